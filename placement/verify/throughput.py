"""Throughput, recomputed: a placed job with a speed table loses `weights.throughput` × its GPU-equivalents ×
the share of its best speed its slowest GPU gives up.

A job's table is its `speeds`, else its `workload`'s (`request.workloads`), under catalog names; a model absent
from it, or a GPU node without a model, runs at 1.0. Its best speed is over the GPU models of every GPU node
the request has or a pool may add. Its loss is 1 − s / best, s the speed of the slowest GPU model among the
nodes its GPU pods sit on. The model charges the loss in steps, one per distinct loss among the cluster's
models (exactly the loss here, as every node the pod may sit on is one of those models), each step's
coefficient rounded to model units (`Tally`). Not derived (None) when a GPU-equivalent is not (a MIG
profile worth different fractions by node).
"""

from __future__ import annotations

from placement.verify.context import Context, Expected, Tally
from placement.verify.priority import task_value
from placement.verify.speeds import canonical, gpu_models, table_of


def check_throughput_term(ctx: Context) -> list[Expected] | None:
    weight = ctx.request.policy.weights.throughput
    models = gpu_models(ctx)
    total = Tally()
    slowest: dict[str, float] = {}
    for r in ctx.resolved:
        if r.task.gpus == 0 and r.task.gpu_share is None and r.task.mig_profile is None:
            continue
        table = table_of(ctx, r.job)
        if table is None:
            continue
        here = table.get(str(canonical(r.node.gpu_model)), 1.0) if r.node.gpu_model is not None else 1.0
        slowest[r.job.name] = min(slowest.get(r.job.name, here), here)
    for name, speed in slowest.items():
        job = ctx.pending_jobs[name]
        table = table_of(ctx, job) or {}
        levels = sorted({table.get(str(m), 1.0) if m is not None else 1.0 for m in models}, reverse=True)
        if not levels:
            continue
        best = levels[0]
        values = [task_value(ctx, t) for t in job.tasks]
        if any(v is None for v in values):
            return None
        gpus = sum(float(v) * t.replicas for v, t in zip(values, job.tasks, strict=True) if v)
        previous = 0.0
        for level in levels[1:]:  # each step of loss the job's slowest GPU reaches, as the model charges it
            step = 1.0 - level / best
            if step > 1.0 - speed / best + 1e-12:
                break
            total.add(-(step - previous) * gpus, 1, weight)
            previous = step
    return [total.expected()]
