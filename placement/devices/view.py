"""The device view of one request: per node, its partitioned, shared and plain GPUs.

Whole-GPU pods are counted per node (the problem's free capacity); pods that take part of a GPU
need to know *which* GPU and, for MIG, which slots. Per node the view holds healthy partitioned
GPUs (occupied / free instances), shared GPUs (what running pods left), and the *plain* GPUs
whole-GPU pods may take. Whole-GPU capacity counts plain GPUs, plus idle partitioned GPUs when
re-partitioning is allowed (they may be made whole again); it never counts a partitioned or
shared GPU otherwise. With `policy.allow_sharing_changes` a plain GPU may also become a shared
GPU (`fresh_share`): the whole-GPU capacity it leaves is the same plain GPU, so MIG, sharing and
whole pods compete for it.
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
                share_use.setdefault((i, pod.gpus[0]), []).append((to_milli(pod.gpu_share), to_mib(gib)))
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
            if is_mig(task) and is_shared(task):
                errors.add(("jobs", j, "tasks", k, "gpu_share"), "a share of a MIG instance (mig_profile with "
                           "gpu_share) is valid and verified, but the planner does not place one yet: leave the job "
                           "out of the request, or ask for a whole instance (drop gpu_share)", task.gpu_share)
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
                     mib_left=to_mib(memory), memory_gib=memory)


def to_milli(share: float) -> int:
    return int(math.ceil(share * MILLI - 1e-6))


def to_mib(gib: float) -> int:
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
        # a shared instance (time-slicing/MPS on MIG) is planned as occupied: it stays where it is, and no
        # pod is placed on it (the planner does not place shares of MIG instances; the verifier checks them)
        busy = occupied.get((i, g), set()) | {x.start for x in node.mig[g] if x.sharing is not None}
        out.append(MigGpu(node=i, gpu=g, occupied=sort_layout(x for x in canon if x[1] in busy),
                          free=sort_layout(x for x in canon if x[1] not in busy)))
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
        mib_left = to_mib(memory) - sum(m for _, m in used)
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


def is_mig(spec: Task) -> bool:
    return spec.mig_profile is not None


def is_shared(spec: Task) -> bool:
    return spec.gpu_share is not None


def uses_devices(spec: Task) -> bool:
    return is_mig(spec) or is_shared(spec)
