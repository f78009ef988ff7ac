"""Migration: a running job may move to other GPUs, evicted and placed again in one plan.

On a mixed fleet a job started on slow GPUs, because nothing faster was free, keeps them for its whole run
unless it moves; and a job that runs almost as fast on a P100 may hold V100s another job needs three times
more. Gavel's lead over a scheduler that never moves jobs comes from moving them between GPU types every
round. With `policy.migration`, every running job that could move gets a *twin*: a pending job of the same
name, team, priority, speed table and shape (one task per task of its pods, each pod's GPUs, CPU and memory),
whose candidate nodes are those where the job keeps at least 1 − `MAX_SLOWDOWN` of its speed on its slowest
GPU now: faster GPUs, or slightly slower ones when that frees faster GPUs for a job that gains more (a swap;
the objective decides, compile/migration.py). The model places the twin exactly when it evicts the job, so a
move is a preemption with rule `migrate` plus the job's new pods among the plan's assignments; a twin left
unplaced is no pending job.

A running job can move when it is `preemptible`, has run `policy.min_runtime_s`, has a speed table (`speeds` or
`workload`) that differs over the cluster's GPU models (on one model nothing moves), and every pod holds whole
GPUs (a MIG instance or a shared GPU is not moved); its pods of one task must hold as many GPUs each (the twin's
task is one shape); and no team or cohort declares a quota (a move between quota scopes changes what a team
borrows, not modelled yet). Twins carry no selectors or tolerations the running job does not state on the wire,
and never go to spot nodes; the slowdown bound keeps a job off GPU models it can barely run on (a running job
states no GPU memory need).
"""

from __future__ import annotations

from collections.abc import Set

import numpy as np
from placement_models import Job, PlacementRequest, RunningJob

from placement import catalog
from placement.speeds import Speeds, speed

#: A move may slow a job by at most this share of its speed now: enough for a swap (a job that loses little on a
#: P100 leaves its V100s to one that gains much), not for a move onto GPUs the job can barely run on
MAX_SLOWDOWN = 0.25


def movable(request: PlacementRequest, rj: RunningJob, models: Set[str | None]) -> bool:
    """Could running job rj move under policy.migration (the module docstring's conditions)? `models`: the
    canonical GPU models of the nodes with GPUs, added ones included."""
    policy = request.policy
    if not policy.migration or not rj.preemptible or not rj.pods or (rj.speeds is None and rj.workload is None):
        return False
    if any(t.quota is not None for t in request.teams) or any(c.quota is not None for c in request.cohorts):
        return False  # quotas: a move between scopes changes what a team borrows; not modelled yet
    if not _speed_differs(request, rj, models):
        return False
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


def _speed_differs(request: PlacementRequest, rj: RunningJob, models: Set[str | None]) -> bool:
    """Does rj's table give it different speeds on these GPU models? On one model, or where its table says it
    runs alike everywhere, a move gains nothing."""
    table = rj.speeds
    if table is None:
        table = next((w.speeds for w in request.workloads if w.name == rj.workload), None)
    if table is None:
        return False
    named = {found.name: v for m, v in table.items() if (found := catalog.lookup(m)) is not None}
    return len({named.get(m, 1.0) if m is not None else 1.0 for m in models}) > 1


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


def with_twins(request: PlacementRequest, models: Set[str | None]) -> PlacementRequest:
    """`request` with a twin after its pending jobs for each running job that could move on a cluster of these
    GPU models (the same object when none could). Twins are named as their running jobs: `twins` tells them
    apart."""
    if not request.policy.migration:
        return request
    found = []
    for rj in request.cluster.running:
        if movable(request, rj, models):
            try:
                found.append(twin(rj))
            except ValueError:
                continue  # pods no pending job's shape could hold (the wire bounds them apart): it stays put
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


def too_slow(speeds: Speeds, r: int, models: list[str | None], capacity: np.ndarray) -> np.ndarray:
    """Per node: would running job r lose more than MAX_SLOWDOWN of its speed now there (or has it no GPUs)? Its
    twin's pods go only to the other nodes."""
    table, pace = speeds.running[r], speeds.running_pace[r]
    floor = pace * (1.0 - MAX_SLOWDOWN) - 1e-9
    return np.array([capacity[n, 0] == 0 or speed(table, m) < floor for n, m in enumerate(models)], dtype=bool)
