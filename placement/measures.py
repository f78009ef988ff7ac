"""The measures what-if and sweep both report, computed once and named once.

Why one module: the two commands answer the same question (what does this change do to the plan?)
side by side, so a reader moves between their tables. Each measure is defined here with its table
label, its JSON key and one legend line, and both commands read them from here; a label can no
longer mean one thing in one table and another in the other (cost of the placed work against cost
of the whole cluster; nodes the solver provisions against nodes a scenario adds).

* placed work cost/h (`placed_cost_per_hour`): the plan's own cost report, the price per hour of
  the GPU-equivalents it places (new work only; running work and idle GPUs cost nothing here).
* cluster cost/h (`cluster_cost_per_hour`): every GPU of every node at its pool's price, plus the
  nodes the plan provisions, whether busy or idle: what the cluster costs to keep.
* nodes added / removed: against the base request, by any means (a scenario's added nodes, nodes
  the plan provisions; a removed rack).
* work placed (`placed_work`): the GPUs the plan places, each times its job's speed on that GPU's model
  (`speeds`, `workload`; 1.0 without a table): reference GPUs of work, so a K80 that runs a job at a quarter
  of a V100's speed counts a quarter. Equal to the GPUs placed where no job declares speeds.
* work per $ (`work_per_dollar`): work placed / placed work cost per hour: reference GPU-hours of work per
  currency unit, the measure that answers "which GPUs should we add" for a queue mix.
* objective: only comparable between requests that score plans alike (`scores_alike`); shown
  only there.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from placement_models import PlacementRequest, Plan

from placement import catalog, speeds

#: JSON key -> table label, for the measures whose names were ambiguous before
LABELS = {
    "placed_cost_per_hour": "placed work cost/h",
    "placed_expected_cost": "placed work cost",
    "cluster_cost_per_hour": "cluster cost/h",
    "cluster_cost_total": "cluster cost",
    "nodes_added": "nodes added",
    "nodes_removed": "nodes removed",
    "objective": "objective",
    "placed_work": "work placed",
    "work_per_dollar": "work per $",
}

#: one line per label, printed under the tables that show it
LEGEND = {
    "placed_cost_per_hour": "price per hour of the GPUs the plan places (new work only)",
    "placed_expected_cost": "the plan's expected cost: placed work over its expected runtime (an hour when unset), "
                            "spot reclaim risk, added nodes' minimum billing",
    "cluster_cost_per_hour": "every GPU in the cluster at its pool's price, busy or idle, provisioned nodes included",
    "cluster_cost_total": "cluster cost/h over the simulated run",
    "nodes_added": "nodes beyond the base cluster, by any means: added by the scenario or provisioned by the plan",
    "nodes_removed": "base nodes the scenario takes away",
    "placed_work": "GPUs placed, each times its job's speed on that GPU's model (reference GPUs of work)",
    "work_per_dollar": "work placed per placed work cost/h: reference GPU-hours of work per currency unit",
    "objective": "the planner's score; shown only where the request scores plans as the base does (same jobs, "
                 "running work, teams, pools and policy; nodes may differ), '-' elsewhere",
}


def legend(keys: list[str]) -> str:
    """The legend lines for the measures a table shows, in its order."""
    width = max((len(LABELS[k]) for k in keys if k in LEGEND), default=0)
    return "\n".join(f"  {LABELS[k].ljust(width)}  {LEGEND[k]}" for k in keys if k in LEGEND)


def cluster_cost_per_hour(request: PlacementRequest, plan: Plan) -> float:
    """Every node's GPUs at its pool's price, plus the GPUs of the nodes the plan provisions."""
    price = {p.name: p.gpu_hour_price or 0.0 for p in request.cluster.pools}
    per_hour = sum(n.gpus * price.get(n.pool or "", 0.0) for n in request.cluster.nodes)
    templates = {p.name: p.provisionable.node for p in request.cluster.pools if p.provisionable is not None}
    for prov in plan.provisioned:
        gpus = templates[prov.pool].gpus if prov.pool in templates else 0
        per_hour += gpus * len(prov.nodes) * price.get(prov.pool, 0.0)
    return per_hour


def placed_work(request: PlacementRequest, plan: Plan) -> float:
    """Σ over the plan's GPUs of its job's speed on that GPU's model (placement.speeds): reference GPUs of work."""
    tables = speeds.resolve(request)
    table_of = dict(zip((j.name for j in request.jobs), tables.pending, strict=True))
    model_of = {n.name: n.gpu_model for n in request.cluster.nodes}
    work = 0.0
    for a in plan.assignments:
        found = catalog.lookup(model_of[a.node]) if model_of.get(a.node) else None
        work += len(a.gpus) * speeds.speed(table_of.get(a.job), found.name if found is not None else None)
    return work


def work_per_dollar(request: PlacementRequest, plan: Plan) -> float | None:
    """`placed_work` per the plan's placed work cost per hour (None without prices or placed work)."""
    if plan.cost is None or not plan.cost.per_hour:
        return None
    return placed_work(request, plan) / plan.cost.per_hour


def nodes_added(base: PlacementRequest, request: PlacementRequest, plan: Plan | None) -> int:
    """Nodes the request has beyond the base's, plus nodes the plan provisions: added by any means (no plan:
    a simulation, whose own provisioning is not a node of the request)."""
    before = {n.name for n in base.cluster.nodes}
    provisioned = 0 if plan is None else sum(len(p.nodes) for p in plan.provisioned)
    return sum(n.name not in before for n in request.cluster.nodes) + provisioned


def nodes_removed(base: PlacementRequest, request: PlacementRequest) -> int:
    """Nodes of the base the request no longer has."""
    after = {n.name for n in request.cluster.nodes}
    return sum(n.name not in after for n in base.cluster.nodes)


#: policy fields that say how long and how to search, not how a plan scores
_SEARCH_ONLY = ("time_limit_s", "workers", "seed", "deterministic", "relative_gap_limit", "explain_top",
                "estimate_starts")


def scoring(request: PlacementRequest) -> str:
    """What the objective of a plan depends on besides the nodes: the request without its nodes, without
    what makes pools provisionable (capacity to choose from, not a change of the score's scale) and without
    the search's own settings."""
    data: dict[str, Any] = request.model_dump(mode="json")
    data["cluster"].pop("nodes", None)
    for knob in _SEARCH_ONLY:
        data["policy"].pop(knob, None)
    for pool in data["cluster"].get("pools") or []:
        pool.pop("provisionable", None)
    return json.dumps(data, sort_keys=True)


def scores_alike(base: PlacementRequest, request: PlacementRequest) -> bool:
    """Plans of the two requests are scored on one scale: their objectives may be compared. Other changes
    (weights, prices, jobs, peak hours) change the scale, and a higher number there means nothing."""
    return scoring(base) == scoring(request)


def fairness(request: PlacementRequest, plan: Plan) -> float:
    """Jain's index over teams of placed / pending GPU demand (1.0 when no team asks for GPUs)."""
    demand: Counter[str] = Counter()
    for job in request.jobs:
        demand[job.team or "(no team)"] += sum(t.gpus * t.replicas for t in job.tasks)
    team_of = {job.name: job.team or "(no team)" for job in request.jobs}
    placed: Counter[str] = Counter()
    for a in plan.assignments:
        placed[team_of[a.job]] += len(a.gpus)
    shares = [placed[t] / d for t, d in demand.items() if d > 0]
    if not shares or not any(shares):
        return 1.0
    return sum(shares) ** 2 / (len(shares) * sum(s * s for s in shares))
