"""Reservations for starved jobs: bounded waiting without idle clusters (EASY backfill, planned whole).

A scheduler that starts every gang that fits starves big gangs: a stream of small jobs always
fits first. Slurm's EASY backfill answers with a reservation for the head of the queue; here the
head is every job that has waited `policy.max_wait_h` (highest class, then oldest), and the rest
of the plan stays the optimiser's choice:

* a starved job that fits now **must start** (the greedy places it first; the model fixes it placed);
* of those that do not, the oldest `policy.max_reservations` get a **hold**: the earliest moment each
  fits as running jobs end (their `started_at` + `expected_runtime_h`), on the nodes where it fits then.
  Until that moment the plan may put on those nodes only work expected to end by then, plus whatever
  leaves the held GPUs free (`Hold.long_room`). As in EASY, the rule binds only jobs submitted after
  the held one: older jobs were ahead of it in the queue. Jobs without a runtime are assumed to outlast every hold.

Holds count GPUs only (CPU and memory of a node rarely bind a GPU gang) and ignore other pending work
(it is this plan's choice, and bound by the hold itself). Where no known end makes room, a single-task
gang's hold is a drain (no start; nothing new takes its GPUs); other gangs get none, and the plan says why.
`policy.reserve_after_h` gives blocked jobs holds before `max_wait_h`; a job reserved in the previous
plan starts as soon as it fits (`timeline.must_start`).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import numpy as np

from placement import screen, timeline
from placement.baseline import greedy
from placement.problem import Problem
from placement.timeline import Hold, Schedule

#: Starved jobs looked at per plan, oldest first: each costs a greedy fit (a few milliseconds at most).
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
    ends = running_ends(whole, now)
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
            taken = np.zeros_like(free)
            for (t, n), k in counts.items():
                taken[n] += problem.tasks[t].demand * k
            free -= taken
            runtime = whole.jobs[j].expected_runtime_h
            if runtime is not None:  # it releases its GPUs when it is expected to end
                ends.append((now + timedelta(hours=runtime), taken))
            continue
        if len(holds) >= request.policy.max_reservations:
            continue
        hold = _hold(whole, j, free, ends, holds)
        if hold is None:
            unheld[name] = ("no running job is expected to end where it would fit (running jobs need started_at "
                            "and expected_runtime_h)")
        else:
            holds.append(hold)
    return replace(problem, schedule=Schedule(tuple(must), tuple(holds), unheld))


def running_ends(problem: Problem, now: datetime) -> list[tuple[datetime, np.ndarray]]:
    """(expected end, the (N, 3) resources it frees) of every running job whose end is known."""
    out = []
    for run in problem.running:
        end = timeline.expected_end(run.spec, now)
        if end is None:
            continue
        use = np.zeros_like(problem.free)
        use[run.nodes] += run.use
        out.append((end, use))
    return sorted(out, key=lambda e: e[0])


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


def earliest_fit(problem: Problem, j: int, free: np.ndarray, ends: list[tuple[datetime, np.ndarray]],
                 held: np.ndarray | None = None) -> tuple[datetime, dict[tuple[int, int], int]] | None:
    """The first expected end after which job j fits on `free` plus what running work has released by then
    (minus `held`), with where it fits then (the greedy's best fit); None if the known ends never make room.
    Whole-GPU gangs without topology needs only."""
    job = problem.jobs[j]
    if job.topology is not None or any(problem.tasks[t].demand[0] == 0 and problem.tasks[t].spec.gpus == 0
                                       for t in problem.job_tasks[j]):
        return None
    view = _on_any_node(problem, j)
    held = np.zeros_like(free) if held is None else held
    steps: list[tuple[datetime, np.ndarray]] = []
    released = np.zeros_like(free)
    for end, use in sorted(ends, key=lambda e: e[0]):
        released = released + use
        if steps and steps[-1][0] == end:
            steps[-1] = (end, released)
        else:
            steps.append((end, released))
    # Fitting only gets easier as more ends pass, so search the first moment it fits by bisection.
    lo, hi = 0, len(steps)
    while lo < hi:
        mid = (lo + hi) // 2
        if _placed(view, j, np.maximum(free + steps[mid][1] - held, 0)):
            hi = mid
        else:
            lo = mid + 1
    if lo == len(steps):
        return None
    moment, rel = steps[lo]
    return moment, _placed(view, j, np.maximum(free + rel - held, 0))


def _hold(problem: Problem, j: int, free: np.ndarray, ends: list[tuple[datetime, np.ndarray]],
          earlier: list[Hold]) -> Hold | None:
    """The earliest moment job j fits as running jobs end, and where (best fit then); else a drain; else None."""
    held = np.zeros_like(free)
    for h in earlier:
        for n, g in h.gpus.items():
            held[n, 0] += g
    found = earliest_fit(problem, j, free, ends, held)
    if found is None:
        return _drain(problem, j, free, held) if problem.jobs[j].topology is None else None
    moment, counts = found
    rel = np.zeros_like(free)
    for end, use in ends:
        if end <= moment:
            rel += use
    gpus: dict[int, int] = {}
    for (t, n), k in counts.items():
        g = int(problem.tasks[t].demand[0]) * k
        if g:
            gpus[n] = gpus.get(n, 0) + g
    room = {n: max(0, int(free[n, 0] + rel[n, 0] - held[n, 0]) - g) for n, g in gpus.items()}
    return Hold(problem.jobs[j].name, moment, gpus, room, problem.jobs[j].submitted_at)


def _drain(problem: Problem, j: int, free: np.ndarray, held: np.ndarray) -> Hold | None:
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
                        problem.jobs[j].submitted_at)
    return None
