"""Scarce nodes last: ``bench-cpsat-online-scarce``, this bench's cpsat-online
that keeps rare nodes for the pods only they take.

Why this exists: in the loop with departures (:mod:`placement.bench.openb.loop`) a node that a pod takes
is gone for the pod's whole lifetime, weeks for some openb pods. The default trace on 15 % of the
nodes has six nodes with 128 cores, 8 GPUs and over 600 GiB; five pods of 8 GPUs, 120 cores and
625-720 GiB fit nowhere else. cpsat-online's key (FGD's score, then the multi-copy fragmentation)
happily puts small long-lived pods there in the first half hour, and the five wait ~2,200 h for them
to leave. FGD cannot see it either (its typical pods have no memory and leave out the rarest 5 %);
its random tie-break just happened to leave the big nodes free.

The rule, from the cluster alone: a node is *scarce* when at most `SCARCE_SHARE` of the nodes have
at least its CPU, memory and GPUs (the node itself counts). A pod that fits some node that is not
scarce never goes to a scarce one; a pod that fits only scarce nodes takes one as cpsat-online would.
No look-ahead and no knowledge of the pods to come: the capability of the nodes alone says which
are rare, as best fit on machine size does in other schedulers.
"""

from __future__ import annotations

import numpy as np

from placement.bench.openb.cluster import Binding, ClusterState, ReplayContext
from placement.bench.openb.cpsat_online import CpsatOnlinePolicy
from placement.bench.openb.trace import NodeTable, Pod

#: A node is scarce when at most this share of the nodes can host whatever it can.
SCARCE_SHARE = 0.05


def scarce_nodes(nodes: NodeTable, share: float = SCARCE_SHARE) -> np.ndarray:
    """(N,) bool: nodes whose CPU, memory and GPUs together at most `share` of the nodes (itself included) match."""
    caps = np.stack([nodes.cpu, nodes.mem, nodes.gpus], axis=1)
    covers = (caps[None, :, :] >= caps[:, None, :]).all(axis=2).sum(axis=1)
    return covers <= max(1, int(share * nodes.size))


class ScarceLastPolicy:
    """cpsat-online, with scarce nodes offered only to pods that fit nothing else (module docstring)."""

    name = "bench-cpsat-online-scarce"

    def __init__(self, seed: int = 0, share: float = SCARCE_SHARE) -> None:
        self.inner = CpsatOnlinePolicy(seed)
        self.share = share
        self.scarce = np.zeros(0, dtype=bool)

    def prepare(self, ctx: ReplayContext) -> None:
        self.inner.prepare(ctx)
        self.scarce = scarce_nodes(ctx.nodes, self.share)

    def choose(self, state: ClusterState, pod: Pod) -> Binding | None:
        if (state.feasible(pod) & ~self.scarce).any():
            self.inner.blocked = self.scarce
        try:
            return self.inner.choose(state, pod)
        finally:
            self.inner.blocked = None
