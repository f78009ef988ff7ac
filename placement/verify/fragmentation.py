"""Fragmentation, recomputed: −weights.fragmentation for each node whose healthy GPUs were all free
before the plan and on which the plan puts a pod that takes whole GPUs.

"Free before the plan" (a node the plan adds is): no GPU of it held by a running job (preempted ones
included: the planner decides on the cluster as it runs; jobs it stops for running past their
`max_runtime_h` are gone first), none partitioned or shared, at least one healthy GPU.
A node the plan breaks only with MIG instances or shared GPUs pays a smaller charge the
verifier does not derive (at most the weight: the
compiler caps it at half of what the smallest such pod earns), once for its MIG pods and once for its
shared ones, whole-GPU pods there or not: so the term may lie up to one weight per such node and kind
below the whole-GPU count. A node with partitioned or shared GPUs may count as whole and free where the
planner may make them whole again: up to two weights each, below.
"""

from __future__ import annotations

from placement.verify.context import Context, Expected


def whole_free_nodes(ctx: Context) -> set[str]:
    """Existing nodes whose every healthy GPU is free before the plan (the module docstring's sense)."""
    stopped = {p.job for p in ctx.plan.preemptions if p.rule == "max_runtime"}
    taken: set[str] = set()
    for rj in ctx.request.cluster.running:
        if rj.job in stopped:
            continue
        for pod in rj.pods:
            node = ctx.nodes.get(pod.node)
            healthy = [] if node is None else [g for g in pod.gpus if g not in node.unhealthy_gpus]
            if pod.mig is not None or healthy:
                taken.add(pod.node)
    out = set()
    for n in ctx.nodes.values():  # nodes the plan adds are free too
        healthy = [g for g in range(n.gpus) if g not in n.unhealthy_gpus]
        if healthy and n.name not in taken and not any(g in n.mig or g in n.sharing for g in healthy):
            out.add(n.name)
    return out


def check_fragmentation_term(ctx: Context) -> list[Expected] | None:
    weight = ctx.request.policy.weights.fragmentation
    if weight == 0:
        return [Expected.exact(0.0)]
    free = whole_free_nodes(ctx)
    whole = {r.node.name for r in ctx.resolved if r.node.name in free and r.task.gpus > 0
             and r.task.mig_profile is None and r.task.gpu_share is None}
    partial = {(r.node.name, r.task.mig_profile is not None) for r in ctx.resolved if r.node.name in free
               and (r.task.mig_profile is not None or r.task.gpu_share is not None)}
    devices = {r.node.name for r in ctx.resolved if r.node.mig or r.node.sharing} - whole - {n for n, _ in partial}
    value = -weight * len(whole)
    spread = weight * (len(partial) + 2 * len(devices))
    return [Expected(value - spread, value, len(whole) + len(partial) + 2 * len(devices))]
