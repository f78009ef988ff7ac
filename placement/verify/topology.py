"""Topology, re-derived from node labels alone: no code shared with placement.topology.

The hard rules (a job's `topology.required` level, its `topology.slice` groups) and the statistics
`topology_report` gives benchmarks both read domains computed here from the cluster's
topology_levels and each node's topology fields and labels.
"""

from __future__ import annotations

from collections import Counter

from placement_models import Node, PlacementRequest, Plan

from placement.verify.context import Context, Expected, Resolved
from placement.verify.fragmentation import whole_free_nodes

#: Levels read from node.topology; the NVLink domain falls back to GPU Feature Discovery's clique label.
_TOPOLOGY_FIELDS = ("nvlink_domain", "rack", "block")
_CLIQUE_LABEL = "nvidia.com/gpu.clique"


def _node_label(node: Node, level: str) -> str | None:
    if level in _TOPOLOGY_FIELDS:
        value = getattr(node.topology, level)
        if value is None and level == "nvlink_domain":
            value = node.labels.get(_CLIQUE_LABEL)
        return value or None
    return node.labels.get(level) or None


def topology_domains(request: PlacementRequest, nodes: list[Node] | None = None) -> dict[str, dict[str, str]]:
    """Level -> node name -> name of the node's domain at that level ("node" included).

    Walking up from the node: a domain of the level below lies in the one domain its nodes are
    labelled with at this level; if none of them carries a label, it is a domain of its own
    ("<…>", a name no label can have), so a required level is never met by guessing where an
    unlabelled node sits.
    """
    nodes = list(request.cluster.nodes) if nodes is None else nodes
    below = {n.name: n.name for n in nodes}
    out = {"node": dict(below)}
    for level in request.cluster.topology_levels:
        labels: dict[str, set[str]] = {}
        for n in nodes:
            label = _node_label(n, level)
            if label is not None:
                labels.setdefault(below[n.name], set()).add(label)
        here = {}
        for n in nodes:
            found = sorted(labels.get(below[n.name], ()))
            here[n.name] = "+".join(found) if found else f"<{below[n.name]}>"
        out[level] = here
        below = here
    return out


def domains_of(ctx: Context) -> dict[str, dict[str, str]]:
    """Per topology level, node -> its domain (topology_domains), computed once per check."""
    if ctx.domain_cache is None:
        ctx.domain_cache = topology_domains(ctx.request, list(ctx.nodes.values()))
    return ctx.domain_cache


def check_required(ctx: Context) -> list[str]:
    domains, per_job = domains_of(ctx), ctx.job_nodes()
    out: list[str] = []
    for job in ctx.request.jobs:
        level = job.topology.required if job.topology is not None else None
        if level is None or job.name not in per_job:
            continue
        if level not in domains:
            out.append(f"topology.required: job {job.name} requires unknown level {level}")
            continue
        used = Counter(domains[level][r.node.name] for r in per_job[job.name])
        if len(used) > 1:
            shown = ", ".join(f"{d} ({k} pods)" for d, k in sorted(used.items()))
            out.append(f"topology.required: job {job.name} must sit in one {level} but uses {len(used)}: {shown}")
    return out


def check_slice(ctx: Context) -> list[str]:
    domains, per_job = domains_of(ctx), ctx.job_nodes()
    out: list[str] = []
    for job in ctx.request.jobs:
        spec = job.topology.slice if job.topology is not None else None
        if spec is None or job.name not in per_job or spec.required not in domains:
            continue
        size, where = spec.size, domains[spec.required]
        groups: dict[tuple[str, int], list[Resolved]] = {}
        for r in per_job[job.name]:
            if r.task.gpus > 0:
                groups.setdefault((r.task.name, r.a.pod // size), []).append(r)
        for (task, g), members in sorted(groups.items()):
            pods = f"{job.name}/{task} pods {g * size}..{g * size + size - 1}"
            if len({m.a.pod for m in members}) != size:
                out.append(f"topology.slice: {pods} form a slice of {size} but {len(members)} are placed")
            used = sorted({where[m.node.name] for m in members})
            if len(used) > 1:
                out.append(f"topology.slice: {pods} must sit in one {spec.required} but use {', '.join(used)}")
    return out


def topology_report(request: PlacementRequest, plan: Plan) -> dict[str, object]:
    """Per-plan topology statistics, recomputed from the request and the plan's assignments.

    * `small_gangs`, `small_in_one_nvlink`, `small_in_one_nvlink_share`: placed jobs of 1-8 GPUs,
      and how many of them (share) sit inside one NVLink domain (a single node counts as one);
    * `multi_node_gangs`: placed jobs on two or more nodes; `domains_per_multi_node_gang`: per
      level, the mean number of that level's domains such a gang uses; `multi_node_in_one`: per
      level, how many such gangs sit inside one domain;
    * `empty_domains`: per level, multi-node domains whose healthy GPUs are all free after the
      plan (running pods minus preempted jobs, plus the plan's pods): room kept for big gangs.
    """
    ctx = Context.build(request, plan)
    nodes = list(ctx.nodes.values())
    domains, per_job = domains_of(ctx), ctx.job_nodes()
    levels = list(request.cluster.topology_levels)
    small = [rs for rs in per_job.values() if 0 < sum(len(r.a.gpus) for r in rs) <= 8]
    nvlink = domains.get("nvlink_domain", domains["node"])  # without that level: one node is the domain
    in_one = sum(1 for rs in small if len({nvlink[r.node.name] for r in rs}) == 1)
    multi = [rs for rs in per_job.values() if len({r.node.name for r in rs}) > 1]
    spread = {lv: [len({domains[lv][r.node.name] for r in rs}) for rs in multi] for lv in levels}
    gone = {p.job for p in plan.preemptions}
    busy = {node for (node, _), job in ctx.held.items() if job not in gone}
    busy |= {r.node.name for r in ctx.resolved if r.a.gpus}
    empty: dict[str, int] = {}
    for lv in levels:
        members: dict[str, list[Node]] = {}
        for n in nodes:
            members.setdefault(domains[lv][n.name], []).append(n)
        empty[lv] = sum(1 for ms in members.values() if len(ms) > 1 and not any(m.name in busy for m in ms)
                        and any(m.gpus > len(m.unhealthy_gpus) for m in ms))
    return {
        "small_gangs": len(small),
        "small_in_one_nvlink": in_one,
        "small_in_one_nvlink_share": round(in_one / len(small), 4) if small else None,
        "multi_node_gangs": len(multi),
        "domains_per_multi_node_gang": {lv: round(sum(v) / len(v), 4) if v else None for lv, v in spread.items()},
        "multi_node_in_one": {lv: sum(1 for k in v if k == 1) for lv, v in spread.items()},
        "empty_domains": empty,
    }


# --------------------------------------------------------------------------------------------
# The objective's topology terms (placement.verify.objective's registry reads them), w = weights.topology.
#
# `topology.keep_whole`: per named level, each domain of two or more nodes whose GPUs were all free before
# the plan (placement.verify.fragmentation) and into which the plan puts a whole-GPU pod costs w / L, L the
# levels that have such free domains a GPU pod could enter (levels with as many domains count once). Which
# free domains a pod could enter follows the planner's filter: L lies between the levels the plan breaks
# into and the levels with free domains, and the term must match one of those. One unit a domain.
# `topology.spread`: a gang touching k domains of its `preferred` level (or, with multi-node NVLink domains
# and no preference, of nvlink_domain at 0.3 of w) costs w × (k − m), m ≥ 1 the domains it needs at least,
# a bound on the planner's pod slots: so between −1.3 × w × (k − 1) and 0 (both may apply).
# `topology.bandwidth` is computed by decode from the in-node GPU graphs (placement.topology) and not derived here.

IMPLICIT_NVLINK = 0.3


def _labelled(ctx: Context) -> bool:
    """Does every node name its domain at every level? Elsewhere the planner's domains (placement.topology)
    may group what the verifier keeps apart, and neither term is derived."""
    levels = ctx.request.cluster.topology_levels
    return bool(levels) and all(_node_label(n, level) is not None for n in ctx.nodes.values() for level in levels)


def check_keep_whole_term(ctx: Context) -> list[Expected] | None:
    weight = ctx.request.policy.weights.topology
    if weight == 0:
        return [Expected.exact(0.0)]
    if not _labelled(ctx):
        return None
    free = whole_free_nodes(ctx)
    domains = domains_of(ctx)
    whole = {r.node.name for r in ctx.resolved if r.task.gpus > 0 and r.task.mig_profile is None
             and r.task.gpu_share is None}
    eligible, broken, seen = 0, [], set()
    for level in ctx.request.cluster.topology_levels:
        of = domains.get(level, {})
        members: dict[str, list[str]] = {}
        for node, d in of.items():
            members.setdefault(d, []).append(node)
        if len(members) in seen:
            continue
        seen.add(len(members))
        empty = [d for d, ns in members.items() if len(ns) > 1 and all(n in free for n in ns)]
        if empty:
            eligible += 1
            hit = sum(1 for d in empty if any(n in whole for n in members[d]))
            if hit:
                broken.append(hit)
    count = sum(broken)
    if not count:
        return [Expected.exact(0.0)]
    return [Expected.exact(-weight * count / levels, count) for levels in range(len(broken), eligible + 1)]


def check_spread_term(ctx: Context) -> list[Expected] | None:
    weight = ctx.request.policy.weights.topology
    levels = ctx.request.cluster.topology_levels
    if not _labelled(ctx):
        return None
    domains = domains_of(ctx)
    low = 0.0
    units = 0
    for job, pods in ctx.job_nodes().items():
        spec = ctx.pending_jobs[job].topology
        level = spec.preferred if spec is not None and spec.preferred else "nvlink_domain"
        w = weight * (1.0 + IMPLICIT_NVLINK)  # a preference's term, and NVLink's beside it where both apply
        if level not in levels:
            continue
        touched = {domains[level].get(r.node.name) for r in pods}
        low -= w * (len(touched) - 1)
        units += len(touched) + 1
    return [Expected(low, 0.0, units)]


def check_bandwidth_term(ctx: Context) -> list[Expected] | None:
    return None
