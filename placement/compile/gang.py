"""Gang: a job runs whole (at least min_available pods) or not at all; never a half-placed gang."""

from __future__ import annotations

from ortools.sat.python import cp_model

from placement.compile.context import ModelContext


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
        total = cp_model.LinearExpr.sum([v for t in tasks for v in ctx.x[t]])
        ctx.model.add(total >= job.needed * placed)
