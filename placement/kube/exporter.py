"""A plan -> what Kubernetes controllers apply: Bindings, pod patches, Kueue admissions, or a table.

* `bindings`: one `v1 Binding` per placed pod (what a scheduler POSTs to `pods/<name>/binding`),
  its annotations carrying the job, task, pod index and devices (the API server copies a
  Binding's annotations onto the pod); one `policy/v1 Eviction` per pod of a preempted job.
* `patches`: one merge patch per placed pod adding a `kubernetes.io/hostname` node selector (legal
  on a scheduling-gated pod): for controllers that create or release pods themselves.
* `kueue`: a Workload status patch per placed Kueue job: the `QuotaReserved` and `Admitted`
  conditions, `admission` with the ClusterQueue, and per podSet its count, flavors, resource usage
  and `topologyAssignment` (levels + domains in v1beta1, levels + slices in v1beta2), in the API
  version the input's Kueue objects used. Jobs read from a controller (batch Job, JobSet, ...)
  get a Workload named as Kueue names it, short of the hash of the owner's uid (a note says so).
* `table`: for people.

Device indices are advice: the NVIDIA device plugin picks the physical devices at container start.
Pod names come from the import (`Origins`): existing pods by index, pods a controller will create by
its naming rule (Volcano: `<job>-<task>-<index>`), else the same rule as a derived name, marked as
such. Without origins (a v1 request file), the request's own names are read: `kube import` writes each
pending pod's name (`tasks[].pod_names`), the job's `namespace` and each running pod's `name`; where a
request lacks them, names follow from the v1 names (job `namespace/name`) and are marked derived.
MIG re-partitions, GPUs the plan shares and added nodes have no Kubernetes object here: they are returned as notes.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any

from placement_models import Assignment, PlacementRequest, Plan

from placement.kube.formats import FORMATS
from placement.kube.importer import JobOrigin, Origins, TaskOrigin
from placement.kube.nodes import HOSTNAME
from placement.kube.quantity import GIB, format_quantity

ANNOTATION = "placement.dev"


def export(request: PlacementRequest, plan: Plan, fmt: str, origins: Origins | None = None) -> tuple[Any, list[str]]:
    """(document, notes): a dict for the object formats, a string for `table`; notes say what has no object."""
    origins = origins if origins is not None else generic_origins(request)
    writers = {"bindings": bindings, "patches": patches, "kueue": kueue, "table": table}
    if fmt not in writers:
        raise ValueError(f"unknown format '{fmt}' (formats: {', '.join(FORMATS)})")
    notes = _notes(plan)
    return writers[fmt](request, plan, origins, notes), notes


def generic_origins(request: PlacementRequest) -> Origins:
    """Origins read from the request alone: the pods' names and namespace where it carries them (`kube import`
    writes `tasks[].pod_names`, `namespace` and running pods' `name`), else v1 names: job `namespace/name`
    (namespace `default` without a slash), pods by the derived rule."""
    out = Origins()
    for job in request.jobs:
        namespace, _, name = job.name.rpartition("/")
        out.jobs[job.name] = JobOrigin("generic", "v1", "Pod", job.namespace or namespace or "default", name,
                                       {t.name: TaskOrigin(t.name, tuple(t.pod_names or ())) for t in job.tasks},
                                       job.team)
    for running in request.cluster.running:
        if all(p.name for p in running.pods):
            namespace = running.namespace or running.job.rpartition("/")[0] or "default"
            out.running_pods[running.job] = [(namespace, p.name) for p in running.pods if p.name]
    for node in request.cluster.nodes:
        out.hostnames[node.name] = node.labels.get(HOSTNAME, node.name)
    return out


def _origin(origins: Origins, job: str) -> JobOrigin:
    found = origins.jobs.get(job)
    if found is None:
        namespace, _, name = job.rpartition("/")
        return JobOrigin("generic", "v1", "Pod", namespace or "default", name, {}, None)
    return found


def derived_pods(request: PlacementRequest, plan: Plan, origins: Origins | None = None) -> list[str]:
    """Names of the placed pods the export makes up (no name in the request or the objects, and no controller
    rule that names them so): Bindings or patches for them name pods that may not exist."""
    origins = origins if origins is not None else generic_origins(request)
    return [name for name, derived in (pod_name(origins, a)[1:] for a in plan.assignments) if derived]


def pod_name(origins: Origins, a: Assignment) -> tuple[str, str, bool]:
    """(namespace, pod name, derived): an existing pod by index, else the controller's naming rule."""
    origin = _origin(origins, a.job)
    task = origin.tasks.get(a.task, TaskOrigin(a.task, ()))
    if a.pod < len(task.pods):
        return origin.namespace, task.pods[a.pod], False
    return origin.namespace, f"{origin.name}-{task.name}-{a.pod}", origin.kind != "volcano-job"


def _devices(a: Assignment) -> dict[str, str]:
    out: dict[str, str] = {}
    if a.gpus and a.gpu_share is None:
        out[f"{ANNOTATION}/gpus"] = ",".join(map(str, a.gpus))
    if a.mig is not None:
        out[f"{ANNOTATION}/mig"] = f"gpu={a.mig.gpu},profile={a.mig.profile},start={a.mig.start}"
    if a.gpu_share is not None and a.mig is not None:  # a share of a shared MIG instance
        out[f"{ANNOTATION}/gpu-share"] = f"mig={a.mig.gpu}/{a.mig.start},share={a.gpu_share:g}"
    elif a.gpu_share is not None:
        out[f"{ANNOTATION}/gpu-share"] = f"gpu={a.gpus[0]},share={a.gpu_share:g}"
    return out


def _annotations(a: Assignment, derived: bool) -> dict[str, str]:
    out = {f"{ANNOTATION}/job": a.job, f"{ANNOTATION}/task": a.task, f"{ANNOTATION}/pod-index": str(a.pod),
           **_devices(a)}
    if derived:
        out[f"{ANNOTATION}/pod-name"] = "derived"
    return out


def bindings(request: PlacementRequest, plan: Plan, origins: Origins, notes: list[str]) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for a in plan.assignments:
        namespace, name, derived = pod_name(origins, a)
        items.append({"apiVersion": "v1", "kind": "Binding",
                      "metadata": {"name": name, "namespace": namespace, "annotations": _annotations(a, derived)},
                      "target": {"apiVersion": "v1", "kind": "Node", "name": a.node}})
    for p in plan.preemptions:
        pods = origins.running_pods.get(p.job)
        if not pods:
            notes.append(f"preempt {p.job}: its pod names are unknown (import from Kubernetes objects to get them)")
            continue
        for namespace, name in pods:
            items.append({"apiVersion": "policy/v1", "kind": "Eviction",
                          "metadata": {"name": name, "namespace": namespace,
                                       "annotations": {f"{ANNOTATION}/reason": p.reason}}})
    return {"apiVersion": "v1", "kind": "List", "items": items}


def patches(request: PlacementRequest, plan: Plan, origins: Origins, notes: list[str]) -> dict[str, Any]:
    items = []
    for a in plan.assignments:
        namespace, name, derived = pod_name(origins, a)
        hostname = origins.hostnames.get(a.node, a.node)
        items.append({"target": {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name},
                      "type": "application/merge-patch+json",
                      "patch": {"metadata": {"annotations": _annotations(a, derived)},
                                "spec": {"nodeSelector": {HOSTNAME: hostname}}},
                      "nodeName": a.node})
    return {"apiVersion": "placement/v1", "kind": "PodPatchList", "items": items}


def kueue(request: PlacementRequest, plan: Plan, origins: Origins, notes: list[str]) -> dict[str, Any]:
    """Workload status patches as Kueue writes them on admission, in the API version the input used
    (v1beta1 unless every Kueue object read was v1beta2)."""
    versions = {o.api_version.rpartition("/")[2] for o in origins.jobs.values() if o.kind == "kueue-workload"}
    version = "v1beta2" if versions == {"v1beta2"} or (not versions and origins.kueue_version == "v1beta2") \
        else "v1beta1"
    now = (request.policy.now or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    jobs = {j.name: j for j in request.jobs}
    nodes = {n.name: n for n in request.cluster.nodes}
    placed: dict[str, list[Assignment]] = {}
    for a in plan.assignments:
        placed.setdefault(a.job, []).append(a)
    items = []
    for job_name, assignments in placed.items():
        origin = _origin(origins, job_name)
        if not _kueue_job(origin):
            continue  # Volcano and KAI jobs are admitted by their own schedulers: see the bindings format
        job = jobs[job_name]
        podsets = []
        for task in job.tasks:
            mine = [a for a in assignments if a.task == task.name]
            if not mine:
                continue
            assignment = _topology_assignment(mine, nodes, origins)
            entry: dict[str, Any] = {
                "name": origin.tasks.get(task.name, TaskOrigin(task.name, ())).name, "count": len(mine),
                "resourceUsage": _usage(task, len(mine)),
                "topologyAssignment": _compact(assignment) if version == "v1beta2" else assignment,
            }
            flavor = _flavor(origins, origin.cluster_queue, {a.node for a in mine})
            if flavor:
                entry["flavors"] = {r: flavor for r in entry["resourceUsage"]}
            podsets.append(entry)
        queue = origin.cluster_queue or job.team or ""
        admission = {"clusterQueue": queue, "podSetAssignments": podsets}
        name = origin.name
        if origin.kind in ("controller", "pods"):
            kind = origin.k8s_kind.lower() if origin.kind == "controller" else "pod"
            name = f"{kind}-{origin.name}"
            notes.append(f"Workload {origin.namespace}/{name}: Kueue names it {kind}-{origin.name}-<hash of the "
                         "owner's uid>; apply the status to the Workload whose owner is this object")
        items.append({"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "Workload",
                      "metadata": {"name": name, "namespace": origin.namespace},
                      "status": {"admission": admission, "conditions": _conditions(queue, now)}})
    for p in plan.pending:
        if _kueue_job(_origin(origins, p.job)):
            notes.append(f"not admitted: {p.job}: {p.reason}")
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _usage(task: Any, count: int) -> dict[str, str]:
    out = {}
    cpu = Fraction(repr(task.cpu)) * count
    memory = Fraction(round(Fraction(repr(task.memory_gib)) * GIB)) * count
    if cpu:
        out["cpu"] = format_quantity(cpu)
    if memory:
        out["memory"] = format_quantity(memory, binary=True)
    if task.gpus:
        out["nvidia.com/gpu"] = str(task.gpus * count)
    if task.mig_profile:
        out[f"nvidia.com/mig-{task.mig_profile}"] = str(count)
    return out


def _topology_assignment(assignments: list[Assignment], nodes: dict[str, Any], origins: Origins) -> dict[str, Any]:
    """Kueue's levels/domains: pods per domain of the lowest level (per host when the Topology has hostname)."""
    labels = origins.topology_labels
    levels = [HOSTNAME] if not labels or labels[-1] == HOSTNAME else labels
    counts: Counter[tuple[str, ...]] = Counter()
    for a in assignments:
        if levels == [HOSTNAME]:
            values: tuple[str, ...] = (origins.hostnames.get(a.node, a.node),)
        else:
            values = tuple(nodes[a.node].labels.get(label, "") for label in levels)
        counts[values] += 1
    return {"levels": levels, "domains": [{"values": list(v), "count": n} for v, n in counts.items()]}


def _kueue_job(origin: JobOrigin) -> bool:
    """A Kueue Workload, v1 names alone, or a controller's or pods' job queued in a Kueue LocalQueue."""
    return origin.kind in ("kueue-workload", "generic") or (origin.kind in ("controller", "pods")
                                                             and origin.cluster_queue is not None)


def _conditions(queue: str, now: str) -> list[dict[str, str]]:
    """The two conditions Kueue sets when it admits a workload without admission checks."""
    return [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "lastTransitionTime": now,
             "message": f"Quota reserved in ClusterQueue {queue}"},
            {"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime": now,
             "message": "The workload is admitted"}]


def _compact(assignment: dict[str, Any]) -> dict[str, Any]:
    """v1beta2's topologyAssignment: the domains as one slice, values per level and pod counts as lists."""
    domains = assignment["domains"]
    levels = assignment["levels"]
    return {"levels": levels, "slices": [{
        "domainCount": len(domains),
        "valuesPerLevel": [{"individual": {"roots": [d["values"][i] for d in domains]}} for i in range(len(levels))],
        "podCounts": {"individual": [d["count"] for d in domains]},
    }]}


def _flavor(origins: Origins, cluster_queue: str | None, used: set[str]) -> str | None:
    for flavor in origins.team_flavors.get(cluster_queue or "", []):
        if used <= set(origins.flavor_nodes.get(flavor, [])):
            return flavor
    return None


def table(request: PlacementRequest, plan: Plan, origins: Origins, notes: list[str]) -> str:
    rows = [("JOB", "TASK", "POD", "NODE", "DEVICES")]
    for a in plan.assignments:
        _, name, derived = pod_name(origins, a)
        rows.append((a.job, a.task, name + (" (derived)" if derived else ""), a.node, _device_text(a)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    placed = len({a.job for a in plan.assignments})
    pods = len(plan.assignments)
    lines.insert(0, f"plan {plan.status}: {placed} job{'' if placed == 1 else 's'} placed "
                 f"({pods} pod{'' if pods == 1 else 's'}), "
                 f"{len(plan.pending)} pending, {len(plan.preemptions)} preempted; objective "
                 f"{plan.objective.total:g}")
    lines += [f"pending   {p.job}: {p.reason}" for p in plan.pending]
    lines += [f"preempt   {p.job}: {p.reason}" for p in plan.preemptions]
    lines += [f"note      {n}" for n in notes]
    return "\n".join(lines) + "\n"


def _device_text(a: Assignment) -> str:
    if a.mig is not None and a.gpu_share is not None:
        return f"{a.gpu_share:g} of MIG {a.mig.profile} on GPU {a.mig.gpu} (slot {a.mig.start}, shared)"
    if a.mig is not None:
        return f"MIG {a.mig.profile} on GPU {a.mig.gpu} (slot {a.mig.start})"
    if a.gpu_share is not None:
        return f"{a.gpu_share:g} of GPU {a.gpus[0]}"
    if a.gpus:
        return "GPUs " + ",".join(map(str, a.gpus))
    return "-"


def _notes(plan: Plan) -> list[str]:
    notes = []
    for c in plan.mig_changes:
        layout = ", ".join(f"{i.profile}@{i.start}" + (f" shared ({i.sharing.mode}, {i.sharing.replicas} replicas)"
                                                         if i.sharing is not None else "")
                           for i in c.layout) if c.mig_enabled else "MIG off"
        shared = any(i.sharing is not None for i in c.layout)
        notes.append(f"re-partition node {c.node} GPU {c.gpu} to [{layout}] before binding (mig-parted / MIG "
                     "manager" + (", and the device plugin's sharing config for the shared instances" if shared
                                  else "") + ": no Kubernetes object here)")
    for s in plan.sharing_changes:
        notes.append(f"share node {s.node} GPU {s.gpu} ({s.mode}, {s.replicas} replicas) before binding its "
                     "gpu_share pods (device plugin or HAMi/KAI sharing config: no Kubernetes object here)")
    for p in plan.provisioned:
        notes.append(f"add {len(p.nodes)} node(s) to pool {p.pool}: {', '.join(p.nodes)} (a node provisioner's "
                     "job; pods bound to them wait for the nodes)")
    return notes
