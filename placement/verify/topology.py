"""Topology, re-derived from node labels alone: no code shared with placement.topology.

The hard rules (a job's `topology.required` level, its `topology.slice` groups) and the statistics
`topology_report` gives benchmarks both read domains computed here from the cluster's
topology_levels and each node's topology fields and labels.
"""

from __future__ import annotations

import math
from collections import Counter

from placement_models import Job, Node, PlacementRequest, Plan, Task

from placement.verify.candidates import NodeClass, all_nodes, class_room, offers, restricted, signature, whole_free
from placement.verify.context import SCALE, SUMMED, Context, Expected, Resolved, Tally

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
# The objective's topology terms (placement.verify.objective's registry reads them), w = weights.topology, over
# the domains of every node the planner weighs (the request's and every node a pool may add); each flag's
# coefficient in model units (`Tally`).
#
# `topology.keep_whole`: per named level (levels with as many domains count once), each domain of two or more
# nodes, all whole and free before the plan (placement.verify.candidates), into which the plan puts a whole-GPU
# pod costs w / L, L the levels where some such domain could take a whole-GPU pod of a pending task (a
# candidate node in it). The levels the plan breaks into are among them; the others follow the planner's
# candidates, and where those are not derived (placement.verify.candidates) the term may take each L between.
# `topology.spread`: a placed gang of two or more pods touching k domains of its `preferred` level (narrower
# than a `required` one) costs w × (k − m), m = max(1, ⌈needed pods / the most pod slots its candidates offer in
# one domain of that level⌉); a GPU gang with no preference (and not required inside one NVLink domain) pays
# the same at nvlink_domain at 0.3 × w when a candidate of a GPU task lies in a multi-node NVLink domain. Where
# the candidates or their slots are not derived, m lies between what the sure and the possible candidates
# give (up to k on a trimmed model), and the implicit NVLink term may or may not apply: each value is listed.
# `topology.bandwidth` is derived in placement.verify.bandwidth.

IMPLICIT_NVLINK = 0.3
NVLINK = "nvlink_domain"
#: Most distinct values the spread term is checked against; beyond, their range.
MAX_VALUES = 256


def _height(levels: list[str], name: str) -> int:
    return 0 if name == "node" else 1 + levels.index(name) if name in levels else len(levels) + 1


def weighed(ctx: Context) -> tuple[dict[str, Node], dict[str, dict[str, str]]]:
    """The nodes the planner weighs by name, and their domains per level."""
    if "weighed" not in ctx.memo:  # read by several terms: once per check
        nodes = {n.name: n for n in all_nodes(ctx)}
        same = len(nodes) == len(ctx.nodes)  # no pool adds a node: the request's own domains
        ctx.memo["weighed"] = (nodes, domains_of(ctx) if same else topology_domains(ctx.request, list(nodes.values())))
    return ctx.memo["weighed"]  # type: ignore[no-any-return]


def _entered(ctx: Context, tasks: list[tuple[Job, Task]]) -> tuple[set[str], set[str]]:
    """(nodes surely a candidate of one of the tasks in the planner's model, nodes that may be one). Once per
    set of task signatures: gangs of one shape ask the same."""
    key = ("entered", frozenset(signature(job, task) for job, task in tasks))
    if key not in ctx.memo:
        ctx.memo[key] = _entered_by(ctx, tasks)
    return ctx.memo[key]  # type: ignore[no-any-return]


def _entered_by(ctx: Context, tasks: list[tuple[Job, Task]]) -> tuple[set[str], set[str]]:
    sure: dict[int, NodeClass] = {}
    maybe: dict[int, NodeClass] = {}
    seen: set[tuple[object, ...]] = set()
    for job, task in tasks:
        if signature(job, task) in seen:
            continue
        seen.add(signature(job, task))
        for c, found, _ in offers(ctx, job, task):
            (sure if found and not restricted(ctx) else maybe)[id(c)] = c
    could = {n.name for c in sure.values() for n in c.members}
    return could, {n.name for c in maybe.values() for n in c.members} - could


def check_keep_whole_term(ctx: Context) -> list[Expected] | None:
    weight = ctx.request.policy.weights.topology
    if weight == 0:
        return [Expected.exact(0.0)]
    nodes, domains = weighed(ctx)
    free = {name for name, n in nodes.items() if whole_free(ctx, n)}
    hit = {r.node.name for r in ctx.resolved if r.task.gpus > 0 and r.task.mig_profile is None
           and r.task.gpu_share is None}
    gpu_tasks = [(job, task) for job in ctx.request.jobs for task in job.tasks
                 if task.gpus > 0 and task.mig_profile is None and task.gpu_share is None]
    could, might = _entered(ctx, gpu_tasks)
    sure, maybe, broken, seen = 0, 0, 0, set()
    for level in ctx.request.cluster.topology_levels:
        members: dict[str, list[str]] = {}
        for node, d in domains[level].items():
            members.setdefault(d, []).append(node)
        if len(members) in seen:
            continue
        seen.add(len(members))
        empty = [ns for ns in members.values() if len(ns) > 1 and all(n in free for n in ns)]
        broken += sum(1 for ns in empty if any(n in hit for n in ns))
        inside = {n for ns in empty for n in ns}
        if inside & (hit | could):
            sure += 1
        elif inside & might:
            maybe += 1
    if not broken:
        return [Expected.exact(0.0)]
    out = []
    for levels in range(max(1, sure), sure + maybe + 1):
        total = Tally()
        total.add(-1.0 / levels, broken, weight)
        out.append(total.expected())
    return out


def check_spread_term(ctx: Context) -> list[Expected] | None:
    weight = ctx.request.policy.weights.topology
    levels = list(ctx.request.cluster.topology_levels)
    if weight == 0:
        return [Expected.exact(0.0)]
    nodes, domains = weighed(ctx)
    sums: dict[int, int] = {0: 0}  # model units -> unsure units, over the jobs so far
    for job_name, pods in ctx.job_nodes().items():
        job = ctx.pending_jobs[job_name]
        for level, w, applies in _spreads(ctx, job, levels, nodes, domains):
            touched = len({domains[level][r.node.name] for r in pods})
            low, high = _minimum(ctx, job, level, domains, touched)
            options: dict[int, int] = {0: 0} if applies is None else {}
            for m in range(low, high + 1):
                tally = Tally()
                tally.add(-1.0, touched, w)
                tally.add(float(m), 1, w)
                options[tally.units] = max(options.get(tally.units, 0), tally.unsure)
            sums = {a + b: max(sums.get(a + b, 0), u + v) for a, u in sums.items() for b, v in options.items()}
            if len(sums) > MAX_VALUES:  # too many combinations to list: their range
                return [Expected(min(sums) / SCALE, max(sums) / SCALE, 2 * max(sums.values()), SUMMED)]
    return [Expected(units / SCALE, units / SCALE, 2 * unsure, SUMMED) for units, unsure in sorted(sums.items())]


def _spreads(ctx: Context, job: Job, levels: list[str], nodes: dict[str, Node],
             domains: dict[str, dict[str, str]]) -> list[tuple[str, float, bool | None]]:
    """The spread terms a placed job carries: (level, weight, applies: True, or None where it may be absent)."""
    weight = ctx.request.policy.weights.topology
    spec = job.topology
    out: list[tuple[str, float, bool | None]] = []
    if NVLINK in levels and job.pods >= 2 and (spec is None or spec.preferred is None) and not (
            spec is not None and spec.required is not None and _height(levels, spec.required) <= _height(levels,
                                                                                                      NVLINK)):
        tasks = [t for t in job.tasks if t.gpus > 0]
        if "wide_nodes" not in ctx.memo:  # nodes in NVLink domains of more than one node: once per check
            sizes: dict[str, int] = {}
            for d in domains[NVLINK].values():
                sizes[d] = sizes.get(d, 0) + 1
            ctx.memo["wide_nodes"] = frozenset(n.name for n in nodes.values() if sizes[domains[NVLINK][n.name]] > 1)
        wide_names: frozenset[str] = ctx.memo["wide_nodes"]
        could, might = _entered(ctx, [(job, t) for t in tasks])
        placed_wide = any(r.task.gpus > 0 and r.node.name in wide_names for r in ctx.job_nodes()[job.name])
        if placed_wide or wide_names & could:
            out.append((NVLINK, weight * IMPLICIT_NVLINK, True))
        elif wide_names & might:
            out.append((NVLINK, weight * IMPLICIT_NVLINK, None))
    # `node` is a level too: fewer nodes is better (the planner weighs it whatever topology_levels lists)
    if spec is not None and spec.preferred is not None and spec.preferred in ("node", *levels) and job.pods > 1 and (
            spec.required is None or _height(levels, spec.preferred) < _height(levels, spec.required)):
        out.append((spec.preferred, weight, True))
    return out


def _minimum(ctx: Context, job: Job, level: str, domains: dict[str, dict[str, str]],
             touched: int) -> tuple[int, int]:
    """(least, most) m, the domains the gang needs at least by the pod slots its candidates offer in one domain
    (the most over domains): pairs the verifier knows are in the model with their exact slots bound m from
    above; every pair that may be, at its most (all replicas where evictions or devices decide), from below."""
    sure: dict[str, int] = {}
    possible: dict[str, int] = {}
    for task in job.tasks:
        for exact, into in ((True, sure), (False, possible)):
            if exact and (restricted(ctx) or job.right_size):
                continue
            for d, pods in _domain_room(ctx, job, task, level, domains, exact).items():
                into[d] = into.get(d, 0) + pods
    most, least = max(possible.values(), default=0), max(sure.values(), default=0)
    low = max(1, math.ceil(job.needed / max(1, most)))
    high = max(1, math.ceil(job.needed / least)) if least else max(low, touched)
    return low, max(low, high)


def _domain_room(ctx: Context, job: Job, task: Task, level: str, domains: dict[str, dict[str, str]],
                 exact: bool) -> dict[str, int]:
    """Domain -> the pods of the task its candidates there take (placement.verify.candidates' `class_room`)."""
    key = ("domain_room", level, exact, *signature(job, task))
    if key not in ctx.memo:
        out: dict[str, int] = {}
        for c, pods in class_room(ctx, job, task, exact):
            for node in c.members:
                d = domains[level][node.name]
                out[d] = out.get(d, 0) + pods
        ctx.memo[key] = out
    return ctx.memo[key]  # type: ignore[no-any-return]
