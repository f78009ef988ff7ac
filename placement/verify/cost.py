"""The hard side of cost: jobs that are not spot_ok stay off spot pools, peak hours keep each pool's
reserve of free GPUs, and the nodes a plan adds are ones their pool offers, within its max_nodes.
"""

from __future__ import annotations

from placement_models import Node

from placement.verify.context import Context, pod_name


def check_spot(ctx: Context) -> list[str]:
    spot = {p.name for p in ctx.request.cluster.pools if p.capacity_type == "spot"}
    return [f"spot: {pod_name(r.a)} of job {r.job.name} (not spot_ok) is on spot node {r.node.name} "
            f"(pool {r.node.pool})"
            for r in ctx.resolved if r.node.pool in spot and not r.job.spot_ok]


def check_reserve(ctx: Context) -> list[str]:
    """During peak, new pods leave `reserve` GPUs of each pool's existing nodes free (or add none there)."""
    policy = ctx.request.policy
    if not policy.peak:
        return []
    out: list[str] = []
    # Whole GPUs only: a shared GPU is never free whole, nor a partitioned one unless the plan may make it
    # whole (no kept running pod holds an instance there). The plan takes one per GPU of a whole-GPU pod
    # and one per plain GPU it partitions for MIG pods (mig_changes) or shares (sharing_changes); shares
    # and instances take none.
    instances = {(pod.node, pod.mig.gpu) for rj in ctx.request.cluster.running if rj.job not in ctx.evicted
                 for pod in rj.pods if pod.mig is not None}

    def whole(n: Node, g: int) -> bool:
        if g in n.unhealthy_gpus or (n.name, g) in ctx.held or g in n.sharing:
            return False
        return g not in n.mig or (policy.allow_mig_changes and (n.name, g) not in instances)

    nodes = {n.name: n for n in ctx.request.cluster.nodes}
    partitioned = {(c.node, c.gpu) for c in ctx.plan.mig_changes if c.mig_enabled and c.node in nodes
                   and c.gpu not in nodes[c.node].mig and whole(nodes[c.node], c.gpu)}
    partitioned |= {(c.node, c.gpu) for c in ctx.plan.sharing_changes if c.node in nodes
                    and c.gpu not in nodes[c.node].mig and whole(nodes[c.node], c.gpu)}
    for pool, reserve in policy.reserve.items():
        members = [n for n in ctx.request.cluster.nodes if n.pool == pool]
        free = sum(1 for n in members for g in range(n.gpus) if whole(n, g))
        names = {n.name for n in members}
        taken = sum(len(set(r.a.gpus)) for r in ctx.resolved if r.node.name in names
                    and r.task.gpu_share is None and r.task.mig_profile is None)
        taken += sum(1 for node, _ in partitioned if node in names)
        if taken > max(0, free - reserve):
            out.append(f"reserve: pool {pool} has {free} free GPUs and must keep {reserve} during peak; "
                       f"the plan takes {taken}")
    return out


def check_provisioning(ctx: Context) -> list[str]:
    pools = {p.name: p for p in ctx.request.cluster.pools}
    out: list[str] = []
    seen: set[str] = set()
    for i, entry in enumerate(ctx.plan.provisioned):
        pool = pools.get(entry.pool)
        if pool is None or pool.provisionable is None:
            out.append(f"provisioning: entry {i} adds nodes to pool {entry.pool}, which is not provisionable")
            continue
        offered = set(pool.provisionable.node_names(pool.name))
        for name in entry.nodes:
            if name not in offered:
                out.append(f"provisioning: pool {entry.pool} offers no node named {name}")
            elif name in seen:
                out.append(f"provisioning: node {name} is added twice")
            seen.add(name)
        if len(set(entry.nodes)) > pool.provisionable.max_nodes:
            out.append(f"provisioning: pool {entry.pool} adds {len(set(entry.nodes))} nodes, more than its "
                       f"max_nodes {pool.provisionable.max_nodes}")
    return out
