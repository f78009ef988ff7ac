"""Device state of one node during the greedy, and the MIG options a pod has there.

The greedy tries each gang on a copy of the nodes it touches (`NodeState.copy`, copied on first
write) and commits it whole or drops it. MIG options are encoded as integers so the cheapest
free instance or re-partition of a node is a min over a cached array (`NodeAnswers`), not a
rescan of every GPU for every pod.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from functools import cache

import numpy as np

from placement.catalog import MigGeometry, MigProfile
from placement.devices.layouts import Layout, can_start, geometry_of, layout_problems, occupancy
from placement.devices.view import DeviceView


class GpuState:
    """One partitioned GPU during the greedy: instances by start, which of them are taken."""

    __slots__ = ("gpu", "origin", "inst", "busy", "shared", "_layout")

    def __init__(self, gpu: int, origin: Layout | None, occupied: Iterable[int]) -> None:
        self.gpu = gpu
        self.origin = origin  # layout before the plan; None: the GPU was whole
        self.inst: dict[int, str] = {s: name for name, s in origin or ()}
        self.busy: set[int] = set(occupied)
        self.shared: set[int] = set()  # starts of instances this plan makes shared (also busy)
        self._layout: Layout | None = None  # layout() of `inst`; reset by touch()

    def layout(self) -> Layout:
        """`inst` as a layout, sorted by start. Cached until `touch()`: the greedy asked 5.8 M times per plan
        at 1,024 nodes (mig-XL) and re-sorted each time; every write to `inst` must call touch()."""
        if self._layout is None:
            self._layout = tuple((self.inst[s], s) for s in sorted(self.inst))
        return self._layout

    def touch(self) -> None:
        """`inst` changed: forget the cached layout."""
        self._layout = None

    def changed(self) -> bool:
        """A new layout, or instances made shared (the wire format says so in the GPU's layout: a MIG change)."""
        return bool(self.shared) or self.layout() != self.origin

    def copy(self) -> GpuState:
        other = GpuState.__new__(GpuState)
        other.gpu, other.origin = self.gpu, self.origin
        other.inst, other.busy, other.shared = dict(self.inst), set(self.busy), set(self.shared)
        other._layout = self._layout  # a tuple: safe to share, and equal to the copied `inst`'s
        return other


class NodeState:
    """Device state of one node during the greedy (copied on first write inside a gang's trial)."""

    __slots__ = ("mig", "plain", "in_w", "whole_taken", "converted", "shared", "opened", "instances", "serial")

    def __init__(self, view: DeviceView, n: int) -> None:
        self.serial = 0  # 0: as the view has it; GreedyDevices.node() gives each writable state a fresh one
        self.mig = {g.gpu: GpuState(g.gpu, g.layout, (s for _, s in g.occupied)) for g in view.mig[n]}
        self.plain = list(view.plain[n])  # still whole and not partitioned by the plan
        # GPUs counted in whole-GPU capacity besides plain ones: idle partitioned ones (re-partitioning on)
        self.in_w = {g.gpu for g in view.mig[n] if g.idle} if view.changes else set()
        self.whole_taken = 0
        self.converted: set[int] = set()  # idle partitioned GPUs made whole
        self.shared = {g.gpu: [g.pods_left, g.parts_left, g.memory_left] for g in view.shared[n]}
        self.opened: list[int] = []  # plain GPUs this plan shares (policy.allow_sharing_changes), also in `shared`
        #: shared MIG instances, declared or made by this plan: (gpu, start) -> [pods, share parts, memory parts] left
        self.instances = {(i.gpu, i.start): [i.pods_left, i.parts_left, i.memory_left]
                          for i in view.shared_instances(n)}

    def copy(self) -> NodeState:
        other = NodeState.__new__(NodeState)
        other.mig = {g: s.copy() for g, s in self.mig.items()}
        other.plain, other.in_w, other.converted = list(self.plain), set(self.in_w), set(self.converted)
        other.whole_taken = self.whole_taken
        other.shared = {g: list(v) for g, v in self.shared.items()}
        other.opened = list(self.opened)
        other.instances = {k: list(v) for k, v in self.instances.items()}
        other.serial = 0  # set by GreedyDevices.node(), the only caller
        return other

    def plain_unclaimed(self) -> int:
        return len(self.plain) - self.whole_taken




#: A pod's choice in the greedy: (sort key, node, gpu, start); gpu -1: a plain GPU, partitioned now.
Option = tuple[tuple[int, ...], int, int, int]

SERIALS = itertools.count(1)
NONE = np.iinfo(np.int64).max
NODE_BITS = 21  # node index in the low bits of a code
#: repartition codes below this are options on GPUs the plan changed already (key[1] == 0)
CHANGED_BELOW = 4 << (8 + 10 + NODE_BITS)


def free_options(state: NodeState, n: int, p: MigProfile, free_ok: bool) -> list[Option]:
    """Free p instances of node n a pod could take; `free_ok`: node n has a whole GPU free."""
    options: list[Option] = []
    for g in state.mig.values():
        takes_w = g.gpu in state.in_w
        if g.gpu in state.converted or (takes_w and not free_ok):
            continue
        for s, name in g.inst.items():
            if name == p.name and s not in g.busy:
                options.append(((0, int(takes_w), -len(g.busy), n, g.gpu, s), n, g.gpu, s))
    return options


def repartition_node(state: NodeState, n: int, geo: MigGeometry, p: MigProfile, free_ok: bool,
                      budget: bool, mig_gpus: dict[tuple[Layout, frozenset[int], bool, bool], int] | None = None
                      ) -> list[Option]:
    """Re-partitions of node n that could take one p pod (identical GPUs: the first); `free_ok`: node n has a
    whole GPU free, `budget`: policy.max_mig_changes allows one more change; `mig_gpus`: `distinct_gpus(state)`
    when the caller has it."""
    options: list[Option] = []
    gpus = dict(distinct_gpus(state) if mig_gpus is None else mig_gpus)
    if state.plain_unclaimed() >= 1 and free_ok:
        gpus.setdefault(((), frozenset(), False, True), -1)  # a plain GPU, partitioned now
    for (layout, busy, changed, takes_w), gpu in gpus.items():
        if (takes_w and not free_ok) or (not changed and not budget):
            continue
        best = best_start(geo.model, p.name, layout, busy)
        if best is not None:
            destroyed, flex, s = best
            # already-changed GPUs first (no new change), then GPUs that stay out of whole-GPU capacity
            options.append(((1, int(not changed), int(takes_w), gpu < 0, destroyed, -flex, n, gpu, s), n, gpu, s))
    return options


def distinct_gpus(state: NodeState) -> dict[tuple[Layout, frozenset[int], bool, bool], int]:
    """(layout, busy starts, changed, in whole-GPU capacity) -> the first GPU so, of a node's partitioned GPUs
    not made whole."""
    gpus: dict[tuple[Layout, frozenset[int], bool, bool], int] = {}  # identical GPUs: the first
    for g in sorted(state.mig.values(), key=lambda g: g.gpu):
        if g.gpu not in state.converted:
            gpus.setdefault((g.layout(), frozenset(g.busy), g.changed(), g.gpu in state.in_w), g.gpu)
    return gpus


def free_code(option: Option) -> int:
    """An integer ordered as a free-instance key (0, takes_w, -busy, node, ...) is, for keys with takes_w 1."""
    key = option[0]
    assert key[0] == 0 and 0 <= -key[2] < 64
    return ((int(key[1]) << 6 | (63 + key[2])) << NODE_BITS) | option[1]


def repartition_code(option: Option) -> int:
    """An integer ordered as a re-partition key (1, not changed, takes_w, plain, destroyed, -flex, node, ...)
    is up to the node (a node's answer is its best option: GPU and start never decide between nodes)."""
    _, not_changed, takes_w, plain, destroyed, neg_flex, n, _, _ = option[0]
    assert 0 <= destroyed < 256 and 0 <= -neg_flex < 512
    high = ((int(not_changed) << 1 | int(takes_w)) << 1 | int(plain)) << 8 | destroyed
    return ((high << 10 | (512 + neg_flex)) << NODE_BITS) | n


def slices_of(geo: MigGeometry, name: str, start: int) -> range:
    p = geo.profile(name)
    assert p is not None
    return p.slices(start)


@cache
def best_start(model: str, profile: str, layout: Layout, busy: frozenset[int]) -> tuple[int, int, int] | None:
    """(instances destroyed, flexibility left, start) of the best start for a new p instance, or None.

    Flexibility = how many (profile, start) placements the slices left free still allow: a 3g at
    start 4 keeps slices 0-3 open for four 1g, at start 0 only three; a 1g goes to an odd corner.
    """
    geo = geometry_of(model)
    p = geo.profile(profile)
    assert p is not None
    best = None
    for s in p.starts:
        hit = [(name, st) for name, st in layout if set(slices_of(geo, name, st)) & set(p.slices(s))]
        if any(st in busy for _, st in hit):
            continue
        rest = [x for x in layout if x not in hit] + [(p.name, s)]
        if layout_problems(geo, rest):
            continue
        mask, counts, media = occupancy(geo, rest)
        flex = sum(can_start(q, st, mask, counts, media) for q in geo.profiles for st in q.starts)
        key = (len(hit), -flex, s)
        if best is None or key < best:
            best = key
    return None if best is None else (best[0], -best[1], best[2])
