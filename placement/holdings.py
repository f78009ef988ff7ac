"""What each team wants, is owed and holds once a placement is applied.

The quota, fairness and preemption terms, the greedy's quota ledger checks, the cost terms and the
plan's team and cost reports all count GPUs the same way: in GPU-equivalents (placement/teams.py),
a whole-GPU pod its GPUs, a MIG pod its instance's memory slices over its node's GPU's, a pod on a
shared GPU its share, a pod on a shared MIG instance its share of the instance's part; integers in
milli-GPU (`MILLI`) where a model or ledger needs them. Running jobs kept plus placed pods, per team,
optionally on a scope's nodes only; CPU (milli-CPU) and memory (MiB) as the problem counts them.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from placement_models import Task

from placement import catalog, devices
from placement.problem import Problem
from placement.solution import Placement
from placement.teams import (
    MILLI,
    UNLIMITED,
    Scope,
    entitlements,
    instance_share_milli,
    share_milli,
    slice_milli,
    to_units,
)


def task_milli(problem: Problem, t: int, nodes: np.ndarray | list[int]) -> np.ndarray:
    """Milli-GPU one pod of task t takes on each of `nodes`: whole GPUs × MILLI, its share, or its MIG
    instance's fraction of the node's GPU (0 where the node's model has no such instance)."""
    nodes = np.asarray(nodes, dtype=np.int64)
    spec = problem.tasks[t].spec
    if devices.is_shared(spec):
        return np.full(nodes.size, share_milli(spec.gpu_share or 0.0), dtype=np.int64)
    if devices.is_instance_share(spec):
        return np.array([instance_share_milli(spec.gpu_share or 0.0, m) for m in _mig_per_node(problem, spec)[nodes]
                         .tolist()], dtype=np.int64)
    if not devices.is_mig(spec):
        return np.full(nodes.size, int(problem.tasks[t].demand[0]) * MILLI, dtype=np.int64)
    return _mig_per_node(problem, spec)[nodes]


def _mig_per_node(problem: Problem, spec: Task) -> np.ndarray:
    """(N,) milli-GPU of a MIG task's instance per node, once per (profile, gpu_memory_gib) and problem."""
    key = (spec.mig_profile, spec.gpu_memory_gib)
    hit = problem.facts.mig_milli.get(key)
    if hit is None:
        per_model: dict[str | None, int] = {}
        out = np.zeros(problem.n_nodes, dtype=np.int64)
        for n, model in enumerate(problem.gpu_models):
            if model not in per_model:
                geo = catalog.mig_geometry(model) if model else None
                found = devices.profile_for(spec, geo)
                per_model[model] = slice_milli(geo, found) if geo is not None and found is not None else 0
            out[n] = per_model[model]
        hit = problem.facts.mig_milli[key] = out
    return hit


def pod_milli(problem: Problem, t: int, n: int) -> int:
    """Milli-GPU of one pod of task t on node n."""
    spec = problem.tasks[t].spec
    if devices.is_shared(spec):
        return share_milli(spec.gpu_share or 0.0)
    if devices.is_instance_share(spec):
        return instance_share_milli(spec.gpu_share or 0.0, int(_mig_per_node(problem, spec)[n]))
    if not devices.is_mig(spec):
        return int(problem.tasks[t].demand[0]) * MILLI
    return int(_mig_per_node(problem, spec)[n])


def pod_gpus(problem: Problem, t: int, n: int) -> float:
    """GPU-equivalents of one pod of task t on node n (what cost and reports count)."""
    return pod_milli(problem, t, n) / MILLI


def use_of(problem: Problem, counts: Mapping[tuple[int, int], int]) -> np.ndarray:
    """(N, 3) per node what pods (task, node) -> count take: milli-GPU, milli-CPU, MiB."""
    out = np.zeros((problem.n_nodes, 3), dtype=np.int64)
    for (t, n), k in counts.items():
        if k:
            demand = problem.tasks[t].demand
            out[n] += (pod_milli(problem, t, n) * k, int(demand[1]) * k, int(demand[2]) * k)
    return out


def running_use(problem: Problem, r: int) -> np.ndarray:
    """(len(nodes), 3) what running job r holds on each of its nodes (aligned with `running[r].nodes`):
    milli-GPU, milli-CPU, MiB."""
    key = id(problem.running)
    cached = problem.facts.running_use.get(key)
    if cached is None:
        cached = problem.facts.running_use[key] = tuple(_running_use(problem, info.index) for info in problem.running)
    return cached[r]


def _running_use(problem: Problem, r: int) -> np.ndarray:
    info = problem.running[r]
    index = problem.teams
    if index is not None and index.held:
        per = index.held[r]
        return np.array([per.get(n, np.zeros(3, dtype=np.int64)) for n in info.nodes.tolist()],
                        dtype=np.int64).reshape(len(info.nodes), 3)
    out = info.use.astype(np.int64).copy()  # no teams index: whole GPUs only
    out[:, 0] *= MILLI
    return out


def job_milli(problem: Problem, j: int) -> int:
    """Milli-GPU job j asks for: every pod, a MIG pod at its smallest fraction over its candidate nodes."""
    total = 0
    for t in problem.job_tasks[j]:
        task = problem.tasks[t]
        if devices.is_mig(task.spec) or devices.is_instance_share(task.spec):
            each = to_units(problem.gpu_value(t), 0, True)
        elif devices.is_shared(task.spec):
            each = share_milli(task.spec.gpu_share or 0.0)
        else:
            each = int(task.demand[0]) * MILLI
        total += each * task.replicas
    return total


def job_use(problem: Problem, j: int) -> np.ndarray:
    """(3,) what job j asks for in all: milli-GPU (as `job_milli`), milli-CPU, MiB."""
    cpu = sum(int(problem.tasks[t].demand[1]) * problem.tasks[t].replicas for t in problem.job_tasks[j])
    mem = sum(int(problem.tasks[t].demand[2]) * problem.tasks[t].replicas for t in problem.job_tasks[j])
    return np.array([job_milli(problem, j), cpu, mem], dtype=np.int64)


def team_demand(problem: Problem) -> np.ndarray:
    """(T,) GPU-equivalents each team wants: what its running jobs hold plus what its pending jobs ask for."""
    assert problem.teams is not None
    out = np.zeros(problem.teams.size)
    for r in problem.running:
        if r.team >= 0:
            out[r.team] += running_use(problem, r.index)[:, 0].sum() / MILLI
    for j, team in enumerate(problem.job_team):
        if team >= 0 and j not in problem.twins:  # a running job's twin wants what the job holds already
            out[team] += job_milli(problem, j) / MILLI
    return out


def problem_entitlements(problem: Problem) -> np.ndarray:
    """(T,) fair GPUs per team over the cluster's healthy GPUs (see placement/teams.py)."""
    index = problem.teams
    assert index is not None
    limit = np.where(index.limit >= UNLIMITED, np.inf, index.limit / MILLI)
    return entitlements(float(problem.capacity[:, 0].sum()), team_demand(problem), index.nominal / MILLI, limit,
                        index.weights, index.usage)


def held_after(problem: Problem, placement: Placement, mask: np.ndarray | None = None,
               resource: int = 0) -> np.ndarray:
    """(T,) what each team holds once the placement is applied (kept running + placed), on `mask` nodes:
    milli-GPU (resource 0), milli-CPU (1) or MiB (2)."""
    assert problem.teams is not None
    out = np.zeros(problem.teams.size, dtype=np.int64)
    for r in problem.running:
        if r.team >= 0 and r.index not in placement.evicted:
            use = running_use(problem, r.index)[:, resource]
            out[r.team] += int(use.sum() if mask is None else (use * mask[r.nodes]).sum())
    for (t, n), k in placement.counts.items():
        team = problem.job_team[problem.tasks[t].job]
        if team >= 0 and k and (mask is None or mask[n]):
            each = pod_milli(problem, t, n) if resource == 0 else int(problem.tasks[t].demand[resource])
            out[team] += each * k
    return out


def held_in(problem: Problem, placement: Placement, scope: Scope) -> np.ndarray:
    """(T,) what each team holds in a quota scope once the placement is applied (the scope's unit)."""
    return held_after(problem, placement, scope.mask, scope.resource)
