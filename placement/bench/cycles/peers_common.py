"""What the peer schedulers share: best-fit gang placement on a private copy of the free GPUs, queue order.

Why this exists: every peer (:mod:`~placement.bench.cycles.peers`,
:mod:`~placement.bench.cycles.peers_tiresias`) places gangs the same way, so their differences in the
report come from their queueing rules, not from how each picks nodes. Free arrays are numpy int
arrays indexed by node; nothing here modifies an array it is given.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from placement.bench.cycles.state import TraceJob, pods_of


def pod_capacity(free: np.ndarray, size: int) -> int:
    """How many pods of ``size`` GPUs fit on ``free`` (each pod whole on one node)."""
    return int((free // size).sum())


def fits(free: np.ndarray, gpus: int, gpus_per_node: int) -> bool:
    """Whether a gang of ``gpus`` (as ``pods_of``) fits on ``free`` now."""
    pods = pods_of(gpus, gpus_per_node)
    return pod_capacity(free, pods[0]) >= len(pods)


def best_fit(free: np.ndarray, gpus: int, gpus_per_node: int,
             prefer: np.ndarray | None = None) -> dict[int, int] | None:
    """Best-fit placement of the gang's pods on ``free``: node -> GPUs, or None when it does not fit.

    Pod by pod, each pod takes the node with the fewest free GPUs that still holds it (ties go to the
    lowest ``prefer[n]`` when given, then to the lowest index). As pods are equal, that is the same
    as filling nodes in ascending order of free GPUs, each with as many pods as it holds, which is what
    is computed. Several pods may share a node. ``free`` is not modified."""
    pods = pods_of(gpus, gpus_per_node)
    size, k = pods[0], len(pods)
    ok = np.flatnonzero(free >= size)
    if not ok.size:
        return None
    keys = (ok, free[ok]) if prefer is None else (ok, prefer[ok], free[ok])
    order = ok[np.lexsort(keys)]
    caps = free[order] // size
    cum = np.cumsum(caps)
    if cum[-1] < k:
        return None
    last = int(np.searchsorted(cum, k))
    place: dict[int, int] = {}
    left = k
    for n, c in zip(order[: last + 1].tolist(), caps[: last + 1].tolist(), strict=True):
        take = min(c, left)
        place[int(n)] = take * size
        left -= take
    return place


class Packer:
    """A private copy of the free GPUs that placements are taken from.

    ``can`` remembers, per pod size, the fewest pods that did not fit: as long as GPUs are only taken,
    a gang of at least that many pods cannot fit either, so long queues cost one check per size.
    ``give`` (GPUs coming back, e.g. from a preemption) forgets that memory."""

    def __init__(self, free: np.ndarray, gpus_per_node: int) -> None:
        self.free = np.array(free, dtype=np.int64, copy=True)
        self.gpus_per_node = gpus_per_node
        self.total = int(self.free.sum())
        self._fails: dict[int, int] = {}

    def can(self, gpus: int) -> bool:
        if gpus > self.total:
            return False
        pods = pods_of(gpus, self.gpus_per_node)
        size, k = pods[0], len(pods)
        if k >= self._fails.get(size, math.inf):
            return False
        if pod_capacity(self.free, size) >= k:
            return True
        self._fails[size] = k
        return False

    def place(self, gpus: int) -> dict[int, int] | None:
        """Best-fit placement of a gang, taken from the free GPUs; None when it does not fit."""
        if not self.can(gpus):
            return None
        place = best_fit(self.free, gpus, self.gpus_per_node)
        assert place is not None
        self.take(place)
        return place

    def take(self, nodes: dict[int, int]) -> None:
        for n, g in nodes.items():
            self.free[n] -= g
            self.total -= g

    def give(self, nodes: dict[int, int]) -> None:
        for n, g in nodes.items():
            self.free[n] += g
            self.total += g
        self._fails.clear()


def by_priority(queue: Iterable[TraceJob]) -> list[TraceJob]:
    """Higher ``priority`` first, arrival order (the queue's order) among equals."""
    return sorted(queue, key=lambda j: -j.priority)


def team_of(job: TraceJob) -> str:
    """The job's team; jobs without one share the team ``"default"``."""
    return job.team if job.team is not None else "default"


def dense(nodes: dict[int, int], n: int) -> np.ndarray:
    """A node -> GPUs map as an array over ``n`` nodes."""
    out = np.zeros(n, dtype=np.int64)
    for node, g in nodes.items():
        out[node] += g
    return out


