"""Kubernetes objects -> a v1 request, with the warnings and the names needed to write a plan back.

    imported = import_paths(["cluster/", "jobs.yaml"], ImportOptions(block_label="example.com/block"))
    imported.request      # a validated models.PlacementRequest
    imported.warnings     # what the request cannot express, each naming its object and field
    imported.origins      # v1 job/task/node names -> Kubernetes objects, for placement.kube.exporter

What maps to what (the modules say how):

* nodes.py: Node -> cluster.nodes (allocatable, GFD labels, MIG, sharing, taints), pools from the
  node group and capacity-type labels (prices from ImportOptions.prices), topology labels.
* queues.py: Volcano Queue, Kueue ClusterQueue/ResourceFlavor/LocalQueue, KAI Queue -> teams.
* jobs.py + this module: Volcano Job/PodGroup, Kueue Workload, KAI PodGroup, pending Pods -> jobs;
  bound Pods -> cluster.running, with GPU indices, MIG instances and shares assigned per node.
* Kueue/KAI Topology levels (or --rack-label/--block-label) -> cluster.topology_levels; topology
  requests -> job.topology; PriorityClass/WorkloadPriorityClass values -> priorities.

Every job may run on spot nodes (spot_ok): Kubernetes lets a pod land on any node its selectors
and tolerations allow, and selectors on capacity-type labels still apply. GPU indices of running
pods are assigned in order: the device plugin does not publish which physical GPU a pod holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from placement_models import PlacementRequest, format_errors
from pydantic import ValidationError

from placement.catalog import normalize_profile
from placement.kube import jobs as J
from placement.kube.jobs import Draft, Gang, PodInfo
from placement.kube.nodes import CLIQUE, HOSTNAME, POOL_LABELS, NodeInfo, assign_pools, read_node
from placement.kube.objects import (
    KubeError,
    KubeWarning,
    Obj,
    Problem,
    View,
    Warnings,
    check_kind,
    load_objects,
    objects_from,
)
from placement.kube.pods import read_shape
from placement.kube.quantity import GIB
from placement.kube.queues import (
    CLUSTER,
    Queues,
    Scope,
    TeamSpec,
    cluster_queue,
    flavor_scope,
    kai_queues,
    volcano_queue,
)

#: The team of jobs that name no queue while others do: outside every quota (see _unqueued).
UNQUEUED = "unqueued"
_DEFAULT_LEVELS = ["nvlink_domain", "rack", "block"]


@dataclass
class ImportOptions:
    """What the objects do not say: which labels mean rack and block, pool prices, solver policy."""

    rack_label: str | None = None
    block_label: str | None = None
    pool_labels: tuple[str, ...] = POOL_LABELS
    #: pool name -> price per GPU-hour (pools are named after node groups or capacity types)
    prices: dict[str, float] = field(default_factory=dict)
    #: unknown kinds become warnings instead of errors (a whole `kubectl get all -A` dump)
    ignore_unknown: bool = False
    #: merged into the request's policy (time_limit_s, workers, seed, preemption, ...)
    policy: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskOrigin:
    name: str  # the Kubernetes task / podSet / sub-group name
    pods: tuple[str, ...]  # existing pod names in pod-index order; empty: a controller creates them


@dataclass(frozen=True)
class JobOrigin:
    kind: str  # volcano-job | kueue-workload | podgroup | pods (from the import), generic (from v1 names)
    api_version: str
    k8s_kind: str
    namespace: str
    name: str
    tasks: dict[str, TaskOrigin]
    cluster_queue: str | None = None


@dataclass
class Origins:
    """v1 names -> Kubernetes names: what an exporter needs besides the request and the plan."""

    jobs: dict[str, JobOrigin] = field(default_factory=dict)
    running_pods: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # job -> (namespace, pod)
    hostnames: dict[str, str] = field(default_factory=dict)
    topology_labels: list[str] = field(default_factory=list)  # a Kueue/KAI Topology's node labels, widest first
    flavor_nodes: dict[str, list[str]] = field(default_factory=dict)
    team_flavors: dict[str, list[str]] = field(default_factory=dict)  # ClusterQueue -> its flavor names


@dataclass
class Imported:
    request: PlacementRequest
    warnings: list[KubeWarning]
    origins: Origins


def import_paths(paths: Iterable[str | Path], options: ImportOptions | None = None) -> Imported:
    """Import every object in the files and folders (multi-document YAML, JSON, Lists)."""
    return import_objects(load_objects(paths), options)


def import_documents(docs: Iterable[Any], options: ImportOptions | None = None) -> Imported:
    """Import parsed documents (dicts), e.g. from a Kubernetes client's `to_dict()`."""
    return import_objects(objects_from(docs), options)


def import_objects(objects: list[Obj], options: ImportOptions | None = None) -> Imported:
    return _Importer(objects, options or ImportOptions()).run()


class _Importer:
    def __init__(self, objects: list[Obj], options: ImportOptions) -> None:
        self.options = options
        self.warnings = Warnings()
        self.problems: list[Problem] = []
        self.by_kind: dict[tuple[str, str], list[Obj]] = {}
        for obj in objects:
            reason = check_kind(obj)
            if reason is None:
                self.by_kind.setdefault((obj.group, obj.kind), []).append(obj)
            elif options.ignore_unknown:
                self.warnings.add(obj.where, "apiVersion", f"{reason}: ignored")
            else:
                self.problems.append(Problem(obj.where, "kind", reason + " (ignore_unknown skips such objects)"))
        self.origins = Origins()
        self.nodes: list[NodeInfo] = []
        self.queues = Queues()
        self.levels: list[str] = list(_DEFAULT_LEVELS)
        self.label_level: dict[str, str] = {}
        self.classes: dict[str, int] = {}
        self.workload_classes: dict[str, int] = {}
        self.default_priority = 0
        self.drafts: list[Draft] = []
        self.running: list[dict[str, Any]] = []
        self.names: set[str] = set()
        self.ledgers: dict[str, _Ledger] = {}

    def of(self, group: str, kind: str) -> list[Obj]:
        return self.by_kind.get((group, kind), [])

    def attempt(self, fn: Any, *args: Any) -> Any:
        """Run one object's reader; its errors are collected so one run reports every broken object."""
        try:
            return fn(*args)
        except KubeError as exc:
            self.problems.extend(exc.problems)
            return None

    def run(self) -> Imported:
        self.attempt(self._priority_classes)
        self.attempt(self._nodes)
        self.attempt(self._topology)
        self.attempt(self._queues)
        if not self.problems:
            self.attempt(self._workloads)
        if self.problems:
            raise KubeError(self.problems)
        return Imported(self._request(), self.warnings.items, self.origins)

    # ----------------------------------------------------------------------------------------
    # Cluster

    def _priority_classes(self) -> None:
        for obj in self.of("scheduling.k8s.io", "PriorityClass"):
            root = obj.view()
            self.classes[obj.name] = root.integer("value", required=True)
            if root.get("globalDefault", bool, False):
                self.default_priority = self.classes[obj.name]
        for obj in self.of("kueue.x-k8s.io", "WorkloadPriorityClass"):
            self.workload_classes[obj.name] = obj.view().integer("value", required=True)

    def _nodes(self) -> None:
        seen: set[str] = set()
        for obj in self.of("", "Node"):
            info = self.attempt(read_node, obj, self.options.pool_labels, self.warnings)
            if info is None:
                continue
            if info.name in seen:
                self.problems.append(Problem(obj.where, "metadata.name", f"node '{info.name}' is listed twice"))
            seen.add(info.name)
            self.nodes.append(info)
            self.origins.hostnames[info.name] = info.hostname
        if not self.nodes and not self.problems:
            raise KubeError([Problem("input", "", "no Node objects: the request needs the cluster's nodes "
                                     "(kubectl get nodes -o json)")])
        self.pools = assign_pools(self.nodes, self.options.prices)
        names = {p["name"] for p in self.pools}
        for pool in sorted(set(self.options.prices) - names):
            self.problems.append(Problem("option prices", pool, f"no such pool (pools: {', '.join(sorted(names))})"))

    def _topology(self) -> None:
        """Levels from a Kueue or KAI Topology (label keys, widest first), else nvlink_domain/rack/block."""
        topologies = self.of("kueue.x-k8s.io", "Topology") + self.of("kai.scheduler", "Topology")
        for label, level in ((CLIQUE, "nvlink_domain"), (self.options.rack_label, "rack"),
                             (self.options.block_label, "block")):
            if label:
                self.label_level[label] = level
        if not topologies:
            return
        chosen = topologies[0]
        labels = [v.text("nodeLabel", required=True) for v in chosen.view().sub("spec").items("levels")]
        if not labels:
            chosen.view().sub("spec").fail("levels", "required: at least one level")
        if HOSTNAME in labels[:-1]:
            chosen.view().sub("spec").fail("levels", f"{HOSTNAME} may only be the lowest level")
        for other in topologies[1:]:
            other_labels = [v.text("nodeLabel") for v in other.view().sub("spec").items("levels")]
            if other_labels != labels:
                self.warnings.add(other.where, "spec.levels", f"only one topology is used: {chosen.ref}'s levels")
        self.origins.topology_labels = labels
        self.levels = []
        for label in reversed(labels):
            if label == HOSTNAME:
                continue
            level = "nvlink_domain" if label == CLIQUE else label
            self.label_level[label] = level
            self.levels.append(level)
        if self.options.rack_label or self.options.block_label:
            self.warnings.add(chosen.where, "spec.levels", "the Topology's levels are used; rack/block labels "
                              "only fill node.topology")

    def level_of(self, view: View, key: str, value: Any) -> str:
        """A topology level named by a request: a level, a level's node label, or a tier number."""
        if value == HOSTNAME or value == "node":
            return "node"
        alias = {"rack": self.options.rack_label, "block": self.options.block_label, "nvlink_domain": CLIQUE}
        if isinstance(value, str) and self.label_level.get(alias.get(value) or "") in self.levels:
            return self.label_level[alias[value] or ""]
        if isinstance(value, str) and value in self.levels:
            return value
        if isinstance(value, str) and self.label_level.get(value) in self.levels:
            return self.label_level[value]
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= len(self.levels):
            self.warnings.add(view.obj.where, view.where(key), f"tier {value} is taken as the {value}. level of "
                              f"{self.levels} (narrowest first; Volcano's HyperNode tiers are not read)")
            return self.levels[value - 1]
        known = ", ".join(["node", *self.levels])
        view.fail(key, f"'{value}' is not a topology level of this cluster (levels: {known}; a Kueue/KAI "
                  "Topology or the rack/block label options define them)")

    def _queues(self) -> None:
        flavors: dict[str, Scope | None] = {}
        for obj in self.of("kueue.x-k8s.io", "ResourceFlavor"):
            spec = obj.view().sub("spec")
            self.queues.flavor_nodes[obj.name], flavors[obj.name] = flavor_scope(obj, self.nodes)
            for key in ("nodeTaints", "tolerations"):
                if spec.has(key):
                    self.warnings.add(obj.where, f"spec.{key}", "flavor taints/tolerations are not added to "
                                      "workloads: the nodes' own taints apply")
        self.origins.flavor_nodes = self.queues.flavor_nodes
        for obj in self.of("scheduling.volcano.sh", "Queue"):
            team = self.attempt(volcano_queue, obj, self.warnings)
            if team is not None:
                self.attempt(self.queues.add, team, obj)
        kai = self.of("scheduling.run.ai", "Queue")
        for team in self.attempt(kai_queues, kai, self.warnings) or []:
            obj = next(o for o in kai if o.name == team.name)
            self.attempt(self.queues.add, team, obj)
        cohorts: set[str] = set()
        for obj in self.of("kueue.x-k8s.io", "ClusterQueue"):
            team = self.attempt(cluster_queue, obj, flavors, self.warnings)
            if team is not None:
                self.attempt(self.queues.add, team, obj)
                self.origins.team_flavors[team.name] = list(team.flavors)
                if team.cohort:
                    cohorts.add(team.cohort)
        if len(cohorts) > 1:
            self.warnings.add("ClusterQueues", "spec.cohortName", f"cohorts {sorted(cohorts)}: placement/v1 has one "
                              "cohort per request, so every queue may borrow from every other")
        for obj in self.of("kueue.x-k8s.io", "Cohort"):
            self.warnings.add(obj.where, "spec", "Cohort objects (hierarchy, cohort-level quotas) are not honoured")
        for obj in self.of("topology.volcano.sh", "HyperNode"):
            self.warnings.add(obj.where, "spec", "HyperNode tiers are not read: use a Kueue/KAI Topology or the "
                              "rack/block label options")
        for obj in self.of("kueue.x-k8s.io", "LocalQueue"):
            cq = self.attempt(lambda o: o.view().sub("spec").text("clusterQueue", required=True), obj)
            if cq is not None:
                self.queues.local_queues[obj.namespace, obj.name] = cq

    # ----------------------------------------------------------------------------------------
    # Workloads

    def _workloads(self) -> None:
        pods = [p for p in (self.attempt(J.read_pod, o) for o in self.of("", "Pod")) if p]
        node_names = {n.name for n in self.nodes}
        bound: dict[J.Group, list[PodInfo]] = {}
        pending: dict[J.Group, list[PodInfo]] = {}
        for p in pods:
            if p.node is not None and p.node not in node_names:
                self.warnings.add(p.obj.where, "spec.nodeName", f"bound to node '{p.node}', which is not in the "
                                  "input: ignored (it holds no capacity the request knows)")
                continue
            (bound if p.node is not None else pending).setdefault(p.group, []).append(p)
        gangs = self._gangs()
        covered: set[J.Group] = set()
        for obj in self.of("batch.volcano.sh", "Job"):
            self.attempt(self._volcano_job, obj, bound, covered)
        for obj in self.of("kueue.x-k8s.io", "Workload"):
            self.attempt(self._workload, obj, bound, gangs, covered)
        for group, gang in gangs.items():
            if group in covered or group in bound:
                continue
            self.attempt(self._podgroup, gang, pending.get(group, []))
            covered.add(group)
        for group, members in pending.items():
            if group in bound:
                self.warnings.add(members[0].obj.where, "", "some pods of this gang run and others wait: the waiting "
                                  "ones are imported as a job of their own")
            if group not in covered or group in bound:
                self.attempt(self._loose_pods, group, members)
        for group, members in bound.items():
            self.attempt(self._running, group, members, gangs.get(group))

    def _gangs(self) -> dict[J.Group, Gang]:
        """PodGroups (Volcano, KAI) by the pod group they name; Kueue Workloads by their owner."""
        gangs: dict[J.Group, Gang] = {}
        for obj in self.of("scheduling.volcano.sh", "PodGroup") + self.of("scheduling.run.ai", "PodGroup"):
            found = self.attempt(self._podgroup_gang, obj)
            if found is not None:
                gangs[found[0]] = found[1]
        for obj in self.of("kueue.x-k8s.io", "Workload"):
            spec = obj.view().sub("spec")
            queue = spec.text("queueName")
            for ref in obj.meta.items("ownerReferences"):
                group = ("owner", obj.namespace, f"{ref.text('kind')}/{ref.text('name')}")
                gangs.setdefault(group, Gang(obj, ("local-queue", queue) if queue else None,
                                             self._workload_priority(obj, spec), None, None, None))
        return gangs

    def _podgroup_gang(self, obj: Obj) -> tuple[J.Group, Gang]:
        spec = obj.view().sub("spec")
        kai = obj.group == "scheduling.run.ai"
        queue = spec.text("queue")
        preempt = spec.text("preemptibility") if kai else None
        if preempt not in (None, "", "preemptible", "non-preemptible"):
            spec.fail("preemptibility", f"'{preempt}' is not preemptible or non-preemptible")
        owner = next((r for r in obj.meta.items("ownerReferences") if r.text("kind") == "Job"
                      and (r.text("apiVersion") or "").startswith("batch.volcano.sh")), None)
        group: J.Group = ("podgroup", obj.namespace, obj.name)
        if owner is not None:  # Volcano's own PodGroup of a Volcano Job: pods name the Job
            group = ("volcano-job", obj.namespace, owner.text("name", required=True))
        topology = spec.sub("topologyConstraint") if kai else spec.sub("networkTopology")
        self._podgroup_warnings(obj, spec, kai)
        preemptible = None if not preempt else preempt == "preemptible"
        return group, Gang(obj, ("team", queue) if queue else None, self._class(spec, "priorityClassName"), preemptible,
                           spec.integer("minMember", None, minimum=0), topology if topology.value else None)

    def _podgroup_warnings(self, obj: Obj, spec: View, kai: bool) -> None:
        keys = ("minSubGroup", "subGroups", "preemptionDelay", "stalenessGracePeriod") if kai else \
            ("minTaskMember", "subGroupPolicy")
        for key in keys:
            if spec.has(key):
                self.warnings.add(obj.where, f"spec.{key}", "sub-group minimums and timing are not honoured: only the "
                                  "gang's minMember")

    def _class(self, view: View, key: str) -> int | None:
        name = view.text(key)
        if not name:
            return None
        if name not in self.classes:
            self.warnings.add(view.obj.where, view.where(key), f"PriorityClass '{name}' is not in the input: "
                              f"priority {self.default_priority}")
            return self.default_priority
        return self.classes[name]

    def _workload_priority(self, obj: Obj, spec: View) -> int:
        if spec.has("priority"):
            return spec.integer("priority")
        ref = spec.sub("priorityClassRef")
        name = ref.text("name") or spec.text("priorityClassName")
        source = (ref.text("kind") or spec.text("priorityClassSource") or "").lower()
        if not name:
            return self.default_priority
        table = self.workload_classes if "workloadpriorityclass" in source else self.classes
        if name not in table:
            self.warnings.add(obj.where, "spec.priorityClassName", f"priority class '{name}' is not in the input: "
                              f"priority {self.default_priority}")
        return table.get(name, self.default_priority)

    def _job_name(self, namespace: str, name: str, kind: str) -> str:
        base = f"{namespace}/{name}"
        candidate = base if base not in self.names else f"{base}~{kind}"
        k = 2
        while candidate in self.names:
            candidate, k = f"{base}~{kind}-{k}", k + 1
        self.names.add(candidate)
        return candidate

    def _volcano_job(self, obj: Obj, bound: dict[J.Group, list[PodInfo]], covered: set[J.Group]) -> None:
        group: J.Group = ("volcano-job", obj.namespace, obj.name)
        covered.add(group)
        phase = obj.view().sub("status").sub("state").text("phase", "Pending")
        if group in bound:
            return  # running: its pods say where; _running reads the Job for team and priority
        if phase not in ("Pending", ""):
            self.warnings.add(obj.where, "status.state.phase", f"{phase} but none of its pods is in the input: "
                              "it holds no capacity in the request")
            return
        spec = obj.view().sub("spec")
        draft = Draft(self._job_name(obj.namespace, obj.name, "job"), "volcano-job", obj, obj.namespace, obj.name,
                      queue=("team", spec.text("queue", "default") or "default"),
                      submitted=J.timestamp(obj.meta, "creationTimestamp"))
        draft.priority = _first(self._class(spec, "priorityClassName"), self.default_priority)
        task_mins: list[tuple[View, int]] = []  # (task, its minimum), every task
        for t in spec.items("tasks"):
            name = t.text("name", required=True)
            replicas = t.integer("replicas", 1, minimum=0)
            template = t.sub("template")
            shape = read_shape(template.sub("spec"), _annotations(template), template.sub("metadata"), self.warnings)
            if template.sub("spec").text("priorityClassName") and not spec.text("priorityClassName"):
                draft.priority = _first(self._class(template.sub("spec"), "priorityClassName"), draft.priority)
            task_min = t.integer("minAvailable", None, minimum=0)
            if task_min is not None and task_min > replicas:
                t.fail("minAvailable", f"{task_min} exceeds the task's {replicas} replicas")
            task_mins.append((t, replicas if task_min is None else task_min))
            if replicas:
                draft.tasks.append((name, shape, replicas, []))
                draft.k8s_tasks[name] = name
            for key in ("topologyPolicy",):
                if t.has(key):
                    self.warnings.add(obj.where, t.where(key), "NUMA topology policy: not honoured")
            self._partition(draft, t)
        if not draft.tasks:
            self.warnings.add(obj.where, "spec.tasks", "no task has replicas: nothing to place")
            return
        total = sum(n for _, _, n, _ in draft.tasks)
        # Volcano's default minAvailable is the sum of the tasks' minimums (each defaulting to its replicas)
        wanted = spec.integer("minAvailable", None, minimum=0) or sum(m for _, m in task_mins)
        if wanted > total:
            spec.fail("minAvailable", f"{wanted} exceeds the {total} pods of the job")
        draft.min_available = wanted if 0 < wanted < total else None
        for t, task_min in task_mins:
            if draft.min_available is not None and t.has("minAvailable") and task_min < t.integer("replicas", 1):
                self.warnings.add(obj.where, t.where("minAvailable"), "per-task minimums are not honoured: only the "
                                  f"job's total ({draft.min_available} pods)")
        if spec.has("networkTopology"):
            self._volcano_topology(draft, spec.sub("networkTopology"))
        self.drafts.append(draft)

    def _volcano_topology(self, draft: Draft, view: View) -> None:
        mode = view.text("mode", "hard")
        if mode not in ("hard", "soft"):
            view.fail("mode", f"'{mode}' is not hard or soft")
        tier: Any = view.text("highestTierName") or view.get("highestTierAllowed", int)
        if tier is None:
            return
        level = self.level_of(view, "highestTierName" if view.has("highestTierName") else "highestTierAllowed", tier)
        topology = dict(draft.topology or {})
        topology["required" if mode == "hard" else "preferred"] = level
        draft.topology = topology

    def _partition(self, draft: Draft, task: View) -> None:
        policy = task.sub("partitionPolicy")
        if not policy.value:
            return
        size = policy.integer("partitionSize", required=True, minimum=1)
        net = policy.sub("networkTopology")
        tier = net.text("highestTierName") or net.get("highestTierAllowed", int)
        if tier is None or net.text("mode", "hard") != "hard":
            self.warnings.add(task.obj.where, task.where("partitionPolicy"), "only hard partition topology maps to "
                              "a slice: not honoured")
            return
        level = self.level_of(net, "highestTierName" if net.has("highestTierName") else "highestTierAllowed", tier)
        topology = dict(draft.topology or {})
        if "slice" in topology:
            self.warnings.add(task.obj.where, task.where("partitionPolicy"), "one slice per job: only the first "
                              "task's partitionPolicy is honoured")
            return
        topology["slice"] = {"size": size, "required": level}
        draft.topology = topology
        if policy.has("minPartitions"):
            self.warnings.add(task.obj.where, policy.where("minPartitions"), "not honoured: the job's minimum counts "
                              "pods")

    def _workload(self, obj: Obj, bound: dict[J.Group, list[PodInfo]], gangs: dict[J.Group, Gang],
                  covered: set[J.Group]) -> None:
        owners = [("owner", obj.namespace, f"{r.text('kind')}/{r.text('name')}") for r in
                  obj.meta.items("ownerReferences")]
        covered.update(owners)
        root = obj.view()
        spec = root.sub("spec")
        status = root.sub("status")
        admitted = status.has("admission") or any(
            c.text("type") in ("Admitted", "QuotaReserved") and c.text("status") == "True"
            for c in status.items("conditions"))
        if admitted:
            if not any(o in bound for o in owners):
                self.warnings.add(obj.where, "status.admission", "admitted, but none of its pods is in the input: "
                                  "it holds no capacity in the request")
            return
        if spec.get("active", bool, True) is False:
            self.warnings.add(obj.where, "spec.active", "inactive workload: not imported")
            return
        queue = spec.text("queueName")
        draft = Draft(self._job_name(obj.namespace, obj.name, "workload"), "kueue-workload", obj, obj.namespace,
                      obj.name, queue=("local-queue", queue) if queue else None,
                      priority=self._workload_priority(obj, spec),
                      submitted=J.timestamp(obj.meta, "creationTimestamp"))
        shrink = 0
        requests: list[tuple[View, dict[str, Any]]] = []
        for ps in spec.items("podSets"):
            name = ps.text("name", required=True)
            count = ps.integer("count", 1, minimum=0)
            template = ps.sub("template")
            shape = read_shape(template.sub("spec"), _annotations(template), template.sub("metadata"), self.warnings)
            if count:
                draft.tasks.append((name, shape, count, []))
                draft.k8s_tasks[name] = name
            min_count = ps.integer("minCount", None, minimum=0)
            if min_count is not None:
                if min_count > count:
                    ps.fail("minCount", f"{min_count} exceeds count {count}")
                shrink += count - min_count
            request = self._topology_request(ps)
            if request:
                requests.append((ps, request))
        if shrink and len(draft.tasks) > 1:
            self.warnings.add(obj.where, "spec.podSets", "minCount lowers the job's minimum; which podSet shrinks is "
                              "not kept (placement/v1 counts pods over the whole job)")
        total = sum(n for _, _, n, _ in draft.tasks)
        draft.min_available = total - shrink if shrink and total - shrink >= 1 else None
        if requests:
            draft.topology = requests[0][1]
            for ps, other in requests[1:]:
                if other != draft.topology:
                    self.warnings.add(obj.where, ps.where("topologyRequest"), "one topology per job: the first "
                                      "podSet's request applies to every pod")
            if len(requests) < len(draft.tasks):
                self.warnings.add(obj.where, requests[0][0].where("topologyRequest"), "applies to the whole job, "
                                  "including podSets without a topology request")
        for key in ("maximumExecutionTimeSeconds",):
            if spec.has(key):
                self.warnings.add(obj.where, f"spec.{key}", "a deadline, not an expected runtime: not honoured")
        if draft.tasks:
            self.drafts.append(draft)

    def _topology_request(self, ps: View) -> dict[str, Any] | None:
        req = ps.sub("topologyRequest")
        if not req.value:
            return None
        out: dict[str, Any] = {}
        for key, field_ in (("required", "required"), ("preferred", "preferred")):
            if req.text(key):
                out[field_] = self.level_of(req, key, req.text(key))
        if req.text("podSetSliceRequiredTopology"):
            size = req.integer("podSetSliceSize", required=True, minimum=1)
            out["slice"] = {"size": size, "required": self.level_of(req, "podSetSliceRequiredTopology",
                                                                    req.text("podSetSliceRequiredTopology"))}
        for key in ("podSetGroupName", "podsetSliceRequiredTopologyConstraints", "subGroupCount"):
            if req.has(key):
                self.warnings.add(ps.obj.where, req.where(key), "not honoured by placement/v1")
        return out or None

    def _podgroup(self, gang: Gang, pods: list[PodInfo]) -> None:
        obj = gang.obj
        phase = obj.view().sub("status").text("phase", "Pending")
        if not pods:
            if phase not in ("Running", "Completed"):
                self.warnings.add(obj.where, "", "none of its pods is in the input: how the gang splits into pods is "
                                  "unknown (minResources is a total), so it is not imported")
            return
        draft = Draft(self._job_name(obj.namespace, obj.name, "podgroup"), "podgroup", obj, obj.namespace, obj.name,
                      queue=gang.queue or J.pod_queue(pods[0]),
                      priority=_first(gang.priority, _pods_priority(pods, self)),
                      submitted=J.timestamp(obj.meta, "creationTimestamp"))
        self._add_pod_tasks(draft, pods)
        total = sum(n for _, _, n, _ in draft.tasks)
        if gang.min_member and gang.min_member > total:
            self.warnings.add(obj.where, "spec.minMember", f"{gang.min_member} exceeds the {total} pods in the input: "
                              "the job needs them all")
        draft.min_available = gang.min_member if gang.min_member and gang.min_member < total else None
        if gang.topology is not None:
            self._gang_topology(draft, gang)
        self.drafts.append(draft)

    def _gang_topology(self, draft: Draft, gang: Gang) -> None:
        view = gang.topology
        assert view is not None
        if gang.obj.group == "scheduling.run.ai":
            out = {}
            for key, field_ in (("requiredTopologyLevel", "required"), ("preferredTopologyLevel", "preferred")):
                if view.text(key):
                    out[field_] = self.level_of(view, key, view.text(key))
            draft.topology = out or None
        else:
            self._volcano_topology(draft, view)

    def _loose_pods(self, group: J.Group, pods: list[PodInfo]) -> None:
        kind, namespace, name = group
        if kind == "owner" and name.startswith("DaemonSet/"):
            self.warnings.add(pods[0].obj.where, "metadata.ownerReferences", "pending DaemonSet pods are placed by "
                              "their controller, one per node: not imported")
            return
        if kind == "volcano-job":
            self.warnings.add(pods[0].obj.where, "metadata.annotations", f"Volcano Job '{name}' is not in the "
                              "input: its pending pods are imported as one job")
        short = name.split("/", 1)[1] if kind == "owner" else name
        created = [t for t in (J.timestamp(p.obj.meta, "creationTimestamp") for p in pods) if t is not None]
        draft = Draft(self._job_name(namespace, short, "pods"), "pods", None, namespace, short,
                      queue=J.pod_queue(pods[0]), priority=_pods_priority(pods, self),
                      submitted=min(created, default=None))
        self._add_pod_tasks(draft, pods)
        draft.min_available = 1  # pods of a controller without a gang start one by one, not all or none
        self.drafts.append(draft)

    def _add_pod_tasks(self, draft: Draft, pods: list[PodInfo]) -> None:
        for name, shape, members in J.split_tasks(pods):
            first = members[0].obj  # pods were read quietly; say once per task what it cannot honour
            read_shape(first.view().sub("spec"), first.annotations(), first.meta, self.warnings)
            draft.tasks.append((name, shape, len(members), [p.obj.name for p in members]))
            draft.k8s_tasks[name] = members[0].task

    # ----------------------------------------------------------------------------------------
    # Running work

    def _running(self, group: J.Group, pods: list[PodInfo], gang: Gang | None) -> None:
        kind, namespace, name = group
        short = name.split("/", 1)[1] if kind == "owner" else name
        job_name = self._job_name(namespace, short, "running")
        volcano = next((o for o in self.of("batch.volcano.sh", "Job") if kind == "volcano-job"
                        and o.namespace == namespace and o.name == name), None)
        queue = gang.queue if gang else None
        priority = gang.priority if gang else None
        if volcano is not None:
            spec = volcano.view().sub("spec")
            queue = queue or ("team", spec.text("queue", "default") or "default")
            priority = _first(priority, self._class(spec, "priorityClassName"))
        queue = queue or J.pod_queue(pods[0])
        priority = _first(_pods_priority(pods, self, explicit_only=True), priority, self.default_priority)
        entry: dict[str, Any] = {"job": job_name, "priority": priority, "_queue": queue, "_namespace": namespace,
                                 "preemptible": self._preemptible(pods, gang, volcano, priority), "pods": []}
        starts = [p.started for p in pods if p.started is not None]
        if starts:
            entry["started_at"] = min(starts).isoformat()
        for p in sorted(pods, key=lambda p: J.natural(p.obj.name)):
            entry["pods"].append(self._bind(p))
        self.origins.running_pods[job_name] = [(p.obj.namespace, p.obj.name) for p in pods]
        self.running.append(entry)

    def _preemptible(self, pods: list[PodInfo], gang: Gang | None, volcano: Obj | None, priority: int) -> bool:
        if gang is not None and gang.preemptible is not None:
            return gang.preemptible
        if (gang is not None and gang.obj.group == "scheduling.run.ai") or any(
                p.obj.view().sub("spec").text("schedulerName") == J.KAI_SCHEDULER for p in pods):
            return priority < J.KAI_PREEMPTIBLE_BELOW
        marks = [p.any(J.VOLCANO_PREEMPTABLE) for p in pods]
        for obj in (volcano, gang.obj if gang else None):
            if obj is not None:
                marks.append(obj.labels().get(J.VOLCANO_PREEMPTABLE) or obj.annotations().get(J.VOLCANO_PREEMPTABLE))
        return any(m == "true" for m in marks)  # Kueue: decided per ClusterQueue once teams are known

    def _bind(self, pod: PodInfo) -> dict[str, Any]:
        """A running pod with concrete devices on its node (indices in order: Kubernetes does not say which)."""
        node = next(n for n in self.nodes if n.name == pod.node)
        ledger = self.ledgers.setdefault(node.name, _Ledger(node))
        s = pod.shape
        out: dict[str, Any] = {"task": pod.task, "node": node.name, "cpu": float(s.cpu),
                               "memory_gib": float(s.memory / GIB)}
        view = pod.obj.view().sub("spec")
        if s.mig_profile or (s.gpus and node.strategy == "single" and node.mig):
            profile = s.mig_profile or node.mig[next(iter(node.mig))][0][0]
            if s.gpus > 1:
                view.fail("containers", f"holds {s.gpus} MIG devices of node '{node.name}': placement/v1 gives a pod "
                          "one instance")
            slot = ledger.mig(profile)
            if slot is None:
                view.fail("nodeName", f"node '{node.name}' has no free {profile} MIG instance left for this pod")
            out["mig"] = {"gpu": slot[0], "profile": slot[1], "start": slot[2]}
        elif s.gpus and node.sharing is None:
            gpus = ledger.whole(s.gpus)
            if gpus is None:
                view.fail("nodeName", f"node '{node.name}' has no {s.gpus} free whole GPUs left for this pod")
            out["gpus"] = gpus
        elif s.gpus or s.shared_replicas or s.gpu_share:
            share = self._running_share(pod, node)
            if share is None:  # a KAI fraction on a whole GPU: held whole (KAI reserves the GPU for it)
                gpus = ledger.whole(1)
                if gpus is None:
                    view.fail("nodeName", f"node '{node.name}' has no free GPU left for this GPU-fraction pod")
                out["gpus"] = gpus
                return out
            gpu = ledger.share(share)
            if gpu is None:
                view.fail("nodeName", f"node '{node.name}' has no shared GPU with {float(share):g} of a GPU left")
            out.update(gpus=[gpu], gpu_share=float(share))
            if s.gpu_memory is not None:
                out["gpu_memory_gib"] = float(s.gpu_memory / GIB)
        return out

    def _running_share(self, pod: PodInfo, node: NodeInfo) -> Fraction | None:
        s = pod.shape
        if node.sharing is None:
            self.warnings.add(pod.obj.where, "metadata.annotations", f"a GPU fraction on node '{node.name}', whose "
                              "GPUs are not shared (time-slicing/MPS): imported as holding one whole GPU")
            return None
        replicas = node.sharing[1]
        if s.gpu_share is not None:
            return s.gpu_share
        count = s.gpus or s.shared_replicas
        if count > replicas:
            pod.obj.view().fail("spec.containers", f"holds {count} replicas of a GPU shared {replicas} ways")
        if count > 1:
            self.warnings.add(pod.obj.where, "spec.containers", f"{count} replicas are imported as {count}/{replicas} "
                              "of one GPU (the device plugin may have spread them over several)")
        return Fraction(count, replicas)

    # ----------------------------------------------------------------------------------------
    # The request

    def _team(self, queue: tuple[str, str] | None, where: str, namespace: str, pending: bool) -> str | None:
        """The team a queue reference names; a Kueue LocalQueue is resolved to its ClusterQueue.

        A LocalQueue missing from the input is an error for pending work when ClusterQueues are given
        (its quota would be guessed); otherwise the work is imported without a team, with a warning.
        """
        if queue is None:
            return None
        kind, name = queue
        if kind != "local-queue":
            return name
        cq = self.queues.local_queues.get((namespace, name))
        if cq is not None:
            return cq
        reason = f"LocalQueue {namespace}/{name} is not in the input, so its ClusterQueue (the team) is unknown"
        if pending and self.of("kueue.x-k8s.io", "ClusterQueue"):
            raise KubeError([Problem(where, "queueName", reason)])
        self.warnings.add(where, "queueName", reason + ": imported without a team")
        return None

    def _request(self) -> PlacementRequest:
        jobs = []
        for d in self.drafts:
            where = d.obj.where if d.obj else f"Pods {d.namespace}/{d.k8s_name}"
            team = self.attempt(self._team, d.queue, where, d.namespace, True)
            jobs.append(self._job(d, team))
            self.origins.jobs[d.name] = self._origin(d, team)
        for r in self.running:
            r["team"] = self.attempt(self._team, r.pop("_queue"), f"running job {r['job']}", r.pop("_namespace"),
                                     False)
            spec = self.queues.teams.get(r["team"]) if r["team"] else None
            if spec is not None and spec.preemptible(list(self.queues.teams.values())):
                r["preemptible"] = True
        if self.problems:
            raise KubeError(self.problems)
        teams = self._teams(jobs)
        policy = dict(self.options.policy)
        if any(r["preemptible"] for r in self.running):
            policy.setdefault("preemption", True)
        running = [{k: v for k, v in r.items() if v is not None} for r in self.running]
        self._check_levels(jobs)
        data = {
            "cluster": {"pools": self.pools, "nodes": [n.wire(self.options.rack_label, self.options.block_label)
                                                       for n in self.nodes],
                        "running": running, "topology_levels": self.levels},
            "jobs": [{k: v for k, v in j.items() if v is not None} for j in jobs],
            "teams": [t.wire() for t in teams], "policy": policy,
        }
        try:
            return PlacementRequest.model_validate(data)
        except ValidationError as exc:
            lines = format_errors(exc)
            raise KubeError([Problem("imported request", "", line) for line in lines]) from None

    def _job(self, d: Draft, team: str | None) -> dict[str, Any]:
        share = self._shared_share(d) if any(s.shared_replicas for _, s, _, _ in d.tasks) else None
        return {
            "name": d.name, "team": team, "priority": d.priority,
            "submitted_at": d.submitted.isoformat() if d.submitted else None,
            "min_available": d.min_available, "spot_ok": True, "topology": d.topology,
            "tasks": [shape.task(name, n, share if shape.shared_replicas else None) for name, shape, n, _ in d.tasks],
        }

    def _shared_share(self, d: Draft) -> Fraction:
        replicas = {n.sharing[1] for n in self.nodes if n.sharing}
        if len(replicas) != 1:
            where = d.obj.where if d.obj else f"Pods {d.namespace}/{d.k8s_name}"
            found = ", ".join(map(str, sorted(replicas))) or "no shared node"
            raise KubeError([Problem(where, "resources", f"nvidia.com/gpu.shared is one replica, a share that depends "
                                     f"on the node's replicas ({found}); placement/v1 needs one share per task")])
        return Fraction(1, replicas.pop())

    def _origin(self, d: Draft, team: str | None) -> JobOrigin:
        obj = d.obj
        tasks = {name: TaskOrigin(d.k8s_tasks.get(name, name), tuple(pods)) for name, _, _, pods in d.tasks}
        return JobOrigin(d.kind, obj.api_version if obj else "v1", obj.kind if obj else "Pod", d.namespace,
                         d.k8s_name, tasks, team if d.kind == "kueue-workload" else None)

    def _teams(self, jobs: list[dict[str, Any]]) -> list[TeamSpec]:
        teams = dict(self.queues.teams)
        named = [j["team"] for j in jobs] + [r["team"] for r in self.running]
        for name in named:
            if name and name not in teams:
                teams[name] = TeamSpec(name, f"queue {name}")
                self.warnings.add(f"queue {name}", "", "named by jobs but declared by no Queue/ClusterQueue in the "
                                  "input: a team without quota")
        if not teams:
            return []
        if any(n is None for n in named):
            teams[UNQUEUED] = self._unqueued(teams, jobs)
            for j in jobs:
                j["team"] = j["team"] or UNQUEUED
            for r in self.running:
                r["team"] = r["team"] or UNQUEUED
        self._kueue_exclusions(teams)
        return list(teams.values())

    def _unqueued(self, teams: dict[str, TeamSpec], jobs: list[dict[str, Any]]) -> TeamSpec:
        """Jobs in no queue: in Kubernetes they run outside every quota. Their team owns exactly what
        they hold and ask for in every quota scope, and neither lends nor borrows, so quotas of the
        real teams are untouched."""
        if UNQUEUED in teams:
            raise KubeError([Problem(teams[UNQUEUED].where, "metadata.name", f"'{UNQUEUED}' is reserved for jobs "
                                     "that name no queue")])
        gpus = sum(len(p.get("gpus", [])) for r in self.running if r["team"] is None for p in r["pods"])
        gpus += sum(t.get("gpus", 0) * t["replicas"] for j in jobs if j["team"] is None for t in j["tasks"])
        scopes = {s for t in teams.values() for s in t.quotas}
        spec = TeamSpec(UNQUEUED, "jobs without a queue")
        spec.quotas = {s: {"nominal": gpus, "borrowing_limit": 0, "lending_limit": 0} for s in scopes}
        self.warnings.add("jobs without a queue", "", f"imported as team '{UNQUEUED}', outside the other teams' "
                          "quotas")
        return spec

    def _kueue_exclusions(self, teams: dict[str, TeamSpec]) -> None:
        """A ClusterQueue cannot use a flavor it does not list: quota 0, no borrowing, in other CQs' scopes."""
        scopes = {s for t in teams.values() if t.kueue for s in t.quotas if s != CLUSTER}
        for t in teams.values():
            if t.kueue:
                for s in scopes - set(t.quotas):
                    t.quotas[s] = {"nominal": 0, "borrowing_limit": 0, "lending_limit": 0}

    def _check_levels(self, jobs: list[dict[str, Any]]) -> None:
        """Warn when a job's level has no labelled node: every node would be its own domain."""
        used = {lv for j in jobs if j.get("topology") for lv in (j["topology"].get("required"),
                j["topology"].get("preferred"), (j["topology"].get("slice") or {}).get("required")) if lv}
        wire = [n.wire(self.options.rack_label, self.options.block_label) for n in self.nodes]
        for level in sorted(used - {"node"}):
            if level in ("nvlink_domain", "rack", "block"):
                labelled = any(n["topology"].get(level) for n in wire) or (
                    level == "nvlink_domain" and any(CLIQUE in n["labels"] for n in wire))
            else:
                labelled = any(level in n["labels"] for n in wire)
            if not labelled:
                self.warnings.add(f"topology level {level}", "", "no node carries this level's label: every node "
                                  "is its own domain (set the rack/block label options or add a Topology)")


class _Ledger:
    """Which devices of one node running pods already hold, handed out in index order."""

    def __init__(self, node: NodeInfo) -> None:
        healthy = [g for g in range(node.gpus) if g not in node.unhealthy]
        self.whole_free = [g for g in healthy if g not in node.mig and node.sharing is None]
        self.mig_free = [(g, p, s) for g, layout in sorted(node.mig.items()) for p, s in layout]
        replicas = node.sharing[1] if node.sharing else 0
        self.share_left = {g: (replicas, Fraction(1)) for g in healthy} if node.sharing else {}

    def whole(self, n: int) -> list[int] | None:
        if n > len(self.whole_free):
            return None
        taken, self.whole_free = self.whole_free[:n], self.whole_free[n:]
        return taken

    def mig(self, profile: str) -> tuple[int, str, int] | None:
        for k, (_, p, _) in enumerate(self.mig_free):
            if normalize_profile(p) == normalize_profile(profile):
                return self.mig_free.pop(k)
        return None

    def share(self, fraction: Fraction) -> int | None:
        for g, (slots, left) in self.share_left.items():
            if slots >= 1 and left >= fraction:
                self.share_left[g] = (slots - 1, left - fraction)
                return g
        return None


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _annotations(template: View) -> dict[str, str]:
    return template.sub("metadata").string_map("annotations")


def _pods_priority(pods: list[PodInfo], importer: _Importer, explicit_only: bool = False) -> int | None:
    """The highest `spec.priority` of the pods (set by admission), else their PriorityClass."""
    values = [p.obj.view().sub("spec").integer("priority") for p in pods]
    if any(v is not None for v in values):
        return max(v for v in values if v is not None)
    if explicit_only:
        return None
    classes = [importer._class(p.obj.view().sub("spec"), "priorityClassName") for p in pods]
    return max((c for c in classes if c is not None), default=importer.default_priority)
