"""The greedy gang planner: priority, then size, descending; best-fit nodes.

It runs before every solve. Its plan is CP-SAT's complete hint (so a feasible solution exists
from the first millisecond) and the fallback when the solver finds nothing better in time, so a
returned plan is never worse than greedy. It is also the peer that benchmarks compare against:
this is roughly what Volcano's or Kueue's one-gang-at-a-time admission does.
"""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np

from placement.problem import Problem
from placement.solution import Placement

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def job_order(problem: Problem) -> list[int]:
    """Higher priority first, then bigger gangs (hardest to fit later), then older, then by name."""

    def key(j: int) -> tuple[int, int, float, str]:
        job = problem.jobs[j]
        submitted = job.submitted_at or _EPOCH
        if submitted.tzinfo is None:
            submitted = submitted.replace(tzinfo=timezone.utc)
        return (-job.priority, -problem.job_gpus(j), submitted.timestamp(), job.name)

    return sorted(range(len(problem.jobs)), key=key)


def greedy(problem: Problem, free: np.ndarray | None = None) -> Placement:
    """Place whole gangs one at a time on the tightest nodes that fit; roll back a gang that does not."""
    free = (problem.free if free is None else free).copy()
    plan = Placement()
    for j in job_order(problem):
        trial = free.copy()
        counts: dict[tuple[int, int], int] = {}
        job = problem.jobs[j]
        all_required = job.needed == job.pods
        placed = 0
        for t in sorted(problem.job_tasks[j], key=lambda t: -int(problem.tasks[t].demand[0])):
            got = _place_task(problem, t, trial, counts)
            placed += got
            if all_required and got < problem.tasks[t].replicas:
                break
        if placed >= job.needed:
            free = trial
            for (t, n), k in counts.items():
                plan.add(t, n, k)
    return plan


def _place_task(problem: Problem, t: int, free: np.ndarray, counts: dict[tuple[int, int], int]) -> int:
    """Best fit, pod by pod: the candidate left with the fewest free GPUs (CPU-only pods: GPU-less nodes first)."""
    task = problem.tasks[t]
    cand = task.candidates
    if cand.size == 0:
        return 0
    d = task.demand
    placed = 0
    cap = np.maximum(problem.capacity[cand], 1)
    while placed < task.replicas:
        left = free[cand] - d
        fits = np.all(left >= 0, axis=1)
        if not fits.any():
            break
        # lexsort: last key is primary. GPU pods: fewest GPUs left; CPU pods: fewest free GPUs touched.
        cpu_left = left[:, 1] / cap[:, 1]
        mem_left = left[:, 2] / cap[:, 2]
        primary = left[:, 0] if d[0] > 0 else free[cand, 0]
        order = np.lexsort((cand, mem_left, cpu_left, primary, ~fits))
        i = order[0]
        n = int(cand[i])
        k = int(min(task.replicas - placed, min((free[n][d > 0] // d[d > 0]).min(), task.replicas)))
        # Several pods on the same best node at once: identical pods, identical score.
        k = max(1, k) if d.any() else task.replicas - placed
        free[n] -= d * k
        counts[t, n] = counts.get((t, n), 0) + k
        placed += k
    return placed
