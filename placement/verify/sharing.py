"""Sharing: time-sliced and MPS pods sit on a shared GPU (the node's, or one the plan shares) within its
replicas, one GPU's worth of shares and its memory; the GPUs a plan shares are plain, idle and healthy.

`changed_gpu` is the check every per-GPU change of a plan (sharing or MIG) starts with.
"""

from __future__ import annotations

from placement_models import Node, SharingChange

from placement.catalog import lookup
from placement.verify.context import EPS, Context, Expected, Tally, num, pod_name


def check_sharing(ctx: Context) -> list[str]:
    """Shared pods sit on a shared GPU, declared (node.sharing) or shared by the plan (sharing_changes); per GPU
    at most `replicas` pods, shares ≤ 1, GPU memory ≤ the GPU's; no whole-GPU pod on either."""
    out, changed = _sharing_changes(ctx)
    load: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for rj in ctx.request.cluster.running:
        for pod in rj.pods:
            if pod.gpu_share is not None and rj.job not in ctx.evicted and pod.gpus:
                node = ctx.nodes[pod.node]
                load.setdefault((pod.node, pod.gpus[0]), []).append(
                    (pod.gpu_share, _share_memory(node, pod.gpu_share, pod.gpu_memory_gib)))
    touched: list[tuple[str, int]] = []
    for r in ctx.resolved:
        a, task, node = r.a, r.task, r.node
        if task.mig_profile is not None:
            continue  # a share of a MIG instance: the mig rule (verify.mig_sharing) checks it
        if task.gpu_share is None:
            if a.gpu_share is not None:
                out.append(f"sharing: {pod_name(a)} takes a GPU share but its task asks for none")
            out.extend(f"sharing: {pod_name(a)} takes shared GPU {g} of node {node.name} whole"
                       + ("" if g in node.sharing else " (the plan shares it)")
                       for g in dict.fromkeys(a.gpus) if g in node.sharing or (node.name, g) in changed)
            continue
        if a.gpu_share is None or abs(a.gpu_share - task.gpu_share) > EPS:
            out.append(f"sharing: {pod_name(a)} takes share {a.gpu_share}; its task asks {num(task.gpu_share)}")
        if len(a.gpus) != 1:
            out.append(f"sharing: {pod_name(a)} names {len(a.gpus)} GPUs; a shared pod names exactly one")
            continue
        g = a.gpus[0]
        if g not in node.sharing and (node.name, g) not in changed:
            out.append(f"sharing: {pod_name(a)} is on GPU {g} of node {node.name}, which is not shared (neither in "
                       "the node's sharing nor among the plan's sharing_changes)")
            continue
        if g in node.unhealthy_gpus:
            out.append(f"sharing: {pod_name(a)} is on unhealthy GPU {g} of node {node.name}")
        if (node.name, g) not in touched:
            touched.append((node.name, g))
        load.setdefault((node.name, g), []).append(
            (task.gpu_share, _share_memory(node, task.gpu_share, task.gpu_memory_gib)))
    for name, g in touched:
        node = ctx.nodes[name]
        spec, pods = node.sharing.get(g) or changed[name, g], load[name, g]
        where = f"shared GPU {g} of node {name}"
        if len(pods) > spec.replicas:
            out.append(f"sharing: {where} has {len(pods)} pods, more than its {spec.replicas} replicas")
        if sum(s for s, _ in pods) > 1 + EPS:
            out.append(f"sharing: {where} is given {num(sum(s for s, _ in pods))} of a GPU")
        model = lookup(node.gpu_model) if node.gpu_model else None
        memory = model.memory_gib if model else 0.0
        if sum(m for _, m in pods) > memory + EPS:
            out.append(f"sharing: {where} is given {num(sum(m for _, m in pods))} GiB of GPU memory, "
                       f"more than its {num(memory)} GiB (no memory isolation)")
    return out


def changed_gpu(ctx: Context, out: list[str], rule: str, node_name: str, gpu: int,
                seen: set[tuple[str, int]], verb: str) -> Node | None:
    """The node of a GPU a plan's MIG or sharing change names, or None (the violation added to `out`)
    when the node is unknown, the index out of range, or the GPU already changed by an earlier entry.
    Records the GPU in `seen`."""
    where = f"node {node_name} GPU {gpu}"
    node = ctx.nodes.get(node_name)
    if node is None:
        out.append(f"{rule}: change of {where} names an unknown node")
        return None
    if not 0 <= gpu < node.gpus:
        out.append(f"{rule}: change of {where}: GPU index out of range 0..{node.gpus - 1}")
        return None
    if (node_name, gpu) in seen:
        out.append(f"{rule}: {where} is {verb} twice")
        return None
    seen.add((node_name, gpu))
    return node


def _sharing_changes(ctx: Context) -> tuple[list[str], dict[tuple[str, int], SharingChange]]:
    """GPUs the plan shares: allowed and within the cap, each a healthy GPU of its node that is plain (neither
    partitioned, before or by the plan, nor shared already) and idle (no running pod holds it), with
    policy.sharing_default's setting. Returns the violations and the changes by (node, gpu)."""
    policy = ctx.request.policy
    changes = ctx.plan.sharing_changes
    out: list[str] = []
    if changes and not policy.allow_sharing_changes:
        out.append(f"sharing: the plan shares {len(changes)} idle GPU(s) but policy.allow_sharing_changes is off")
    if policy.max_sharing_changes is not None and len(changes) > policy.max_sharing_changes:
        out.append(f"sharing: the plan shares {len(changes)} GPUs, more than policy.max_sharing_changes "
                   f"{policy.max_sharing_changes}")
    running = {(pod.node, g): rj.job for rj in ctx.request.cluster.running for pod in rj.pods
               if pod.gpu_share is None for g in pod.gpus}
    repartitioned = {(m.node, m.gpu) for m in ctx.plan.mig_changes}
    default = policy.sharing_default
    changed: dict[tuple[str, int], SharingChange] = {}
    for c in changes:
        where = f"node {c.node} GPU {c.gpu}"
        node = changed_gpu(ctx, out, "sharing", c.node, c.gpu, set(changed), "shared")
        if node is None:
            continue
        changed[c.node, c.gpu] = c
        if c.gpu in node.unhealthy_gpus:
            out.append(f"sharing: {where} is unhealthy and cannot be shared")
        if c.gpu in node.mig or (c.node, c.gpu) in repartitioned:
            out.append(f"sharing: {where} is MIG-partitioned (or re-partitioned by the plan); a GPU is shared one "
                       "way only")
        if c.gpu in node.sharing:
            out.append(f"sharing: {where} is already shared (the node's sharing); the plan shares plain GPUs only")
        if (c.node, c.gpu) in running:
            out.append(f"sharing: {where} is not idle: running job {running[c.node, c.gpu]} holds it")
        if (c.mode, c.replicas) != (default.mode, default.replicas):
            out.append(f"sharing: {where} is shared as {c.mode} with {c.replicas} replicas; policy.sharing_default "
                       f"says {default.mode} with {default.replicas}")
    return out, changed


def _share_memory(node: Node, share: float, gib: float | None) -> float:
    """A shared pod's GPU memory: as declared, else its share of the GPU's memory."""
    if gib is not None:
        return gib
    model = lookup(node.gpu_model) if node.gpu_model else None
    return share * (model.memory_gib if model else 0.0)


def check_sharing_change_term(ctx: Context) -> list[Expected] | None:
    """`sharing_change`: −weights.sharing_change per whole GPU the plan turns into a shared one (its
    `sharing_changes` entries on GPUs not shared before), in model units."""
    opened = {(c.node, c.gpu) for c in ctx.plan.sharing_changes
              if c.node in ctx.nodes and c.gpu not in ctx.nodes[c.node].sharing}
    total = Tally()
    total.add(-1.0, len(opened), ctx.request.policy.weights.sharing_change)
    return [total.expected()]
