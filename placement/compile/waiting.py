"""Turnaround (soft): among plans that place as much, start the jobs that free their GPUs soonest.

A scheduler that calls the planner every cycle is judged by how long jobs wait over days, not by
one snapshot. Per GPU, the priority term cannot tell eight one-GPU jobs from one eight-GPU job,
nor a ten-minute job from a ten-day one; but the mean wait falls when short work goes first
(shortest job first, Smith's rule). So each placed job earns `weights.turnaround` ×

    1 / (1 + expected_runtime_h)        (a job without a runtime counts as one hour: ½)

once, whatever its size: at equal GPUs placed, more jobs and shorter ones win. With a weight up to
1 the value stays below one GPU-equivalent per job, so it never leaves a GPU idle for ordering
alone; above 1 a short job may win over a bigger long one that would fill more GPUs now (a
scheduler loop gains from it: the cycles bench runs 2, at unchanged utilisation on ITP traces).
Long jobs do not starve: aging (compile/fairness.py) grows with waiting, and a
job past `policy.max_wait_h` starts or holds a reservation (compile/reservation.py).
"""

from __future__ import annotations

from placement.compile.context import ModelContext
from placement.problem import Problem

#: Hours a job without `expected_runtime_h` counts as.
UNKNOWN_RUNTIME_H = 1.0


def shortness(problem: Problem, j: int) -> float:
    runtime = problem.jobs[j].expected_runtime_h
    return 1.0 / (1.0 + (UNKNOWN_RUNTIME_H if runtime is None else runtime))


def apply(ctx: ModelContext) -> None:
    weight = ctx.problem.request.policy.weights.turnaround
    if weight == 0:
        return
    jobs = [j for j in range(len(ctx.problem.jobs)) if ctx.problem.job_tasks[j]]
    ctx.objective.add("turnaround", [ctx.placed[j] for j in jobs], [shortness(ctx.problem, j) for j in jobs], weight)
