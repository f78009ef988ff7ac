"""Workload controllers -> pending jobs, read the way Kueue's integrations read them: pod sets with counts.

A user should not have to hand-write Kueue Workloads: the objects they already apply say what the
pods will be. Each kind becomes pod sets (a name, a pod template, a count), as Kueue's integration
for it builds the Workload:

* batch/v1 Job: one pod set `main` of min(parallelism, completions) pods; the annotation
  `kueue.x-k8s.io/job-min-parallelism` lets it shrink (partial admission).
* JobSet: a pod set per replicatedJob of replicas × its Job's pods; the JobSet annotation
  `alpha.jobset.sigs.k8s.io/exclusive-topology` puts each child Job in its own domain (a slice).
* Kubeflow training jobs (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob, MPIJob): a pod set
  per replica type (`master`, `worker`, `launcher`, ...).
* LeaderWorkerSet: one job per group (Kueue admits each group as a Workload): a leader and size − 1
  workers; `leaderworkerset.sigs.k8s.io/exclusive-topology` keeps a group in one domain.
* Deployment: its replicas, each pod on its own (Kueue admits serving pods one by one).
* StatefulSet: its replicas; one gang when Kueue manages it (Kueue makes it a pod group).

Gangs: whatever Kueue queues is admitted whole (all pods of all pod sets, down to the minimums it
allows); distributed training kinds, JobSets and LWS groups are gangs under any gang scheduler and
useless in part; a Job, Deployment or StatefulSet outside Kueue starts pod by pod. Kueue's
topology annotations on pod templates (`kueue.x-k8s.io/podset-required-topology`, ...) become the
job's topology. An object whose pods are already in the input is read from its pods instead
(placement.kube.running and the importer's loose pods), and one a Kueue Workload in the input owns
is read from that Workload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from placement.kube import jobs as J
from placement.kube.jobs import Draft, PodInfo
from placement.kube.objects import Obj, View
from placement.kube.pods import read_shape
from placement.kube.state import ImportState, annotations_of

#: Kubeflow training-operator kinds -> the spec field holding their replica specs
KUBEFLOW = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs", "XGBoostJob": "xgbReplicaSpecs",
            "PaddleJob": "paddleReplicaSpecs", "JAXJob": "jaxReplicaSpecs", "MPIJob": "mpiReplicaSpecs"}
KINDS = [("batch", "Job"), ("jobset.x-k8s.io", "JobSet"), ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"),
         ("apps", "Deployment"), ("apps", "StatefulSet")] + [("kubeflow.org", k) for k in KUBEFLOW]

KUEUE_MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
KUEUE_PRIORITY = "kueue.x-k8s.io/priority-class"
TAS_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
TAS_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
TAS_SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
TAS_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOBSET_EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
KUBEFLOW_JOB = "training.kubeflow.org/job-name"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
_FINISHED = {"Complete", "Completed", "Failed", "Succeeded"}


@dataclass
class PodSet:
    name: str
    template: View
    count: int
    min_count: int | None = None


class ControllerWorkloads(ImportState):
    """Readers of the workload controllers Kueue integrates (batch, JobSet, Kubeflow, LWS, apps)."""

    def _controllers(self, pods: list[PodInfo], owned: set[tuple[str, str, str]]) -> None:
        for group, kind in KINDS:
            for obj in self.of(group, kind):
                if (obj.namespace, obj.kind, obj.name) in owned:
                    continue  # a Kueue Workload in the input describes it
                if any(p.obj.namespace == obj.namespace and _owns(obj, p) for p in pods):
                    continue  # its pods speak for it (running, or pending pods grouped by owner)
                self.attempt(self._controller, obj)

    def _controller(self, obj: Obj) -> None:
        if self._finished(obj):
            return
        spec = obj.view().sub("spec")
        queue = self._controller_queue(obj)
        kueue = queue is not None and queue[0] == "local-queue"
        suspended = spec.get("suspend", bool, False) or spec.sub("runPolicy").get("suspend", bool, False)
        active = obj.view().sub("status").get("active", int, 0) or obj.view().sub("status").get("readyReplicas", int, 0)
        if active and not suspended:
            self.warnings.add(obj.where, "status", f"{active} pod(s) running, none of them in the input: it holds no "
                              "capacity in the request and is not imported")
            return
        if suspended and not kueue:
            self.warnings.add(obj.where, "spec.suspend", "suspended and queued by no Kueue LocalQueue (label "
                              f"{J.KUEUE_QUEUE}): nothing will start it; not imported")
            return
        if obj.kind == "LeaderWorkerSet":
            self._lws(obj, spec, queue)
            return
        sets = self._podsets(obj, spec)
        draft = self._draft(obj, obj.name, queue, sets)
        if draft is None:
            return
        gang = kueue or obj.kind in KUBEFLOW or obj.kind == "JobSet"
        if obj.kind == "Deployment" or (not gang and obj.kind in ("Job", "StatefulSet")):
            draft.min_available = 1  # pod by pod: kube-scheduler's way, and Kueue's for serving pods
        policy = spec.sub("runPolicy").sub("schedulingPolicy")
        least = policy.integer("minAvailable", None, minimum=1)
        total = sum(n for _, _, n, _ in draft.tasks)
        if least is not None and least < total and not kueue:
            draft.min_available = least
        if obj.kind == "JobSet" and (level := obj.annotations().get(JOBSET_EXCLUSIVE)):
            self._exclusive(obj, spec, draft, level)
        self.drafts.append(draft)

    def _finished(self, obj: Obj) -> bool:
        status = obj.view().sub("status")
        done = [c.text("type") for c in status.items("conditions")
                if c.text("type") in _FINISHED and c.text("status") == "True"]
        if done or status.text("terminalState"):
            self.warnings.add(obj.where, "status.conditions", f"{done[0] if done else status.text('terminalState')}: "
                              "finished, not imported")
            return True
        return False

    def _controller_queue(self, obj: Obj) -> tuple[str, str] | None:
        labels = obj.labels()
        if labels.get(J.KUEUE_QUEUE):
            return ("local-queue", labels[J.KUEUE_QUEUE])
        for key in (*J.KAI_QUEUES, J.VOLCANO_QUEUE):
            if labels.get(key):
                return ("team", labels[key])
        queue = obj.view().sub("spec").sub("runPolicy").sub("schedulingPolicy").text("queue")
        return ("team", queue) if queue else None

    def _podsets(self, obj: Obj, spec: View) -> list[PodSet]:
        if obj.kind == "Job":
            count = _pods_count(spec)
            least = obj.annotations().get(KUEUE_MIN_PARALLELISM)
            minimum = None
            if least is not None:
                try:
                    minimum = int(least)
                except ValueError:
                    obj.meta.sub("annotations").fail(KUEUE_MIN_PARALLELISM, f"'{least}' is not a whole number")
                if not 0 < minimum <= count:
                    obj.meta.sub("annotations").fail(KUEUE_MIN_PARALLELISM, f"{minimum} is not in 1..{count}")
            return [PodSet("main", spec.sub("template"), count, minimum)]
        if obj.kind == "JobSet":
            sets = []
            for rj in spec.items("replicatedJobs"):
                name = rj.text("name", required=True)
                job = rj.sub("template").sub("spec")
                sets.append(PodSet(name, job.sub("template"), rj.integer("replicas", 1, minimum=0) * _pods_count(job)))
            if not sets:
                spec.fail("replicatedJobs", "required: a JobSet has at least one replicated job")
            return sets
        if obj.kind in KUBEFLOW:
            replicas = spec.sub(KUBEFLOW[obj.kind])
            if not replicas.value:
                spec.fail(KUBEFLOW[obj.kind], f"required: a {obj.kind} has at least one replica type")
            return [PodSet(rtype.lower(), rs.sub("template"), rs.integer("replicas", 1, minimum=0))
                    for rtype, rs in replicas.mapping_items()]
        return [PodSet("main", spec.sub("template"), spec.integer("replicas", 1, minimum=0))]  # Deployment, STS

    def _draft(self, obj: Obj, name: str, queue: tuple[str, str] | None, sets: list[PodSet]) -> Draft | None:
        draft = Draft(self._job_name(obj.namespace, name, obj.kind.lower()), "controller", obj, obj.namespace, name,
                      queue=queue, priority=self._controller_priority(obj, sets),
                      submitted=J.timestamp(obj.meta, "creationTimestamp"))
        for ps in sets:
            if not ps.template.value:
                ps.template.fail(None, "required: the pod template")
            template_spec = ps.template.sub("spec")
            shape = read_shape(template_spec, annotations_of(ps.template), ps.template.sub("metadata"), self.warnings)
            if ps.count:
                draft.tasks.append((ps.name, shape, ps.count, []))
                draft.k8s_tasks[ps.name] = ps.name
                if ps.min_count is not None and ps.min_count < ps.count:
                    draft.task_mins[ps.name] = ps.min_count
            request = self._template_topology(ps.template)
            if request and draft.topology is None:
                draft.topology = request
            elif request and request != draft.topology:
                self.warnings.add(obj.where, ps.template.where("metadata.annotations"), "one topology per job: "
                                  "the first pod set's request applies to every pod")
        if not draft.tasks:
            self.warnings.add(obj.where, "spec", "no pods to create (replicas 0): nothing to place")
            return None
        return draft

    def _controller_priority(self, obj: Obj, sets: list[PodSet]) -> int:
        labels = obj.meta.sub("labels")
        if obj.labels().get(J.KAI_PRIORITY):
            return self.kai_class(labels, J.KAI_PRIORITY)
        name = obj.labels().get(KUEUE_PRIORITY)
        if name:
            if name not in self.workload_classes:
                self.warnings.add(obj.where, f"metadata.labels.{KUEUE_PRIORITY}", f"WorkloadPriorityClass '{name}' is "
                                  f"not in the input: priority {self.default_priority}")
            return self.workload_classes.get(name, self.default_priority)
        policy = obj.view().sub("spec").sub("runPolicy").sub("schedulingPolicy")
        if policy.text("priorityClass"):
            return self._class(policy, "priorityClass") or 0
        for ps in sets:
            meta_labels = ps.template.sub("metadata").sub("labels")
            if ps.template.sub("metadata").string_map("labels").get(J.KAI_PRIORITY):
                return self.kai_class(meta_labels, J.KAI_PRIORITY)
            if ps.template.sub("spec").text("priorityClassName"):
                value = self._class(ps.template.sub("spec"), "priorityClassName")
                return self.default_priority if value is None else value
        return self.default_priority

    def _template_topology(self, template: View) -> dict[str, Any] | None:
        """Kueue's topology annotations on a pod template -> a job topology."""
        ann = annotations_of(template)
        view = template.sub("metadata").sub("annotations")
        out: dict[str, Any] = {}
        for key, field_ in ((TAS_REQUIRED, "required"), (TAS_PREFERRED, "preferred")):
            if ann.get(key):
                out[field_] = self.level_of(view, key, ann[key])
        if ann.get(TAS_SLICE):
            size = ann.get(TAS_SLICE_SIZE)
            if not size or not size.isdigit() or int(size) < 1:
                view.fail(TAS_SLICE_SIZE, f"required with {TAS_SLICE}: a whole number of pods per slice")
            out["slice"] = {"size": int(size), "required": self.level_of(view, TAS_SLICE, ann[TAS_SLICE])}
        return out or None

    def _exclusive(self, obj: Obj, spec: View, draft: Draft, label: str) -> None:
        """JobSet exclusive placement: each child Job alone in a domain of `label` -> slices of one Job's pods."""
        view = obj.meta.sub("annotations")
        level = self.level_of(view, JOBSET_EXCLUSIVE, label)
        sizes = {_pods_count(rj.sub("template").sub("spec")) for rj in spec.items("replicatedJobs")
                 if any(name == rj.text("name") and shape.uses_gpu for name, shape, _, _ in draft.tasks)}
        if len(sizes) != 1:
            self.warnings.add(obj.where, f"metadata.annotations.{JOBSET_EXCLUSIVE}", "child Jobs of different sizes: "
                              "one slice size per job, so the exclusive placement is not honoured")
            return
        topology = dict(draft.topology or {})
        topology["slice"] = {"size": sizes.pop(), "required": level}
        draft.topology = topology
        self.warnings.add(obj.where, f"metadata.annotations.{JOBSET_EXCLUSIVE}", "each child Job gets a domain of "
                          "its own; a domain may still hold pods of two child Jobs when they fit (not exclusive)")

    def _lws(self, obj: Obj, spec: View, queue: tuple[str, str] | None) -> None:
        """A LeaderWorkerSet: one job per group (leader + size − 1 workers), each group a gang."""
        tpl = spec.sub("leaderWorkerTemplate")
        size = tpl.integer("size", 1, minimum=1)
        worker = tpl.sub("workerTemplate")
        leader = tpl.sub("leaderTemplate") if tpl.has("leaderTemplate") else worker
        level = obj.annotations().get(LWS_EXCLUSIVE)
        for g in range(spec.integer("replicas", 1, minimum=0)):
            sets = [PodSet("leader", leader, 1)] + ([PodSet("worker", worker, size - 1)] if size > 1 else [])
            draft = self._draft(obj, f"{obj.name}-{g}", queue, sets)
            if draft is None:
                return
            if level:
                draft.topology = {**(draft.topology or {}),
                                  "required": self.level_of(obj.meta.sub("annotations"), LWS_EXCLUSIVE, level)}
            self.drafts.append(draft)


def _pods_count(job: View) -> int:
    """The pods a Job runs at once, as Kueue counts them: parallelism (default 1), at most completions."""
    parallelism = job.integer("parallelism", 1, minimum=0)
    completions = job.integer("completions", None, minimum=0)
    return parallelism if completions is None else min(parallelism, completions)


def _owns(obj: Obj, pod: PodInfo) -> bool:
    """Is the pod one of the object's (by owner reference or the label its controller sets)?"""
    labels = pod.labels
    owners = [(r.text("kind"), r.text("name") or "") for r in pod.obj.meta.items("ownerReferences")]
    if obj.kind == "Job":
        return ("Job", obj.name) in owners or any(labels.get(k) == obj.name for k in JOB_NAME_LABELS)
    if obj.kind == "JobSet":
        return labels.get(JOBSET_NAME) == obj.name
    if obj.kind in KUBEFLOW:
        return (obj.kind, obj.name) in owners or labels.get(KUBEFLOW_JOB) == obj.name
    if obj.kind == "LeaderWorkerSet":
        return labels.get(LWS_NAME) == obj.name
    if obj.kind == "Deployment":
        rs = f"{obj.name}-{labels.get('pod-template-hash', '')}"
        return ("ReplicaSet", rs) in owners
    return (obj.kind, obj.name) in owners  # StatefulSet
