"""Queues -> teams: Volcano Queues, Kueue ClusterQueues (with ResourceFlavors, LocalQueues), KAI Queues.

All three are quota objects over one shared pool of GPUs, and placement/v1 models the Kueue
flavour of it (placement/teams.py): a nominal share, a borrowing limit above it, a lending limit
on the idle part, borrowed within a cohort. The mappings:

* Kueue ClusterQueue: per flavor, `nominalQuota`, `borrowingLimit`, `lendingLimit` of
  `nvidia.com/gpu`. A flavor becomes a quota scope when its `nodeLabels` select exactly the GPU
  nodes of one pool, one GPU model or both (or all GPU nodes: the cluster-wide quota).
  `spec.cohort` (`cohortName`) is the team's cohort; a queue without one neither borrows nor lends.
  `fairSharing.weight` is the team weight.
* Kueue Cohort: a cohort of the request with its `parent` (`parentName`) and its own quota, mapped
  per flavor as a ClusterQueue's; every cohort a ClusterQueue or Cohort names is declared, Cohort
  object or not. When no ClusterQueue names a cohort, none is declared (one implicit cohort), and
  the queues' limits are 0 instead. `fairSharing.weight` is the cohort's weight: the fair share
  multiplies the weights of the teams below it by it (placement/cohorts.py `fair_weights`); on a root
  cohort it has no sibling to weigh against and changes nothing (a warning says so). Weight 0, on a
  ClusterQueue or a Cohort, is imported as 0.001 with a warning.
* Volcano Queue: `deserved` is the nominal share, `guarantee` the part never lent (lending limit
  = deserved − guarantee), `capability` the ceiling (borrowing limit = capability − deserved),
  `weight` the team weight.
* KAI Queue: `resources.gpu.quota` is the nominal share (deserved; −1 or 0: none), `limit` the
  ceiling (−1: none), `overQuotaWeight` the team weight, which shares what is left above the
  nominal shares exactly as KAI's over-quota stage does (0: never above quota). KAI lends all idle
  quota, and also any GPU no queue's quota covers: those belong to a team without work,
  `kai-unassigned`, which lends them all.

A ClusterQueue's `preemption` (withinClusterQueue, reclaimWithinCohort, borrowWithinCohort) is its
team's `preemption` rules. Volcano and KAI queue hierarchies and queue priorities have no v1 field: each is
reported as a warning. A flavor's CPU and memory quotas count the nodes it selects: on a flavor
that selects every node (Kueue's `default-flavor` without labels) they are the cluster-wide
`quota.cpu` and `quota.memory_gib`; on any other they are the flavor's own `cpu` and `memory_gib`
in `quota.flavors`, keyed by the pool, GPU model or both that form exactly its nodes, CPU nodes
included (placement.kube.flavors gives the nodes a pool of their own when none does). Only a
flavor whose nodes cannot get one is reported.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from placement.kube.nodes import GPU, NodeInfo
from placement.kube.objects import Obj, View, Warnings
from placement.kube.quantity import GIB, QuantityError, parse_quantity

Scope = tuple[str | None, str | None]  # (pool, gpu_model); (None, None) = the whole cluster
CLUSTER: Scope = (None, None)


@dataclass
class TeamSpec:
    """One team: where it came from, its weight and GPU quota per scope (GpuQuota dicts)."""

    name: str
    where: str
    weight: float = 1.0
    quotas: dict[Scope, dict[str, int]] = field(default_factory=dict)
    kueue: bool = False
    #: Kueue flavor name -> the scope its nodes form (None: a set no v1 scope expresses)
    flavors: dict[str, Scope | None] = field(default_factory=dict)
    #: Kueue: cohort and preemption policies (who may evict whose workloads)
    cohort: str | None = None
    #: "cpu" (cores) / "memory" (GiB) -> a ResourceQuota dict, cluster-wide
    other: dict[str, dict[str, float]] = field(default_factory=dict)
    #: ("cpu" | "memory", flavor scope) -> a ResourceQuota dict on that flavor's nodes
    flavor_other: dict[tuple[str, Scope], dict[str, float]] = field(default_factory=dict)
    #: Kueue: the ClusterQueue's preemption rules (a v1 PreemptionRules dict)
    preemption: dict[str, Any] | None = None
    within: str = "Never"
    reclaim: str = "Never"

    def preemptible(self, teams: list[TeamSpec], root: Callable[[str | None], str | None]) -> bool:
        """Kueue: its workloads may be evicted by higher priority in the queue, or reclaimed by a mate in its
        cohort tree (`root`: a cohort's root)."""
        if not self.kueue:
            return False
        mine = root(self.cohort)
        return self.within != "Never" or any(t is not self and t.kueue and mine is not None
                                             and root(t.cohort) == mine and t.reclaim != "Never" for t in teams)

    def isolate(self) -> None:
        """Neither borrow nor lend: every limit 0 (a ClusterQueue without a cohort when no cohort is declared)."""
        for quota in [*self.quotas.values(), *self.other.values(), *self.flavor_other.values()]:
            quota.update(borrowing_limit=0, lending_limit=0)

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "weight": self.weight}
        if self.cohort is not None:
            out["cohort"] = self.cohort
        if self.preemption is not None:
            out["preemption"] = self.preemption
        if self.quotas or self.flavor_other:
            quota: dict[str, Any] = {}
            if CLUSTER in self.quotas:
                quota["gpus"] = self.quotas[CLUSTER]
            flavors: dict[Scope, dict[str, Any]] = {}
            for (p, m), q in self.quotas.items():
                if (p, m) != CLUSTER:
                    flavors[p, m] = {**({"pool": p} if p else {}), **({"gpu_model": m} if m else {}), "gpus": q}
            for (resource, (p, m)), q in self.flavor_other.items():
                entry = flavors.setdefault((p, m), {**({"pool": p} if p else {}), **({"gpu_model": m} if m else {})})
                entry["cpu" if resource == "cpu" else "memory_gib"] = q
            if flavors:
                quota["flavors"] = list(flavors.values())
            out["quota"] = quota
        for resource, key in (("cpu", "cpu"), ("memory", "memory_gib")):
            if resource in self.other:
                out.setdefault("quota", {})[key] = self.other[resource]
        return out


@dataclass
class CohortSpec:
    """A Kueue cohort: its parent and its own quota (a TeamSpec's quotas, None: no Cohort object)."""

    name: str
    where: str
    parent: str | None = None
    quota: TeamSpec | None = None
    weight: float = 1.0  # spec.fairSharing.weight

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.parent is not None:
            out["parent"] = self.parent
        if self.weight != 1.0:
            out["weight"] = self.weight
        quota = self.quota.wire().get("quota") if self.quota is not None else None
        if quota:
            out["quota"] = quota
        return out


@dataclass
class Queues:
    teams: dict[str, TeamSpec] = field(default_factory=dict)
    #: Kueue cohorts by name (empty: no ClusterQueue names one, all teams form one implicit cohort)
    cohorts: dict[str, CohortSpec] = field(default_factory=dict)
    #: (namespace, LocalQueue name) -> ClusterQueue name
    local_queues: dict[tuple[str, str], str] = field(default_factory=dict)
    #: ResourceFlavor name -> names of the nodes it selects
    flavor_nodes: dict[str, list[str]] = field(default_factory=dict)
    #: ResourceFlavor name -> (nodeLabels, tolerations) Kueue injects into the pods it admits there
    flavor_rules: dict[str, tuple[dict[str, str], list[Any]]] = field(default_factory=dict)

    def add(self, team: TeamSpec, obj: Obj) -> None:
        if team.name in self.teams:
            obj.view().fail("metadata.name", f"queue '{team.name}' is also declared by {self.teams[team.name].where}; "
                            "queue names become team names and must be unique")
        self.teams[team.name] = team

    def root(self, cohort: str | None) -> str | None:
        """The root of a cohort's tree (None for no cohort)."""
        seen: set[str] = set()
        while cohort is not None and cohort not in seen and cohort in self.cohorts:
            seen.add(cohort)
            if self.cohorts[cohort].parent is None:
                return cohort
            cohort = self.cohorts[cohort].parent
        return cohort


def _gpus(view: View, key: str) -> Fraction | None:
    """The nvidia.com/gpu quantity of a resource list field, or None when absent."""
    if not view.has(key):
        return None
    resources = view.sub(key)
    if not resources.has(GPU):
        return None
    return _nonnegative(resources, GPU)


def _nonnegative(view: View, key: str) -> Fraction:
    """The quantity at `key`, exact; a malformed or negative one fails naming the field."""
    try:
        value = parse_quantity(view.value[key])
    except QuantityError as exc:
        view.fail(key, str(exc))
    if value < 0:
        view.fail(key, "must not be negative")
    return value


def _whole(view: View, key: str, value: Fraction) -> int:
    if value.denominator != 1:
        view.fail(key, f"{value} GPUs is not a whole number (quotas count whole GPUs)")
    return int(value)


def _other_resources(fields: list[tuple[View, str]], warnings: Warnings) -> None:
    """One warning per queue naming every non-GPU quota it sets (quotas count GPUs only)."""
    found = sorted(f"{v.where(key)}.{name}" for v, key in fields if v.has(key) for name in v.sub(key).value
                   if name != GPU)
    if found:
        warnings.add(fields[0][0].obj.where, ", ".join(found), "only GPUs are imported into quotas: not honoured")


# --------------------------------------------------------------------------------------------
# Volcano


def volcano_queue(obj: Obj, warnings: Warnings) -> TeamSpec:
    spec = obj.view().sub("spec")
    team = TeamSpec(obj.name, obj.where, weight=float(spec.integer("weight", 1, minimum=1)))
    capability = _gpus(spec, "capability")
    deserved = _gpus(spec, "deserved")
    guarantee = _gpus(spec.sub("guarantee"), "resource")
    nominal = deserved if deserved is not None else guarantee
    if nominal is not None:
        kept = guarantee if guarantee is not None else Fraction(0)
        if kept > nominal:
            spec.sub("guarantee").fail("resource", f"guarantee {kept} exceeds deserved {nominal}")
        quota = {"nominal": _whole(spec, "deserved", nominal)}
        if guarantee is not None:  # the guarantee is never lent; deserved above it is
            quota["lending_limit"] = _whole(spec, "guarantee", nominal - kept)
        if capability is not None:
            if capability < nominal:
                spec.fail("capability", f"{capability} GPUs is below the queue's deserved/guarantee {nominal}")
            quota["borrowing_limit"] = _whole(spec, "capability", capability - nominal)
        team.quotas[CLUSTER] = quota
    elif capability is not None:
        warnings.add(obj.where, "spec.capability", "a ceiling without deserved/guarantee is not expressible (a v1 "
                     "team without nominal quota may only borrow others' idle quota): not honoured")
    _other_resources([(spec, "capability"), (spec, "deserved"), (spec.sub("guarantee"), "resource")], warnings)
    for key, what in (("parent", "queue hierarchy"), ("priority", "queue priority"),
                      ("reclaimable", "reclaimable flag"), ("affinity", "queue node affinity")):
        if spec.has(key):
            warnings.add(obj.where, f"spec.{key}", f"{what}: not honoured")
    return team


# --------------------------------------------------------------------------------------------
# KAI


def kai_queues(objs: list[Obj], warnings: Warnings) -> list[TeamSpec]:
    """Leaf queues become teams; a parent's own quota cannot be expressed (one cohort, no hierarchy)."""
    parents = {o.view().sub("spec").text("parentQueue") for o in objs} - {None}
    teams = []
    for obj in objs:
        spec = obj.view().sub("spec")
        if obj.name in parents:
            warnings.add(obj.where, "", "parent queue: the hierarchy is flattened, its children are teams of one "
                         "cohort; its own quota and limit are not honoured")
            continue
        teams.append(_kai_leaf(obj, spec, warnings))
    return teams


def _kai_leaf(obj: Obj, spec: View, warnings: Warnings) -> TeamSpec:
    team = TeamSpec(obj.name, obj.where)
    resources = spec.sub("resources")
    gpu = resources.sub("gpu")
    quota = _number(gpu, "quota", -1)
    limit = _number(gpu, "limit", -1)
    weight = _number(gpu, "overQuotaWeight", 1)
    if weight < 0:
        gpu.fail("overQuotaWeight", "must not be negative")
    if quota != int(quota) and quota > 0:
        warnings.add(obj.where, "spec.resources.gpu.quota", f"{quota} GPUs: quotas count whole GPUs, "
                     f"rounded down to {math.floor(quota)}")
    if quota < 0:
        warnings.add(obj.where, "spec.resources.gpu.quota", "-1 (no quota of its own): imported as no guaranteed "
                     "GPUs; the queue uses idle GPUs over quota by its overQuotaWeight")
    # quota: deserved GPUs (lent while idle, as KAI reclaims them); over it, any idle GPU, shared by weight
    entry: dict[str, int] = {"nominal": max(0, math.floor(quota))}
    if limit >= 0:
        if limit < max(quota, 0):
            gpu.fail("limit", f"{limit} is below the quota {quota}")
        entry["borrowing_limit"] = math.floor(limit) - entry["nominal"]
    if weight == 0:
        entry["borrowing_limit"] = 0  # overQuotaWeight 0: never above its quota
    team.quotas[CLUSTER] = entry
    if weight > 0:
        team.weight = float(weight)
    for name in ("cpu", "memory"):
        r = resources.sub(name)
        if _number(r, "quota", -1) > 0 or _number(r, "limit", -1) >= 0:
            warnings.add(obj.where, f"spec.resources.{name}", "only GPUs are imported into KAI quotas: not honoured")
    for key in ("priority", "preemptMinRuntime", "reclaimMinRuntime"):
        if spec.has(key):
            warnings.add(obj.where, f"spec.{key}", "per-queue setting: not honoured")
    return team


def kai_unassigned(teams: list[TeamSpec], nodes: list[NodeInfo]) -> TeamSpec | None:
    """The GPUs no KAI queue's quota covers, as a team without work that lends them all.

    KAI gives a queue over its quota any idle GPU of the cluster, shared by overQuotaWeight; a v1
    team borrows only other teams' idle nominal. This team owns the rest of the cluster's GPUs so
    that they are borrowable exactly as in KAI (quota 0 everywhere: every GPU, by weight).
    """
    total = sum(n.gpus - len(n.unhealthy) for n in nodes)
    covered = sum(t.quotas[CLUSTER]["nominal"] for t in teams if CLUSTER in t.quotas)
    if not teams or total <= covered:
        return None
    team = TeamSpec(KAI_UNASSIGNED, "KAI queues")
    team.quotas[CLUSTER] = {"nominal": total - covered, "borrowing_limit": 0}
    return team


#: The team holding the GPUs no KAI queue's quota covers (see kai_unassigned).
KAI_UNASSIGNED = "kai-unassigned"


def _number(view: View, key: str, default: float) -> float:
    value = view.get(key, (int, float, str), default)
    try:
        return float(parse_quantity(value))
    except QuantityError as exc:
        view.fail(key, str(exc))


# --------------------------------------------------------------------------------------------
# Kueue


def flavor_scope(obj: Obj, nodes: list[NodeInfo]) -> tuple[list[str], Scope | None]:
    """The nodes a ResourceFlavor selects, and the v1 quota scope with exactly those GPU nodes."""
    wanted = obj.view().sub("spec").string_map("nodeLabels")
    matched = [n for n in nodes if all(n.labels.get(k) == v for k, v in wanted.items())]
    gpu_all = {n.name for n in nodes if n.gpus}
    gpu_matched = {n.name for n in matched if n.gpus}
    if not gpu_matched:
        return [n.name for n in matched], None
    if gpu_matched == gpu_all:
        return [n.name for n in matched], CLUSTER
    pools = sorted({n.pool for n in nodes if n.gpus})
    models = sorted({n.gpu_model for n in nodes if n.gpus and n.gpu_model})
    candidates: list[Scope] = [(p, None) for p in pools] + [(None, m) for m in models]
    candidates += [(p, m) for p in pools for m in models]
    for pool, model in candidates:
        members = {n.name for n in nodes if n.gpus and (pool is None or n.pool == pool)
                   and (model is None or n.gpu_model == model)}
        if members == gpu_matched:
            return [n.name for n in matched], (pool, model)
    return [n.name for n in matched], None


def resource_scope(obj: Obj, nodes: list[NodeInfo]) -> Scope | None:
    """The v1 scope a ResourceFlavor's CPU and memory quotas count: the pool, GPU model or both whose nodes, CPU
    nodes included, are exactly those it selects (CLUSTER when it selects every node; None when nothing forms
    them). Unlike `flavor_scope`, which needs only the GPU nodes to match, every node here holds CPU and memory."""
    wanted = obj.view().sub("spec").string_map("nodeLabels")
    matched = {n.name for n in nodes if all(n.labels.get(k) == v for k, v in wanted.items())}
    if not matched:
        return None
    if len(matched) == len(nodes):
        return CLUSTER
    pools = sorted({n.pool for n in nodes})
    models = sorted({n.gpu_model for n in nodes if n.gpu_model})
    candidates: list[Scope] = [(p, None) for p in pools] + [(None, m) for m in models]
    candidates += [(p, m) for p in pools for m in models]
    for pool, model in candidates:
        if {n.name for n in nodes if (pool is None or n.pool == pool)
                and (model is None or n.gpu_model == model)} == matched:
            return pool, model
    return None


def resource_flavors(queues: list[Obj]) -> set[str]:
    """The flavors some ClusterQueue or Cohort sets a CPU or memory quota on (read leniently: cluster_queue
    reports what is malformed), so that only their nodes are given pools of their own."""
    def listed(value: Any, key: str) -> list[Any]:
        found = value.get(key) if isinstance(value, dict) else None
        return found if isinstance(found, list) else []

    out: set[str] = set()
    for obj in queues:
        spec = obj.view().value.get("spec") if isinstance(obj.view().value, dict) else None
        for g in listed(spec, "resourceGroups"):
            for f in listed(g, "flavors"):
                if any(isinstance(r, dict) and r.get("name") in ("cpu", "memory") for r in listed(f, "resources")):
                    out.add(str(f.get("name")))
    return out


def cluster_queue(obj: Obj, flavors: dict[str, Scope | None], warnings: Warnings,
                  others: dict[str, Scope | None] | None = None) -> TeamSpec:
    """A ClusterQueue -> a team; `flavors`: each flavor's GPU scope, `others`: its CPU and memory scope
    (`resource_scope`: CLUSTER for a flavor on every node, whose quotas are the cluster-wide ones)."""
    spec = obj.view().sub("spec")
    cohort = None if obj.kind == "Cohort" else spec.text("cohortName") or spec.text("cohort")
    weight = 1.0 if obj.kind == "Cohort" else _fair_weight(obj, spec, warnings)
    preemption = spec.sub("preemption")
    team = TeamSpec(obj.name, obj.where, weight=weight, kueue=True, cohort=cohort,
                    within=preemption.text("withinClusterQueue", "Never") or "Never",
                    reclaim=preemption.text("reclaimWithinCohort", "Never") or "Never")
    team.preemption = _kueue_preemption(preemption)
    dropped: set[str] = set()
    for g in spec.items("resourceGroups"):
        for f in g.items("flavors"):
            name = f.text("name", required=True)
            if name not in flavors:
                f.fail("name", f"ResourceFlavor '{name}' is not in the input (flavors: "
                       f"{', '.join(sorted(flavors)) or 'none'})")
            team.flavors[name] = flavors[name]
            for r in f.items("resources"):
                resource = r.text("name", required=True)
                if resource == GPU:
                    _kueue_resource(obj, team, name, flavors[name], r, warnings)
                elif resource in ("cpu", "memory") and (others or {}).get(name) is not None:
                    _kueue_other(team, resource, r, (others or {})[name])
                else:
                    dropped.add(f"{resource} ({name})")
    if dropped:
        warnings.add(obj.where, "spec.resourceGroups", f"quotas on {', '.join(sorted(dropped))}: only {GPU}, cpu "
                     "and memory quotas are imported, and cpu and memory only of flavors whose nodes a pool, GPU "
                     "model or both form: not honoured")
    if cohort is None and team.quotas and obj.kind != "Cohort":
        warnings.add(obj.where, "spec.cohortName", "no cohort: the queue neither borrows nor lends")
    for key in ("flavorFungibility", "admissionChecks", "admissionChecksStrategy", "namespaceSelector",
                "stopPolicy", "admissionScope"):
        if spec.value.get(key):  # an empty selector selects everything: nothing to honour
            warnings.add(obj.where, f"spec.{key}", "not honoured by placement/v1")
    if sum(1 for s in team.flavors.values() if s is not None) > 1:
        warnings.add(obj.where, "spec.resourceGroups", "flavor order is Kueue's preference; placement/v1 chooses "
                     "among the flavors' nodes by its objective (price, topology)")
    return team


def kueue_cohort(obj: Obj, flavors: dict[str, Scope | None], warnings: Warnings,
                 others: dict[str, Scope | None] | None = None) -> CohortSpec:
    """A Kueue Cohort -> a cohort: its parent, and its own quota (GPUs, CPU, memory per flavor, as a
    ClusterQueue's) that its subtree may use; its limits bound what the subtree borrows from and lends to
    the parent."""
    spec = obj.view().sub("spec")
    quota = cluster_queue(obj, flavors, warnings, others)
    quota.preemption = None
    parent = spec.text("parentName") or spec.text("parent")
    weight = _fair_weight(obj, spec, warnings)
    if spec.sub("fairSharing").has("weight") and not parent:
        warnings.add(obj.where, "spec.fairSharing.weight", "a root cohort has no sibling to share with: its "
                     "fair-sharing weight changes nothing")
    return CohortSpec(obj.name, obj.where, parent or None, quota, weight)


_WITHIN = {"Never": "never", "LowerPriority": "lower_priority",
           "LowerOrNewerEqualPriority": "lower_or_newer_equal_priority"}
_RECLAIM = {"Never": "never", "LowerPriority": "lower_priority", "Any": "any"}
_BORROW = {"Never": "never", "LowerPriority": "lower_priority"}


def _kueue_preemption(view: View) -> dict[str, Any]:
    """A ClusterQueue's `spec.preemption` -> the team's PreemptionRules (Kueue's defaults: Never everywhere)."""
    out: dict[str, Any] = {}
    for key, field_, values in (("withinClusterQueue", "within_team", _WITHIN),
                                ("reclaimWithinCohort", "reclaim_within_cohort", _RECLAIM)):
        value = view.text(key, "Never") or "Never"
        if value not in values:
            view.fail(key, f"'{value}' is not one of {', '.join(values)}")
        out[field_] = values[value]
    borrow = view.sub("borrowWithinCohort")
    policy = borrow.text("policy", "Never") or "Never"
    if policy not in _BORROW:
        borrow.fail("policy", f"'{policy}' is not one of {', '.join(_BORROW)}")
    out["borrow_within_cohort"] = {"policy": _BORROW[policy]}
    if borrow.has("maxPriorityThreshold"):
        out["borrow_within_cohort"]["max_priority_threshold"] = borrow.integer("maxPriorityThreshold")
    if out["reclaim_within_cohort"] == "never" and policy != "Never":
        borrow.fail("policy", "needs reclaimWithinCohort other than Never (Kueue refuses this ClusterQueue)")
    return out


def _kueue_other(team: TeamSpec, resource: str, r: View, scope: Scope) -> None:
    """A flavor's CPU (cores) or memory (GiB) quota -> the team's cluster-wide quota (a flavor on every node) or
    its quota on the flavor's scope; two flavors on the same nodes add up, as their GPU quotas do."""
    scale = Fraction(1) if resource == "cpu" else Fraction(1, GIB)
    values: dict[str, float] = {}
    for key, out in (("nominalQuota", "nominal"), ("borrowingLimit", "borrowing_limit"),
                     ("lendingLimit", "lending_limit")):
        if r.has(key):
            values[out] = float(_nonnegative(r, key) * scale)
    if "nominal" not in values:
        r.fail("nominalQuota", "required")
    old = (team.other.setdefault(resource, {}) if scope == CLUSTER
           else team.flavor_other.setdefault((resource, scope), {}))
    for k, v in values.items():
        old[k] = old.get(k, 0) + v


def _fair_weight(obj: Obj, spec: View, warnings: Warnings) -> float:
    fair = spec.sub("fairSharing")
    if not fair.has("weight"):
        return 1.0
    try:
        weight = float(parse_quantity(fair.value["weight"]))
    except QuantityError as exc:
        fair.fail("weight", str(exc))
    if weight <= 0:
        warnings.add(obj.where, "spec.fairSharing.weight", "weight 0 (borrow only what nobody else wants) is "
                     "imported as the smallest weight, 0.001")
        return 0.001
    return weight


def _kueue_resource(obj: Obj, team: TeamSpec, flavor: str, scope: Scope | None, r: View,
                    warnings: Warnings) -> None:
    if scope is None:
        warnings.add(obj.where, r.where(), f"flavor '{flavor}' selects GPU nodes that no pool, GPU model or both "
                     "form exactly: its GPU quota is not honoured")
        return
    values: dict[str, int] = {}
    for key, out in (("nominalQuota", "nominal"), ("borrowingLimit", "borrowing_limit"),
                     ("lendingLimit", "lending_limit")):
        if r.has(key):
            values[out] = _whole(r, key, _nonnegative(r, key))
    if "nominal" not in values:
        r.fail("nominalQuota", "required")
    if scope in team.quotas:
        old = team.quotas[scope]
        warnings.add(obj.where, r.where(), f"two flavors form the same scope {scope}: their quotas are added")
        for k, v in values.items():
            old[k] = old.get(k, 0) + v
    else:
        team.quotas[scope] = values
