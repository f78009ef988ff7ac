"""Reservations (hard): starved jobs that fit start now, and work that outlasts a hold keeps off its GPUs.

`problem.schedule` (placement.reservation) names the starved jobs that must start (`placed[j] = 1`;
the greedy plan places them first, so the hint satisfies it) and the holds of those that cannot.
For each hold and each of its nodes n, the pods of jobs expected to run past the hold's start
(or without a runtime) take at most `long_room[n]` GPUs there:

    Σ_{t outlasting the hold} gpus_t · x[t, n] ≤ long_room[n]

Jobs that end before the hold's start are free to use the held GPUs meanwhile (backfill). The
rule is checked without CP-SAT by placement.verify.reservation.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from placement.compile.context import ModelContext


def apply(ctx: ModelContext) -> None:
    problem = ctx.problem
    schedule = problem.schedule
    if not schedule.must_start and not schedule.holds:
        return
    index = {job.name: j for j, job in enumerate(problem.jobs)}
    for name in schedule.must_start:
        if name in index:
            ctx.model.add(ctx.placed[index[name]] == 1)
    now = problem.request.planning_time()
    for hold in schedule.holds:
        rows: dict[int, list[tuple[cp_model.IntVar, int]]] = {n: [] for n in hold.long_room}
        for t, task in enumerate(problem.tasks):
            gpus = int(task.demand[0])
            if not gpus or not hold.binds(problem.jobs[task.job], now):
                continue
            for var, n in zip(ctx.x[t], ctx.candidates[t].tolist(), strict=True):
                if n in rows:
                    rows[n].append((var, gpus))
        for n, row in rows.items():
            if row:
                ctx.model.add(cp_model.LinearExpr.weighted_sum([v for v, _ in row], [g for _, g in row])
                              <= hold.long_room[n])

