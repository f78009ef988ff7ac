"""Per-GPU bookkeeping for GPUs that several pods share: MIG instances and time-sliced/MPS GPUs.

Whole-GPU pods are counted per node (problem.free); pods that take part of a GPU need to know
*which* GPU and, for MIG, which slots: this module keeps that ledger, for every stage that needs it.

* **Legal layouts** (HARDWARE.md §1.3): instances occupy consecutive memory slices from a legal
  start, no two share a slice, per-profile counts are capped, at most one media (`+me`, whole-GPU)
  instance per GPU. `configs` enumerates, per GPU situation (the instances running pods hold, the
  free ones, the profiles pending pods want), every layout worth considering, reduced to the
  Pareto-maximal supplies of wanted instances: exact for pods that only care *how many* instances
  of a profile a node offers, and small (a few dozen per situation, cached).
* **The view** (`build`): per node, healthy partitioned GPUs (occupied / free instances), shared
  GPUs (what running pods left), and the *plain* GPUs whole-GPU pods may take. Whole-GPU capacity
  (problem.free[:, 0]) counts plain GPUs, plus idle partitioned GPUs when re-partitioning is allowed
  (they may be made whole again); it never counts a partitioned or shared GPU otherwise. With
  `policy.allow_sharing_changes` a plain GPU may also become a shared GPU (`fresh_share`): the
  whole-GPU capacity it leaves is the same plain GPU, so MIG, sharing and whole pods compete for it.
* **Candidates** (`restrict`): a MIG or shared pod's nodes are filtered before any variable exists.
* **Greedy** (`GreedyDevices`): first-fit into free instances and shares, then (when allowed) the
  cheapest re-partition or a newly shared plain GPU; the baseline planner uses it, and so do pending reasons.
* **Decode** (`pod_picks`, `whole_gpu_ids`, `mig_changes`, `sharing_changes`, `attach`): the exact,
  cheap step from per-node counts and per-GPU layouts to concrete GPU indices, instances and shares.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from dataclasses import field as _field
from functools import cache
from typing import TYPE_CHECKING

import numpy as np
from placement_models import (
    Assignment,
    ErrorList,
    GpuSharing,
    MigChange,
    MigInstance,
    MigSlot,
    Node,
    PlacementRequest,
    SharingChange,
    Task,
)

from placement import catalog
from placement.catalog import MigGeometry, MigProfile

if TYPE_CHECKING:
    from placement.problem import Problem, TaskInfo
    from placement.solution import Placement

#: One MIG instance: (profile name, first memory slice). A layout is a tuple of them, sorted by start.
Instance = tuple[str, int]
Layout = tuple[Instance, ...]

#: Candidate-filter stages this module adds to a task's funnel (explain.py turns them into reasons).
STAGES = ("mig_profile", "mig_room", "shared_gpus", "share_room")

MILLI = 1000


def _geo(model: str) -> MigGeometry:
    found = catalog.lookup(model)
    assert found is not None and found.mig is not None, model
    return found.mig


def _sorted(layout: Iterable[Instance]) -> Layout:
    return tuple(sorted(layout, key=lambda i: i[1]))


# --------------------------------------------------------------------------------------------
# Legal layouts


def layout_problems(geo: MigGeometry, layout: Iterable[Instance]) -> list[tuple[int, str, str]]:
    """(index in the layout, field, reason) for every rule an instance breaks; empty when legal."""
    out: list[tuple[int, str, str]] = []
    used: dict[int, Instance] = {}
    counts: dict[str, int] = {}
    media: Instance | None = None
    for k, (name, start) in enumerate(layout):
        p = geo.profile(name)
        if p is None:
            out.append((k, "profile", f"{geo.model} has no MIG profile '{name}' "
                        f"(profiles: {', '.join(q.name for q in geo.profiles)})"))
            continue
        if start not in p.starts:
            out.append((k, "start", f"{p.name} starts at memory slice {_or(p.starts)} on {geo.model}, not {start}"))
            continue
        clash = sorted({used[m] for m in p.slices(start) if m in used}, key=lambda i: i[1])
        if clash:
            out.append((k, "start", f"{p.name}@{start} overlaps {', '.join(f'{n}@{s}' for n, s in clash)} "
                        "(instances may not share a memory slice)"))
            continue
        counts[p.name] = counts.get(p.name, 0) + 1
        if counts[p.name] > p.max_count:
            out.append((k, "profile", f"more than {p.max_count} {p.name} instance(s) on one GPU"))
            continue
        if p.media and media is not None:
            out.append((k, "profile", f"{p.name} and {media[0]}@{media[1]} both need the GPU's single media "
                        "engine set (at most one +me or whole-GPU instance per GPU)"))
            continue
        media = (p.name, start) if p.media else media
        used.update(dict.fromkeys(p.slices(start), (p.name, start)))
    return out


def _or(values: Iterable[int]) -> str:
    v = [str(x) for x in values]
    return v[0] if len(v) == 1 else ", ".join(v[:-1]) + " or " + v[-1]


def _state(geo: MigGeometry, layout: Iterable[Instance]) -> tuple[int, dict[str, int], bool]:
    """(bitmask of used memory slices, count per profile, media engine taken) of a legal layout."""
    mask, counts, media = 0, {}, False
    for name, start in layout:
        p = geo.profile(name)
        assert p is not None
        mask |= _bits(p, start)
        counts[p.name] = counts.get(p.name, 0) + 1
        media = media or p.media
    return mask, counts, media


def _bits(p: MigProfile, start: int) -> int:
    return ((1 << p.memory_slices) - 1) << start


def _fits(p: MigProfile, start: int, mask: int, counts: dict[str, int], media: bool) -> bool:
    return (start in p.starts and not mask & _bits(p, start) and counts.get(p.name, 0) < p.max_count
            and not (p.media and media))


@cache
def completions(model: str, fixed: Layout, relevant: tuple[str, ...]) -> tuple[Layout, ...]:
    """Every set of instances of `relevant` profiles that can join `fixed` legally (the empty set too).

    Slice by slice: leave it empty or start an instance there. Each set comes out exactly once; for
    the whole 8-slice profile family that is a few thousand sets, for the profiles pods ask, far fewer.
    """
    geo = _geo(model)
    profiles = [p for p in geo.profiles if p.name in relevant]
    mask0, counts0, media0 = _state(geo, fixed)
    out: list[Layout] = []

    def rec(m: int, mask: int, counts: dict[str, int], media: bool, chosen: list[Instance]) -> None:
        if m >= geo.memory_slices:
            out.append(tuple(chosen))
            return
        if mask >> m & 1:
            rec(m + 1, mask, counts, media, chosen)
            return
        rec(m + 1, mask, counts, media, chosen)
        for p in profiles:
            if _fits(p, m, mask, counts, media):
                counts[p.name] = counts.get(p.name, 0) + 1
                chosen.append((p.name, m))
                rec(m + p.memory_slices, mask | _bits(p, m), counts, media or p.media, chosen)
                chosen.pop()
                counts[p.name] -= 1

    rec(0, mask0, dict(counts0), media0, [])
    return tuple(out)


@dataclass(frozen=True)
class Config:
    """One choice for one GPU: its layout (None: whole, MIG off), the free instances it offers per wanted
    profile, and whether it differs from what the GPU has now."""

    layout: Layout | None
    supply: tuple[int, ...]
    changed: bool

    @property
    def whole(self) -> bool:
        return self.layout is None


@cache
def configs(model: str, occupied: Layout, free: Layout | None, relevant: tuple[str, ...], changes: bool,
            whole_ok: bool) -> tuple[Config, ...]:
    """The layouts worth considering for a GPU, current first.

    `free` None: the GPU is whole now. Without `changes`, only the current layout. With them: the
    whole GPU (when no instance is occupied and `whole_ok`), and every legal layout that keeps the
    occupied instances, reduced to the Pareto-maximal supplies of `relevant` instances that beat
    the current layout somewhere. Among layouts with the same supply, the one destroying the fewest
    free instances is kept (free instances no pod needs stay where the slices allow).
    """
    zero = (0,) * len(relevant)
    if free is None:
        current = Config(None, zero, False)
    else:
        current = Config(_sorted(occupied + free), _supply(free, relevant), False)
    out = [current]
    if not changes:
        return tuple(out)
    if free is not None and not occupied and whole_ok:
        out.append(Config(None, zero, True))
    geo = _geo(model)
    best: dict[tuple[int, ...], tuple[int, Layout]] = {}
    for extra in completions(model, occupied, relevant):
        mask, counts, media = _state(geo, occupied + extra)
        kept: list[Instance] = []
        for name, start in free or ():
            p = geo.profile(name)
            assert p is not None
            if _fits(p, start, mask, counts, media):
                kept.append((name, start))
                mask |= _bits(p, start)
                counts[p.name] = counts.get(p.name, 0) + 1
                media = media or p.media
        layout = _sorted(occupied + extra + tuple(kept))
        if layout == current.layout:
            continue
        supply = _supply(extra + tuple(kept), relevant)
        if supply == zero or (current.layout is not None and _dominated(supply, current.supply)):
            continue
        destroyed = len(free or ()) - len(kept)
        if supply not in best or destroyed < best[supply][0]:
            best[supply] = (destroyed, layout)
    front = [s for s in best if not any(o != s and _dominated(s, o) for o in best)]
    out.extend(Config(best[s][1], s, True) for s in sorted(front, reverse=True))
    return tuple(out)


def _supply(layout: Iterable[Instance], relevant: tuple[str, ...]) -> tuple[int, ...]:
    names = [name for name, _ in layout]
    return tuple(names.count(r) for r in relevant)


def _dominated(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return all(x <= y for x, y in zip(a, b, strict=True))


def max_instances(model: str, occupied: Layout, free: Layout | None, profile: str, changes: bool) -> int:
    """The most free `profile` instances this GPU can offer (after a re-partition, when allowed)."""
    return max(c.supply[0] for c in configs(model, occupied, free, (profile,), changes, False))


# --------------------------------------------------------------------------------------------
# The view of one request


@dataclass(frozen=True)
class MigGpu:
    """A healthy partitioned GPU: instances running pods hold (never move) and free ones."""

    node: int
    gpu: int
    occupied: Layout
    free: Layout

    @property
    def layout(self) -> Layout:
        return _sorted(self.occupied + self.free)

    @property
    def idle(self) -> bool:
        return not self.occupied


@dataclass(frozen=True)
class SharedGpu:
    """A healthy time-sliced/MPS GPU and what its running pods leave: pods, milli-GPU, MiB of GPU memory."""

    node: int
    gpu: int
    mode: str
    replicas: int
    pods_left: int
    milli_left: int
    mib_left: int
    memory_gib: float  # the model's


@dataclass(frozen=True)
class DeviceView:
    changes: bool  # policy.allow_mig_changes
    max_changes: int | None
    models: tuple[str | None, ...]  # canonical model per node
    mig: tuple[tuple[MigGpu, ...], ...]  # per node
    shared: tuple[tuple[SharedGpu, ...], ...]  # per node
    plain: tuple[tuple[int, ...], ...]  # per node: healthy, unheld, neither partitioned nor shared
    whole_free: np.ndarray  # (N,) GPUs whole-GPU pods may count on (see module doc)
    #: policy.allow_sharing_changes (with a cap above zero): plain GPUs may become shared GPUs
    sharing_changes: bool = False
    max_sharing_changes: int | None = None
    sharing_default: GpuSharing = GpuSharing(mode="time-slicing", replicas=8)
    #: answers derived from the view alone (see `_mig_rooms`); not an init field, so `replace` starts afresh
    memo: dict[object, object] = _field(default_factory=dict, init=False, compare=False, repr=False)

    def geometry(self, n: int) -> MigGeometry | None:
        model = self.models[n]
        return catalog.mig_geometry(model) if model else None

    def convertible(self, n: int) -> int:
        """Plain GPUs of node n the plan may turn into shared GPUs (0 when sharing changes are off)."""
        return len(self.plain[n]) if self.sharing_changes else 0

    def fresh_share(self, n: int) -> SharedGpu:
        """What a plain GPU of node n offers once the plan shares it (policy.sharing_default); node and gpu
        are -1: one template per GPU model serves every node and GPU of it."""
        return _fresh(self.models[n] or "", self.sharing_default.mode, self.sharing_default.replicas)

    @property
    def active(self) -> bool:
        return any(self.mig) or any(self.shared)


def build(request: PlacementRequest, nodes: tuple[Node, ...], models: tuple[str | None, ...]) -> DeviceView:
    """Index partitioned and shared GPUs; MIG layouts and shares are checked against the catalog here
    (models/ cannot read it), with the path of the offending field."""
    errors = ErrorList("PlacementRequest")
    index = {n.name: i for i, n in enumerate(nodes)}
    occupied: dict[tuple[int, int], set[int]] = {}
    held: list[set[int]] = [set(n.unhealthy_gpus) for n in nodes]
    share_use: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (node, gpu) -> [(milli, mib)]
    for job in request.cluster.running:
        for pod in job.pods:
            i = index[pod.node]
            if pod.mig is not None:
                occupied.setdefault((i, pod.mig.gpu), set()).add(pod.mig.start)
            elif pod.gpu_share is not None:
                model = catalog.lookup(models[i] or "")
                gib = pod.gpu_memory_gib if pod.gpu_memory_gib is not None else pod.gpu_share * (
                    model.memory_gib if model else 0.0)
                share_use.setdefault((i, pod.gpus[0]), []).append((_milli(pod.gpu_share), _mib(gib)))
            else:
                held[i].update(pod.gpus)
    mig: list[tuple[MigGpu, ...]] = []
    shared: list[tuple[SharedGpu, ...]] = []
    plain: list[tuple[int, ...]] = []
    for i, node in enumerate(nodes):
        mig.append(_node_mig(errors, i, node, models[i], occupied))
        shared.append(_node_shared(errors, i, node, models[i], share_use))
        held[i].update(node.mig, node.sharing)
        plain.append(tuple(g for g in range(node.gpus) if g not in held[i]))
    known = catalog.profile_names()
    for j, job in enumerate(request.jobs):
        for k, task in enumerate(job.tasks):
            if is_mig(task) and not task.mig_auto and catalog.normalize_profile(task.mig_profile or "") not in known:
                errors.add(("jobs", j, "tasks", k, "mig_profile"), f"unknown MIG profile '{task.mig_profile}' "
                           "(a name like 1g.10gb, 3g.40gb, 1g.10gb+me, or 'auto')", task.mig_profile)
    errors.raise_if_any()
    policy = request.policy
    changes = policy.allow_mig_changes
    whole = np.array([len(p) + (sum(g.idle for g in m) if changes else 0) for p, m in zip(plain, mig, strict=True)],
                     dtype=np.int64)
    return DeviceView(changes=changes, max_changes=policy.max_mig_changes, models=models, mig=tuple(mig),
                      shared=tuple(shared), plain=tuple(plain), whole_free=whole,
                      sharing_changes=policy.allow_sharing_changes and policy.max_sharing_changes != 0,
                      max_sharing_changes=policy.max_sharing_changes, sharing_default=policy.sharing_default)


@cache
def _fresh(model: str, mode: str, replicas: int) -> SharedGpu:
    found = catalog.lookup(model) if model else None
    memory = found.memory_gib if found else 0.0
    return SharedGpu(node=-1, gpu=-1, mode=mode, replicas=replicas, pods_left=replicas, milli_left=MILLI,
                     mib_left=_mib(memory), memory_gib=memory)


def _milli(share: float) -> int:
    return int(math.ceil(share * MILLI - 1e-6))


def _mib(gib: float) -> int:
    return int(math.ceil(gib * 1024 - 1e-6))


def _node_mig(errors: ErrorList, i: int, node: Node, model: str | None,
              occupied: dict[tuple[int, int], set[int]]) -> tuple[MigGpu, ...]:
    if not node.mig:
        return ()
    base = ("cluster", "nodes", i, "mig")
    geo = catalog.mig_geometry(model)
    if geo is None:
        errors.add(base, f"GPU model '{node.gpu_model}' has no MIG (MIG models: {', '.join(catalog.mig_models())})",
                   node.gpu_model)
        return ()
    out = []
    for g in sorted(node.mig):
        layout = [(i.profile, i.start) for i in node.mig[g]]
        problems = layout_problems(geo, layout)
        for k, field, reason in problems:
            errors.add((*base, g, k, field), reason, layout[k][1] if field == "start" else layout[k][0])
        if problems or g in node.unhealthy_gpus:
            continue
        canon = [(_canonical(geo, name), start) for name, start in layout]
        busy = occupied.get((i, g), set())
        out.append(MigGpu(node=i, gpu=g, occupied=_sorted(x for x in canon if x[1] in busy),
                          free=_sorted(x for x in canon if x[1] not in busy)))
    return tuple(out)


def _canonical(geo: MigGeometry, name: str) -> str:
    p = geo.profile(name)
    assert p is not None
    return p.name


def _node_shared(errors: ErrorList, i: int, node: Node, model: str | None,
                 share_use: dict[tuple[int, int], list[tuple[int, int]]]) -> tuple[SharedGpu, ...]:
    found = catalog.lookup(model) if model else None
    out = []
    for g in sorted(node.sharing):
        spec = node.sharing[g]
        used = share_use.get((i, g), [])
        memory = found.memory_gib if found else 0.0
        mib_left = _mib(memory) - sum(m for _, m in used)
        if mib_left < 0:
            errors.add(("cluster", "nodes", i, "sharing", g), f"running pods on GPU {g} use "
                       f"{sum(m for _, m in used) / 1024:g} GiB of GPU memory, more than the {memory:g} GiB of "
                       f"{model} (time-slicing has no memory isolation)", None)
        if g in node.unhealthy_gpus:
            continue
        out.append(SharedGpu(node=i, gpu=g, mode=spec.mode, replicas=spec.replicas,
                             pods_left=spec.replicas - len(used), milli_left=MILLI - sum(m for m, _ in used),
                             mib_left=mib_left, memory_gib=memory))
    return tuple(out)


# --------------------------------------------------------------------------------------------
# Tasks


def is_mig(spec: Task) -> bool:
    return spec.mig_profile is not None


def is_shared(spec: Task) -> bool:
    return spec.gpu_share is not None


def uses_devices(spec: Task) -> bool:
    return is_mig(spec) or is_shared(spec)


#: profile_for answers by (geometry, mig_profile, gpu_memory_gib): the geometry is kept in the value and
#: compared by identity, so a geometry that is not the catalog's own can never get another's answer.
_PROFILES: dict[tuple[int, str, float | None], tuple[MigGeometry, MigProfile | None]] = {}


def profile_for(spec: Task, geo: MigGeometry | None) -> MigProfile | None:
    """The instance a MIG pod takes on a GPU model: the named profile, or for `auto` the smallest that fits.

    Memoized: a plan at 1,024 nodes (mig-XL) asked 7.2 M times, once per pod and candidate node, while a
    cluster has a handful of models and a request a handful of profiles (the answer depends on nothing else).
    """
    if geo is None or spec.mig_profile is None:
        return None
    key = (id(geo), spec.mig_profile, spec.gpu_memory_gib)
    hit = _PROFILES.get(key)
    if hit is not None and hit[0] is geo:
        return hit[1]
    found = _profile_for(spec, geo)
    if len(_PROFILES) > 4096:  # a long-running service sees new specs forever; the live set is small
        _PROFILES.clear()
    _PROFILES[key] = (geo, found)
    return found


def _profile_for(spec: Task, geo: MigGeometry) -> MigProfile | None:
    if spec.mig_auto:
        return geo.smallest_fitting(spec.gpu_memory_gib or 0.0)
    p = geo.profile(spec.mig_profile)
    if p is not None and spec.gpu_memory_gib is not None and p.memory_gib < spec.gpu_memory_gib - 1e-9:
        return None
    return p


def share_demand(spec: Task, gpu: SharedGpu) -> tuple[int, int]:
    """(milli-GPU, MiB of GPU memory) of one shared pod; memory defaults to its share of the GPU's."""
    share = spec.gpu_share or 0.0
    gib = spec.gpu_memory_gib if spec.gpu_memory_gib is not None else share * gpu.memory_gib
    return _milli(share), _mib(gib)


def share_room(spec: Task, gpu: SharedGpu) -> int:
    """How many pods of the task fit on what the shared GPU has left."""
    milli, mib = share_demand(spec, gpu)
    fit = gpu.pods_left
    fit = min(fit, gpu.milli_left // milli) if milli else fit
    fit = min(fit, gpu.mib_left // mib) if mib else fit
    return max(0, fit)


def fresh_room(spec: Task, view: DeviceView, nodes: np.ndarray) -> np.ndarray:
    """Per node, how many pods of the task one of its plain GPUs would take once shared (one answer per GPU
    model: thousands of nodes share a handful of models)."""
    per_model: dict[str | None, int] = {}
    out = np.zeros(len(nodes), dtype=np.int64)
    for i, n in enumerate(nodes.tolist()):
        model = view.models[n]
        if model not in per_model:
            per_model[model] = share_room(spec, view.fresh_share(n))
        out[i] = per_model[model]
    return out


def mig_room(view: DeviceView, n: int, p: MigProfile) -> int:
    """At most this many pods of profile p on node n: free instances, or what re-partitions could offer."""
    model = view.models[n]
    assert model is not None
    total = sum(max_instances(model, g.occupied, g.free, p.name, view.changes) for g in view.mig[n])
    if view.changes:
        total += len(view.plain[n]) * max_instances(model, (), None, p.name, True)
    return total


def restrict(info: TaskInfo, view: DeviceView) -> TaskInfo:
    """Keep only nodes that can take one MIG/shared pod of the task; cap pods per node by device room."""
    spec = info.spec
    if not uses_devices(spec):
        return info
    cand = info.candidates
    if is_mig(spec):
        fits_all, room_all = _mig_rooms(view, spec)
        fits, room = fits_all[cand], room_all[cand]
        stages = ("mig_profile", "mig_room")
    else:
        room = np.array([sum(share_room(spec, g) for g in view.shared[int(n)]) for n in cand], dtype=np.int64)
        fits = np.array([bool(view.shared[int(n)]) for n in cand], dtype=bool)
        if view.sharing_changes:  # plain GPUs the plan may share count as shared GPUs with all their room
            idle = np.array([view.convertible(int(n)) for n in cand], dtype=np.int64)
            fits |= idle > 0
            room += idle * fresh_room(spec, view, cand)
        stages = ("shared_gpus", "share_room")
    keep = fits & (room > 0)
    funnel = (*info.funnel, (stages[0], int(fits.sum())), (stages[1], int(keep.sum())))
    return replace(info, candidates=cand[keep].astype(np.int64),
                   max_per_node=np.minimum(info.max_per_node[keep], room[keep]).astype(np.int64), funnel=funnel)


def _mig_rooms(view: DeviceView, spec: Task) -> tuple[np.ndarray, np.ndarray]:
    """Per node of the view: has a profile for the MIG task (bool), and `mig_room` for it (0 without one).

    Built once per (mig_profile, gpu_memory_gib), from one answer per node situation (model, partitioned
    GPUs, plain GPUs): restrict asked profile_for and mig_room per (task, candidate node), 2 M times and
    16.4 s of a profiled plan at 1,024 nodes (mig-XL), with identical tasks and nodes repeating the answers.
    """
    key = ("mig_rooms", spec.mig_profile, spec.gpu_memory_gib)
    hit = view.memo.get(key)
    if hit is None:
        n_nodes = len(view.models)
        fits = np.zeros(n_nodes, dtype=bool)
        room = np.zeros(n_nodes, dtype=np.int64)
        seen: dict[tuple[object, ...], int] = {}
        for n in range(n_nodes):
            p = profile_for(spec, view.geometry(n))
            if p is None:
                continue
            fits[n] = True
            situation = (view.models[n], p.name, tuple((g.occupied, g.free) for g in view.mig[n]), len(view.plain[n]))
            if situation not in seen:
                seen[situation] = mig_room(view, n, p)
            room[n] = seen[situation]
        hit = view.memo[key] = (fits, room)
    return hit  # type: ignore[return-value]


def gpu_value(problem: Problem, t: int) -> float:
    """A pod's GPU-equivalents for the priority term: whole GPUs, its share, or its instance's memory slices
    over the GPU's (the smallest over its candidate models, so the value does not depend on the node)."""
    task = problem.tasks[t]
    spec = task.spec
    if is_shared(spec):
        return float(spec.gpu_share or 0.0)
    if not is_mig(spec):
        return float(spec.gpus)
    view = _view(problem)
    key = ("slice_fractions", spec.mig_profile, spec.gpu_memory_gib)
    fractions = view.memo.get(key)
    if fractions is None:  # per node, once per task shape: per (task, candidate), 1.9 s of a profiled mig-XL plan
        fractions = np.full(len(view.models), np.inf)
        for n in range(len(view.models)):
            geo = view.geometry(n)
            p = profile_for(spec, geo)
            if geo is not None and p is not None:
                fractions[n] = p.memory_slices / geo.memory_slices
        view.memo[key] = fractions
    found = fractions[task.candidates]  # type: ignore[index]
    return float(found.min()) if found.size and np.isfinite(found).any() else 0.0


def _view(problem: Problem) -> DeviceView:
    view = problem.devices
    assert view is not None, "problem built without a device view"
    return view


# --------------------------------------------------------------------------------------------
# Greedy: first-fit into free instances and shares, then the cheapest re-partition


#: baseline._place_task's signature: (problem, task, free, counts, allowed nodes, pod limit) -> pods placed
Placer = Callable[..., int]


def needed(problem: Problem) -> bool:
    """Does the greedy need the device ledger? (MIG/shared pods, or idle partitioned GPUs it may make whole)"""
    cached = problem.extras.get("devices_needed")
    if cached is None:  # asked once per pending job by explain: answer from the first look
        view = problem.devices
        cached = view is not None and (any(uses_devices(t.spec) for t in problem.tasks) or bool(
            view.changes and any(g.idle for gpus in view.mig for g in gpus)))
        problem.extras["devices_needed"] = cached
    return cached


class _Gpu:
    """One partitioned GPU during the greedy: instances by start, which of them are taken."""

    __slots__ = ("gpu", "origin", "inst", "busy", "_layout")

    def __init__(self, gpu: int, origin: Layout | None, occupied: Iterable[int]) -> None:
        self.gpu = gpu
        self.origin = origin  # layout before the plan; None: the GPU was whole
        self.inst: dict[int, str] = {s: name for name, s in origin or ()}
        self.busy: set[int] = set(occupied)
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
        return self.layout() != self.origin

    def copy(self) -> _Gpu:
        other = _Gpu.__new__(_Gpu)
        other.gpu, other.origin = self.gpu, self.origin
        other.inst, other.busy = dict(self.inst), set(self.busy)
        other._layout = self._layout  # a tuple: safe to share, and equal to the copied `inst`'s
        return other


class _Node:
    """Device state of one node during the greedy (copied on first write inside a gang's trial)."""

    __slots__ = ("mig", "plain", "in_w", "whole_taken", "converted", "shared", "opened", "serial")

    def __init__(self, view: DeviceView, n: int) -> None:
        self.serial = 0  # 0: as the view has it; GreedyDevices.node() gives each writable state a fresh one
        self.mig = {g.gpu: _Gpu(g.gpu, g.layout, (s for _, s in g.occupied)) for g in view.mig[n]}
        self.plain = list(view.plain[n])  # still whole and not partitioned by the plan
        # GPUs counted in whole-GPU capacity besides plain ones: idle partitioned ones (re-partitioning on)
        self.in_w = {g.gpu for g in view.mig[n] if g.idle} if view.changes else set()
        self.whole_taken = 0
        self.converted: set[int] = set()  # idle partitioned GPUs made whole
        self.shared = {g.gpu: [g.pods_left, g.milli_left, g.mib_left] for g in view.shared[n]}
        self.opened: list[int] = []  # plain GPUs this plan shares (policy.allow_sharing_changes), also in `shared`

    def copy(self) -> _Node:
        other = _Node.__new__(_Node)
        other.mig = {g: s.copy() for g, s in self.mig.items()}
        other.plain, other.in_w, other.converted = list(self.plain), set(self.in_w), set(self.converted)
        other.whole_taken = self.whole_taken
        other.shared = {g: list(v) for g, v in self.shared.items()}
        other.opened = list(self.opened)
        other.serial = 0  # set by GreedyDevices.node(), the only caller
        return other

    def plain_unclaimed(self) -> int:
        return len(self.plain) - self.whole_taken


class GreedyDevices:
    """The greedy planner's device ledger: where MIG and shared pods go, which GPUs change layout."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.view = _view(problem)
        self.nodes: dict[int, _Node] = {}
        self.own: set[int] = set()
        self.changes = 0
        self.changed_nodes: set[int] = set()  # nodes with a GPU whose layout this plan changes
        self.shares: dict[tuple[int, int], list[int]] = {}
        self.opened = 0  # plain GPUs this plan shares (policy.max_sharing_changes caps them)
        #: per node, the `serial` of its state here (-1: no state yet): what _NodeAnswers entries are checked against
        self.serial = np.full(len(self.view.mig), -1, dtype=np.int64)

    # -- trials: a gang's placement is tried on a copy and committed whole, or dropped

    def trial(self) -> GreedyDevices:
        other = GreedyDevices.__new__(GreedyDevices)
        other.problem, other.view = self.problem, self.view
        other.nodes, other.own, other.changes = dict(self.nodes), set(), self.changes
        other.changed_nodes = set(self.changed_nodes)
        other.shares = {k: list(v) for k, v in self.shares.items()}
        other.opened = self.opened
        other.serial = self.serial.copy()
        return other

    def commit(self, trial: GreedyDevices) -> None:
        self.nodes, self.own, self.changes, self.shares = trial.nodes, set(), trial.changes, trial.shares
        self.changed_nodes, self.opened, self.serial = trial.changed_nodes, trial.opened, trial.serial

    def node(self, n: int) -> _Node:
        """Node n's state, to change: copied on first write in a trial, and given a fresh serial on every call
        (callers change it right after, before any _NodeAnswers lookup)."""
        if n not in self.own:
            state = self.nodes.get(n)
            self.nodes[n] = state.copy() if state is not None else _Node(self.view, n)
            self.own.add(n)
        state = self.nodes[n]
        state.serial = next(_SERIALS)
        self.serial[n] = state.serial
        return state

    def peek(self, n: int) -> _Node:
        state = self.nodes.get(n)
        if state is None:
            state = self.nodes[n] = _Node(self.view, n)
            self.serial[n] = 0
        return state

    # -- placing

    def placer(self, whole: Placer) -> Placer:
        """A task placer with baseline._place_task's signature: MIG/shared tasks go through this ledger."""

        def place(problem: Problem, t: int, free: np.ndarray, counts: dict[tuple[int, int], int],
                  allowed: np.ndarray | None = None, limit: int | None = None) -> int:
            if uses_devices(problem.tasks[t].spec):
                return self.place_task(t, free, counts, allowed, limit)
            idle = self._convertible()
            if problem.tasks[t].demand[0] == 0 or not idle.any():
                return whole(problem, t, free, counts, allowed, limit)
            # plain GPUs first: make a partitioned GPU whole only for pods that fit nowhere else
            plain = free.copy()
            plain[:, 0] = np.maximum(free[:, 0] - idle, 0)
            before = plain.copy()
            got = whole(problem, t, plain, counts, allowed, limit)
            free -= before - plain
            want = problem.tasks[t].replicas if limit is None else min(limit, problem.tasks[t].replicas)
            return got + (whole(problem, t, free, counts, allowed, want - got) if got < want else 0)

        return place

    def _convertible(self) -> np.ndarray:
        """Per node, idle partitioned GPUs still counted in whole-GPU capacity (re-partitioning on)."""
        if not self.view.changes:
            return np.zeros(len(self.view.mig), dtype=np.int64)
        # Cached per node state (serial), as _NodeAnswers are: asked once per whole-GPU task, the scan over
        # every node cost 0.7 s of a profiled plan at 1,024 nodes (mig-XL).
        cached = self.view.memo.get("convertible")
        if cached is None:
            idle = np.array([sum(g.idle for g in gpus) for gpus in self.view.mig], dtype=np.int64)
            cached = self.view.memo["convertible"] = (np.zeros(len(self.view.mig), dtype=np.int64), idle)
        serials, counts = cached  # type: ignore[misc]
        current = np.maximum(self.serial, 0)
        for n in np.nonzero(serials != current)[0].tolist():
            state = self.nodes.get(n)
            counts[n] = len(state.in_w) if state is not None else sum(g.idle for g in self.view.mig[n])
            serials[n] = current[n]
        return counts.copy()

    def place_task(self, t: int, free: np.ndarray, counts: dict[tuple[int, int], int],
                   allowed: np.ndarray | None = None, limit: int | None = None) -> int:
        """Place as many pods of MIG/shared task t as fit, one at a time; updates `free` and `counts`.

        `allowed` (a bool per node) and `limit` (pods) confine it as baseline._place_task's do.
        """
        task = self.problem.tasks[t]
        d = task.demand
        cand = task.candidates if allowed is None else task.candidates[allowed[task.candidates]]
        want = task.replicas if limit is None else min(limit, task.replicas)
        placed = 0
        while placed < want:
            ok = cand[np.all(free[cand, 1:] >= d[1:], axis=1)]
            pick = self._mig_pod(t, ok, free) if is_mig(task.spec) else self._share_pod(t, ok, free)
            if pick is None:
                break
            free[pick, 1:] -= d[1:]
            counts[t, pick] = counts.get((t, pick), 0) + 1
            placed += 1
        return placed

    def _share_pod(self, t: int, nodes: np.ndarray, free: np.ndarray) -> int | None:
        """One pod: best fit onto a shared GPU (declared, or shared earlier by this plan: either costs nothing
        more), else, when allowed, onto a plain GPU the plan shares now."""
        spec = self.problem.tasks[t].spec
        best: tuple[int, int, int] | None = None
        for n in nodes.tolist():
            state = self.peek(n)
            if not state.shared:
                continue
            need_milli, need_mib = share_demand(spec, self.view.fresh_share(n))  # one GPU model per node
            for gpu, (pods, milli, mib) in state.shared.items():
                if pods >= 1 and milli >= need_milli and mib >= need_mib:
                    key = (milli - need_milli, n, gpu)  # best fit: the fullest GPU that still fits
                    best = key if best is None or key < best else best
        if best is not None:
            _, n, gpu = best
        else:
            found = self._share_plain(spec, nodes, free)
            if found is None:
                return None
            n, gpu = found
        need_milli, need_mib = share_demand(spec, self.view.fresh_share(n))
        left = self.node(n).shared[gpu]
        left[0] -= 1
        left[1] -= need_milli
        left[2] -= need_mib
        self.shares.setdefault((t, n), []).append(gpu)
        return n

    def _share_plain(self, spec: Task, nodes: np.ndarray, free: np.ndarray) -> tuple[int, int] | None:
        """Share a plain GPU for one pod: on the node with the fewest whole GPUs free (whole nodes stay whole
        for gangs), its highest index (whole-GPU pods keep the low ones); None when not allowed or none fits."""
        view = self.view
        if not view.sharing_changes or (view.max_sharing_changes is not None
                                        and self.opened >= view.max_sharing_changes):
            return None
        best: tuple[int, int] | None = None
        for n in nodes[free[nodes, 0] >= 1].tolist():
            if not view.convertible(n) or share_room(spec, view.fresh_share(n)) < 1:
                continue
            if self.peek(n).plain_unclaimed() >= 1:
                best = (int(free[n, 0]), n) if best is None else min(best, (int(free[n, 0]), n))
        if best is None:
            return None
        n = best[1]
        self._open(n, self.node(n).plain[-1], free)
        return n, self.node(n).opened[-1]

    def _open(self, n: int, gpu: int, free: np.ndarray) -> None:
        """Plain GPU `gpu` of node n becomes a shared GPU (policy.sharing_default): out of whole-GPU capacity."""
        state = self.node(n)
        state.plain.remove(gpu)
        g = self.view.fresh_share(n)
        state.shared[gpu] = [g.pods_left, g.milli_left, g.mib_left]
        state.opened.append(gpu)
        free[n, 0] -= 1
        self.opened += 1

    def _mig_pod(self, t: int, nodes: np.ndarray, free: np.ndarray) -> int | None:
        """One pod: first fit into a free instance (GPUs outside whole-GPU capacity first), else the cheapest
        re-partition (a GPU this plan already changes, then one left out of whole-GPU capacity, ...).

        Node by node this is `_mig_pod_options` and `_repartition_options` (the reference, kept for tests);
        their answers per node are cached in `_NodeAnswers` and the minimum over nodes taken with numpy: the
        scans over every node for every pod took 29 s of a profiled plan at 1,024 nodes (mig-XL)."""
        spec = self.problem.tasks[t].spec
        option = self._first_fit(spec, nodes, free)
        if option is None and self.view.changes:
            touched = nodes[np.isin(nodes, list(self.changed_nodes))]
            option = self._best_repartition(spec, touched, free, changed_only=True)
            if option is None:
                option = self._best_repartition(spec, nodes, free, changed_only=False)
        if option is None:
            return None
        _, n, gpu, start = option
        self._take(n, gpu, start, profile_for(spec, self.view.geometry(n)), free)
        return n

    def _mig_pod_options(self, spec: Task, nodes: np.ndarray, free: np.ndarray) -> Option | None:
        """The free instance `_mig_pod` takes, node by node (the reference `_first_fit` must agree with)."""
        options: list[Option] = []  # (key, node, gpu, start)
        for n in nodes.tolist():
            if not self.view.mig[n] and n not in self.nodes:
                continue  # nothing partitioned here (yet)
            state = self.peek(n)
            if options and len(state.in_w) + len(state.converted) == len(state.mig):
                continue  # only GPUs in whole-GPU capacity here; an earlier node already offers one
            p = profile_for(spec, self.view.geometry(n))
            if p is None:
                continue
            options.extend(_free_options(state, n, p, bool(free[n, 0] >= 1)))
            if options and min(options)[0][1] == 0:
                break  # first fit: a free instance that costs no whole GPU
        return min(options) if options else None

    def _first_fit(self, spec: Task, nodes: np.ndarray, free: np.ndarray) -> Option | None:
        """`_mig_pod_options` from cached per-node answers: the first node (in `nodes` order) with a free
        instance outside whole-GPU capacity gives its best; without one, the lowest key among the first node
        with any free instance and the later ones that have a GPU outside whole-GPU capacity (the others the
        reference skips once it holds an option)."""
        if nodes.size == 0:
            return None
        answers = self._answers(spec)
        answers.refresh_free(self, spec, nodes)
        ok = (free[nodes, 0] >= 1).astype(np.intp)
        w0 = answers.w0[nodes, ok]
        if w0.any():
            i = int(np.argmax(w0))
            return answers.free_best[int(nodes[i])][ok[i]]
        found = answers.any[nodes, ok]
        if not found.any():
            return None
        f = int(np.argmax(found))
        kept = found & ~answers.allw[nodes]
        kept[: f + 1] = False
        kept[f] = True
        codes = np.where(kept, answers.free_code[nodes, ok], _NONE)
        i = int(np.argmin(codes))
        return answers.free_best[int(nodes[i])][ok[i]]

    def _best_repartition(self, spec: Task, nodes: np.ndarray, free: np.ndarray, changed_only: bool) -> Option | None:
        """min(`_repartition_options`) (only GPUs this plan changed already, when `changed_only`), from cached
        per-node answers."""
        if nodes.size == 0:
            return None
        answers = self._answers(spec)
        answers.refresh_repartition(self, spec, nodes)
        budget = self.view.max_changes is None or self.changes < self.view.max_changes
        variant = (free[nodes, 0] >= 1).astype(np.intp) * 2 + int(budget)
        codes = answers.re_code[nodes, variant]
        if changed_only:
            codes = np.where(codes < _CHANGED_BELOW, codes, _NONE)
        i = int(np.argmin(codes))
        if codes[i] == _NONE:
            return None
        return answers.re_best[int(nodes[i])][variant[i]]

    def _answers(self, spec: Task) -> _NodeAnswers:
        key = ("node_answers", spec.mig_profile, spec.gpu_memory_gib)
        found = self.view.memo.get(key)
        if found is None:
            found = self.view.memo[key] = _NodeAnswers(len(self.view.mig))
        return found  # type: ignore[return-value]

    def _repartition_options(self, spec: Task, nodes: np.ndarray, free: np.ndarray) -> list[Option]:
        """Every re-partition that could take one pod, node by node (the reference `_best_repartition` must
        agree with)."""
        options: list[Option] = []
        budget = self.view.max_changes is None or self.changes < self.view.max_changes
        for n in nodes.tolist():
            geo = self.view.geometry(n)
            p = profile_for(spec, geo)
            if geo is None or p is None:
                continue
            options.extend(_repartition_node(self.peek(n), n, geo, p, bool(free[n, 0] >= 1), budget))
        return options

    def _take(self, n: int, gpu: int, start: int, p: MigProfile | None, free: np.ndarray) -> None:
        assert p is not None
        state = self.node(n)
        was_changed = gpu >= 0 and state.mig[gpu].changed()
        if gpu < 0:  # partition a plain GPU: the highest index, so whole-GPU pods keep the low ones
            gpu = state.plain.pop()
            state.mig[gpu] = _Gpu(gpu, None, ())
            state.in_w.add(gpu)
        g = state.mig[gpu]
        if gpu in state.in_w:
            state.in_w.discard(gpu)
            free[n, 0] -= 1
        geo = self.view.geometry(n)
        assert geo is not None
        if g.inst.get(start) != p.name or start in g.busy:
            for s in [s for s, name in g.inst.items() if set(_slices(geo, name, s)) & set(p.slices(start))]:
                assert s not in g.busy
                del g.inst[s]
            g.inst[start] = p.name
            g.touch()
        g.busy.add(start)
        if g.changed() and not was_changed:
            self.changes += 1
            self.changed_nodes.add(n)

    def settle(self, counts: dict[tuple[int, int], int]) -> bool:
        """After a gang: make idle partitioned GPUs whole where its whole-GPU pods need more than the plain
        GPUs left; False when that would exceed policy.max_mig_changes (the gang is then rolled back)."""
        need: dict[int, int] = {}
        for (t, n), k in counts.items():
            gpus = int(self.problem.tasks[t].demand[0])
            if gpus and k:
                need[n] = need.get(n, 0) + gpus * k
        for n, k in need.items():
            if not self.view.mig[n] and n not in self.nodes:
                continue  # nothing partitioned here: whole pods simply take plain GPUs
            state = self.node(n)
            state.whole_taken += k
            short = -state.plain_unclaimed() - len(state.converted)
            for g in sorted(state.in_w - set(state.plain)):
                if short <= 0:
                    break
                if self.view.max_changes is not None and self.changes >= self.view.max_changes:
                    return False
                state.in_w.discard(g)
                state.converted.add(g)
                self.changes += 1
                short -= 1
            if short > 0:
                return False
        return True

    def apply(self, placement: Placement, free: np.ndarray) -> None:
        """Load a placement into the ledger (its new layouts, GPUs it shares, taken instances, shares, whole GPUs
        taken), and take out of `free[:, 0]` the GPUs it removes from whole-GPU capacity by partitioning, sharing
        or using them."""
        problem = self.problem
        for n, gpu in sorted(placement.sharing_changes):
            self._open(n, gpu, free)
        for (n, gpu), layout in placement.mig_layouts.items():
            state = self.node(n)
            self.changes += 1
            if layout is None:
                state.converted.add(gpu)
                state.in_w.discard(gpu)
                continue
            if gpu not in state.mig:
                state.plain.remove(gpu)
                state.mig[gpu] = _Gpu(gpu, None, ())
                free[n, 0] -= 1
            elif gpu in state.in_w:
                state.in_w.discard(gpu)
                free[n, 0] -= 1
            state.mig[gpu].inst = {s: name for name, s in layout}
            state.mig[gpu].touch()
        for (t, n), picks in pod_picks(problem, placement).items():
            state = self.node(n)
            spec = problem.tasks[t].spec
            for gpu, inst in picks:
                if inst is not None:
                    state.mig[gpu].busy.add(inst[1])
                    if gpu in state.in_w:
                        state.in_w.discard(gpu)
                        free[n, 0] -= 1
                    continue
                milli, mib = share_demand(spec, self.view.fresh_share(n))  # one GPU model per node
                left = state.shared[gpu]
                left[0] -= 1
                left[1] -= milli
                left[2] -= mib
        for (t, n), k in placement.counts.items():
            gpus = int(problem.tasks[t].demand[0]) * k
            if gpus and (self.view.mig[n] or n in self.nodes):
                self.node(n).whole_taken += gpus
        self.own = set()

    def finish(self, placement: Placement) -> None:
        """Write the picks into the placement: new layouts of changed GPUs, GPUs it shares, the GPU of each
        shared pod."""
        for n, state in sorted(self.nodes.items()):
            placement.sharing_changes.update((n, gpu) for gpu in state.opened)
            for gpu, g in sorted(state.mig.items()):
                if gpu in state.converted:
                    placement.mig_layouts[n, gpu] = None
                elif g.changed():
                    placement.mig_layouts[n, gpu] = g.layout()
        for key, gpus in sorted(self.shares.items()):
            placement.shares[key] = sorted(gpus)


#: A pod's choice in the greedy: (sort key, node, gpu, start); gpu -1: a plain GPU, partitioned now.
Option = tuple[tuple[int, ...], int, int, int]

_SERIALS = itertools.count(1)
_NONE = np.iinfo(np.int64).max
_NODE_BITS = 21  # node index in the low bits of a code
#: repartition codes below this are options on GPUs the plan changed already (key[1] == 0)
_CHANGED_BELOW = 4 << (8 + 10 + _NODE_BITS)


def _free_options(state: _Node, n: int, p: MigProfile, free_ok: bool) -> list[Option]:
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


def _repartition_node(state: _Node, n: int, geo: MigGeometry, p: MigProfile, free_ok: bool,
                      budget: bool, mig_gpus: dict[tuple[Layout, frozenset[int], bool, bool], int] | None = None
                      ) -> list[Option]:
    """Re-partitions of node n that could take one p pod (identical GPUs: the first); `free_ok`: node n has a
    whole GPU free, `budget`: policy.max_mig_changes allows one more change; `mig_gpus`: `_distinct_gpus(state)`
    when the caller has it."""
    options: list[Option] = []
    gpus = dict(_distinct_gpus(state) if mig_gpus is None else mig_gpus)
    if state.plain_unclaimed() >= 1 and free_ok:
        gpus.setdefault(((), frozenset(), False, True), -1)  # a plain GPU, partitioned now
    for (layout, busy, changed, takes_w), gpu in gpus.items():
        if (takes_w and not free_ok) or (not changed and not budget):
            continue
        best = _best_start(geo.model, p.name, layout, busy)
        if best is not None:
            destroyed, flex, s = best
            # already-changed GPUs first (no new change), then GPUs that stay out of whole-GPU capacity
            options.append(((1, int(not changed), int(takes_w), gpu < 0, destroyed, -flex, n, gpu, s), n, gpu, s))
    return options


def _distinct_gpus(state: _Node) -> dict[tuple[Layout, frozenset[int], bool, bool], int]:
    """(layout, busy starts, changed, in whole-GPU capacity) -> the first GPU so, of a node's partitioned GPUs
    not made whole."""
    gpus: dict[tuple[Layout, frozenset[int], bool, bool], int] = {}  # identical GPUs: the first
    for g in sorted(state.mig.values(), key=lambda g: g.gpu):
        if g.gpu not in state.converted:
            gpus.setdefault((g.layout(), frozenset(g.busy), g.changed(), g.gpu in state.in_w), g.gpu)
    return gpus


class _NodeAnswers:
    """Per node, what `_free_options` and `_repartition_node` give one MIG task shape (mig_profile,
    gpu_memory_gib), for each way the rest of the ledger can matter (node has a whole GPU free or not;
    max_mig_changes reached or not), with the `serial` of the node state each answer came from.

    A node state with a given serial never changes (GreedyDevices.node() gives a fresh one before any
    change; 0 is the view's own state), so an answer is good for every ledger whose node has that serial:
    one object per view and shape serves the greedy, its trials and every pending reason. Minimums over
    nodes become numpy argmins over `codes`, integers ordered as the options' keys are, node index last.
    """

    def __init__(self, n_nodes: int) -> None:
        assert n_nodes < 1 << _NODE_BITS
        self.free_serial = np.full(n_nodes, -2, dtype=np.int64)
        self.w0 = np.zeros((n_nodes, 2), dtype=bool)  # a free instance outside whole-GPU capacity
        self.any = np.zeros((n_nodes, 2), dtype=bool)  # any free instance
        self.allw = np.zeros(n_nodes, dtype=bool)  # every GPU in whole-GPU capacity or made whole
        self.free_code = np.full((n_nodes, 2), _NONE, dtype=np.int64)  # key of the best (key[1:3]), node
        self.free_best: list[list[Option | None]] = [[None, None] for _ in range(n_nodes)]
        self.re_serial = np.full(n_nodes, -2, dtype=np.int64)
        self.re_code = np.full((n_nodes, 4), _NONE, dtype=np.int64)  # variant: free_ok * 2 + budget
        self.re_best: list[list[Option | None]] = [[None] * 4 for _ in range(n_nodes)]

    def refresh_free(self, ledger: GreedyDevices, spec: Task, nodes: np.ndarray) -> None:
        """Recompute the free-instance answers of `nodes` whose state changed. Nodes without a state yet are
        the view's (no state is created for them: `_mig_pod_options` peeks only nodes it would use)."""
        serial = np.maximum(ledger.serial[nodes], 0)
        for n in nodes[self.free_serial[nodes] != serial].tolist():
            state = ledger.nodes.get(n) or _Node(ledger.view, n)
            p = profile_for(spec, ledger.view.geometry(n))
            self.allw[n] = len(state.in_w) + len(state.converted) == len(state.mig)
            for ok in (0, 1):
                options = _free_options(state, n, p, bool(ok)) if p is not None else []
                best = min(options) if options else None
                self.free_best[n][ok] = best
                self.any[n, ok] = best is not None
                self.w0[n, ok] = best is not None and best[0][1] == 0
                self.free_code[n, ok] = _NONE if best is None else _free_code(best)
            self.free_serial[n] = max(state.serial, 0)

    def refresh_repartition(self, ledger: GreedyDevices, spec: Task, nodes: np.ndarray) -> None:
        """Recompute the re-partition answers of `nodes` whose state changed, and give a state to every node
        with a profile for the shape that has none (as the node-by-node scan's peek does)."""
        view = ledger.view
        for n in nodes[self.re_serial[nodes] != ledger.serial[nodes]].tolist():
            geo = view.geometry(n)
            p = profile_for(spec, geo)
            if geo is None or p is None:
                self.re_code[n] = _NONE
                self.re_best[n] = [None] * 4
                continue  # no state: re_serial stays, so the check repeats (cheap: profile_for is cached)
            state = ledger.peek(n)
            if self.re_serial[n] != state.serial:
                mig_gpus = _distinct_gpus(state)
                for v in range(4):
                    options = _repartition_node(state, n, geo, p, bool(v >> 1), bool(v & 1), mig_gpus)
                    best = min(options) if options else None
                    self.re_best[n][v] = best
                    self.re_code[n, v] = _NONE if best is None else _repartition_code(best)
                self.re_serial[n] = state.serial


def _free_code(option: Option) -> int:
    """An integer ordered as a free-instance key (0, takes_w, -busy, node, ...) is, for keys with takes_w 1."""
    key = option[0]
    assert key[0] == 0 and 0 <= -key[2] < 64
    return ((int(key[1]) << 6 | (63 + key[2])) << _NODE_BITS) | option[1]


def _repartition_code(option: Option) -> int:
    """An integer ordered as a re-partition key (1, not changed, takes_w, plain, destroyed, -flex, node, ...)
    is up to the node (a node's answer is its best option: GPU and start never decide between nodes)."""
    _, not_changed, takes_w, plain, destroyed, neg_flex, n, _, _ = option[0]
    assert 0 <= destroyed < 256 and 0 <= -neg_flex < 512
    high = ((int(not_changed) << 1 | int(takes_w)) << 1 | int(plain)) << 8 | destroyed
    return ((high << 10 | (512 + neg_flex)) << _NODE_BITS) | n


def _slices(geo: MigGeometry, name: str, start: int) -> range:
    p = geo.profile(name)
    assert p is not None
    return p.slices(start)


@cache
def _best_start(model: str, profile: str, layout: Layout, busy: frozenset[int]) -> tuple[int, int, int] | None:
    """(instances destroyed, flexibility left, start) of the best start for a new p instance, or None.

    Flexibility = how many (profile, start) placements the slices left free still allow: a 3g at
    start 4 keeps slices 0-3 open for four 1g, at start 0 only three; a 1g goes to an odd corner.
    """
    geo = _geo(model)
    p = geo.profile(profile)
    assert p is not None
    best = None
    for s in p.starts:
        hit = [(name, st) for name, st in layout if set(_slices(geo, name, st)) & set(p.slices(s))]
        if any(st in busy for _, st in hit):
            continue
        rest = [x for x in layout if x not in hit] + [(p.name, s)]
        if layout_problems(geo, rest):
            continue
        mask, counts, media = _state(geo, rest)
        flex = sum(_fits(q, st, mask, counts, media) for q in geo.profiles for st in q.starts)
        key = (len(hit), -flex, s)
        if best is None or key < best:
            best = key
    return None if best is None else (best[0], -best[1], best[2])


# --------------------------------------------------------------------------------------------
# Decode: concrete GPUs, instances and shares


def final_layouts(problem: Problem, placement: Placement) -> dict[tuple[int, int], Layout | None]:
    """(node, gpu) -> layout after the plan (None: whole), for every GPU partitioned before or after."""
    view = _view(problem)
    out: dict[tuple[int, int], Layout | None] = {}
    for n, gpus in enumerate(view.mig):
        for g in gpus:
            out[n, g.gpu] = g.layout
    out.update(placement.mig_layouts)
    return out


def pod_picks(problem: Problem, placement: Placement) -> dict[tuple[int, int], list[tuple[int, Instance | None]]]:
    """(task, node) -> per pod (gpu, instance) for MIG pods, (gpu, None) for shared ones.

    MIG pods fill free instances of their profile in GPU, then start order: exact, because the
    plan never offers a node fewer free instances of a profile than pods that want it.
    """
    view = _view(problem)
    layouts = final_layouts(problem, placement)
    busy = {(n, g.gpu, s) for n, gpus in enumerate(view.mig) for g in gpus for _, s in g.occupied}
    by_node: dict[int, list[tuple[int, Layout]]] = {}  # node -> its partitioned GPUs, in GPU order
    for (nn, gpu), layout in sorted(layouts.items()):
        if layout is not None:
            by_node.setdefault(nn, []).append((gpu, layout))
    out: dict[tuple[int, int], list[tuple[int, Instance | None]]] = {}
    for (t, n), k in sorted(placement.counts.items()):
        spec = problem.tasks[t].spec
        if not k or not uses_devices(spec):
            continue
        if is_shared(spec):
            out[t, n] = [(g, None) for g in placement.shares.get((t, n), [])]
            continue
        p = profile_for(spec, view.geometry(n))
        assert p is not None
        picks: list[tuple[int, Instance | None]] = []
        for gpu, layout in by_node.get(n, []):  # (every GPU of the plan per pod took 0.4 s of a mig-XL decode)
            for name, s in layout:
                if len(picks) < k and name == p.name and (n, gpu, s) not in busy:
                    busy.add((n, gpu, s))
                    picks.append((gpu, (name, s)))
        out[t, n] = picks
    return out


def whole_gpu_ids(problem: Problem, placement: Placement) -> list[list[int]]:
    """Per node, the GPU indices whole-GPU pods may take after the plan's MIG and sharing changes, ascending."""
    view = _view(problem)
    ids = [set(p) for p in view.plain]
    for (n, gpu), layout in placement.mig_layouts.items():
        if layout is None:
            ids[n].add(gpu)
        else:
            ids[n].discard(gpu)
    for n, gpu in placement.sharing_changes:
        ids[n].discard(gpu)
    return [sorted(s) for s in ids]


def shareable_gpus(problem: Problem, placement: Placement, n: int) -> list[int]:
    """Plain GPUs of node n the plan may still share, highest first (whole-GPU pods keep the low ones):
    neither partitioned by its MIG changes nor shared already."""
    view = _view(problem)
    return [g for g in reversed(view.plain[n])
            if (n, g) not in placement.mig_layouts and (n, g) not in placement.sharing_changes]


def sharing_changes(problem: Problem, placement: Placement) -> list[SharingChange]:
    spec = _view(problem).sharing_default
    return [SharingChange(node=problem.nodes[n].name, gpu=gpu, mode=spec.mode, replicas=spec.replicas)
            for n, gpu in sorted(placement.sharing_changes)]


def mig_changes(problem: Problem, placement: Placement) -> list[MigChange]:
    out = []
    for (n, gpu), layout in sorted(placement.mig_layouts.items()):
        out.append(MigChange(node=problem.nodes[n].name, gpu=gpu, mig_enabled=layout is not None,
                             layout=[MigInstance(profile=name, start=s) for name, s in layout or ()]))
    return out


def attach(problem: Problem, placement: Placement, assignments: list[Assignment]) -> list[Assignment]:
    """Fill in the MIG instance or shared GPU of every MIG/shared pod among decoded assignments."""
    if problem.devices is None or not any(uses_devices(t.spec) for t in problem.tasks):
        return assignments
    picks = pod_picks(problem, placement)
    task_of = {(problem.jobs[task.job].name, task.name): t for t, task in enumerate(problem.tasks)}
    index = {problem.nodes[n].name: n for n in range(problem.n_nodes)}
    for a in assignments:
        t = task_of[a.job, a.task]
        spec = problem.tasks[t].spec
        if not uses_devices(spec):
            continue
        gpu, inst = picks[t, index[a.node]].pop(0)
        if inst is None:
            a.gpus, a.gpu_share = [gpu], spec.gpu_share
        else:
            a.gpus, a.mig = [], MigSlot(gpu=gpu, profile=inst[0], start=inst[1])
    return assignments


# --------------------------------------------------------------------------------------------
# Pending reasons


def filter_reason(problem: Problem, task: TaskInfo, stage: str) -> str:
    """Why no node can take one MIG/shared pod of the task, for the filter stage that emptied its list."""
    spec = task.spec
    view = _view(problem)
    if stage == "mig_profile":
        if spec.mig_auto:
            return (f"no MIG profile of a matching node's GPU model has {spec.gpu_memory_gib:g} GiB for task "
                    f"'{spec.name}' (mig_profile auto)")
        models = sorted({m for m in view.models if m and catalog.mig_geometry(m) is not None})
        small = [m for m in models if (g := catalog.mig_geometry(m)) and (q := g.profile(spec.mig_profile or ""))
                 and spec.gpu_memory_gib is not None and q.memory_gib < spec.gpu_memory_gib]
        if small:
            return (f"MIG profile {spec.mig_profile} has less than the {spec.gpu_memory_gib:g} GiB task "
                    f"'{spec.name}' asks (gpu_memory_gib)")
        return (f"no matching node's GPU model offers MIG profile {spec.mig_profile} for task '{spec.name}'"
                + (f" (MIG models here: {', '.join(models)})" if models else " (no MIG-capable GPUs here)"))
    if stage == "mig_room":
        names = sorted({p.name for n in range(problem.n_nodes)
                        if (p := profile_for(spec, view.geometry(n))) is not None})
        wanted = "/".join(names) or str(spec.mig_profile)
        if not view.changes:
            return f"no free {wanted} instance and re-partitioning disabled (policy.allow_mig_changes)"
        models = sorted({view.models[n] or "" for n in range(problem.n_nodes) if view.mig[n]})
        return (f"every {'/'.join(models) or 'MIG GPU'} with room has running instances at the memory slices a "
                f"{wanted} needs, and no idle GPU is left to partition")
    if stage == "shared_gpus":
        return (f"no matching node has a shared (time-slicing/MPS) GPU for task '{spec.name}'"
                + (" nor an idle GPU to share" if view.sharing_changes else "") + sharing_hint(problem, task))
    return (f"no shared GPU has {spec.gpu_share:g} of a GPU"
            + (f" and {spec.gpu_memory_gib:g} GiB" if spec.gpu_memory_gib is not None else "")
            + f" and a replica free for task '{spec.name}'"
            + (", nor would an idle GPU once shared" if view.sharing_changes else "") + sharing_hint(problem, task))


def sharing_hint(problem: Problem, task: TaskInfo, placement: Placement | None = None,
                 usage: np.ndarray | None = None) -> str:
    """"; 3 idle GPUs on matching nodes could be shared if policy.allow_sharing_changes were on" (or the cap
    that stops it) when that is why a share pod waits; "" otherwise. With a placement, GPUs it uses, partitions
    or shares are not idle, and `usage` (what it takes per node) must leave the pod's CPU and memory."""
    if not is_shared(task.spec) or task.eligible is None:
        return ""
    view = _view(problem)
    policy = problem.request.policy
    cap = policy.max_sharing_changes
    capped = cap is not None and placement is not None and len(placement.sharing_changes) >= cap
    if view.sharing_changes and not capped:
        return ""
    nodes = task.eligible
    left = problem.free[nodes, 1:] - (usage[nodes, 1:] if usage is not None else 0)
    nodes = nodes[np.all(left >= task.demand[1:], axis=1)]
    nodes = nodes[_idle_plain(problem, placement, usage)[nodes] > 0]
    idle = int((_idle_plain(problem, placement, usage)[nodes] * (fresh_room(task.spec, view, nodes) > 0)).sum())
    if not idle:
        return ""
    gpus = f"{idle} idle GPU{'s' if idle != 1 else ''} on matching nodes could be shared"
    if not policy.allow_sharing_changes:
        return f"; {gpus} if policy.allow_sharing_changes were on"
    return f"; {gpus}, but policy.max_sharing_changes ({cap}) is reached"


def _idle_plain(problem: Problem, placement: Placement | None, usage: np.ndarray | None) -> np.ndarray:
    """Per node, plain GPUs nobody uses: before any plan, or after `placement` (which takes `usage`, the same on
    every call for one placement: built once, since every pending share job asks)."""
    memo: dict[str, object] = problem.extras if placement is None else placement.memo
    if "idle_plain" not in memo:
        view = _view(problem)
        counts = np.array([len(p) for p in view.plain], dtype=np.int64)
        if placement is not None:
            for (n, gpu), layout in placement.mig_layouts.items():
                counts[n] -= int(layout is not None and gpu in view.plain[n])  # plain GPUs partitioned
            for n, _ in placement.sharing_changes:
                counts[n] -= 1
            if usage is not None:
                counts -= usage[:, 0]  # whole-GPU pods (a GPU made whole again may be one: a hint, not a proof)
        memo["idle_plain"] = np.maximum(counts, 0)
    return memo["idle_plain"]  # type: ignore[return-value]


def _loaded(problem: Problem, free: np.ndarray, placement: Placement | None) -> tuple[GreedyDevices, np.ndarray]:
    """The device ledger with `placement` loaded and the room it leaves in `free`, built once per
    (problem, placement, free): every pending job of a plan asks `job_fits` against the same ones,
    and loading a plan of thousands of pods for each of them took 300 s of a 10 s plan at 1,024
    nodes (mig-XL, 1,287 pending jobs). Callers work on `trial()` copies, which copy a node's state
    on first write, so the cached ledger is never changed."""
    memo = placement.memo if placement is not None else problem.extras
    cache: dict[bytes, tuple[GreedyDevices, np.ndarray]] = memo.setdefault("loaded_ledgers", {})  # type: ignore[assignment]
    key = free.tobytes()
    hit = cache.get(key)
    if hit is None or hit[0].problem is not problem:  # replace(problem, ...) views share `extras`
        ledger, room = GreedyDevices(problem), free.copy()
        if placement is not None:
            ledger.apply(placement, room)
        hit = cache[key] = (ledger, room)
    return hit


def job_fits(problem: Problem, j: int, free: np.ndarray, placement: Placement | None, place_whole: Placer) -> bool:
    """Would job j fit, alone, in `free` (and, given a placement, beside its pods and MIG changes)?

    Answered once per job shape: pending jobs that differ only in names get the same answer against the
    same (problem, placement, free), and re-running the MIG greedy for each of 1,287 pending jobs cost 8 s
    of a plan at 1,024 nodes (mig-XL). The key holds everything the fit reads: per task (in the order it
    places them) the spec but its name, demand, candidates, pods per node cap and replicas; the job's
    `needed`; `free`; and `place_whole` (the value keeps the problem, compared by identity, as _loaded does).
    """
    memo = placement.memo if placement is not None else problem.extras
    cache: dict[tuple[object, ...], tuple[Problem, bool]] = memo.setdefault("job_fits", {})  # type: ignore[assignment]
    order = sorted(problem.job_tasks[j], key=lambda t: -int(problem.tasks[t].demand[0]))
    shape = tuple((repr(sorted(problem.tasks[t].spec.model_dump(exclude={"name"}).items())),
                   problem.tasks[t].demand.tobytes(), problem.tasks[t].candidates.tobytes(),
                   problem.tasks[t].max_per_node.tobytes(), problem.tasks[t].replicas) for t in order)
    key = (shape, problem.jobs[j].needed, free.tobytes(), place_whole)
    hit = cache.get(key)
    if hit is not None and hit[0] is problem:
        return hit[1]
    fits = _job_fits(problem, j, free, placement, place_whole)
    cache[key] = (problem, fits)
    return fits


def _job_fits(problem: Problem, j: int, free: np.ndarray, placement: Placement | None, place_whole: Placer) -> bool:
    loaded, room = _loaded(problem, free, placement)
    ledger, trial = loaded.trial(), room.copy()
    counts: dict[tuple[int, int], int] = {}
    placed = 0
    for t in sorted(problem.job_tasks[j], key=lambda t: -int(problem.tasks[t].demand[0])):
        spec = problem.tasks[t].spec
        placed += ledger.place_task(t, trial, counts) if uses_devices(spec) else place_whole(problem, t, trial, counts)
    return placed >= problem.jobs[j].needed and ledger.settle(counts)
