"""Why a job waits: a precise, human reason for every pending job of a plan.

Reasons go from the most basic to the most contextual: nothing matches the task at all (and
which filter emptied the list), the cluster is too small for the gang even when empty of new
work, or the capacity went to other jobs in this plan (and to which ones).
"""

from __future__ import annotations

import numpy as np

from placement.baseline import _place_task
from placement.problem import Problem, TaskInfo
from placement.solution import Placement


def _demand_text(task: TaskInfo) -> str:
    spec = task.spec
    parts = []
    if spec.gpus:
        parts.append(f"{spec.gpus} GPU" + ("s" if spec.gpus != 1 else ""))
    if spec.cpu:
        parts.append(f"{spec.cpu:g} CPU")
    if spec.memory_gib:
        parts.append(f"{spec.memory_gib:g} GiB")
    return ", ".join(parts) or "no resources"


def gang_text(problem: Problem, j: int) -> str:
    parts = [f"{problem.tasks[t].replicas}×{problem.tasks[t].name} ({_demand_text(problem.tasks[t])})"
             for t in problem.job_tasks[j]]
    return " + ".join(parts)


def _filter_reason(problem: Problem, task: TaskInfo) -> str:
    """Name the first filter stage that left no node for the task."""
    spec = task.spec
    emptied = next((stage for stage, left in task.funnel if left == 0), "free_capacity")
    if emptied == "nodes":
        return "the cluster has no nodes"
    if emptied == "node_selector":
        return f"no node matches node_selector {dict(spec.node_selector)} of task '{spec.name}'"
    if emptied == "taints":
        taints = sorted({f"{t.key}={t.value}:{t.effect}" for n in problem.nodes for t in n.taints
                         if t.effect != "PreferNoSchedule"})
        return f"every node left for task '{spec.name}' has a taint it does not tolerate ({', '.join(taints[:3])})"
    if emptied == "has_gpus":
        return f"task '{spec.name}' needs GPUs but no matching node has any"
    if emptied == "gpu_memory":
        have = [problem.nodes[i].gpu_model for i in range(problem.n_nodes) if problem.gpu_models[i]]
        return (f"task '{spec.name}' needs {spec.gpu_memory_gib:g} GiB of GPU memory per GPU; no matching node's "
                f"GPU model has that much (models here: {', '.join(sorted(set(map(str, have))))})")
    most = int(problem.free[:, 0].max()) if problem.n_nodes else 0
    return (f"no matching node has room for one pod of task '{spec.name}' ({_demand_text(task)}) "
            f"beside running work; the most free GPUs on one node is {most}")


def _fits(problem: Problem, j: int, free: np.ndarray) -> bool:
    trial = free.copy()
    counts: dict[tuple[int, int], int] = {}
    placed = sum(_place_task(problem, t, trial, counts) for t in problem.job_tasks[j])
    return placed >= problem.jobs[j].needed


def pending_reason(problem: Problem, j: int, placement: Placement, usage: np.ndarray) -> str:
    for t in problem.job_tasks[j]:
        task = problem.tasks[t]
        if task.candidates.size == 0:
            return _filter_reason(problem, task)
    gang = gang_text(problem, j)
    if not _fits(problem, j, problem.free):
        return (f"does not fit even if no other job were placed: gang of {gang} "
                "(free capacity too fragmented or too small)")
    left = problem.free - usage
    if _fits(problem, j, left):
        return (f"fits in the capacity this plan leaves free, but the solver did not reach a plan placing it "
                f"within its time limit: gang of {gang}")
    nodes = set().union(*(problem.tasks[t].candidates.tolist() for t in problem.job_tasks[j]))
    rivals: dict[int, int] = {}
    for (t, n), k in placement.counts.items():
        if n in nodes and k:
            rival = problem.tasks[t].job
            rivals[rival] = rivals.get(rival, 0) + int(problem.tasks[t].demand[0]) * k
    top = sorted(rivals, key=lambda r: (-problem.jobs[r].priority, -rivals[r], problem.jobs[r].name))[:3]
    who = ", ".join(f"{problem.jobs[r].name} (priority {problem.jobs[r].priority}, {rivals[r]} GPUs)" for r in top)
    free_gpus = int(left[sorted(nodes), 0].sum()) if nodes else 0
    return (f"capacity went to higher-value jobs: gang of {gang} does not fit in the {free_gpus} GPUs left on "
            f"matching nodes" + (f"; placed there instead: {who}" if who else ""))
