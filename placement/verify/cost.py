"""The hard side of cost: jobs that are not spot_ok stay off spot pools, peak hours keep each pool's
reserve of free GPUs, and the nodes a plan adds are ones their pool offers, within its max_nodes;
and the plan's cost summary, recomputed where it is plain arithmetic.

Cost summary (`cost`): per placed job, its GPU-equivalents (a whole-GPU pod its GPUs, a MIG pod its
instance's memory slices over its GPU's, a shared pod its gpu_share, times it on a shared MIG
instance: placement.verify.quota derives them from the catalog) and those on spot nodes, the price per
hour they cost at their pools' gpu_hour_price, compute = per_hour × runtime_h (the job's
expected_runtime_h, else 1 h, over the speed of its slowest GPU pod's node where it has a speed table:
placement.verify.speeds), total = compute + reclaim_risk (0 unless a pod is on a spot node); the
summary's totals are the sums of its rows plus provisioning (each added node's price × GPUs × its
pool's min_billing_h). The reclaim risk itself is an estimate (placement.pricing's model), not
recomputed.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from placement_models import Job, Node, Pool

from placement.verify.candidates import offers
from placement.verify.context import FLOAT_SUM, SUMMED, Context, Expected, Resolved, Tally, num, pod_name
from placement.verify.priority import pod_values, tiers
from placement.verify.quota import assigned_gpus
from placement.verify.speeds import pace


def check_spot(ctx: Context) -> list[str]:
    spot = {p.name for p in ctx.request.cluster.pools if p.capacity_type == "spot"}
    return [f"spot: {pod_name(r.a)} of job {r.job.name} (not spot_ok) is on spot node {r.node.name} "
            f"(pool {r.node.pool})"
            for r in ctx.resolved if r.node.pool in spot and not r.job.spot_ok]


def check_reserve(ctx: Context) -> list[str]:
    """During peak, new pods leave `reserve` GPUs of each pool's existing nodes free (or add none there)."""
    policy = ctx.request.policy
    if not ctx.request.in_peak:
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


#: Hours a job without expected_runtime_h is priced for (JobCost.runtime_h: "1 h when the job gives none").
DEFAULT_RUNTIME_H = 1.0


def _pricing(pools: dict[str, Pool]) -> tuple[Callable[[Node], float], Callable[[Node], bool]]:
    """A node's GPU-hour price (0 for an unpriced pool) and whether it is spot, from the request's pools."""

    def price(node: Node) -> float:
        pool = pools.get(node.pool) if node.pool else None
        return (pool.gpu_hour_price or 0.0) if pool is not None else 0.0

    def spot(node: Node) -> bool:
        pool = pools.get(node.pool) if node.pool else None
        return pool is not None and pool.capacity_type == "spot"

    return price, spot


def check_cost(ctx: Context) -> list[str]:
    """The plan's cost summary against its assignments and the pools' prices."""
    summary = ctx.plan.cost
    if summary is None:
        return []
    pools = {p.name: p for p in ctx.request.cluster.pools}

    price, spot = _pricing(pools)

    per_job: dict[str, list[float]] = {}  # job -> [GPU-equivalents, on spot, per hour, pods on spot]
    gang_speed: dict[str, float] = {}  # job -> the speed of its slowest GPU pod's node (placement.verify.speeds)
    for r in ctx.resolved:
        g = assigned_gpus(r)
        if g > 0:
            gang_speed[r.job.name] = min(gang_speed.get(r.job.name, math.inf), pace(ctx, r.job, r.node))
        row = per_job.setdefault(r.job.name, [0.0, 0.0, 0.0, 0.0])
        row[0] += g
        row[1] += g if spot(r.node) else 0.0
        row[2] += price(r.node) * g
        row[3] += 1.0 if spot(r.node) else 0.0
    rows = {row.job: row for row in summary.jobs}
    tol = 1e-6 * (len(summary.jobs) + 2)
    out: list[str] = []

    def differs(what: str, reported: float, want: float) -> None:
        if not abs(reported - want) <= tol + 1e-9 * max(abs(reported), abs(want)):
            out.append(f"cost: {what} is {num(reported)}, recomputed {num(round(want, 6))}")

    out += [f"cost: job {name} is placed but has no row in the cost summary" for name in per_job if name not in rows]
    gpu_hours = 0.0
    for row in summary.jobs:
        if row.job not in per_job:
            out.append(f"cost: the cost summary lists job {row.job}, which the plan does not place")
            continue
        gpus, on_spot, per_hour, spot_pods = per_job[row.job]
        job = ctx.pending_jobs[row.job]
        runtime = job.expected_runtime_h if job.expected_runtime_h is not None else DEFAULT_RUNTIME_H
        runtime /= gang_speed.get(row.job, 1.0)  # a job is billed for the hours its gang takes (slowest member)
        differs(f"job {row.job}'s gpus", row.gpus, gpus)
        differs(f"job {row.job}'s spot_gpus", row.spot_gpus, on_spot)
        differs(f"job {row.job}'s per_hour", row.per_hour, per_hour)
        differs(f"job {row.job}'s runtime_h", row.runtime_h, runtime)
        differs(f"job {row.job}'s compute", row.compute, per_hour * runtime)
        differs(f"job {row.job}'s total", row.total, row.compute + row.reclaim_risk)
        if row.reclaim_risk < 0 or (row.reclaim_risk > 0 and not spot_pods):
            out.append(f"cost: job {row.job}'s reclaim_risk is {num(row.reclaim_risk)} with "
                       f"{'a negative value' if row.reclaim_risk < 0 else 'no pod on a spot node'}")
        gpu_hours += gpus * runtime
    provisioning = 0.0
    for entry in ctx.plan.provisioned:
        pool = pools.get(entry.pool)
        if pool is None or pool.provisionable is None:
            continue  # the provisioning rule reports it
        provisioning += sum((pool.gpu_hour_price or 0.0) * ctx.nodes[name].gpus * pool.provisionable.min_billing_h
                            for name in set(entry.nodes) if name in ctx.nodes)
    differs("compute", summary.compute, sum(r.compute for r in summary.jobs))
    differs("reclaim_risk", summary.reclaim_risk, sum(r.reclaim_risk for r in summary.jobs))
    differs("per_hour", summary.per_hour, sum(v[2] for v in per_job.values()))
    differs("gpu_hours", summary.gpu_hours, gpu_hours)
    differs("provisioning", summary.provisioning, provisioning)
    differs("total", summary.total, summary.compute + summary.reclaim_risk + summary.provisioning)
    return out


# --------------------------------------------------------------------------------------------
# The objective's cost terms, recomputed (placement.verify.objective's registry reads them).
#
# In GPU-equivalents: weights.cost × dollars. `cost.provisioning`: −weight × each added node's minimum
# billing (price × GPUs × min_billing_h), one unit a node. `cost.reclaim_risk`: −weight × per pod on a spot
# node, the gang's expected lost hours there (reclaim rate λ, restart r, runtime t, checkpoints every i:
# (t/i)·e^{λr}·(e^{λi} − 1)/λ − t, at most a century) × the pool's price × the gang's GPU-equivalents
# (its whole GPUs, or its shares and instances if more; their parts follow the planner's nodes, so between
# the verifier's pod values and a whole GPU each), each pod's coefficient in model units (`Tally`).
# `deferral`: a deferrable job's pods earn −½ of their priority value during peak, +5 % off peak.
# `cost.compute`: −weight × each pod's price × GPU-equivalents × runtime (over the job's speed on that node, where
# it has a speed table: each node its own) above the cheapest existing node its
# task could use, capped at half the pod's priority value (weights.priority × class weight × GPU-equivalents)
# over weights.cost; the full price for a deferrable job in peak, and on an added node when no existing node
# could take the task. Which nodes the task could use is the planner's filter, derived again in
# placement.verify.candidates (the planner takes the cheapest over them all, whatever a trimmed model kept):
# where it knows them (no room from evictions, whole-GPU and CPU pods) each pod's coefficient is exact in model
# units (`Tally`); elsewhere bounds: on an existing node at most the capped premium over the cheapest existing
# node that may be a candidate, at least nothing; on an added node between the premiums over the dearest and
# the cheapest such node, or the full price.

#: Restart after a reclaim, hours (placement.pricing's model).
RESTART_H = 0.1
#: Expected lost hours that stand for "never finishes".
NEVER_H = 876_000.0
PEAK_VALUE_FACTOR = 0.5
OFF_PEAK_BONUS = 0.05
#: Most of a pod's priority value its price premium on existing nodes may cancel (the planner's cap).
PREMIUM_CAP = 0.5


def _runtime(job: Job) -> float:
    return job.expected_runtime_h if job.expected_runtime_h is not None else DEFAULT_RUNTIME_H


def lost_hours(job: Job, rate: float) -> float:
    if rate <= 0:
        return 0.0
    t = _runtime(job)
    i = min(job.checkpoint_interval_h, t) if job.checkpoint_interval_h is not None else t
    try:
        extra = (t / i) * math.exp(rate * RESTART_H) * math.expm1(rate * i) / rate - t
    except OverflowError:
        return NEVER_H
    return min(extra, NEVER_H)


def check_provisioning_term(ctx: Context) -> list[Expected] | None:
    weight = ctx.request.policy.weights.cost
    pools = {p.name: p for p in ctx.request.cluster.pools}
    used = {r.node.name for r in ctx.resolved}
    total = Tally()
    for entry in ctx.plan.provisioned:
        pool = pools.get(entry.pool)
        if pool is None or pool.provisionable is None:
            continue
        for name in set(entry.nodes) & used:
            total.add(-((pool.gpu_hour_price or 0.0) * ctx.nodes[name].gpus * pool.provisionable.min_billing_h), 1,
                      weight)
    return [total.expected()]


def _priced(ctx: Context) -> bool:
    return ctx.request.policy.weights.cost > 0 and any(p.gpu_hour_price for p in ctx.request.cluster.pools)


def check_reclaim_risk_term(ctx: Context) -> list[Expected] | None:
    if not _priced(ctx):
        return [Expected.exact(0.0)]
    values = pod_values(ctx)
    if values is None:
        return None
    pools = {p.name: p for p in ctx.request.cluster.pools}
    weight = ctx.request.policy.weights.cost
    low, high = Tally(), Tally()
    for r in ctx.new_work():
        pool = pools.get(r.node.pool) if r.node.pool else None
        if pool is None or pool.capacity_type != "spot" or not pool.reclaim_rate_per_h:
            continue
        whole = sum(t.gpus * t.replicas for t in r.job.tasks if t.mig_profile is None and t.gpu_share is None)
        parts = [t for t in r.job.tasks if t.mig_profile is not None or t.gpu_share is not None]
        least = max(float(whole), whole + sum(values[r.job.name, t.name] * t.replicas for t in parts
                                              if values[r.job.name, t.name] >= 0.01))
        most = max(least, whole + sum(t.replicas for t in parts))  # a part of a GPU is at most one
        if r.job.right_size:  # the planner counts a right-size offer's MIG pods beside the declared GPUs
            most += whole
        hours = lost_hours(r.job, pool.reclaim_rate_per_h) * (pool.gpu_hour_price or 0.0)
        low.add(-(hours * most), 1, weight)
        high.add(-(hours * least), 1, weight)
    return [Expected(low.value(), high.value(), 2 * max(low.unsure, high.unsure), SUMMED)]


def check_deferral_term(ctx: Context) -> list[Expected] | None:
    found = tiers(ctx)
    values = pod_values(ctx)
    if found is None or values is None:
        return None
    share = -(1.0 - PEAK_VALUE_FACTOR) if ctx.request.in_peak else OFF_PEAK_BONUS
    weight = ctx.request.policy.weights.priority
    out = []
    for tier in found:
        total = Tally()
        for r in ctx.resolved:
            if r.job.deferrable:  # the pod's priority value (weight applied), as the model holds it
                total.add(share * (weight * tier.weights.get(r.job.priority, 0.0) * values[r.job.name, r.task.name]))
        out.append(total.expected())
    return out


def check_compute_term(ctx: Context) -> list[Expected] | None:
    if not _priced(ctx):
        return [Expected.exact(0.0)]
    found = tiers(ctx)
    values = pod_values(ctx)
    if found is None or values is None:
        return [_compute_bounds(ctx, None, None)]
    return [_compute_bounds(ctx, tier.weights, values) for tier in found]


def _compute_bounds(ctx: Context, classes: dict[int, float] | None,
                    values: dict[tuple[str, str], float] | None) -> Expected:
    """`cost.compute` over the class weights `classes` (None: the premium cap is not known, bounds only)."""
    pools = {p.name: p for p in ctx.request.cluster.pools}
    weight = ctx.request.policy.weights.cost
    price, _ = _pricing(pools)
    exact = Tally()
    low = high = 0.0
    loose = 0
    for r in ctx.new_work():
        g = assigned_gpus(r)
        full = price(r.node) * g * _runtime(r.job) / pace(ctx, r.job, r.node)
        if r.job.deferrable and ctx.request.in_peak:
            exact.add(-full, 1, weight)
            continue
        cap = math.inf
        if classes is not None and values is not None:
            earns = ctx.request.policy.weights.priority * classes.get(r.job.priority, 0.0) * values[r.job.name,
                                                                                                  r.task.name]
            cap = PREMIUM_CAP * earns / weight
        known, least, most = _existing(ctx, r, g, price)
        if known is not None and not r.right_sized and not (classes is None and not math.isnan(known)
                                                             and full - known > 0):
            exact.add(-(min(full - known, cap) if not math.isnan(known) else full), 1, weight)
            continue
        if known is not None and not r.right_sized:  # a premium whose cap (the pod's value) is not derived
            loose += 1
            low -= weight * (full - known)
            continue
        loose += 1
        if r.node.name in {n.name for n in ctx.request.cluster.nodes}:  # its own node is among the cheapest's
            low -= weight * (0.0 if math.isnan(least) else max(0.0, min(full - least, cap)))
        elif math.isnan(least):
            low -= weight * full
            high -= weight * full
        else:  # an added node: the premium over the existing nodes the model kept, or the full price
            low -= weight * max(full, min(full - least, cap))
            high -= weight * min(full, min(full - most, cap))
    value = exact.value()
    return Expected(value + low, value + high, 2 * exact.unsure + loose, SUMMED if not loose else FLOAT_SUM)


def _existing(ctx: Context, r: Resolved, g: float,
              price: Callable[[Node], float]) -> tuple[float | None, float, float]:
    """(the cheapest existing candidate's compute cost for the pod where the verifier knows the candidates, else
    None; NaN when there is none), and the least and most the cheapest may be over the nodes that may be
    candidates (NaN when none may be): placement.verify.candidates says when the candidates are known. The
    planner takes the cheapest over all the task's candidates, whatever a trimmed model kept."""
    sure: list[float] = []
    maybe: list[float] = []
    for c, found, _ in offers(ctx, r.job, r.task):
        if not c.added:
            (sure if found else maybe).append(price(c.node) * g * _runtime(r.job) / pace(ctx, r.job, c.node))
    possible = sure + maybe
    least = min(possible) if possible else math.nan
    most = max(possible) if possible else math.nan
    if maybe:
        return None, least, most
    return (min(sure) if sure else math.nan), least, most
