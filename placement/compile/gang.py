"""Gang: a job runs with at least its minimum or not at all; never a half-placed gang.

The minimum is per task (`min_replicas`, default every replica) and in total (`min_available`,
`Job.needed`): placed[j] ⇒ each task has at least its minimum and the job at least `needed` pods;
a task's extra pods (up to its replicas) only go with the job. A task and its right-size
alternative share the declared task's minimum (`placement.rightsize.gang_minimums`).
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from placement.compile.context import ModelContext
from placement.rightsize import gang_minimums


def apply(ctx: ModelContext) -> None:
    for j, job in enumerate(ctx.problem.jobs):
        placed = ctx.placed[j]
        tasks = ctx.problem.job_tasks[j]
        if job.needed == job.pods:
            # Every pod is required: each task exactly full or empty (tighter than one sum).
            for t in tasks:
                ctx.model.add(ctx.task_pods(t) == ctx.problem.tasks[t].replicas * placed)
            continue
        for t in tasks:
            ctx.model.add(ctx.task_pods(t) <= ctx.problem.tasks[t].replicas * placed)
        floor = 0
        for members, minimum in gang_minimums(ctx.problem, j):
            if minimum > 0:
                ctx.model.add(cp_model.LinearExpr.sum([v for t in members for v in ctx.x[t]]) >= minimum * placed)
                floor += minimum
        if job.needed > floor:
            total = cp_model.LinearExpr.sum([v for t in tasks for v in ctx.x[t]])
            ctx.model.add(total >= job.needed * placed)
