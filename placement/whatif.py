"""What-if: change the request, solve every variant, and show the plans side by side.

A scenario is a named list of changes applied to a copy of the request, in order:

```yaml
name: four-more-spot-nodes
changes:
  - add_nodes: {pool: h100-spot, count: 4, like: n001}   # or node: {gpu_model: ..., gpus: 8, ...}
  - remove_rack: r03        # its nodes go; running jobs that had pods there are queued again
  - peak: false             # flip peak hours (reserve released, deferrable jobs go first)
  - provision: {pool: h100-od, max_nodes: 4, like: n001}  # let the solver decide how many to add
  - policy: {weights: {cost: 0.01}}                      # any policy field, merged
  - quota: {team: research, quota: {...}}                # needs the teams module
  - mig: {node: n004, layout: {...}}                     # needs the GPU-sharing module
  - pool: {name: h100-spot, gpu_hour_price: 1.1, reclaim_rate_per_h: 0.1}  # pool fields, merged
```

The base request and every scenario are solved in parallel (each a full `placement.plan`,
verified) on the shared executor (placement.executor: this machine's cores by default, or Ray
with `--executor ray[:ADDRESS]`); output keeps the order base, then scenarios as given, whatever
order the solves finish in. With `policy.deterministic` the plans are reproducible, so a
scenario's column equals a separate solve of the changed request, on every executor.

Fairness is Jain's index over teams of the share of each team's pending GPU demand the plan
places (1 = every team served in the same proportion), until the teams module brings its own.
The cost and node rows, and when the objective is shown, are defined in placement.measures, which
the sweep reads too: the two tables use one vocabulary.
"""

from __future__ import annotations

import copy
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from placement_models import NodeTemplate, PlacementRequest, Plan, format_errors
from placement_models.request import Strict
from pydantic import Field, ValidationError, model_validator

from placement import measures
from placement.executor import Executor, make_executor, run_all
from placement.measures import fairness


class ScenarioError(ValueError):
    """A scenario that cannot be applied to this request (unknown rack, unsupported kind, ...).

    `change` and `kind` name the offending change when one is to blame, so a face (the HTTP
    service) can point at `scenarios[i].changes[change].kind` without parsing the message.
    """

    def __init__(self, message: str, *, change: int | None = None, kind: str | None = None) -> None:
        super().__init__(message)
        self.change = change
        self.kind = kind


# --------------------------------------------------------------------------------------------
# Scenario files


class _Shape(Strict):
    """Shape of new nodes: copy an existing node (`like`) or give a template (`node`)."""

    like: str | None = None
    node: NodeTemplate | None = None

    @model_validator(mode="after")
    def _one(self) -> _Shape:
        if self.like is not None and self.node is not None:
            raise ValueError("give either 'like' (an existing node) or 'node' (a template), not both")
        return self


class AddNodes(_Shape):
    pool: str
    #: 0 adds nothing, so a sweep axis can start from the cluster as it is
    count: int = Field(ge=0, le=4096)


class Provision(_Shape):
    pool: str
    max_nodes: int = Field(ge=1, le=256)
    min_billing_h: float = Field(1.0, ge=0)


class Quota(Strict):
    team: str
    quota: Any


class Mig(Strict):
    node: str
    layout: Any


class PoolChange(Strict):
    """Fields of one pool, merged: prices and spot reclaim rates are what capacity questions vary."""

    name: str
    capacity_type: str | None = None
    gpu_hour_price: float | None = Field(None, ge=0)
    reclaim_rate_per_h: float | None = Field(None, ge=0)


class Change(Strict):
    """Exactly one kind of change."""

    add_nodes: AddNodes | None = None
    remove_rack: str | None = None
    peak: bool | None = None
    provision: Provision | None = None
    policy: dict[str, Any] | None = None
    quota: Quota | None = None
    mig: Mig | None = None
    pool: PoolChange | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Change:
        given = [k for k, v in self.__dict__.items() if v is not None]
        if len(given) != 1:
            raise ValueError(f"a change has exactly one kind (add_nodes, remove_rack, peak, provision, policy, "
                             f"quota, mig, pool); got {given or 'none'}")
        return self


class Scenario(Strict):
    name: str = Field(min_length=1)
    changes: list[Change] = Field(default_factory=list)


def load_scenarios(path: str | Path) -> list[Scenario]:
    """A file holds one scenario (a mapping) or several (a list); a nameless one takes the file's stem."""
    from placement.io import load_document

    data = load_document(path)
    items = data if isinstance(data, list) else [data]
    out = []
    for i, item in enumerate(items):
        if isinstance(item, dict) and "name" not in item:
            item = {**item, "name": Path(path).stem if len(items) == 1 else f"{Path(path).stem}-{i}"}
        out.append(Scenario.model_validate(item))
    return out


# --------------------------------------------------------------------------------------------
# Applying changes (on the request as plain data, then validated again)


def apply(request: PlacementRequest, scenario: Scenario) -> PlacementRequest:
    data = request.model_dump(mode="json")
    for i, change in enumerate(scenario.changes):
        kind = next(k for k, v in change.__dict__.items() if v is not None)
        try:
            _APPLY[kind](data, getattr(change, kind))
        except ScenarioError as exc:
            raise ScenarioError(f"scenario {scenario.name}, change {i} ({kind}): {exc}",
                                change=i, kind=kind) from None
    try:
        return PlacementRequest.model_validate(data)
    except ValidationError as exc:
        lines = format_errors(exc)
        hint = ""
        if any("not supported yet" in line for line in lines):
            hint = " (this kind of change needs a module that is not built yet)"
        raise ScenarioError(f"scenario {scenario.name} makes an invalid request{hint}: " + "; ".join(lines)) from None


def _shape(data: dict[str, Any], change: _Shape, pool: str) -> dict[str, Any]:
    nodes = data["cluster"]["nodes"]
    if change.node is not None:
        return change.node.model_dump(mode="json")
    if change.like is not None:
        src = next((n for n in nodes if n["name"] == change.like), None)
        if src is None:
            raise ScenarioError(f"no node named {change.like} to copy")
    else:
        src = next((n for n in nodes if n.get("pool") == pool), None)
        if src is None:
            raise ScenarioError(f"pool {pool} has no node to copy; give 'like' or 'node'")
    keep = ("gpu_model", "gpus", "cpu", "memory_gib", "labels", "taints", "topology")
    return {k: copy.deepcopy(src[k]) for k in keep if k in src}


def _pool(data: dict[str, Any], name: str) -> dict[str, Any]:
    pool = next((p for p in data["cluster"]["pools"] if p["name"] == name), None)
    if pool is None:
        raise ScenarioError(f"unknown pool {name}")
    return pool


def _add_nodes(data: dict[str, Any], change: AddNodes) -> None:
    _pool(data, change.pool)
    shape = _shape(data, change, change.pool)
    taken = {n["name"] for n in data["cluster"]["nodes"]}
    k = 0
    for _ in range(change.count):
        while f"{change.pool}-whatif-{k}" in taken:
            k += 1
        name = f"{change.pool}-whatif-{k}"
        taken.add(name)
        data["cluster"]["nodes"].append({"name": name, "pool": change.pool, **copy.deepcopy(shape)})


def _remove_rack(data: dict[str, Any], rack: str) -> None:
    """Drop the rack's nodes; a running job with a pod there stops whole and is queued again."""
    cluster = data["cluster"]
    gone = {n["name"] for n in cluster["nodes"] if (n.get("topology") or {}).get("rack") == rack}
    if not gone:
        racks = sorted({str((n.get("topology") or {}).get("rack")) for n in cluster["nodes"]})
        raise ScenarioError(f"no node in rack {rack} (racks: {', '.join(racks[:10])})")
    if len(gone) == len(cluster["nodes"]):
        raise ScenarioError(f"rack {rack} holds every node; nothing would be left")
    cluster["nodes"] = [n for n in cluster["nodes"] if n["name"] not in gone]
    keep = []
    for job in cluster["running"]:
        if any(pod["node"] in gone for pod in job["pods"]):
            data["jobs"].append(_requeue(job))
        else:
            keep.append(job)
    cluster["running"] = keep


def _requeue(job: dict[str, Any]) -> dict[str, Any]:
    """A displaced running job as a pending one: one task per task name, sized like its biggest pod."""
    tasks: dict[str, dict[str, Any]] = {}
    for pod in job["pods"]:
        t = tasks.setdefault(pod["task"], {"name": pod["task"], "replicas": 0, "gpus": 0, "cpu": 0.0,
                                           "memory_gib": 0.0})
        t["replicas"] += 1
        t["gpus"] = max(t["gpus"], len(pod.get("gpus") or []))
        t["cpu"] = max(t["cpu"], pod.get("cpu") or 0.0)
        t["memory_gib"] = max(t["memory_gib"], pod.get("memory_gib") or 0.0)
    return {"name": job["job"], "team": job.get("team"), "priority": job.get("priority", 0),
            "preemptible": job.get("preemptible", False), "submitted_at": job.get("started_at"),
            "tasks": list(tasks.values())}


def _peak(data: dict[str, Any], peak: bool) -> None:
    data["policy"]["peak"] = peak


def _provision(data: dict[str, Any], change: Provision) -> None:
    pool = _pool(data, change.pool)
    pool["provisionable"] = {"max_nodes": change.max_nodes, "min_billing_h": change.min_billing_h,
                             "node": _shape(data, change, change.pool)}


def _merge(into: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


def _policy(data: dict[str, Any], update: dict[str, Any]) -> None:
    _merge(data["policy"], update)


def _quota(data: dict[str, Any], change: Quota) -> None:
    team = next((t for t in data["teams"] if t["name"] == change.team), None)
    if team is None:
        raise ScenarioError(f"unknown team {change.team}")
    team["quota"] = copy.deepcopy(change.quota)


def _mig(data: dict[str, Any], change: Mig) -> None:
    node = next((n for n in data["cluster"]["nodes"] if n["name"] == change.node), None)
    if node is None:
        raise ScenarioError(f"unknown node {change.node}")
    node["mig"] = copy.deepcopy(change.layout)


def _pool_fields(data: dict[str, Any], change: PoolChange) -> None:
    pool = _pool(data, change.name)
    pool.update(change.model_dump(exclude={"name"}, exclude_none=True))


_APPLY = {"add_nodes": _add_nodes, "remove_rack": _remove_rack, "peak": _peak, "provision": _provision,
          "policy": _policy, "quota": _quota, "mig": _mig, "pool": _pool_fields}


# --------------------------------------------------------------------------------------------
# Solving and comparing


@dataclass(frozen=True)
class Row:
    """One column of the side-by-side table."""

    name: str
    status: str
    gpus_placed: int
    jobs_placed: int
    jobs_pending: int
    #: the measures below are named and defined in placement.measures, as the sweep names them
    placed_cost_per_hour: float | None
    placed_expected_cost: float | None
    cluster_cost_per_hour: float
    fairness: float
    #: reference GPUs of work placed, and per currency unit per hour (placement.measures)
    placed_work: float
    work_per_dollar: float | None
    nodes_added: int
    nodes_removed: int
    objective: float
    #: the request scores plans as the base does (measures.scores_alike): only then is `objective` comparable
    objective_comparable: bool


@dataclass
class Diff:
    """How a scenario's plan differs from the base plan, job by job."""

    placed: list[str] = field(default_factory=list)  # pending in base, placed here
    pending: list[str] = field(default_factory=list)  # placed in base, pending here
    moved: list[str] = field(default_factory=list)  # placed in both, on other nodes
    new_jobs: list[str] = field(default_factory=list)  # not in the base request (displaced work)


@dataclass
class WhatIf:
    names: list[str]
    requests: list[PlacementRequest]
    plans: list[Plan]
    rows: list[Row]
    diffs: list[Diff]  # one per scenario (not for the base)

    def table(self) -> str:
        return render_table(self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenarios": [
                {"row": row.__dict__, "diff": None if i == 0 else self.diffs[i - 1].__dict__,
                 "plan": plan.model_dump(mode="json")}
                for i, (row, plan) in enumerate(zip(self.rows, self.plans, strict=True))
            ]
        }


def _solve(request: PlacementRequest) -> Plan:
    from placement.api import plan

    return plan(request)


def what_if(request: PlacementRequest | dict[str, Any], scenarios: list[Scenario],
            processes: int | None = None, executor: Executor | None = None) -> WhatIf:
    """Solve the base request and each scenario in parallel and compare them.

    ``executor`` runs the solves (placement.executor; the caller keeps and closes it); without one, a
    local process pool of ``processes`` workers (default one per core) is made for this call. A solve
    that raises is retried once; if it fails again the whole comparison fails (a side-by-side table with
    a hole in it would hide which column is missing)."""
    base = request if isinstance(request, PlacementRequest) else PlacementRequest.model_validate(request)
    names = ["base", *[s.name for s in scenarios]]
    if len(set(names)) != len(names):
        raise ScenarioError(f"scenario names must be unique and not 'base': {names[1:]}")
    requests = [base, *[apply(base, s) for s in scenarios]]  # all applied before any solve: fail fast
    if executor is None:
        with make_executor("local", max(1, min(len(requests), processes or os.cpu_count() or 1))) as own:
            outcomes = run_all(_solve, requests, own)
    else:
        outcomes = run_all(_solve, requests, executor)  # outcomes keep the input order
    failed = [f"{names[o.index]}: {o.error}" for o in outcomes if not o.ok]
    if failed:
        raise RuntimeError(f"solves failed after a retry: {'; '.join(failed)}")
    plans = [o.value for o in outcomes]
    rows = [summarise(name, req, plan, base) for name, req, plan in zip(names, requests, plans, strict=True)]
    diffs = [diff(plans[0], p, requests[0]) for p in plans[1:]]
    return WhatIf(names, requests, plans, rows, diffs)


def summarise(name: str, request: PlacementRequest, plan: Plan, base: PlacementRequest | None = None) -> Row:
    """One column; `base` is the request the scenarios change (None: this is the base)."""
    base = base if base is not None else request
    cost = plan.cost
    return Row(
        name=name, status=plan.status, gpus_placed=sum(len(a.gpus) for a in plan.assignments),
        jobs_placed=len({a.job for a in plan.assignments}), jobs_pending=len(plan.pending),
        placed_cost_per_hour=None if cost is None else cost.per_hour,
        placed_expected_cost=None if cost is None else cost.total,
        cluster_cost_per_hour=measures.cluster_cost_per_hour(request, plan),
        fairness=round(fairness(request, plan), 4),
        placed_work=round(measures.placed_work(request, plan), 4),
        work_per_dollar=None if (wpd := measures.work_per_dollar(request, plan)) is None else round(wpd, 4),
        nodes_added=measures.nodes_added(base, request, plan),
        nodes_removed=measures.nodes_removed(base, request),
        objective=plan.objective.total,
        # an unscored plan (no time left for the model that scores it) compares with nothing
        objective_comparable=plan.solver.objective is not None and measures.scores_alike(base, request),
    )


def _where(plan: Plan) -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = {}
    for a in plan.assignments:
        out.setdefault(a.job, Counter())[a.node] += 1
    return out


def diff(base: Plan, other: Plan, base_request: PlacementRequest) -> Diff:
    before, after = _where(base), _where(other)
    known = {j.name for j in base_request.jobs}
    pending_after = {p.job for p in other.pending}
    d = Diff()
    for job in sorted(set(after) | pending_after):
        if job not in known:
            d.new_jobs.append(job)
        elif job in after and job not in before:
            d.placed.append(job)
        elif job not in after and job in before:
            d.pending.append(job)
        elif job in after and after[job] != before[job]:
            d.moved.append(job)
    return d


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return str(value)


_ROWS = (("status", "status"), ("GPUs placed", "gpus_placed"), ("jobs placed", "jobs_placed"),
         ("jobs pending", "jobs_pending"), *((measures.LABELS[k], k) for k in (
             "placed_cost_per_hour", "placed_expected_cost", "cluster_cost_per_hour")),
         ("fairness (Jain)", "fairness"), *((measures.LABELS[k], k) for k in (
             "placed_work", "work_per_dollar", "nodes_added", "nodes_removed")))


def render_table(rows: list[Row]) -> str:
    """Scenarios as columns, measures as rows: easy to read side by side in a terminal. The objective row
    is there only when some scenario's objective compares with the base's ('-' where it does not); a
    legend under the table says what the cost and node rows count."""
    header = ["", *[r.name for r in rows]]
    body = [[label, *[_fmt(getattr(r, attr)) for r in rows]] for label, attr in _ROWS]
    keys = [attr for _, attr in _ROWS]
    if any(r.objective_comparable for r in rows[1:]):
        body.append(["objective", *[_fmt(r.objective) if r.objective_comparable else "-" for r in rows]])
        keys.append("objective")
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in
                       enumerate(zip(line, widths, strict=True))) for line in [header, *body]]
    return "\n".join(lines) + "\n" + measures.legend(keys)


def render_diffs(result: WhatIf) -> str:
    lines = []
    for name, d in zip(result.names[1:], result.diffs, strict=True):
        lines.append(f"{name} vs base:")
        for label, jobs in (("now placed", d.placed), ("now pending", d.pending), ("moved", d.moved),
                            ("displaced work", d.new_jobs)):
            if jobs:
                shown = ", ".join(jobs[:12]) + (f" (+{len(jobs) - 12} more)" if len(jobs) > 12 else "")
                lines.append(f"  {label} ({len(jobs)}): {shown}")
        if len(lines) and lines[-1] == f"{name} vs base:":
            lines.append("  same jobs placed on the same nodes")
    return "\n".join(lines)
