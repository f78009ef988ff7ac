"""Turnaround, recomputed: each placed job earns weights.turnaround × 1 / (1 + its runtime), once.

A job's runtime is its `expected_runtime_h` (one hour without it). With a speed table (placement.verify.speeds)
it is the runtime at its slowest GPU pod's speed, charged as the model charges it: at the job's best speed over
the request's GPU models, then, for each distinct slower speed its slowest GPU reaches, fastest first, the
difference the step makes. Each coefficient rounded to model units, as the model holds it (`Tally`).
"""

from __future__ import annotations

from placement_models import Job

from placement.verify.context import Context, Expected, Tally
from placement.verify.speeds import best, gpu_models, pace, table_of

#: Hours a job without `expected_runtime_h` counts as.
UNKNOWN_RUNTIME_H = 1.0


def shortness(runtime_h: float | None, speed: float = 1.0) -> float:
    return 1.0 / (1.0 + (UNKNOWN_RUNTIME_H if runtime_h is None else runtime_h) / speed)


def check_turnaround_term(ctx: Context) -> list[Expected] | None:
    weight = ctx.request.policy.weights.turnaround
    placed: dict[str, Job] = {}
    slowest: dict[str, float] = {}
    for r in ctx.new_work():
        placed[r.job.name] = r.job
        if r.task.gpus > 0 or r.task.gpu_share is not None or r.task.mig_profile is not None:
            slowest[r.job.name] = min(slowest.get(r.job.name, float("inf")), pace(ctx, r.job, r.node))
    models = gpu_models(ctx)
    total = Tally()
    for name, job in placed.items():
        table = table_of(ctx, job)
        if table is None:
            total.add(shortness(job.expected_runtime_h), 1, weight)
            continue
        top = best(table, models)
        total.add(shortness(job.expected_runtime_h, top), 1, weight)
        levels = sorted({table.get(m, 1.0) if m is not None else 1.0 for m in models}, reverse=True)
        before = top
        for level in levels[1:]:  # each slower speed its slowest GPU reaches, as the model's steps
            if level < slowest.get(name, top) - 1e-12:
                break
            total.add(shortness(job.expected_runtime_h, level) - shortness(job.expected_runtime_h, before), 1, weight)
            before = level
    return [total.expected()]
