"""Usage: a right-sized pod's MIG instance is big enough for its job's observed GPU memory and
utilisation, with policy.right_size_headroom to spare.
"""

from __future__ import annotations

from placement.catalog import lookup
from placement.verify.context import EPS, Context, Expected, Tally, num, pod_name
from placement.verify.priority import task_value, tiers


def check_right_size(ctx: Context) -> list[str]:
    """A right-sized pod's instance holds at least the job's observed GPU memory × policy.right_size_headroom,
    and at least its observed utilisation × headroom of the GPU's SMs (compute slices)."""
    headroom = ctx.request.policy.right_size_headroom
    out: list[str] = []
    for r in ctx.resolved:
        if not r.right_sized or r.a.mig is None:
            continue
        seen = r.job.observed_gpu_memory_gib
        if seen is None:
            out.append(f"right_size: {pod_name(r.a)} holds MIG {r.a.mig.profile} instead of a GPU, but job "
                       f"{r.job.name} has no observed_gpu_memory_gib to size it by")
            continue
        model = lookup(r.node.gpu_model) if r.node.gpu_model else None
        got = model.mig.profile(r.a.mig.profile) if model is not None and model.mig is not None else None
        if got is None:
            continue  # not a profile of the node's GPU: the mig rule says so
        if got.memory_gib < seen * headroom - EPS:
            out.append(f"right_size: {pod_name(r.a)} holds {got.name} ({num(got.memory_gib)} GiB); job {r.job.name} "
                       f"needs observed {num(seen)} GiB × headroom {num(headroom)} = {num(seen * headroom)} GiB")
        util = r.job.observed_sm_util
        total = model.mig.compute_slices if model is not None and model.mig is not None else 0
        if util is not None and total and got.compute_slices / total < util * headroom - EPS:
            out.append(f"right_size: {pod_name(r.a)} holds {got.name} ({got.compute_slices}/{total} of the SMs); job "
                       f"{r.job.name} needs observed utilisation {num(util)} × headroom {num(headroom)} = "
                       f"{num(util * headroom)} of them")
    return out


def check_over_declared_term(ctx: Context) -> list[Expected] | None:
    """`usage.over_declared`: each placed pod of a task declaring `gpu_memory_gib` loses the unused part of
    it (1 − observed / declared, its job's `observed_gpu_memory_gib`) × its priority value (class weight ×
    GPU-equivalents, placement.verify.priority) × weights.over_declared × weights.priority. One unit a pod."""
    weights = ctx.request.policy.weights
    pods = [r for r in ctx.resolved if r.task.gpu_memory_gib and r.job.observed_gpu_memory_gib is not None
            and not r.right_sized]
    if not pods or not weights.over_declared:
        return [Expected.exact(0.0)]
    found = tiers(ctx)
    if found is None:
        return None
    out = []
    for tier in found:
        total = Tally()
        for r in pods:
            unused = max(0.0, 1.0 - (r.job.observed_gpu_memory_gib or 0.0) / (r.task.gpu_memory_gib or 1.0))
            gpus = task_value(ctx, r.task) or 0.0
            total.add(-unused * (tier.weights.get(r.job.priority, 0.0) * gpus), 1,
                      weights.over_declared * weights.priority)
        out.append(total.expected())
    return out


def check_right_size_term(ctx: Context) -> list[Expected] | None:
    """`usage.right_size`: 0 where no job opts in (`right_size`); else not derived (the offered instances and
    which jobs get an offer follow the usage stage, placement.rightsize)."""
    if not any(job.right_size for job in ctx.request.jobs):
        return [Expected.exact(0.0)]
    return None
