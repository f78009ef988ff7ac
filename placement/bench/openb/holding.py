"""A hold for the oldest starving pod in the loop with departures: ``cpsat-online-hold``.

Why this exists: an online policy retried every cycle in arrival order is FIFO with backfilling, and
backfilling has no memory. A pod that fits only a few nodes (an 8-GPU pod asking 120 cores and
700 GiB fits only the largest-memory ones) waits while every pod that departs from those nodes is
replaced by a smaller one that arrived later: in openb with departures such pods wait thousands of
hours. Kubernetes batch schedulers answer with a reservation (Volcano's `reserve` plugin, Slurm's
backfill reservation): once a pod has waited `hold_after_s`, the first such pod in arrival order
fences one node: no other pod is placed there until the held pod starts (there or anywhere else).

Which node: among the nodes that could hold the pod when empty, the one it is closest to fitting now
(fewest GPUs missing, then the least CPU and memory missing, as shares of the node), so the fence
drains as little as it can; the fence stays on that node until the pod starts. Only the node
choice of the inner policy changes: it never sees the fenced node, and the pod itself is tried in
arrival order as before. The loop tells the policy who waits through :meth:`HoldingPolicy.waiting`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from placement.bench.openb.cluster import ClusterState, Placement, ReplayContext
from placement.bench.openb.cpsat_online import CpsatOnlinePolicy
from placement.bench.openb.trace import GPU_MILLI, Pod

#: Simulated seconds a pod waits before it may fence a node.
HOLD_AFTER_S = 3600.0


class HoldingPolicy:
    """`cpsat-online` with one hold for the oldest pod that has waited `hold_after_s` (module docstring)."""

    name = "cpsat-online-hold"

    def __init__(self, seed: int = 0, hold_after_s: float = HOLD_AFTER_S) -> None:
        self.inner = CpsatOnlinePolicy(seed)
        self.hold_after_s = hold_after_s
        self.held: Pod | None = None
        self.fence: int | None = None
        self.holds = 0  #: fences set over the run
        self._empty: ClusterState | None = None

    def prepare(self, ctx: ReplayContext) -> None:
        self.inner.prepare(ctx)
        self._empty = ClusterState(ctx.nodes)
        self.held, self.fence, self.holds = None, None, 0

    def waiting(self, state: ClusterState, queue: Sequence[tuple[Pod, float]]) -> None:
        """Before a pass: the waiting pods in arrival order with the seconds each has waited."""
        if self.held is not None and any(pod is self.held for pod, _ in queue):
            return  # the fence stays until its pod starts
        self.held, self.fence = None, None
        for pod, waited in queue:
            if waited < self.hold_after_s:
                break  # arrival order: the rest waited less
            if state.feasible(pod).any():
                continue  # it fits now: this pass places it
            node = self._closest(state, pod)
            if node is not None:
                self.held, self.fence = pod, node
                self.holds += 1
            return

    def _closest(self, state: ClusterState, pod: Pod) -> int | None:
        assert self._empty is not None
        capable = np.flatnonzero(self._empty.feasible(pod))
        if capable.size == 0:
            return None
        nodes = state.nodes
        if pod.num_gpu == 0:
            gpus_short = np.zeros(capable.size)
        elif pod.num_gpu == 1:
            gpus_short = (state.idle[capable].max(axis=1) < pod.gpu_milli).astype(float)
        else:
            gpus_short = np.maximum(0, pod.num_gpu - (state.idle[capable] >= GPU_MILLI).sum(axis=1)).astype(float)
        cpu_short = np.maximum(0, pod.cpu - state.cpu_free[capable]) / np.maximum(nodes.cpu[capable], 1)
        mem_short = np.maximum(0, pod.mem - state.mem_free[capable]) / np.maximum(nodes.mem[capable], 1)
        order = np.lexsort((state.rank[capable], cpu_short + mem_short, gpus_short))
        return int(capable[order[0]])

    def choose(self, state: ClusterState, pod: Pod) -> Placement | None:
        if self.fence is None or pod is self.held:
            found = self.inner.choose(state, pod)
            if found is not None and pod is self.held:
                self.held, self.fence = None, None  # it starts: the fence is lifted
            return found
        self.inner.blocked = self.fence
        try:
            return self.inner.choose(state, pod)
        finally:
            self.inner.blocked = None
