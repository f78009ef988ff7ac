"""Making the sparse openb trace contend, deterministically: arrival-gap compression and a node subset.

Why this exists: the departures replay (:mod:`placement.bench.openb.loop`) judges a scheduler loop
only if pods queue, and in real time they never do; how the trace is squeezed decides every number,
so it lives apart, documented and tested. The choices and why are in the docstring of
:mod:`placement.bench.openb.loop` ("Contention, deterministic").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from placement.bench.openb.loop import LoopPod
from placement.bench.openb.trace import NodeTable


def subset_nodes(nodes: NodeTable, frac: float) -> NodeTable:
    """``frac`` of the nodes of every (model, GPUs) group, evenly spaced in name order, at least one each."""
    if not 0 < frac <= 1:
        raise ValueError(f"node fraction must be in (0, 1], got {frac}")
    if frac == 1:
        return nodes
    keep: list[int] = []
    groups: dict[tuple[int, int], list[int]] = {}
    for i in range(nodes.size):
        groups.setdefault((int(nodes.model[i]), int(nodes.gpus[i])), []).append(i)
    for members in groups.values():
        k = max(1, round(len(members) * frac))
        keep += [members[(j * len(members)) // k] for j in range(k)]
    idx = np.array(sorted(keep), dtype=np.int64)
    return NodeTable(
        names=tuple(nodes.names[i] for i in idx),
        cpu=nodes.cpu[idx].copy(),
        mem=nodes.mem[idx].copy(),
        gpus=nodes.gpus[idx].copy(),
        model=nodes.model[idx].copy(),
        models=nodes.models,
    )


#: In a compressed replay, a gap between consecutive arrivals longer than this (trace seconds) counts as
#: this long before scaling: the default trace trickles ~26 pods over its first ~2,750 h, then ~8,100
#: over ~830 h; uncapped, that idle head would be most of any window averaged over.
GAP_CAP_S = 3600.0


def offered_load(pods: Sequence[LoopPod], capacity_milli: int, clip: bool = True) -> float:
    """Σ demand · lifetime / (capacity · arrival span); NaN when the arrivals span no time.

    ``clip`` (the default, what ``--load`` sets) counts each lifetime only up to the last arrival:
    it is then the mean share of capacity the pods would hold over the arrivals if every pod started
    on arrival, the ceiling of the time-averaged allocation. Unclipped, a few pods that live for
    weeks would make up most of it (on openb ~90 % of the GPU-hours) while asking little at any time.
    """
    if not pods:
        return math.nan
    last = pods[-1].arrival
    span = last - pods[0].arrival
    if span <= 0:
        return math.nan
    work = sum(p.pod.demand * (min(p.lifetime, last - p.arrival) if clip else p.lifetime) for p in pods)
    return work / (capacity_milli * span)


def compress(pods: Sequence[LoopPod], capacity_milli: int, load: float | None) -> tuple[list[LoopPod], float]:
    """The pods with arrival gaps capped (:data:`GAP_CAP_S`) then scaled by one factor ``c``, lifetimes kept,
    so that the clipped :func:`offered_load` is ``load``; and ``c``. No ``load``: the trace as it is.

    The clipped load only grows as ``c`` shrinks, so ``c`` is found by bisection (deterministic). Its
    ceiling, every pod arriving at once, is Σ demand·(share of the span left after it) / capacity; a
    ``load`` above it raises ValueError (a smaller cluster, ``node_frac``, raises the ceiling).
    """
    if load is None:
        return list(pods), 1.0
    if not load > 0 or not math.isfinite(load):
        raise ValueError(f"--load must be a positive number, got {load}")
    if len(pods) < 2:
        raise ValueError("--load needs at least two pods to compress")
    t = [0.0]
    for a, b in zip(pods, pods[1:], strict=False):
        t.append(t[-1] + min(b.arrival - a.arrival, GAP_CAP_S))
    if t[-1] <= 0:
        raise ValueError("--load: the pods all arrive at the same time, there is nothing to compress")
    t0 = pods[0].arrival

    def at(c: float) -> list[LoopPod]:
        return [LoopPod(p.pod, t0 + x * c, p.lifetime) for p, x in zip(pods, t, strict=True)]

    total = float(sum(p.pod.demand for p in pods))
    ceiling = sum(p.pod.demand * (t[-1] - x) for p, x in zip(pods, t, strict=True)) / (t[-1] * capacity_milli)
    if total == 0 or load >= ceiling:
        raise ValueError(f"--load {load:g} is out of reach: even with every pod arriving at once the offered load "
                         f"is {ceiling:.3f} on this cluster; ask less or shrink the cluster with --node-frac")
    lo, hi = 0.0, 1.0
    while offered_load(at(hi), capacity_milli) > load:  # grow until the load is below the target
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        if offered_load(at(mid), capacity_milli) > load:
            lo = mid
        else:
            hi = mid
    return at(hi), hi


def demand_profile(pods: Sequence[LoopPod], capacity_milli: int) -> tuple[float, float]:
    """Mean and peak % of capacity asked by the running pods if every pod started on arrival, over the arrivals."""
    if len(pods) < 2:
        return math.nan, math.nan
    lo, hi = pods[0].arrival, pods[-1].arrival
    ev = sorted([(p.arrival, p.pod.demand) for p in pods] + [(p.arrival + p.lifetime, -p.pod.demand) for p in pods])
    level = area = peak = 0.0
    prev = lo
    for t, d in ev:
        t = min(max(t, lo), hi)
        area += level * (t - prev)
        prev = t
        level += d
        peak = max(peak, level)
    span = hi - lo
    return (100.0 * area / (capacity_milli * span) if span > 0 else math.nan), 100.0 * peak / capacity_milli
