"""Reservations for starved jobs: bounded waiting without idle clusters (EASY backfill, planned whole).

A scheduler that starts every gang that fits starves big gangs: a stream of small jobs always
fits first. Slurm's EASY backfill answers with a reservation for the head of the queue; here the
head is every job that has waited `policy.max_wait_h`, in reservation order (highest class, then
arrival: `timeline.reservation_key`), and the rest of the plan stays the optimiser's choice:

* a starved job that fits now **must start** (the greedy places it first; the model fixes it placed);
* of those that do not, the first `policy.max_reservations` get a **hold**: the earliest moment each
  fits as running jobs end (their `started_at` + `expected_runtime_h`), on the nodes where it fits then.
  Until that moment the plan may put on those nodes only work expected to end by then, plus whatever
  leaves the held GPUs free (`Hold.long_room`). The rule binds every job but the held one, jobs of a higher
  class and jobs that must start: older jobs too, which fit now and may start now, but not on the held GPUs
  (as in Slurm, nothing may delay the reserved job; when older work could take the held nodes, the hold's
  start slid back every cycle). Jobs without a runtime are assumed to outlast every hold; a max runtime
  that `policy.overdue: evict` enforces bounds a job's runtime (`timeline.runtime_h`).

Holds count GPUs only (CPU and memory of a node rarely bind a GPU gang) and ignore other pending work
(it is this plan's choice, and bound by the hold itself). Where no known end makes room, a single-task
gang's hold is a drain (no start; nothing new takes its GPUs); other gangs get none, and the plan says why.
`policy.reserve_after_h` gives blocked jobs holds before `max_wait_h`; a job reserved in the previous
plan starts as soon as it fits (`timeline.must_start`).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import NamedTuple

import numpy as np

from placement import screen, timeline
from placement.baseline import greedy
from placement.problem import Problem
from placement.timeline import Hold, Schedule

#: Starved jobs looked at per plan, in reservation order: each costs a greedy fit (a few milliseconds at most).
STARVED_CHECKED = 64


def attach(problem: Problem) -> Problem:
    """`problem` with its schedule: must-start jobs and holds (module docstring). Unchanged without
    `policy.max_wait_h` or `reserve_after_h`, or without starved jobs."""
    request = problem.request
    if request.policy.max_wait_h is None and (request.policy.reserve_after_h is None
                                              or request.policy.max_reservations == 0):
        return problem
    before = screen.screened(problem)
    whole = before[0] if before is not None else problem  # jobs that cannot fit now were screened out
    # Strict classes hold: only starved jobs of the highest class that waits get anything.
    top = max((job.priority for job in whole.jobs), default=0)
    late = [j for j in timeline.starved(request, whole.jobs) if whole.jobs[j].priority >= top][:STARVED_CHECKED]
    if not late:
        return problem
    now = request.planning_time()
    index = {job.name: j for j, job in enumerate(problem.jobs)}
    free = problem.free.copy()
    limits = timeline.enforced(request)
    ends = running_ends(whole, now, limits)
    exempt = timeline.starting(request, problem.jobs)
    must: list[str] = []
    holds: list[Hold] = []
    unheld: dict[str, str] = {}
    for j in late:
        name = whole.jobs[j].name
        scheduled = replace(problem, schedule=Schedule(tuple(must), tuple(holds)))
        counts = _placed(scheduled, index[name], free) if name in index else {}
        if counts and not timeline.must_start(request, whole.jobs[j]):
            continue  # not starved yet: the objective decides when it starts
        if counts:
            must.append(name)
            nodes, taken = usage_of(problem, counts)
            free[nodes] -= taken
            runtime = timeline.runtime_h(whole.jobs[j], limits)
            if runtime is not None:  # it releases its GPUs when it is expected to end
                ends.append((now + timedelta(hours=runtime), nodes, taken))
            continue
        if len(holds) >= request.policy.max_reservations:
            continue
        hold = _hold(whole, j, free, Releases(ends, free.shape), holds, exempt, limits)
        if hold is None:
            unheld[name] = ("no running job is expected to end where it would fit (running jobs need started_at "
                            "and expected_runtime_h, or a max_runtime_h that policy.overdue evict enforces)")
        else:
            holds.append(hold)
    return replace(problem, schedule=Schedule(tuple(must), tuple(holds), unheld))


#: (expected end, nodes, the (len(nodes), 3) GPUs, milli-CPU and MiB it frees on each): work that ends.
#: Sparse: thousands of running jobs, each a dense (N, 3) array, cost seconds to allocate and sum.
End = tuple[datetime, np.ndarray, np.ndarray]


def running_ends(problem: Problem, now: datetime, limits: timeline.Enforced = None) -> list[End]:
    """The `End` of every running job whose end is known (`timeline.expected_end`), soonest first."""
    out = []
    for run in problem.running:
        end = timeline.expected_end(run.spec, now, limits, problem.speeds.running_pace[run.index])
        if end is not None:
            out.append((end, run.nodes, run.use))
    return sorted(out, key=lambda e: e[0])


def usage_of(problem: Problem, counts: dict[tuple[int, int], int]) -> tuple[np.ndarray, np.ndarray]:
    """(nodes, the (len(nodes), 3) resources pods take on each) of pods per (task, node), nodes ascending."""
    per_node: dict[int, list[int]] = {}
    for (t, n), k in counts.items():
        d = problem.tasks[t].demand
        row = per_node.setdefault(n, [0, 0, 0])
        for i in range(3):
            row[i] += int(d[i]) * k
    nodes = sorted(per_node)
    return (np.array(nodes, dtype=np.int64),
            np.array([per_node[n] for n in nodes], dtype=np.int64).reshape(len(nodes), 3))


class Releases:
    """What ends free as time passes: at each distinct expected end, all that ends by then, as (N, 3).

    Built on demand and kept: a bisection looks at a few of the moments, and the jobs whose starts decode
    estimates bisect over the same ones.
    """

    #: moments kept: the first steps of every bisection are the same few, and each is an (N, 3) array
    MEMO = 64

    def __init__(self, ends: list[End], shape: tuple[int, ...]) -> None:
        ordered = sorted(ends, key=lambda e: e[0])
        self.shape = shape
        #: the distinct ends, soonest first, and for each how many of `ordered` end by then
        self.times: list[datetime] = []
        self.upto: list[int] = []
        for i, (end, _, _) in enumerate(ordered):
            if self.times and self.times[-1] == end:
                self.upto[-1] = i + 1
            else:
                self.times.append(end)
                self.upto.append(i + 1)
        self.nodes = np.concatenate([e[1] for e in ordered]) if ordered else np.zeros(0, dtype=np.int64)
        self.rows = (np.concatenate([e[2] for e in ordered]) if ordered else np.zeros((0, 3), dtype=np.int64))
        self.sizes = np.cumsum([0] + [len(e[1]) for e in ordered])  # rows of the first i ends
        self.memo: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.times)

    def by(self, step: int) -> np.ndarray:
        """Everything freed by `times[step]` (read-only: it is kept, the most recently asked MEMO of them)."""
        found = self.memo.pop(step, None)
        if found is None:
            found = np.zeros(self.shape, dtype=np.int64)
            size = int(self.sizes[self.upto[step]])
            np.add.at(found, self.nodes[:size], self.rows[:size])
            found.flags.writeable = False
            if len(self.memo) >= self.MEMO:
                del self.memo[next(iter(self.memo))]
        self.memo[step] = found
        return found


class Fit(NamedTuple):
    """When a job fits as work ends, where (pods per (task, node)), and what has been freed by then."""

    start: datetime
    counts: dict[tuple[int, int], int]
    released: np.ndarray


def _placed(problem: Problem, j: int, free: np.ndarray) -> dict[tuple[int, int], int]:
    plan = greedy(problem, free, order=[j])
    return {key: k for key, k in plan.counts.items() if k}


def _on_any_node(problem: Problem, j: int) -> Problem:
    """`problem` where job j's tasks may use every node that passes their filters, however busy now."""
    tasks = list(problem.tasks)
    for t in problem.job_tasks[j]:
        eligible = problem.tasks[t].eligible
        if eligible is not None:
            tasks[t] = replace(tasks[t], candidates=eligible, max_per_node=np.full(eligible.size, tasks[t].replicas))
    return replace(problem, tasks=tuple(tasks), schedule=Schedule())


def earliest_fit(problem: Problem, j: int, free: np.ndarray, releases: Releases,
                 held: np.ndarray | None = None) -> Fit | None:
    """The first expected end after which job j fits on `free` plus what running work has released by then
    (minus `held`), with where it fits then (the greedy's best fit); None if the known ends never make room.
    Whole-GPU gangs without topology needs only."""
    job = problem.jobs[j]
    if job.topology is not None or any(problem.tasks[t].demand[0] == 0 and problem.tasks[t].spec.gpus == 0
                                       for t in problem.job_tasks[j]):
        return None
    view = _on_any_node(problem, j)
    held = np.zeros_like(free) if held is None else held
    # Fitting only gets easier as more ends pass, so search the first moment it fits by bisection.
    lo, hi = 0, len(releases)
    while lo < hi:
        mid = (lo + hi) // 2
        if _placed(view, j, np.maximum(free + releases.by(mid) - held, 0)):
            hi = mid
        else:
            lo = mid + 1
    if lo == len(releases):
        return None
    released = releases.by(lo)
    return Fit(releases.times[lo], _placed(view, j, np.maximum(free + released - held, 0)), released)


def _hold(problem: Problem, j: int, free: np.ndarray, releases: Releases, earlier: list[Hold],
          exempt: frozenset[str], limits: timeline.Enforced) -> Hold | None:
    """The earliest moment job j fits as running jobs end, and where (best fit then); else a drain; else None."""
    held = np.zeros_like(free)
    for h in earlier:
        for n, g in h.gpus.items():
            held[n, 0] += g
    found = earliest_fit(problem, j, free, releases, held)
    if found is None:
        return _drain(problem, j, free, held, exempt, limits) if problem.jobs[j].topology is None else None
    moment, counts, rel = found
    gpus: dict[int, int] = {}
    for (t, n), k in counts.items():
        g = int(problem.tasks[t].demand[0]) * k
        if g:
            gpus[n] = gpus.get(n, 0) + g
    room = {n: max(0, int(free[n, 0] + rel[n, 0] - held[n, 0]) - g) for n, g in gpus.items()}
    return Hold(problem.jobs[j].name, moment, gpus, room, problem.jobs[j].priority, exempt, limits)


def _drain(problem: Problem, j: int, free: np.ndarray, held: np.ndarray, exempt: frozenset[str],
           limits: timeline.Enforced) -> Hold | None:
    """A hold without a start, where no known end makes room: the nodes with the most GPUs free now that
    hold the gang once emptied, on which nothing new may take the gang's GPUs (every job outlasts an
    unknown start) — they drain as their running work ends, and the gang starts when it fits
    (Kubernetes schedulers' node draining for a blocked gang). Single-task gangs only."""
    tasks = problem.job_tasks[j]
    if len(tasks) != 1:
        return None
    task = problem.tasks[tasks[0]]
    size = int(task.demand[0])
    if task.eligible is None or size == 0:
        return None
    room = problem.capacity[:, 0] - held[:, 0]
    need = problem.jobs[j].needed
    gpus: dict[int, int] = {}
    for n in sorted(task.eligible.tolist(), key=lambda n: (-int(free[n, 0]), n)):
        fit = min(int(room[n]) // size, int(problem.capacity[n, 1] // max(task.demand[1], 1)) if task.demand[1] else
                  need, int(problem.capacity[n, 2] // max(task.demand[2], 1)) if task.demand[2] else need, need)
        if fit > 0:
            gpus[n] = fit * size
            need -= fit
        if need == 0:
            return Hold(problem.jobs[j].name, None, gpus, {n: int(room[n]) - g for n, g in gpus.items()},
                        problem.jobs[j].priority, exempt, limits)
    return None
