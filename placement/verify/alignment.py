"""Alignment, recomputed where it is off: with `weights.alignment` 0 (the default) the term is 0.

With a weight, each whole GPU of a placed pod costs up to the weight per day its job is expected to run
past the latest expected end on its node, capped at half of what the GPU earns; the expected ends of
running jobs follow the planner's timeline (runtime limits it enforces, overdue jobs), which the verifier
does not rebuild, so it derives only the bounds: between −(weight capped as said) × whole GPUs placed of
jobs with an expected runtime, and 0.
"""

from __future__ import annotations

from placement.verify.context import Context, Expected
from placement.verify.priority import tiers


def check_alignment_term(ctx: Context) -> list[Expected] | None:
    weight = ctx.request.policy.weights.alignment
    if weight == 0:
        return [Expected.exact(0.0)]
    found = tiers(ctx)
    if found is None:
        return None
    earns = ctx.request.policy.weights.priority
    out = []
    for tier in found:
        low = 0.0
        for r in ctx.resolved:
            if r.job.expected_runtime_h is None or r.task.mig_profile is not None or r.task.gpu_share is not None:
                continue
            charge = min(weight, 0.5 * tier.weights.get(r.job.priority, 1.0) * earns)
            low -= charge * r.task.gpus
        out.append(Expected(low, 0.0, len(ctx.resolved)))
    return out
