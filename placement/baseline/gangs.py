"""The greedy gang planner: priority, then size, descending; best-fit nodes.

It runs before every solve. Its plan is CP-SAT's complete hint (so a feasible solution exists
from the first millisecond) and the fallback when the solver finds nothing better in time, so a
returned plan is never worse than greedy. It is also the peer that benchmarks compare against:
this is roughly what Volcano's or Kueue's one-gang-at-a-time admission does.
"""

from __future__ import annotations

from datetime import datetime, timezone
from functools import partial

import numpy as np

from placement.baseline import topology
from placement.baseline.devices import GreedyDevices
from placement.holdings import use_of
from placement.problem import Problem
from placement.rightsize import gang_minimums, pairs
from placement.solution import Placement
from placement.teams import QuotaLedger

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def job_order(problem: Problem) -> list[int]:
    """Higher priority first, then bigger gangs (hardest to fit later), then older, then by name."""

    peak = problem.request.in_peak
    first = {name: i for i, name in enumerate(problem.schedule.must_start)}

    def key(j: int) -> tuple[int, int, int, int, float, str]:
        job = problem.jobs[j]
        submitted = job.submitted_at or _EPOCH
        if submitted.tzinfo is None:
            submitted = submitted.replace(tzinfo=timezone.utc)
        # Deferrable jobs wait behind their priority level during peak and go first off-peak (placement.pricing).
        deferral = (1 if peak else -1) if job.deferrable else 0
        # Starved jobs that fit start before anything else (policy.max_wait_h; placement.reservation).
        starved = first.get(job.name, len(first))
        return (starved, -job.priority, deferral, -problem.job_gpus(j), submitted.timestamp(), job.name)

    return sorted(range(len(problem.jobs)), key=key)


def greedy(problem: Problem, free: np.ndarray | None = None, order: list[int] | None = None) -> Placement:
    """Place whole gangs one at a time on the tightest nodes that fit; roll back a gang that does not.

    Never preempts, and never breaks a team quota (placement.teams): a gang over its team's
    quota is rolled back like one that does not fit. `order` overrides `job_order` (benchmarks).
    """
    free = (problem.free if free is None else free).copy()
    plan = Placement()
    ledger = QuotaLedger(problem.teams) if problem.teams is not None and problem.teams.all_scopes else None
    ledger_devices = GreedyDevices(problem) if problem.needs_device_ledger() else None  # MIG and shared GPUs
    now = problem.request.planning_time()
    long_used: dict[tuple[int, int], int] = {}  # (hold, node) -> GPUs taken by work that outlasts the hold
    for j in job_order(problem) if order is None else order:
        bound = [(h, hold) for h, hold in enumerate(problem.schedule.holds) if hold.binds(problem.jobs[j], now)]
        trial = free.copy()
        for h, hold in bound:  # work that outlasts a reservation keeps off its GPUs
            for n, room in hold.long_room.items():
                trial[n, 0] = min(trial[n, 0], max(0, room - long_used.get((h, n), 0)))
        before = trial.copy()
        trial_devices = ledger_devices.trial() if ledger_devices is not None else None
        place = trial_devices.placer(place_task) if trial_devices is not None else place_task
        counts: dict[tuple[int, int], int] = {}
        job = problem.jobs[j]
        if job.topology is not None:  # whole domains first, Kueue's BestFit (placement.baseline.topology)
            placed = topology.place_job(problem, j, trial, counts, place)
        else:  # each task's minimum first, then the extra pods of elastic tasks
            placed = topology.fill_gang(problem, j, partial(_place_some, place, problem, trial, counts))
        if trial_devices is not None and placed >= job.needed and not trial_devices.settle(counts):
            continue  # would exceed policy.max_mig_changes
        if ledger is not None and placed >= job.needed and problem.job_team[j] >= 0:
            add = ledger.index.scope_use(use_of(problem, counts))  # GPU-equivalents, CPU, memory per scope
            if ledger.blocker(problem.job_team[j], add) is not None:
                continue
            ledger.take(problem.job_team[j], add)
        if placed >= job.needed:
            use = before - trial  # what the gang took, devices included (the trial started clipped)
            free = free - use
            for h, hold in bound:
                for n in hold.long_room:
                    long_used[h, n] = long_used.get((h, n), 0) + int(use[n, 0])
            for (t, n), k in counts.items():
                plan.add(t, n, k)
            if ledger_devices is not None and trial_devices is not None:
                ledger_devices.commit(trial_devices)
    if ledger_devices is not None:
        ledger_devices.finish(plan)
    return one_choice_per_pod(problem, plan)


def _place_some(place: topology.PlaceTask, problem: Problem, free: np.ndarray, counts: dict[tuple[int, int], int],
                t: int, most: int) -> int:
    return place(problem, t, free, counts, None, most)


def place_task(problem: Problem, t: int, free: np.ndarray, counts: dict[tuple[int, int], int],
                allowed: np.ndarray | None = None, limit: int | None = None) -> int:
    """Best fit, pod by pod: the candidate left with the fewest free GPUs (CPU-only pods: GPU-less nodes first).

    `allowed` (a bool per node) and `limit` (pods) confine it to one topology domain or one slice.
    """
    task = problem.tasks[t]
    cand = task.candidates if allowed is None else task.candidates[allowed[task.candidates]]
    want = task.replicas if limit is None else min(limit, task.replicas)
    if cand.size == 0:
        return 0
    d = task.demand
    placed = 0
    cap = np.maximum(problem.capacity[cand], 1)
    while placed < want:
        left = free[cand] - d
        fits = np.all(left >= 0, axis=1)
        if not fits.any():
            break
        # lexsort: last key is primary. GPU pods: fewest GPUs left; CPU pods: fewest free GPUs touched.
        cpu_left = left[:, 1] / cap[:, 1]
        mem_left = left[:, 2] / cap[:, 2]
        primary = left[:, 0] if d[0] > 0 else free[cand, 0]
        added = cand >= len(problem.request.cluster.nodes)  # nodes a pool would have to add: last resort
        order = np.lexsort((cand, mem_left, cpu_left, primary, added, ~fits))
        i = order[0]
        n = int(cand[i])
        # Several pods on the same best node at once: identical pods, identical score.
        k = max(1, int(min(want - placed, (free[n][d > 0] // d[d > 0]).min()))) if d.any() else want - placed
        free[n] -= d * k
        counts[t, n] = counts.get((t, n), 0) + k
        placed += k
    return placed


def one_choice_per_pod(problem: Problem, placement: Placement) -> Placement:
    """One choice per pod where a task has a right-size alternative (`placement.rightsize`): the gang loop
    fills both tasks of a pair, so drop the surplus whole-GPU pods (keeping the instances, the saving); a
    gang left short (in total or below a task's minimum) is dropped whole."""
    found = pairs(problem)
    if not found:
        return placement
    for p in found:
        surplus = placement.task_pods(p.task) + placement.task_pods(p.alternative) - problem.tasks[p.task].replicas
        for key in sorted((k for k in placement.counts if k[0] == p.task), reverse=True):
            if surplus <= 0:
                break
            take = min(surplus, placement.counts[key])
            placement.counts[key] -= take
            surplus -= take
            if not placement.counts[key]:
                del placement.counts[key]
    for j in {p.job for p in found}:
        tasks = set(problem.job_tasks[j])
        placed = sum(k for (t, _), k in placement.counts.items() if t in tasks)
        short = any(sum(placement.task_pods(t) for t in members) < minimum
                    for members, minimum in gang_minimums(problem, j))
        if placed and (placed < problem.jobs[j].needed or short):
            for key in [k for k in placement.counts if k[0] in tasks]:
                del placement.counts[key]
    return placement
