"""The simulated cluster a replay runs on, and what a policy is handed: state, decisions, context.

Why this exists: the harness and every policy (the paper's peers and ours) share one picture of
the cluster, free CPU, memory and per-GPU idle milli as numpy arrays, and one checked way to
change it, :meth:`ClusterState.place`, which refuses an infeasible placement instead of
corrupting the state. The policy interfaces (:class:`OnlinePolicy`, :class:`BatchPolicy`) and the
:class:`ReplayContext` they are prepared with live here too, below every policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from placement.bench.openb.trace import GPU_MILLI, NodeTable, Pod, Trace

#: A decision: the node index and the GPU indices on it (empty for CPU-only pods).
#: Where a policy binds one pod: (node, GPU indices). Not `placement.solution.Placement`, the planner's pods per
#: (task, node): this simulator has its own, smaller currency.
Binding = tuple[int, tuple[int, ...]]


class InvalidPlacement(ValueError):
    """A policy returned a placement the cluster cannot take: a bug in the policy, never a fail."""


class ClusterState:
    """Free resources of every node, as numpy arrays so policies can score all nodes at once.

    ``idle`` is (nodes × max GPUs) idle milli per GPU; GPU slots a node does not have hold 0, which
    no GPU pod fits on and which adds nothing to any sum, so policies need no separate mask.
    ``version[n]`` grows whenever node ``n`` changes: policies may cache per-node scores and
    recompute only nodes whose version moved (FGD does).
    """

    def __init__(self, nodes: NodeTable, rank: np.ndarray | None = None) -> None:
        self.nodes = nodes
        n, g = nodes.size, max(nodes.max_gpus, 1)
        self.cpu_free = nodes.cpu.copy()
        self.mem_free = nodes.mem.copy()
        self.idle = np.where(np.arange(g)[None, :] < nodes.gpus[:, None], GPU_MILLI, 0).astype(np.int64)
        self.rank = np.arange(n, dtype=np.int64) if rank is None else np.asarray(rank, dtype=np.int64)
        self.version = np.zeros(n, dtype=np.int64)
        self.capacity_milli = GPU_MILLI * nodes.total_gpus
        self.used_milli = 0
        self._model_ok: dict[tuple[str, ...], np.ndarray] = {}

    def model_ok(self, spec: tuple[str, ...]) -> np.ndarray:
        """(N,) bool: nodes whose GPU model is allowed by ``spec`` (all nodes when spec is empty)."""
        mask = self._model_ok.get(spec)
        if mask is None:
            if spec:
                allowed = np.array([m in spec for m in self.nodes.models], dtype=bool)
                mask = allowed[self.nodes.model]
            else:
                mask = np.ones(self.nodes.size, dtype=bool)
            self._model_ok[spec] = mask
        return mask

    def feasible(self, pod: Pod) -> np.ndarray:
        """(N,) bool, the protocol's filter: CPU, memory, GPU model, and a GPU fit for GPU pods."""
        ok = (self.cpu_free >= pod.cpu) & (self.mem_free >= pod.mem)
        if pod.num_gpu == 0:
            return ok
        ok &= self.model_ok(pod.spec)
        if pod.num_gpu == 1:
            return ok & (self.idle.max(axis=1) >= pod.gpu_milli)
        return ok & ((self.idle >= GPU_MILLI).sum(axis=1) >= pod.num_gpu)

    def fitting_gpus(self, node: int, pod: Pod) -> np.ndarray:
        """GPU indices on ``node`` a one-GPU pod may use (idle ≥ its milli), in index order."""
        return np.flatnonzero(self.idle[node] >= pod.gpu_milli)

    def whole_gpus(self, node: int, count: int) -> tuple[int, ...]:
        """The ``count`` lowest-indexed fully idle GPUs: how whole-GPU pods are bound by every peer."""
        return tuple(int(i) for i in np.flatnonzero(self.idle[node] >= GPU_MILLI)[:count])

    def check(self, pod: Pod, placement: Binding) -> str | None:
        """Why ``placement`` is invalid for ``pod`` now, or None when the cluster can take it."""
        node, gpus = placement
        if not 0 <= node < self.nodes.size:
            return f"node index {node} out of range"
        if self.cpu_free[node] < pod.cpu or self.mem_free[node] < pod.mem:
            return f"node {self.nodes.names[node]} lacks CPU or memory"
        if pod.num_gpu and not self.model_ok(pod.spec)[node]:
            return f"node {self.nodes.names[node]} has a GPU model outside {pod.spec}"
        if len(gpus) != pod.num_gpu or len(set(gpus)) != len(gpus):
            return f"{len(gpus)} GPU indices for a pod of {pod.num_gpu} GPUs"
        for g in gpus:
            if not 0 <= g < self.nodes.gpus[node]:
                return f"GPU index {g} out of range on {self.nodes.names[node]}"
            need = pod.gpu_milli if pod.num_gpu == 1 else GPU_MILLI
            if self.idle[node, g] < need:
                return f"GPU {g} of {self.nodes.names[node]} has {self.idle[node, g]} idle milli, needs {need}"
        return None

    def place(self, pod: Pod, placement: Binding) -> None:
        """Bind ``pod``; raises :class:`InvalidPlacement` instead of corrupting the state."""
        why = self.check(pod, placement)
        if why is not None:
            raise InvalidPlacement(f"pod {pod.name}: {why}")
        node, gpus = placement
        self.cpu_free[node] -= pod.cpu
        self.mem_free[node] -= pod.mem
        for g in gpus:
            self.idle[node, g] -= pod.gpu_milli
        self.used_milli += pod.demand
        self.version[node] += 1


@dataclass(frozen=True)
class ReplayContext:
    """What a policy may know before the first arrival: the cluster, the original trace, the seed."""

    nodes: NodeTable
    trace: Trace
    seed: int


class OnlinePolicy(Protocol):
    """Sees one arrival at a time; returns a placement or None (the pod fails for good)."""

    name: str

    def prepare(self, ctx: ReplayContext) -> None: ...

    def choose(self, state: ClusterState, pod: Pod) -> Binding | None: ...


class BatchPolicy(Protocol):
    """Sees ``window`` arrived pods at once (the scheduler-cycle view); never moves a placed pod.

    The harness applies the returned placements in arrival order, checking each against the state
    left by the ones before, so a batch must be consistent in that order.
    """

    name: str
    window: int

    def prepare(self, ctx: ReplayContext) -> None: ...

    def choose_batch(self, state: ClusterState, pods: Sequence[Pod]) -> list[Binding | None]: ...
