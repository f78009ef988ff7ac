"""What one MIG or shared pod needs from a node's devices, and how many such pods a node can take.

Candidate filtering asks this before any variable exists: a MIG or shared pod's nodes are the
ones whose instances, re-partitions or shares have room (`room`), and the priority term values
such a pod by its fraction of a GPU (`gpu_value`). A share of a MIG instance counts that part of
its instance: 0.25 of a 1g instance of an 8-slice GPU is 1/32 of a GPU.
"""

from __future__ import annotations

import numpy as np
from placement_models import (
    Task,
)

from placement.catalog import MigGeometry, MigProfile
from placement.devices.layouts import max_instances
from placement.devices.view import (
    DeviceView,
    SharedGpu,
    is_instance_share,
    is_mig,
    is_shared,
    memory_parts,
    to_parts,
)

#: Candidate-filter stages this module adds to a task's funnel (explain.py turns them into reasons).
STAGES = ("mig_profile", "mig_room", "shared_gpus", "share_room", "instance_share_room")


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
    """(parts of the device, parts of its memory) one shared pod takes, `SHARE_PARTS` to the whole of either (the
    GPU, or the instance on a shared MIG instance); memory defaults to the pod's share, so pods of k/replicas
    that declare none fill a device exactly."""
    parts = to_parts(spec.gpu_share or 0.0)
    if spec.gpu_memory_gib is None:
        return parts, parts
    return parts, memory_parts(spec.gpu_memory_gib, gpu.memory_gib)


def share_room(spec: Task, gpu: SharedGpu) -> int:
    """How many pods of the task fit on what the shared GPU has left."""
    parts, memory = share_demand(spec, gpu)
    fit = gpu.pods_left
    fit = min(fit, gpu.parts_left // parts) if parts else fit
    fit = min(fit, gpu.memory_left // memory) if memory else fit
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


def instance_share_room(spec: Task, view: DeviceView, n: int, p: MigProfile) -> int:
    """Pods of a task sharing `p` instances that node n takes: the room its shared instances of p have left,
    plus, with re-partitioning on, every p instance its GPUs could offer (free ones shared, new ones made)
    at the room of a new shared instance."""
    total = sum(share_room(spec, i) for i in view.shared_instances(n) if i.profile == p.name)
    if view.changes:
        total += mig_room(view, n, p) * share_room(spec, view.fresh_instance(n, p.name))
    return total


def room(spec: Task, view: DeviceView, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[str, str]]:
    """Per candidate node of a MIG or shared task: can it take one pod (bool), how many (int), and the two
    filter stages these answer (a task's funnel names them, so pending reasons can say which one emptied it)."""
    if is_mig(spec):
        fits_all, room_all = _mig_rooms(view, spec)
        return fits_all[cand], room_all[cand], ("mig_profile", "mig_room")
    if is_instance_share(spec):
        fits = np.zeros(cand.size, dtype=bool)
        rooms = np.zeros(cand.size, dtype=np.int64)
        for i, n in enumerate(cand.tolist()):
            p = profile_for(spec, view.geometry(n))
            if p is not None:
                fits[i] = True
                rooms[i] = instance_share_room(spec, view, n, p)
        return fits, rooms, ("mig_profile", "instance_share_room")
    rooms = np.array([sum(share_room(spec, g) for g in view.shared[int(n)]) for n in cand], dtype=np.int64)
    fits = np.array([bool(view.shared[int(n)]) for n in cand], dtype=bool)
    if view.sharing_changes:  # plain GPUs the plan may share count as shared GPUs with all their room
        idle = np.array([view.convertible(int(n)) for n in cand], dtype=np.int64)
        fits |= idle > 0
        rooms += idle * fresh_room(spec, view, cand)
    return fits, rooms, ("shared_gpus", "share_room")


def _mig_rooms(view: DeviceView, spec: Task) -> tuple[np.ndarray, np.ndarray]:
    """Per node of the view: has a profile for the MIG task (bool), and `mig_room` for it (0 without one).

    Built once per (mig_profile, gpu_memory_gib), from one answer per node situation (model, partitioned
    GPUs, plain GPUs): candidate filtering asked profile_for and mig_room per (task, candidate node), 2 M times and
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


def gpu_value(spec: Task, view: DeviceView | None, cand: np.ndarray) -> float:
    """A pod's GPU-equivalents for the priority term: whole GPUs, its share, or its instance's memory slices
    over the GPU's (the smallest over its candidate nodes' models, so the value does not depend on the node),
    times its share for a share of a MIG instance."""
    if is_shared(spec):
        return float(spec.gpu_share or 0.0)
    if not is_mig(spec) and not is_instance_share(spec):
        return float(spec.gpus)
    assert view is not None, "a MIG task needs the device view"
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
    found = fractions[cand]  # type: ignore[index]
    whole = float(found.min()) if found.size and np.isfinite(found).any() else 0.0
    return whole * spec.gpu_share if is_instance_share(spec) and spec.gpu_share is not None else whole
