"""An immutable, indexed view of one request: what is free where, and where each task may go.

Everything the model needs is computed here once, in integers (milli-CPU, MiB) and numpy arrays,
and every (task, node) pair that cannot host even one pod is filtered out *before* a variable
exists: presolve should never have to discover that a taint blocks a node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from models import ErrorList, Job, Node, PlacementRequest, Task
from placement import catalog

#: Resource dimensions in integer units: GPUs, milli-CPU, MiB of RAM.
DIMS = ("gpus", "cpu", "memory")


def cpu_units(cores: float, demand: bool) -> int:
    """Milli-CPU; demands round up and capacities round down, so integer packing is never optimistic."""
    x = cores * 1000.0
    return int(math.ceil(x - 1e-6)) if demand else int(math.floor(x + 1e-6))


def mem_units(gib: float, demand: bool) -> int:
    x = gib * 1024.0
    return int(math.ceil(x - 1e-6)) if demand else int(math.floor(x + 1e-6))


def effective_labels(node: Node, model_name: str | None) -> dict[str, str]:
    """The node's labels plus implicit ones a selector may use; explicit labels win."""
    labels = {"kubernetes.io/hostname": node.name}
    if node.pool:
        labels["placement/pool"] = node.pool
    if model_name:
        labels["placement/gpu-model"] = model_name
    labels.update(node.labels)
    return labels


@dataclass(frozen=True)
class TaskInfo:
    """One task of one pending job, with its demand and the nodes that can take at least one pod."""

    index: int
    job: int
    spec: Task
    demand: np.ndarray  # (3,) int64: GPUs, milli-CPU, MiB
    candidates: np.ndarray  # node indices, ascending
    max_per_node: np.ndarray  # aligned with candidates: pods that fit on the free node alone
    #: why nodes were filtered: stage name -> nodes left after that stage (for pending reasons)
    funnel: tuple[tuple[str, int], ...]

    @property
    def replicas(self) -> int:
        return self.spec.replicas

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class Problem:
    request: PlacementRequest
    nodes: tuple[Node, ...]
    node_index: dict[str, int]
    gpu_models: tuple[str | None, ...]  # canonical catalog names
    capacity: np.ndarray  # (N, 3) healthy capacity
    free: np.ndarray  # (N, 3) after running pods
    free_gpu_ids: tuple[tuple[int, ...], ...]  # healthy, unused GPU indices per node
    jobs: tuple[Job, ...]
    tasks: tuple[TaskInfo, ...]
    job_tasks: tuple[tuple[int, ...], ...]
    extras: dict[str, object] = field(default_factory=dict)

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    def gpu_empty(self) -> np.ndarray:
        """Nodes whose every healthy GPU is free: the whole nodes big gangs need."""
        return (self.capacity[:, 0] > 0) & (self.free[:, 0] == self.capacity[:, 0])

    def job_gpus(self, j: int) -> int:
        return sum(int(self.tasks[t].demand[0]) * self.tasks[t].replicas for t in self.job_tasks[j])


def build(request: PlacementRequest) -> Problem:
    """Index the request; unknown GPU models are reported with the list of known ones."""
    nodes = tuple(request.cluster.nodes)
    node_index = {n.name: i for i, n in enumerate(nodes)}
    errors = ErrorList("PlacementRequest")
    models: list[str | None] = []
    memory = np.zeros(len(nodes))
    for i, n in enumerate(nodes):
        if n.gpu_model is None:
            models.append(None)
            continue
        found = catalog.lookup(n.gpu_model)
        if found is None:
            errors.add(("cluster", "nodes", i, "gpu_model"),
                       f"unknown GPU model '{n.gpu_model}' (known: {', '.join(catalog.known_models())})",
                       n.gpu_model)
            models.append(None)
        else:
            models.append(found.name)
            memory[i] = found.memory_gib
    errors.raise_if_any()

    capacity = np.array(
        [[n.gpus - len(n.unhealthy_gpus), cpu_units(n.cpu, False), mem_units(n.memory_gib, False)] for n in nodes],
        dtype=np.int64,
    ).reshape(len(nodes), 3)
    used = np.zeros_like(capacity)
    held: list[set[int]] = [set(n.unhealthy_gpus) for n in nodes]
    for job in request.cluster.running:
        for pod in job.pods:
            i = node_index[pod.node]
            healthy_taken = [g for g in pod.gpus if g not in nodes[i].unhealthy_gpus]
            used[i] += (len(healthy_taken), cpu_units(pod.cpu, True), mem_units(pod.memory_gib, True))
            held[i].update(pod.gpus)
    free = np.maximum(capacity - used, 0)
    free_ids = tuple(tuple(g for g in range(n.gpus) if g not in held[i]) for i, n in enumerate(nodes))

    labels = [effective_labels(n, m) for n, m in zip(nodes, models, strict=True)]
    tasks: list[TaskInfo] = []
    job_tasks: list[tuple[int, ...]] = []
    for j, job in enumerate(request.jobs):
        ids = []
        for spec in job.tasks:
            ids.append(len(tasks))
            tasks.append(_task_info(len(tasks), j, spec, nodes, labels, memory, free))
        job_tasks.append(tuple(ids))
    return Problem(
        request=request, nodes=nodes, node_index=node_index, gpu_models=tuple(models), capacity=capacity,
        free=free, free_gpu_ids=free_ids, jobs=tuple(request.jobs), tasks=tuple(tasks),
        job_tasks=tuple(job_tasks),
    )


def _task_info(index: int, job: int, spec: Task, nodes: tuple[Node, ...], labels: list[dict[str, str]],
               memory: np.ndarray, free: np.ndarray) -> TaskInfo:
    demand = np.array([spec.gpus, cpu_units(spec.cpu, True), mem_units(spec.memory_gib, True)], dtype=np.int64)
    n = len(nodes)
    funnel: list[tuple[str, int]] = [("nodes", n)]
    ok = np.ones(n, dtype=bool)
    if spec.node_selector:
        sel = spec.node_selector.items()
        ok &= np.array([all(lab.get(k) == v for k, v in sel) for lab in labels], dtype=bool)
        funnel.append(("node_selector", int(ok.sum())))
    ok &= np.array([_tolerated(spec, node) for node in nodes], dtype=bool)
    funnel.append(("taints", int(ok.sum())))
    if spec.gpus > 0:
        ok &= np.array([node.gpus > 0 for node in nodes], dtype=bool)
        funnel.append(("has_gpus", int(ok.sum())))
        if spec.gpu_memory_gib is not None:
            ok &= memory >= spec.gpu_memory_gib - 1e-9
            funnel.append(("gpu_memory", int(ok.sum())))
    with np.errstate(divide="ignore"):
        per_dim = np.where(demand > 0, free // np.maximum(demand, 1), np.iinfo(np.int64).max)
    fit = np.minimum(per_dim.min(axis=1), spec.replicas)
    ok &= fit >= 1
    funnel.append(("free_capacity", int(ok.sum())))
    cand = np.flatnonzero(ok)
    return TaskInfo(index=index, job=job, spec=spec, demand=demand, candidates=cand,
                    max_per_node=fit[cand].astype(np.int64), funnel=tuple(funnel))


def _tolerated(spec: Task, node: Node) -> bool:
    """NoSchedule and NoExecute taints block unless tolerated; PreferNoSchedule only prefers."""
    return all(
        taint.effect == "PreferNoSchedule" or any(t.tolerates(taint) for t in spec.tolerations)
        for taint in node.taints
    )
