"""Pending reasons when no node passes a task's filters: which filter, what nodes have instead, and whether
it is a filter (`filter`), the devices' policy (`mig`, `sharing`) or running work that holds every device
(`gang_size`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from placement import devices
from placement.explain import devices as device_reasons
from placement.explain.rivals import Reason
from placement.problem import Problem, TaskInfo, effective_labels


def demand_text(task: TaskInfo) -> str:
    """One pod's demand: "8 GPUs, 16 CPU", "MIG 1g.10gb", "0.25 of a shared GPU" (never GPUs for a device pod)."""
    spec = task.spec
    parts = []
    if spec.gpus:
        parts.append(f"{spec.gpus} GPU" + ("s" if spec.gpus != 1 else ""))
    if spec.mig_profile is not None and spec.gpu_share is not None:
        parts.append(f"{spec.gpu_share:g} of a shared MIG {spec.mig_profile} instance")
    elif spec.mig_profile is not None:
        parts.append(f"MIG {spec.mig_profile}" + (f" ≥ {spec.gpu_memory_gib:g} GiB" if spec.mig_auto else ""))
    elif spec.gpu_share is not None:
        parts.append(f"{spec.gpu_share:g} of a shared GPU")
    if spec.cpu:
        parts.append(f"{spec.cpu:g} CPU")
    if spec.memory_gib:
        parts.append(f"{spec.memory_gib:g} GiB")
    return ", ".join(parts) or "no resources"



def filter_reason(problem: Problem, task: TaskInfo) -> Reason:
    """Name the first filter stage that left no node for the task, and the constraint it is."""
    spec = task.spec
    emptied = next((stage for stage, left in task.funnel if left == 0), "free_capacity")
    if emptied in devices.STAGES:  # MIG instances, shared GPUs
        return Reason(_device_constraint(problem, task, emptied),
                      device_reasons.filter_reason(problem, task, emptied) + _offered(problem, task, emptied))
    if emptied == "nodes":
        return Reason("gang_size", "the cluster has no nodes")
    if emptied == "node_selector":
        return Reason("filter", f"no node matches node_selector {dict(spec.node_selector)} of task '{spec.name}' "
                                f"({_label_values(problem, spec.node_selector)})")
    if emptied == "taints":  # the taints it does not tolerate on the nodes its selector leaves
        left = [n for i, n in enumerate(problem.nodes) if all(
            effective_labels(n, problem.gpu_models[i]).get(k) == v for k, v in spec.node_selector.items())]
        taints = sorted({f"{t.key}={t.value}:{t.effect}" for n in left for t in n.taints
                         if t.effect != "PreferNoSchedule" and not any(w.tolerates(t) for w in spec.tolerations)})
        more = f" and {len(taints) - 3} more" if len(taints) > 3 else ""
        return Reason("filter", f"every node left for task '{spec.name}' ({len(left)}) has a taint it does not "
                                f"tolerate ({', '.join(taints[:3])}{more})")
    if emptied == "has_gpus":
        if not any(n.gpus for n in problem.nodes):
            return Reason("gang_size", f"task '{spec.name}' needs GPUs but the cluster has none")
        return Reason("filter", f"task '{spec.name}' needs GPUs but no node its node_selector and tolerations "
                                "allow has any")
    if emptied == "gpu_memory":
        have = [problem.nodes[i].gpu_model for i in range(problem.n_nodes) if problem.gpu_models[i]]
        return Reason("filter", f"task '{spec.name}' needs {spec.gpu_memory_gib:g} GiB of GPU memory per GPU; no "
                                f"matching node's GPU model has that much (models here: "
                                f"{', '.join(sorted(set(map(str, have))))})")
    if emptied == "spot":  # compile.cost names the rule (spot_ok)
        return Reason("filter", f"task '{spec.name}' fits only on spot nodes and the job is not spot_ok")
    return Reason("gang_size", room_text(problem, task))


def _label_values(problem: Problem, selector: dict[str, str]) -> str:
    """"zone here: eu-1, eu-2" per selector key (what nodes carry instead), or "no node has label zone"."""
    parts = []
    for key in selector:
        found = sorted({v for i, n in enumerate(problem.nodes)
                        if (v := effective_labels(n, problem.gpu_models[i]).get(key)) is not None})
        parts.append(f"{key} here: {', '.join(found[:5])}" + (", ..." if len(found) > 5 else "") if found
                     else f"no node has label {key}")
    return "; ".join(parts)


def room_text(problem: Problem, task: TaskInfo) -> str:
    """No node left after the free-capacity filter: the most any matching node has of what one pod needs."""
    what = f"one pod of task '{task.name}' ({demand_text(task)})"
    nodes = task.eligible if task.eligible is not None else np.zeros(0, dtype=np.int64)
    if nodes.size == 0:
        return f"no matching node is large enough for {what}, even with nothing running on it"
    units = (("GPUs", 1), ("CPU", 1000), ("GiB", 1024))
    most = [f"{problem.free[nodes, d].max() / scale:g} {name}" for d, (name, scale) in enumerate(units)
            if task.demand[d] > 0]
    return (f"no matching node has room for {what} beside running work; the most free on one matching node: "
            + ", ".join(most))


def _device_constraint(problem: Problem, task: TaskInfo, stage: str) -> str:
    """`mig` / `sharing` when allowing re-partitioning / sharing changes (or another profile) would give the
    task's minimum of pods room; `gang_size` when running pods hold the devices it needs whatever the policy.
    A share of a MIG instance gets new shared instances only from re-partitioning: `mig`."""
    view = problem.device_view()
    if stage == "mig_profile":
        return "mig"
    nodes = task.eligible if task.eligible is not None else np.zeros(0, dtype=np.int64)
    nodes = nodes[np.all(problem.free[nodes, 1:] >= task.demand[1:], axis=1)]
    if stage in ("mig_room", "instance_share_room"):
        if view.changes:
            return "gang_size"
        _, room, _ = devices.room(task.spec, replace(view, changes=True), nodes)
    elif view.sharing_changes and view.max_sharing_changes is None:
        return "gang_size"
    else:
        _, room, _ = devices.room(task.spec, replace(view, sharing_changes=True, max_sharing_changes=None), nodes)
    need = max(problem.jobs[task.job].task_minimum(task.spec), 1)
    kind = "mig" if stage in ("mig_room", "instance_share_room") else "sharing"
    return kind if int(room.sum()) >= need else "gang_size"


def _offered(problem: Problem, task: TaskInfo, stage: str) -> str:
    """What matching nodes offer instead, for a MIG pod that found no instance: "; free instances on matching
    nodes: 3× 1g.10gb, 1× 2g.20gb" (or that there are none)."""
    if stage != "mig_room":
        return ""
    view = problem.device_view()
    nodes = task.eligible if task.eligible is not None else np.zeros(0, dtype=np.int64)
    free: dict[str, int] = {}
    for n in nodes.tolist():
        for g in view.mig[n]:
            for profile, _ in g.free:
                free[profile] = free.get(profile, 0) + 1
    if not free:
        return "; matching nodes have no free MIG instance"
    return "; free instances on matching nodes: " + ", ".join(f"{k}× {p}" for p, k in sorted(free.items()))
