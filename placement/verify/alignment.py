"""Alignment: bounds only, and none with `weights.alignment` 0 (presets may weigh it where the request does
not say so).

With a weight, each whole GPU of a placed pod costs up to the weight per day its job is expected to run
past the latest expected end on its node, capped at half of what the GPU earns; the expected ends of
running jobs follow the planner's timeline (runtime limits it enforces, overdue jobs), which the verifier
does not rebuild, so it derives only the bounds: between −(weight capped as said) × whole GPUs placed of
jobs (a runtime limit stands for a runtime), and 0.
"""

from __future__ import annotations

from placement.verify.context import Context, Expected
from placement.verify.priority import tiers


def check_alignment_term(ctx: Context) -> list[Expected] | None:
    weight = ctx.request.policy.weights.alignment
    if weight == 0:
        return None  # loop presets and benches may weigh it where the request says 0: not derived
    found = tiers(ctx)
    if found is None:
        return None
    earns = ctx.request.policy.weights.priority
    out = []
    for tier in found:
        low = 0.0
        for r in ctx.resolved:
            if r.task.mig_profile is not None or r.task.gpu_share is not None:  # runtime limits count as runtimes
                continue
            charge = min(weight, 0.5 * tier.weights.get(r.job.priority, 1.0) * earns)
            low -= charge * r.task.gpus
        out.append(Expected(low, 0.0, len(ctx.resolved)))
    return out
