"""Workloads -> jobs: Volcano Jobs and PodGroups, Kueue Workloads, KAI PodGroups, and plain pods.

Pending work comes from the object that describes the whole gang: a Volcano Job's tasks, a Kueue
Workload's podSets (their pods do not exist yet while Kueue holds the job), or a PodGroup together
with the pods it groups (a PodGroup says how many, its pods say what each needs). Pending pods no
such object covers become jobs of their own, grouped by their controller.

Running work is read from pods bound to nodes, grouped into jobs by the gang they belong to
(Volcano job/PodGroup annotations, KAI's `pod-group-name`, else the controlling owner), because a
running job is kept or preempted whole. Their team, priority and preemptibility come from the
gang's object when the input has it, else from the pods' own queue labels and priority.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from placement.kube.objects import Obj, View, Warnings
from placement.kube.pods import Shape, read_shape

VOLCANO_JOB_NAME = "volcano.sh/job-name"
VOLCANO_TASK = "volcano.sh/task-spec"
VOLCANO_GROUP = "scheduling.k8s.io/group-name"
VOLCANO_QUEUE = "scheduling.volcano.sh/queue-name"
VOLCANO_PREEMPTABLE = "volcano.sh/preemptable"
KAI_GROUP = "pod-group-name"
KAI_QUEUES = ("kai.scheduler/queue", "runai/queue")
KAI_SUBGROUP = "kai.scheduler/subgroup-name"
KAI_SCHEDULER = "kai-scheduler"
#: KAI reads a workload's priority class from this label (on the pod or its top owner)
KAI_PRIORITY = "priorityClassName"
#: the PriorityClasses KAI's installation creates (docs/priority): train is preemptible, build and inference not
KAI_CLASSES = {"train": 50, "interactive-preemptible": 75, "build": 100, "inference": 125}
#: KAI's default: a job below this priority is preemptible unless its PodGroup says otherwise.
KAI_PREEMPTIBLE_BELOW = 100
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
KUEUE_PODSET = "kueue.x-k8s.io/podset"
#: Kueue's plain-pod groups: pods with one group name form one Workload, admitted whole
KUEUE_POD_GROUP = "kueue.x-k8s.io/pod-group-name"
KUEUE_POD_GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"
KUBEFLOW_REPLICA = "training.kubeflow.org/replica-type"

Group = tuple[str, str, str]  # (kind of grouping, namespace, name)


@dataclass
class PodInfo:
    """One pod that holds or wants capacity."""

    obj: Obj
    shape: Shape
    node: str | None
    group: Group
    task: str
    started: datetime | None

    @property
    def labels(self) -> dict[str, str]:
        return self.obj.labels()

    @property
    def annotations(self) -> dict[str, str]:
        return self.obj.annotations()

    def any(self, key: str) -> str | None:
        """A label, else an annotation (controllers disagree on which they set)."""
        return self.labels.get(key) or self.annotations.get(key)


@dataclass
class Gang:
    """What a gang object says about its jobs, read before any pod is grouped."""

    obj: Obj
    queue: tuple[str, str] | None  # ("team", name) or ("local-queue", name)
    priority: int | None
    preemptible: bool | None
    min_member: int | None
    topology: View | None  # the object's topology request (format depends on the kind)
    #: Volcano PodGroup `minTaskMember`: task name -> its minimum pods
    min_task_member: dict[str, int] = field(default_factory=dict)


@dataclass
class Draft:
    """A v1 job under construction, with the Kubernetes names an exporter needs to write it back."""

    name: str
    kind: str  # volcano-job | kueue-workload | podgroup | pods
    obj: Obj | None
    namespace: str
    k8s_name: str
    queue: tuple[str, str] | None = None
    priority: int = 0
    submitted: datetime | None = None
    min_available: int | None = None
    tasks: list[tuple[str, Shape, int, list[str]]] = field(default_factory=list)  # (name, shape, replicas, pods)
    #: v1 task -> its `min_replicas` (Volcano task minAvailable, PodGroup minTaskMember, Kueue minCount)
    task_mins: dict[str, int] = field(default_factory=dict)
    k8s_tasks: dict[str, str] = field(default_factory=dict)  # v1 task -> Kubernetes task/podSet name
    topology: dict[str, Any] | None = None


def timestamp(view: View, key: str) -> datetime | None:
    text = view.text(key)
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        view.fail(key, f"'{text}' is not an RFC 3339 time (e.g. 2026-12-01T08:00:00Z)")
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def group_of(obj: Obj) -> Group:
    labels, annotations = obj.labels(), obj.annotations()
    ns = obj.namespace
    job = labels.get(VOLCANO_JOB_NAME) or annotations.get(VOLCANO_JOB_NAME)
    if job:
        return ("volcano-job", ns, job)
    group = annotations.get(VOLCANO_GROUP) or annotations.get(KAI_GROUP) or labels.get(KAI_GROUP)
    if group:
        return ("podgroup", ns, group)
    if labels.get(KUEUE_POD_GROUP):
        return ("kueue-pod-group", ns, labels[KUEUE_POD_GROUP])
    for ref in obj.meta.items("ownerReferences"):
        if ref.get("controller", bool, False):
            return ("owner", ns, f"{ref.text('kind', required=True)}/{ref.text('name', required=True)}")
    return ("pod", ns, obj.name)


def task_of(obj: Obj) -> str:
    labels, annotations = obj.labels(), obj.annotations()
    for key in (VOLCANO_TASK, KAI_SUBGROUP, KUEUE_PODSET, KUBEFLOW_REPLICA):
        value = annotations.get(key) or labels.get(key)
        if value:
            return value.lower() if key == KUBEFLOW_REPLICA else value
    return "pod"


def read_pod(obj: Obj) -> PodInfo | None:
    """A pod that holds capacity (bound, not finished) or wants it (pending); None for finished pods."""
    root = obj.view()
    status = root.sub("status")
    phase = status.text("phase", "Pending")
    if phase in ("Succeeded", "Failed"):
        return None
    spec = root.sub("spec")
    node = spec.text("nodeName") or None
    # read quietly: a running pod's scheduling rules no longer matter, and a pending pod's are reported
    # once per task by whoever turns it into a job
    shape = read_shape(spec, obj.annotations(), obj.meta, Warnings())
    return PodInfo(obj, shape, node, group_of(obj), task_of(obj), timestamp(status, "startTime"))


def pod_queue(pod: PodInfo) -> tuple[str, str] | None:
    if pod.any(VOLCANO_QUEUE):
        return ("team", pod.any(VOLCANO_QUEUE) or "")
    for key in KAI_QUEUES:
        if pod.labels.get(key):
            return ("team", pod.labels[key])
    if pod.labels.get(KUEUE_QUEUE):
        return ("local-queue", pod.labels[KUEUE_QUEUE])
    return None


def split_tasks(pods: list[PodInfo]) -> list[tuple[str, Shape, list[PodInfo]]]:
    """Pods -> tasks of identical pods: by task name, and by shape within a name (`name-2`, ...)."""
    by_key: dict[tuple[str, Shape], list[PodInfo]] = {}
    for p in sorted(pods, key=lambda p: natural(p.obj.name)):
        by_key.setdefault((p.task, p.shape), []).append(p)
    out: list[tuple[str, Shape, list[PodInfo]]] = []
    used: dict[str, int] = {}
    for (task, shape), members in by_key.items():
        used[task] = used.get(task, 0) + 1
        out.append((task if used[task] == 1 else f"{task}-{used[task]}", shape, members))
    return out


def natural(name: str) -> tuple[Any, ...]:
    """worker-10 after worker-9: pod indices sort as numbers."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))
