"""Turnaround (soft): among plans that place as much, start the jobs that free their GPUs soonest.

A scheduler that calls the planner every cycle is judged by how long jobs wait over days, not by
one snapshot. Per GPU, the priority term cannot tell eight one-GPU jobs from one eight-GPU job,
nor a ten-minute job from a ten-day one; but the mean wait falls when short work goes first
(shortest job first, Smith's rule). So each placed job earns `weights.turnaround` ×

    1 / (1 + expected_runtime_h)        (a job without a runtime counts as one hour: ½)

(a job with a speed table: its runtime at the speed of its slowest GPU in the plan, placement.speeds)

once, whatever its size: at equal GPUs placed, more jobs and shorter ones win. It is a trade, not
only a tie-break: each placed job adds less than the weight, so a plan may leave idle fewer GPUs
than weight × the jobs it places. At 0.5, three ten-minute one-GPU jobs (3 GPUs) beat one ten-hour
four-GPU job (4 GPUs) on a four-GPU node; at 0.3 the big job starts.
A scheduler loop gains from it (the cycles bench runs 2: a quarter off the mean wait on ITP
cluster04 at its utilisation; on other ITP slices 0.6-1.4 points of utilisation lost, README).
Long jobs do not starve: aging (compile/fairness.py) grows with waiting, and a
job past `policy.max_wait_h` starts or holds a reservation (compile/reservation.py).
"""

from __future__ import annotations

from placement import speeds
from placement.compile import terms
from placement.compile.context import ModelContext
from placement.problem import Problem

#: Hours a job without `expected_runtime_h` counts as.
UNKNOWN_RUNTIME_H = 1.0


def shortness(problem: Problem, j: int, speed: float = 1.0) -> float:
    """1 / (1 + hours): the job's runtime at `speed` (its estimate is for 1.0; placement.speeds)."""
    runtime = problem.jobs[j].expected_runtime_h
    return 1.0 / (1.0 + (UNKNOWN_RUNTIME_H if runtime is None else runtime) / speed)


def apply(ctx: ModelContext) -> None:
    problem = ctx.problem
    weight = problem.request.policy.weights.turnaround
    if weight == 0:
        return
    jobs = [j for j in range(len(problem.jobs)) if problem.job_tasks[j] and j not in problem.twins]
    pending = problem.speeds.pending
    fastest = [1.0 if not pending or pending[j] is None else
               ctx.best_speed.get(j, speeds.best(pending[j], problem.speeds.models)) for j in jobs]
    ctx.objective.add(terms.TURNAROUND, [ctx.placed[j] for j in jobs],
                      [shortness(problem, j, s) for j, s in zip(jobs, fastest, strict=True)], weight)
    # a job on slower GPUs runs longer: each speed step it reaches (compile/throughput.py's flags) takes the
    # difference off, so the term counts its runtime at its slowest GPU's speed
    variables, coefs = [], []
    for j, steps in ctx.slow.items():
        if j in problem.twins:
            continue
        before = ctx.best_speed[j]
        for speed, flag in steps:
            variables.append(flag)
            coefs.append(shortness(problem, j, speed) - shortness(problem, j, before))
            before = speed
    if variables:
        ctx.objective.add(terms.TURNAROUND, variables, coefs, weight)
