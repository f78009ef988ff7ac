"""The v1 request: cluster state, pending jobs, teams and policy, and the rules that cross them.

The parts live in their own modules (cluster, jobs, teams, policy); this one holds the top-level
`PlacementRequest`, whose validator checks what no single part can: names unique, pools, nodes
and GPUs that exist and are not double-booked, teams and topology levels that are declared.
Every model is re-exported here, so `placement_models.request` keeps its names.

Fields of concerns that have no solver module yet are declared so that a caller who sends them
gets a clear "not supported yet" error at the right path, instead of a plan that silently
ignores what they asked for.
"""

from __future__ import annotations

from datetime import datetime, timezone
from functools import cached_property
from typing import Any, Literal

from placement_models.base import MAX_JOBS, MAX_TEAMS, Strict, bounded_list, cross_field, either, given, holds
from placement_models.cluster import (
    Cluster,
    GpuSharing,
    MigInstance,
    MigSlot,
    Node,
    NodeTemplate,
    NodeTopology,
    Pool,
    Provisionable,
    RunningJob,
    RunningPod,
    Taint,
    Toleration,
)
from placement_models.errors import ErrorList
from placement_models.jobs import Job, JobTopology, Task, TopologySlice
from placement_models.policy import Policy, PreemptionRules, PreviousAssignment, PreviousPlan, Weights, resolve_rules
from placement_models.speeds import MAX_WORKLOADS, Workload
from placement_models.teams import Cohort, FlavorQuota, GpuQuota, Quota, Team
from pydantic import Field, model_validator

__all__ = [
    "API_VERSION", "NODE_LEVEL", "Cluster", "Cohort", "FlavorQuota", "GpuQuota", "GpuSharing", "Job", "JobTopology",
    "MigInstance", "MigSlot", "Node", "NodeTemplate", "NodeTopology", "PlacementRequest", "Policy", "Pool",
    "PreviousAssignment", "PreviousPlan", "Provisionable", "Quota", "RunningJob", "RunningPod", "Strict", "Taint",
    "Task", "Team", "Toleration", "TopologySlice", "Weights",
]

API_VERSION = "placement/v1"


#: with teams declared, every job (pending or running) names one: the part of `_check_teams` a schema can say
_TEAM_NAMED = {"items": given("team")}


class PlacementRequest(Strict):
    model_config = cross_field(either(holds("teams", {"maxItems": 0}),
                                      {"properties": {"jobs": _TEAM_NAMED,
                                                      "cluster": holds("running", _TEAM_NAMED)}}))

    api_version: Literal["placement/v1"] = API_VERSION
    cluster: Cluster
    jobs: bounded_list(Job, MAX_JOBS) = Field(default_factory=list)
    teams: bounded_list(Team, MAX_TEAMS) = Field(default_factory=list)
    #: Kueue cohorts the teams borrow in (`teams[].cohort`), possibly nested; none: one implicit cohort
    cohorts: bounded_list(Cohort, MAX_TEAMS) = Field(default_factory=list)
    policy: Policy = Field(default_factory=Policy)
    #: named speed tables jobs share (`jobs[].workload`, `cluster.running[].workload`; placement_models.speeds)
    workloads: bounded_list(Workload, MAX_WORKLOADS) = Field(default_factory=list)

    def check_references(self) -> PlacementRequest:
        """Run the cross-reference checks again (`_references`): for a request assembled from validated parts
        (placement.states), whose parts need no second look but whose parts' meeting does."""
        return self._references()

    @model_validator(mode="after")
    def _references(self) -> PlacementRequest:
        """Cross-references: names unique, pools and nodes exist, GPUs in range and not double-booked."""
        errors = ErrorList("PlacementRequest")
        _unique(errors, ("cluster", "pools"), [p.name for p in self.cluster.pools], "pool")
        _unique(errors, ("cluster", "nodes"), [n.name for n in self.cluster.nodes], "node")
        _unique(errors, ("teams",), [t.name for t in self.teams], "team")
        job_names = [j.job for j in self.cluster.running] + [j.name for j in self.jobs]
        locs: list[tuple[str | int, ...]] = [("cluster", "running", i, "job") for i in range(len(self.cluster.running))]
        locs += [("jobs", i, "name") for i in range(len(self.jobs))]
        seen: set[str] = set()
        for loc, name in zip(locs, job_names, strict=True):
            if name in seen:
                errors.add(loc, f"duplicate job name '{name}' (running and pending jobs share one namespace)", name)
            seen.add(name)

        pools = {p.name for p in self.cluster.pools}
        for i, n in enumerate(self.cluster.nodes):
            if n.pool is not None and n.pool not in pools:
                known = ", ".join(sorted(pools)) or "none declared"
                errors.add(("cluster", "nodes", i, "pool"), f"unknown pool '{n.pool}' (known: {known})", n.pool)
        _check_running(errors, self.cluster)
        _check_devices(errors, self.cluster)
        _check_cost(errors, self)
        _check_teams(errors, self)
        _check_cohorts(errors, self)
        _check_topology(errors, self)
        _check_workloads(errors, self)
        if self.policy.off_peak is not None and self.policy.peak:
            errors.add(("policy", "peak"), "set either peak or off_peak (which decides peak from the planning time)",
                       True)
        errors.raise_if_any()
        return self

    def preemption_rules_for(self, team: str | None) -> PreemptionRules | None:
        """The preemption rules of a job of `team` (the preemptor's, as Kueue reads its ClusterQueue's): the
        team's own `preemption`, else `policy.preemption`; None when off."""
        if team is not None:
            own = self._team_rules.get(team)
            if own is not None:
                return resolve_rules(own)
        return self.policy.preemption_rules

    @cached_property
    def _team_rules(self) -> dict[str, bool | PreemptionRules]:
        return {t.name: t.preemption for t in self.teams if t.preemption is not None}

    def share_cohort(self, a: str | None, b: str | None) -> bool:
        """Are teams a and b in one cohort tree, so that one may reclaim from or borrow against the other (Kueue's
        reclaimWithinCohort, borrowWithinCohort)? Without declared cohorts every team is in one implicit cohort."""
        roots = self._cohort_roots
        if roots is None:
            return True
        return roots.get(a or "") is not None and roots.get(a or "") == roots.get(b or "")

    @cached_property
    def _cohort_roots(self) -> dict[str, str | None] | None:
        """Team name -> the root of its cohort tree (None: in no cohort); None when no cohort is declared at all."""
        if not self.cohorts and not any(t.cohort for t in self.teams):
            return None
        parents = {c.name: c.parent for c in self.cohorts}
        out: dict[str, str | None] = {}
        for team in self.teams:
            at, seen = team.cohort, set()
            while at is not None and parents.get(at) is not None and at not in seen:
                seen.add(at)
                at = parents[at]
            out[team.name] = at
        return out

    @property
    def may_preempt(self) -> bool:
        """Does some job's rule set allow preemption at all (the policy's, or a team's own)?"""
        return self.policy.preemption_rules is not None or any(resolve_rules(v) for v in self._team_rules.values())

    def planning_time(self) -> datetime:
        """`policy.now`, else the latest time the request mentions (else the epoch): one answer everywhere.

        A default read from the wall clock would make the same request plan differently tomorrow;
        the latest mentioned time never lets a job look older than the request shows it.
        """
        return self.policy.now if self.policy.now is not None else self.latest_mentioned_time

    @cached_property
    def in_peak(self) -> bool:
        """Is this plan made in peak hours? `policy.peak`, or with `policy.off_peak`, the planning time outside
        every off-peak window: what the reserve, deferral and their checks all read."""
        off_peak = self.policy.off_peak
        return self.policy.peak if off_peak is None else not off_peak.contains(self.planning_time())

    @cached_property
    def latest_mentioned_time(self) -> datetime:
        """Cached: modules ask for the planning time once per job, and the request is frozen."""
        times = [j.submitted_at for j in self.jobs] + [t.usage_at for t in self.teams]
        times += [t for r in self.cluster.running for t in (r.started_at, r.checkpointed_at)]
        return max((t for t in times if t is not None), default=datetime(1970, 1, 1, tzinfo=timezone.utc))


def _check_teams(errors: ErrorList, request: PlacementRequest) -> None:
    """With teams declared, every job (running or pending) names one; flavors name real pools."""
    teams = {t.name for t in request.teams}
    pools = {p.name for p in request.cluster.pools}
    if teams:
        declared = ", ".join(sorted(teams))
        named = [(("cluster", "running", i, "team"), r.team) for i, r in enumerate(request.cluster.running)]
        named += [(("jobs", i, "team"), j.team) for i, j in enumerate(request.jobs)]
        for loc, team in named:
            if team is None:
                errors.add(loc, f"required: teams are declared, so every job names one (declared: {declared})",
                           None, "missing")
            elif team not in teams:
                errors.add(loc, f"unknown team '{team}' (declared: {declared})", team)
    for i, team in enumerate(request.teams):
        if team.usage_half_life_h is not None and team.usage_at is None:
            errors.add(("teams", i, "usage_half_life_h"), "decaying usage needs usage_at (when usage_gpu_h was "
                       "measured); leave it unset if usage_gpu_h is already decayed", team.usage_half_life_h)
        if team.usage_at is not None and request.policy.now is not None and team.usage_at > request.policy.now:
            errors.add(("teams", i, "usage_at"), f"after policy.now ({request.policy.now.isoformat()})",
                       team.usage_at.isoformat())
        for k, flavor in enumerate(team.quota.flavors if team.quota else []):
            if flavor.pool is not None and flavor.pool not in pools:
                known = ", ".join(sorted(pools)) or "none declared"
                errors.add(("teams", i, "quota", "flavors", k, "pool"), f"unknown pool '{flavor.pool}' "
                           f"(known: {known})", flavor.pool)


def _check_cohorts(errors: ErrorList, request: PlacementRequest) -> None:
    """Cohort names unique and known (teams' and parents'), no parent cycle, flavors on real pools: the tree
    the quota rules recurse over must be a forest."""
    _unique(errors, ("cohorts",), [c.name for c in request.cohorts], "cohort")
    parents = {c.name: c.parent for c in request.cohorts}
    declared = ", ".join(sorted(parents)) or "none declared"
    for i, team in enumerate(request.teams):
        if team.cohort is not None and team.cohort not in parents:
            errors.add(("teams", i, "cohort"), f"unknown cohort '{team.cohort}' (declared: {declared})", team.cohort)
    pools = {p.name for p in request.cluster.pools}
    for i, cohort in enumerate(request.cohorts):
        if cohort.parent is not None and cohort.parent not in parents:
            errors.add(("cohorts", i, "parent"), f"unknown cohort '{cohort.parent}' (declared: {declared})",
                       cohort.parent)
        seen, at = {cohort.name}, cohort.parent
        while at is not None and at in parents:
            if at in seen:
                errors.add(("cohorts", i, "parent"), f"cohort '{cohort.name}' is its own ancestor (a parent cycle "
                           f"through '{cohort.parent}')", cohort.parent)
                break
            seen.add(at)
            at = parents[at]
        for k, flavor in enumerate(cohort.quota.flavors if cohort.quota else []):
            if flavor.pool is not None and flavor.pool not in pools:
                errors.add(("cohorts", i, "quota", "flavors", k, "pool"), f"unknown pool '{flavor.pool}'", flavor.pool)


def _unique(errors: ErrorList, base: tuple[str, ...], names: list[str], what: str) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            errors.add((*base, i, "name"), f"duplicate {what} name '{name}'", name)
        seen.add(name)


def _check_workloads(errors: ErrorList, request: PlacementRequest) -> None:
    """Workload names are unique, a job names a declared one, and sets either `speeds` or `workload`."""
    _unique(errors, ("workloads",), [w.name for w in request.workloads], "workload")
    declared = {w.name for w in request.workloads}
    holders = [(("cluster", "running", i), r) for i, r in enumerate(request.cluster.running)]
    holders += [(("jobs", i), j) for i, j in enumerate(request.jobs)]
    for loc, job in holders:
        if job.workload is None:
            continue
        if job.speeds is not None:
            errors.add((*loc, "workload"), "set either speeds or workload (which names a speed table)", job.workload)
        elif job.workload not in declared:
            known = ", ".join(sorted(declared)) or "none declared"
            errors.add((*loc, "workload"), f"unknown workload '{job.workload}' (known: {known})", job.workload)


def _check_running(errors: ErrorList, cluster: Cluster) -> None:
    """Running pods must name real nodes and real, distinct GPUs, and fit their node."""
    nodes = {n.name: n for n in cluster.nodes}
    owner: dict[tuple[str, int], str] = {}
    used_cpu: dict[str, float] = {}
    used_mem: dict[str, float] = {}
    for ji, job in enumerate(cluster.running):
        for pi, pod in enumerate(job.pods):
            loc = ("cluster", "running", ji, "pods", pi)
            node = nodes.get(pod.node)
            if node is None:
                errors.add((*loc, "node"), f"unknown node '{pod.node}'", pod.node)
                continue
            for gi, g in enumerate(pod.gpus):
                if not 0 <= g < node.gpus:
                    errors.add((*loc, "gpus", gi), f"GPU index {g} out of range for node '{node.name}' "
                               f"with {node.gpus} GPUs", g)
                elif pod.gpu_share is not None:
                    continue  # shared GPUs: _check_devices sums the shares
                elif g in node.mig or g in node.sharing:
                    kind = "MIG-partitioned" if g in node.mig else "shared (sharing)"
                    errors.add((*loc, "gpus", gi), f"GPU {g} of node '{node.name}' is {kind}; a pod holding "
                               "whole GPUs cannot be on it", g)
                elif (node.name, g) in owner:
                    errors.add((*loc, "gpus", gi), f"GPU {g} of node '{node.name}' is already held by "
                               f"'{owner[node.name, g]}'", g)
                else:
                    owner[node.name, g] = job.job
            used_cpu[node.name] = used_cpu.get(node.name, 0.0) + pod.cpu
            used_mem[node.name] = used_mem.get(node.name, 0.0) + pod.memory_gib
    for ni, node in enumerate(cluster.nodes):
        if used_cpu.get(node.name, 0.0) > node.cpu + 1e-6:
            errors.add(("cluster", "nodes", ni, "cpu"), f"running pods use {used_cpu[node.name]:g} CPUs, "
                       f"more than the node's {node.cpu:g}", node.cpu)
        if used_mem.get(node.name, 0.0) > node.memory_gib + 1e-6:
            errors.add(("cluster", "nodes", ni, "memory_gib"), f"running pods use {used_mem[node.name]:g} GiB, "
                       f"more than the node's {node.memory_gib:g}", node.memory_gib)


def _check_devices(errors: ErrorList, cluster: Cluster) -> None:
    """Running pods on MIG instances name an instance of their node's layout, one pod each; pods on a
    shared GPU name a GPU listed in `sharing` and stay within its replicas and one whole GPU.

    Profile and start legality need the GPU catalog: problem.build checks them (placement/devices.py).
    """
    nodes = {n.name: n for n in cluster.nodes}
    taken: dict[tuple[str, int, int], str] = {}
    shares: dict[tuple[str, int], list[float]] = {}
    instance_shares: dict[tuple[str, int, int], list[float]] = {}
    for ji, job in enumerate(cluster.running):
        for pi, pod in enumerate(job.pods):
            loc = ("cluster", "running", ji, "pods", pi)
            node = nodes.get(pod.node)
            if node is None:
                continue
            if pod.mig is not None:
                slot = pod.mig
                layout = node.mig.get(slot.gpu)
                if layout is None:
                    errors.add((*loc, "mig", "gpu"), f"GPU {slot.gpu} of node '{node.name}' is not MIG-partitioned "
                               "(not in the node's 'mig')", slot.gpu)
                else:
                    _check_instance(errors, loc, node, pod, layout, job.job, taken, instance_shares)
            if pod.gpu_share is not None and pod.mig is None and pod.gpus and 0 <= pod.gpus[0] < node.gpus:
                g = pod.gpus[0]
                if g not in node.sharing:
                    errors.add((*loc, "gpus", 0), f"GPU {g} of node '{node.name}' is not shared (not in the "
                               "node's 'sharing'); a pod with gpu_share needs a shared GPU", g)
                else:
                    shares.setdefault((node.name, g), []).append(pod.gpu_share)
    for ni, node in enumerate(cluster.nodes):
        for g, spec in node.sharing.items():
            held = shares.get((node.name, g), [])
            if len(held) > spec.replicas:
                errors.add(("cluster", "nodes", ni, "sharing", g, "replicas"), f"{len(held)} running pods share "
                           f"GPU {g}, more than its {spec.replicas} replicas", spec.replicas)
            if sum(held) > 1 + 1e-6:
                errors.add(("cluster", "nodes", ni, "sharing", g), f"running pods' gpu_share on GPU {g} sums to "
                           f"{sum(held):g}, more than one GPU", None)
        for g, layout in node.mig.items():
            for k, instance in enumerate(layout):
                held = instance_shares.get((node.name, g, instance.start), [])
                if instance.sharing is None or not held:
                    continue
                where = ("cluster", "nodes", ni, "mig", g, k, "sharing")
                if len(held) > instance.sharing.replicas:
                    errors.add((*where, "replicas"), f"{len(held)} running pods share MIG instance "
                               f"{instance.profile}@{instance.start} of GPU {g}, more than its "
                               f"{instance.sharing.replicas} replicas", instance.sharing.replicas)
                if sum(held) > 1 + 1e-6:
                    errors.add(where, f"running pods' gpu_share on MIG instance {instance.profile}@{instance.start} "
                               f"of GPU {g} sums to {sum(held):g}, more than the instance", None)


def _check_instance(errors: ErrorList, loc: tuple[Any, ...], node: Node, pod: RunningPod, layout: list[MigInstance],
                    job: str, taken: dict[tuple[str, int, int], str],
                    shares: dict[tuple[str, int, int], list[float]]) -> None:
    """A running pod's MIG instance exists in the layout; a whole instance is held by one pod, a shared one
    (its layout entry has `sharing`) only by pods with gpu_share, whose shares _check_devices sums."""
    slot = pod.mig
    assert slot is not None
    found = next((i for i in layout if i.start == slot.start and i.profile.lower() == slot.profile.lower()), None)
    key = (node.name, slot.gpu, slot.start)
    if found is None:
        errors.add((*loc, "mig"), f"node '{node.name}' GPU {slot.gpu} has no {slot.profile} instance at "
                   f"start {slot.start}", slot.model_dump())
    elif found.sharing is None and pod.gpu_share is not None:
        errors.add((*loc, "gpu_share"), f"instance {slot.profile}@{slot.start} of node '{node.name}' GPU {slot.gpu} "
                   "is not shared (its layout entry has no 'sharing'); a pod holds it whole", pod.gpu_share)
    elif found.sharing is not None and pod.gpu_share is None:
        errors.add((*loc, "gpu_share"), f"instance {slot.profile}@{slot.start} of node '{node.name}' GPU {slot.gpu} "
                   "is shared: a pod on it holds a share (gpu_share)", None, "missing")
    elif found.sharing is not None:
        shares.setdefault(key, []).append(pod.gpu_share or 0.0)
    elif key in taken:
        errors.add((*loc, "mig"), f"instance {slot.profile}@{slot.start} of node '{node.name}' GPU "
                   f"{slot.gpu} is already held by '{taken[key]}'", None)
    else:
        taken[key] = job


def _check_cost(errors: ErrorList, request: PlacementRequest) -> None:
    """Reserve names real pools with non-negative GPU counts; added nodes' names are free."""
    pools = {p.name for p in request.cluster.pools}
    for pool, gpus in request.policy.reserve.items():
        if pool not in pools:
            known = ", ".join(sorted(pools)) or "none declared"
            errors.add(("policy", "reserve", pool), f"unknown pool '{pool}' (known: {known})", pool)
        elif gpus < 0:
            errors.add(("policy", "reserve", pool), "must be a non-negative number of GPUs", gpus)
    taken = {n.name for n in request.cluster.nodes}
    for i, pool in enumerate(request.cluster.pools):
        if pool.provisionable is None:
            continue
        clash = sorted(taken.intersection(pool.provisionable.node_names(pool.name)))
        if clash:
            errors.add(("cluster", "pools", i, "provisionable"), f"names of added nodes clash with existing "
                       f"nodes: {', '.join(clash[:3])}", None)


#: The level every request has implicitly below its named ones: one node.
NODE_LEVEL = "node"
_TOPOLOGY_FIELDS = ("nvlink_domain", "rack", "block")


def _check_topology(errors: ErrorList, request: PlacementRequest) -> None:
    """Levels are distinct names; jobs name known levels; slices cut GPU tasks into whole groups;
    node topo_matrix references exist (the matrix text itself is parsed by placement.topology)."""
    levels = request.cluster.topology_levels
    for i, level in enumerate(levels):  # blank and reserved names are refused per field (cluster.Level)
        if level in levels[:i]:
            errors.add(("cluster", "topology_levels", i), f"level '{level}' is listed twice", level)
    known = [NODE_LEVEL, *levels]
    for ji, job in enumerate(request.jobs):
        spec = job.topology
        if spec is None:
            continue
        loc = ("jobs", ji, "topology")
        named = [(("required",), spec.required), (("preferred",), spec.preferred)]
        if spec.slice is not None:
            named.append((("slice", "required"), spec.slice.required))
        for sub, level in named:
            if level is not None and level not in known:
                errors.add((*loc, *sub), f"unknown topology level '{level}' (levels: {', '.join(known)})", level)
        if spec.slice is None:
            continue
        gpu_tasks = [t for t in job.tasks if t.gpus > 0]
        if not gpu_tasks:
            errors.add((*loc, "slice"), "a slice groups the pods of GPU tasks; this job has none", None)
        for t in gpu_tasks:
            if t.replicas % spec.slice.size:
                errors.add((*loc, "slice", "size"), f"task '{t.name}' has {t.replicas} replicas, not a multiple "
                           f"of the slice size {spec.slice.size}", spec.slice.size)
    matrices = request.cluster.topo_matrices
    for ni, node in enumerate(request.cluster.nodes):
        ref = node.topology.topo_matrix
        if ref is not None and "\n" not in ref and ref not in matrices:
            names = ", ".join(sorted(matrices)) or "none declared"
            errors.add(("cluster", "nodes", ni, "topology", "topo_matrix"), f"'{ref}' is neither "
                       f"`nvidia-smi topo -m` text nor a cluster.topo_matrices name (known: {names})", ref)
