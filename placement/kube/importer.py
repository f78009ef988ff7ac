"""Kubernetes objects -> a v1 request, with the warnings and the names needed to write a plan back.

    imported = import_paths(["cluster/", "jobs.yaml"], ImportOptions(block_label="example.com/block"))
    imported.request      # a validated models.PlacementRequest
    imported.warnings     # what the request cannot express, each naming its object and field
    imported.origins      # v1 job/task/node names -> Kubernetes objects, for placement.kube.exporter

What maps to what (the modules say how):

* nodes.py: Node -> cluster.nodes (allocatable, GFD labels, MIG, sharing, taints), pools from the
  node group and capacity-type labels (prices from ImportOptions.prices), topology labels.
* queues.py: Volcano Queue, Kueue ClusterQueue/ResourceFlavor/LocalQueue, KAI Queue -> teams.
* jobs.py with volcano.py (Volcano Job), podgroups.py (Volcano and KAI PodGroup), kueue.py (Kueue
  Workload), controllers.py (batch Job, JobSet, Kubeflow jobs, LeaderWorkerSet, Deployment,
  StatefulSet) and this module (pending Pods, Kueue pod groups): -> jobs. demand.py reads what
  `nvidia.com/gpu` means on the nodes a pod may land on (whole, shared replica, MIG instance).
* running.py: bound Pods -> cluster.running, with GPU indices, MIG instances and shares assigned
  per node (ledger.py).
* Kueue/KAI Topology levels (or --rack-label/--block-label) -> cluster.topology_levels; topology
  requests -> job.topology; PriorityClass/WorkloadPriorityClass values -> priorities.
* cluster.py reads the cluster-side objects first; assembly.py builds and validates the request;
  state.py is what they share, origins.py what the exporter needs to write a plan back.

Every job may run on spot nodes (spot_ok): Kubernetes lets a pod land on any node its selectors
and tolerations allow, and selectors on capacity-type labels still apply. GPU indices of running
pods are assigned in order: the device plugin does not publish which physical GPU a pod holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from placement_models import PlacementRequest

from placement.kube import jobs as J
from placement.kube.assembly import UNQUEUED, RequestAssembly
from placement.kube.cluster import ClusterObjects
from placement.kube.controllers import ControllerWorkloads
from placement.kube.jobs import Draft, Gang, PodInfo
from placement.kube.kueue import KueueWorkloads
from placement.kube.objects import KubeError, KubeWarning, Obj, load_objects, objects_from
from placement.kube.origins import JobOrigin, Origins, TaskOrigin
from placement.kube.podgroups import PodGroups
from placement.kube.running import RunningWork
from placement.kube.state import ImportOptions, pods_priority

__all__ = ["UNQUEUED", "ImportOptions", "Imported", "JobOrigin", "Origins", "TaskOrigin", "import_documents",
           "import_objects", "import_paths"]


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


class _Importer(ClusterObjects, PodGroups, KueueWorkloads, ControllerWorkloads, RunningWork, RequestAssembly):
    """One import: the readers of every kind of object, run in order (cluster first, then workloads)."""

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
        owned: set[tuple[str, str, str]] = set()
        for obj in self.of("kueue.x-k8s.io", "Workload"):
            self.attempt(self._workload, obj, bound, gangs, covered)
            owned.update((obj.namespace, r.text("kind") or "", r.text("name") or "")
                         for r in obj.meta.items("ownerReferences"))
        self._controllers(pods, owned)
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

    def _loose_pods(self, group: J.Group, pods: list[PodInfo]) -> None:
        kind, namespace, name = group
        if kind == "owner" and name.startswith("DaemonSet/"):
            self.warnings.add(pods[0].obj.where, "metadata.ownerReferences", "pending DaemonSet pods are placed by "
                              "their controller, one per node: not imported")
            return
        if kind == "volcano-job":
            self.warnings.add(pods[0].obj.where, "metadata.annotations", f"Volcano Job '{name}' is not in the "
                              "input: its pending pods are imported as one job")
        if kind == "kueue-pod-group":
            self._kueue_pod_group(group, pods)
            return
        short = name.split("/", 1)[1] if kind == "owner" else name
        created = [t for t in (J.timestamp(p.obj.meta, "creationTimestamp") for p in pods) if t is not None]
        draft = Draft(self._job_name(namespace, short, "pods"), "pods", None, namespace, short,
                      queue=J.pod_queue(pods[0]), priority=pods_priority(pods, self),
                      submitted=min(created, default=None))
        self._add_pod_tasks(draft, pods)
        draft.min_available = 1  # pods of a controller without a gang start one by one, not all or none
        self.drafts.append(draft)

    def _kueue_pod_group(self, group: J.Group, pods: list[PodInfo]) -> None:
        """Plain pods that Kueue admits as one Workload: all of them or none, once all of them exist."""
        _, namespace, name = group
        first = pods[0].obj
        text = first.annotations().get(J.KUEUE_POD_GROUP_COUNT)
        if text is None:
            first.meta.sub("annotations").fail(J.KUEUE_POD_GROUP_COUNT, f"required with the label "
                                               f"{J.KUEUE_POD_GROUP} (Kueue waits for this many pods)")
        try:
            total = int(text)
        except ValueError:
            first.meta.sub("annotations").fail(J.KUEUE_POD_GROUP_COUNT, f"'{text}' is not a whole number")
        if total > len(pods):
            self.warnings.add(first.where, f"metadata.annotations.{J.KUEUE_POD_GROUP_COUNT}", f"{total} pods "
                              f"in the group, {len(pods)} in the input: Kueue admits the group only once all exist; "
                              "imported with the pods there are")
        created = [t for t in (J.timestamp(p.obj.meta, "creationTimestamp") for p in pods) if t is not None]
        draft = Draft(self._job_name(namespace, name, "pod-group"), "pods", None, namespace, name,
                      queue=J.pod_queue(pods[0]), priority=pods_priority(pods, self),
                      submitted=min(created, default=None))
        self._add_pod_tasks(draft, pods)
        self.drafts.append(draft)  # min_available unset: the whole group, as Kueue admits it
