"""Migration: a running job may move to GPUs where it runs faster, evicted and placed again in one plan.

On a mixed fleet a job started on slow GPUs, because nothing faster was free, keeps them for its whole run
unless it moves; Gavel's lead over a scheduler that never moves jobs comes from moving them between GPU types
as faster ones free. With `policy.migration`, every running job that could move gets a *twin*: a pending job
of the same name, team, priority, speed table and shape (one task per task of its pods, each pod's GPUs, CPU
and memory), whose candidate nodes are only those where the job runs faster than on its slowest GPU now. The
model places the twin exactly when it evicts the job (compile/migration.py), so a move is a preemption with
rule `migrate` plus the job's new pods among the plan's assignments; a twin left unplaced is no pending job.

A running job can move when it is `preemptible`, has run `policy.min_runtime_s`, has a speed table (`speeds` or
`workload`), and every pod holds whole GPUs (a MIG instance or a shared GPU is not moved); its pods of one
task must hold as many GPUs each (the twin's task is one shape); and no team or cohort declares a quota (a move
between quota scopes changes what a team borrows, not modelled yet). Twins carry no selectors or tolerations the
running job does not state on the wire, and never go to spot nodes: they go only to GPU models its own table
names faster.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from placement_models import Job, PlacementRequest, RunningJob

from placement.speeds import Speeds, speed


def movable(request: PlacementRequest, rj: RunningJob) -> bool:
    """Could running job rj move under policy.migration (the module docstring's conditions)?"""
    policy = request.policy
    if not policy.migration or not rj.preemptible or not rj.pods or (rj.speeds is None and rj.workload is None):
        return False
    if any(t.quota is not None for t in request.teams) or any(c.quota is not None for c in request.cohorts):
        return False  # quotas: a move between scopes changes what a team borrows; not modelled yet
    if policy.min_runtime_s > 0:
        if rj.started_at is None:
            return False
        if (request.planning_time() - rj.started_at).total_seconds() < policy.min_runtime_s:
            return False
    shapes: dict[str, tuple[int, float, float]] = {}
    for pod in rj.pods:
        if pod.mig is not None or pod.gpu_share is not None or not pod.gpus:
            return False
        shape = (len(pod.gpus), pod.cpu, pod.memory_gib)
        if shapes.setdefault(pod.task, shape) != shape:
            return False
    return True


def twin(rj: RunningJob) -> Job:
    """The pending job that stands for running job rj placed again: its name, team, priority, speeds, shape."""
    tasks: dict[str, dict[str, object]] = {}
    for pod in rj.pods:
        task = tasks.setdefault(pod.task, {"name": pod.task, "replicas": 0, "gpus": len(pod.gpus), "cpu": pod.cpu,
                                           "memory_gib": pod.memory_gib})
        task["replicas"] = int(task["replicas"]) + 1  # type: ignore[call-overload]
    return Job.model_validate({
        "name": rj.job, "team": rj.team, "namespace": rj.namespace, "priority": rj.priority,
        "submitted_at": rj.started_at, "expected_runtime_h": rj.expected_runtime_h, "max_runtime_h": rj.max_runtime_h,
        "speeds": rj.speeds, "workload": rj.workload, "attained_gpu_h": rj.attained_gpu_h,
        "tasks": list(tasks.values()),
    })


def with_twins(request: PlacementRequest) -> PlacementRequest:
    """`request` with a twin after its pending jobs for each running job that could move (the same object when
    none could). Twins are named as their running jobs: `twins` tells them apart."""
    if not request.policy.migration:
        return request
    found = [twin(rj) for rj in request.cluster.running if movable(request, rj)]
    if not found:
        return request
    return request.model_copy(update={"jobs": [*request.jobs, *found]})


def twins(request: PlacementRequest) -> dict[int, int]:
    """Pending job index -> running job index, for the twins among `request.jobs` (a pending job named as a running
    one: a user's request cannot hold one, the wire keeps one namespace for both)."""
    if not request.policy.migration:
        return {}
    running = {rj.job: r for r, rj in enumerate(request.cluster.running)}
    return {j: running[job.name] for j, job in enumerate(request.jobs) if job.name in running}


def without_twins(names: Iterable[str], request: PlacementRequest) -> list[str]:
    """The names that are not running jobs' (twins answer to their running job's name)."""
    running = {rj.job for rj in request.cluster.running}
    return [n for n in names if n not in running]


def no_faster(speeds: Speeds, r: int, models: list[str | None], capacity: np.ndarray) -> np.ndarray:
    """Per node: would running job r run there no faster than on its slowest GPU now (or has it no GPUs)? Its
    twin's pods go only to the other nodes."""
    table, pace = speeds.running[r], speeds.running_pace[r]
    return np.array([capacity[n, 0] == 0 or speed(table, m) <= pace + 1e-9 for n, m in enumerate(models)], dtype=bool)
