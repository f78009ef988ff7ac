"""The device view of one request: per node, its partitioned, shared and plain GPUs.

Whole-GPU pods are counted per node (the problem's free capacity); pods that take part of a GPU
need to know *which* GPU and, for MIG, which slots. Per node the view holds healthy partitioned
GPUs (occupied / free instances), shared GPUs (what running pods left), shared MIG instances
(a layout entry with `sharing`: what running shares left of each), and the *plain* GPUs
whole-GPU pods may take. Whole-GPU capacity counts plain GPUs, plus idle partitioned GPUs when
re-partitioning is allowed (they may be made whole again); it never counts a partitioned or
shared GPU otherwise. With `policy.allow_sharing_changes` a plain GPU may also become a shared
GPU (`fresh_share`): the whole-GPU capacity it leaves is the same plain GPU, so MIG, sharing and
whole pods compete for it. With `policy.allow_mig_changes` a free instance, or one a re-partition
creates, may become a shared MIG instance too (`fresh_instance`, with policy.sharing_default's setting).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from dataclasses import field as _field
from functools import cache

import numpy as np
from placement_models import (
    ErrorList,
    GpuSharing,
    Node,
    PlacementRequest,
    Task,
)

from placement import catalog
from placement.catalog import MigGeometry
from placement.devices.layouts import Layout, layout_problems, sort_layout

MILLI = 1000
#: Parts of one GPU (or MIG instance) in which shares are counted: divisible by every replica count up to 16
#: and by 32, 64 and 128, so the device plugin's k/replicas shares add up exactly (three thirds fill a device;
#: in thousandths, rounded up, two would).
SHARE_PARTS = 5_765_760


@dataclass(frozen=True)
class MigGpu:
    """A healthy partitioned GPU: instances running pods hold (never move) and free ones."""

    node: int
    gpu: int
    occupied: Layout
    free: Layout

    @property
    def layout(self) -> Layout:
        return sort_layout(self.occupied + self.free)

    @property
    def idle(self) -> bool:
        return not self.occupied


@dataclass(frozen=True)
class SharedGpu:
    """A healthy time-sliced/MPS GPU and what its running pods leave: pods, parts of the GPU and parts of its
    memory (`SHARE_PARTS` to the whole of either)."""

    node: int
    gpu: int
    mode: str
    replicas: int
    pods_left: int
    parts_left: int
    memory_left: int
    memory_gib: float  # the model's


@dataclass(frozen=True)
class SharedInstance(SharedGpu):
    """A shared MIG instance (time-slicing or MPS on MIG) of a healthy GPU and what its running shares leave;
    `memory_gib` is the instance's. It never moves and never takes a whole-instance pod."""

    profile: str  # the catalog's name
    start: int


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
    #: per node, its shared MIG instances (GPU, then start order)
    instances: tuple[tuple[SharedInstance, ...], ...] = ()
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

    def fresh_instance(self, n: int, profile: str) -> SharedInstance:
        """What a new shared instance of `profile` on node n offers (policy.sharing_default; node, gpu and
        start -1): a free instance the plan shares, or one a re-partition creates for shares."""
        return _fresh_instance(self.models[n] or "", profile, self.sharing_default.mode,
                               self.sharing_default.replicas)

    def shared_instances(self, n: int) -> tuple[SharedInstance, ...]:
        return self.instances[n] if self.instances else ()

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
    share_use: dict[tuple[int, int], list[tuple[int, int, float]]] = {}  # (node, gpu) -> [(parts, memory, GiB)]
    instance_use: dict[tuple[int, int, int], list[tuple[int, int, float]]] = {}  # (node, gpu, start) -> the same
    for job in request.cluster.running:
        for pod in job.pods:
            i = index[pod.node]
            if pod.mig is not None:
                occupied.setdefault((i, pod.mig.gpu), set()).add(pod.mig.start)
                if pod.gpu_share is not None:
                    instance_use.setdefault((i, pod.mig.gpu, pod.mig.start), []).append(
                        _use(pod.gpu_share, pod.gpu_memory_gib, _instance_gib(models[i], pod.mig.profile)))
            elif pod.gpu_share is not None:
                model = catalog.lookup(models[i] or "")
                share_use.setdefault((i, pod.gpus[0]), []).append(
                    _use(pod.gpu_share, pod.gpu_memory_gib, model.memory_gib if model else 0.0))
            else:
                held[i].update(pod.gpus)
    mig: list[tuple[MigGpu, ...]] = []
    shared: list[tuple[SharedGpu, ...]] = []
    instances: list[tuple[SharedInstance, ...]] = []
    plain: list[tuple[int, ...]] = []
    for i, node in enumerate(nodes):
        mig.append(_node_mig(errors, i, node, models[i], occupied))
        instances.append(_node_instances(errors, i, node, {g.gpu for g in mig[-1]}, instance_use))
        shared.append(_node_shared(errors, i, node, models[i], share_use))
        held[i].update(node.mig, node.sharing)
        plain.append(tuple(g for g in range(node.gpus) if g not in held[i]))
    known = catalog.profile_names()
    for j, job in enumerate(request.jobs):
        for k, task in enumerate(job.tasks):
            if task.mig_profile is not None and not task.mig_auto and catalog.normalize_profile(
                    task.mig_profile) not in known:
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
                      max_sharing_changes=policy.max_sharing_changes, sharing_default=policy.sharing_default,
                      instances=tuple(instances))


@cache
def _fresh(model: str, mode: str, replicas: int) -> SharedGpu:
    found = catalog.lookup(model) if model else None
    memory = found.memory_gib if found else 0.0
    return SharedGpu(node=-1, gpu=-1, mode=mode, replicas=replicas, pods_left=replicas, parts_left=SHARE_PARTS,
                     memory_left=SHARE_PARTS, memory_gib=memory)


@cache
def _fresh_instance(model: str, profile: str, mode: str, replicas: int) -> SharedInstance:
    memory = _instance_gib(model, profile)
    return SharedInstance(node=-1, gpu=-1, mode=mode, replicas=replicas, pods_left=replicas, parts_left=SHARE_PARTS,
                          memory_left=SHARE_PARTS, memory_gib=memory, profile=profile, start=-1)


def _instance_gib(model: str | None, profile: str) -> float:
    """GiB of one instance of `profile` on the GPU model (0 when the catalog has no such instance)."""
    geo = catalog.mig_geometry(model) if model else None
    found = geo.profile(profile) if geo is not None else None
    return found.memory_gib if found is not None else 0.0


def to_parts(share: float) -> int:
    """A share in `SHARE_PARTS`, rounded up (a share never takes less than it asks)."""
    return int(math.ceil(share * SHARE_PARTS - 1e-6))


def memory_parts(gib: float, device_gib: float) -> int:
    """GPU memory in parts of the device's (`SHARE_PARTS` to all of it), rounded up; more than the device when it
    has none the catalog knows."""
    if device_gib <= 0:
        return SHARE_PARTS + 1 if gib > 0 else 0
    return int(math.ceil(gib / device_gib * SHARE_PARTS - 1e-6))


def _use(share: float, gib: float | None, device_gib: float) -> tuple[int, int, float]:
    """(parts, memory parts, GiB) a running share holds; its memory defaults to its share of the device's."""
    if gib is None:
        return to_parts(share), to_parts(share), share * device_gib
    return to_parts(share), memory_parts(gib, device_gib), gib


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
        # a shared instance (time-slicing/MPS on MIG) is planned as occupied: it stays where it is and takes
        # no whole-instance pod; its shares are `instances` (_node_instances)
        busy = occupied.get((i, g), set()) | {x.start for x in node.mig[g] if x.sharing is not None}
        out.append(MigGpu(node=i, gpu=g, occupied=sort_layout(x for x in canon if x[1] in busy),
                          free=sort_layout(x for x in canon if x[1] not in busy)))
    return tuple(out)


def _node_instances(errors: ErrorList, i: int, node: Node, planned: set[int],
                    use: dict[tuple[int, int, int], list[tuple[int, int]]]) -> tuple[SharedInstance, ...]:
    """The shared MIG instances of node i's GPUs in `planned` (healthy, legal layouts: _node_mig's), each with
    what its running shares leave; running shares over an instance's memory are an error with its path."""
    geo = catalog.mig_geometry(node.gpu_model) if node.gpu_model else None
    out = []
    for g in sorted(planned):
        for k, inst in enumerate(node.mig[g]):
            p = geo.profile(inst.profile) if geo is not None else None
            if inst.sharing is None or p is None:
                continue
            used = use.get((i, g, inst.start), [])
            memory_left = SHARE_PARTS - sum(m for _, m, _ in used)
            if memory_left < 0:
                errors.add(("cluster", "nodes", i, "mig", g, k, "sharing"), f"running pods on instance "
                           f"{p.name}@{inst.start} of GPU {g} use {sum(x for _, _, x in used):g} GiB of GPU "
                           f"memory, more than its {p.memory_gib:g} GiB", None)
            out.append(SharedInstance(node=i, gpu=g, mode=inst.sharing.mode, replicas=inst.sharing.replicas,
                                      pods_left=inst.sharing.replicas - len(used),
                                      parts_left=SHARE_PARTS - sum(m for m, _, _ in used), memory_left=memory_left,
                                      memory_gib=p.memory_gib, profile=p.name, start=inst.start))
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
        memory_left = SHARE_PARTS - sum(m for _, m, _ in used)
        if memory_left < 0:
            errors.add(("cluster", "nodes", i, "sharing", g), f"running pods on GPU {g} use "
                       f"{sum(x for _, _, x in used):g} GiB of GPU memory, more than the {memory:g} GiB of "
                       f"{model} (time-slicing has no memory isolation)", None)
        if g in node.unhealthy_gpus:
            continue
        out.append(SharedGpu(node=i, gpu=g, mode=spec.mode, replicas=spec.replicas,
                             pods_left=spec.replicas - len(used), parts_left=SHARE_PARTS - sum(m for m, _, _ in used),
                             memory_left=memory_left, memory_gib=memory))
    return tuple(out)


def is_mig(spec: Task) -> bool:
    """A pod that takes a whole MIG instance."""
    return spec.mig_profile is not None and spec.gpu_share is None


def is_shared(spec: Task) -> bool:
    """A pod that takes a share of a time-sliced/MPS GPU (not of a MIG instance: `is_instance_share`)."""
    return spec.gpu_share is not None and spec.mig_profile is None


def is_instance_share(spec: Task) -> bool:
    """A pod that takes a share of a shared MIG instance of its profile (mig_profile with gpu_share)."""
    return spec.mig_profile is not None and spec.gpu_share is not None


def uses_devices(spec: Task) -> bool:
    return spec.mig_profile is not None or spec.gpu_share is not None
