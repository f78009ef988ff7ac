"""Nodes: capacity, GPUs from NVIDIA's labels and resources, taints, pools and topology labels.

What Kubernetes says about a node's GPUs (docs/hardware.md §4, §6):

* GPU Feature Discovery labels the model (`nvidia.com/gpu.product`, a sanitised product name the
  catalog accepts as an alias), the count and the MIG strategy. With strategy `none` the device
  plugin offers whole GPUs as `nvidia.com/gpu`, and fewer allocatable than present means unhealthy
  GPUs. With `mixed`, whole GPUs stay `nvidia.com/gpu` and each MIG profile becomes its own
  resource `nvidia.com/mig-<profile>`, counted over the node; `gpu.count` still counts physical
  GPUs. With `single`, every GPU carries instances of one profile and they are offered as
  `nvidia.com/gpu`; GFD then reports the profile in the product name and the instance count.
* Kubernetes does not say *which* GPU holds which instance at which memory slice: the importer
  rebuilds a legal layout from the counts (the mig-parted config named by `nvidia.com/mig.config`
  when it explains them, else a packing), and says so in a warning. Placement needs how many
  instances of each profile a node offers; the exact slots only matter for re-partitioning.
* Time-slicing and MPS: `nvidia.com/gpu.replicas` and `nvidia.com/gpu.sharing-strategy` make every
  GPU of the node a shared GPU (node.sharing) with that many replicas.
* Sharing on MIG devices (the device plugin's `sharing.timeSlicing` or `sharing.mps` on MIG resources,
  GKE's time-sharing on MIG): under strategy single GFD's `-SHARED` MIG product with
  `nvidia.com/gpu.replicas` (or the renamed `nvidia.com/gpu.shared`); under strategy mixed
  `nvidia.com/mig-<profile>` with a `nvidia.com/mig-<profile>.replicas` label above 1, or the renamed
  `nvidia.com/mig-<profile>.shared` (`renameByDefault`). Each instance is offered `replicas` times, so
  the node offers instances × replicas: the instances are the offer divided by the replicas, and each
  becomes a shared MIG instance of the layout (`MigInstance.sharing`, mode from the
  `sharing-strategy` label) that pods share (placement.kube.demand reads their requests as shares).
* `nvidia.com/gpu.clique` (multi-node NVLink, GB200 NVL72) is the node's nvlink_domain.
* What a pod's `nvidia.com/gpu` means on these nodes is placement.kube.demand's.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from placement import catalog, devices
from placement.catalog import MigGeometry, MigProfile
from placement.kube.objects import Obj, View, Warnings
from placement.kube.quantity import GIB, QuantityError, parse_quantity

GPU = "nvidia.com/gpu"
GPU_SHARED = "nvidia.com/gpu.shared"
MIG_PREFIX = "nvidia.com/mig-"
PRODUCT = "nvidia.com/gpu.product"
COUNT = "nvidia.com/gpu.count"
MIG_STRATEGY = "nvidia.com/mig.strategy"
MIG_CONFIG = "nvidia.com/mig.config"
REPLICAS = "nvidia.com/gpu.replicas"
SHARING_STRATEGY = "nvidia.com/gpu.sharing-strategy"
CLIQUE = "nvidia.com/gpu.clique"
HOSTNAME = "kubernetes.io/hostname"

#: Labels that name a node's pool (node group), first match wins; override with ImportOptions.pool_labels.
POOL_LABELS = ("karpenter.sh/nodepool", "cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup",
               "kubernetes.azure.com/agentpool")

#: Capacity-type labels: label -> {value (lower case) -> pool capacity_type}.
CAPACITY_LABELS: dict[str, dict[str, str]] = {
    "karpenter.sh/capacity-type": {"spot": "spot", "on-demand": "on-demand", "reserved": "reserved"},
    "eks.amazonaws.com/capacitytype": {"spot": "spot", "on_demand": "on-demand", "capacity_block": "reserved"},
    "cloud.google.com/gke-spot": {"true": "spot", "false": "on-demand"},
    "cloud.google.com/gke-provisioning": {"spot": "spot", "standard": "on-demand", "queued": "reserved"},
    "kubernetes.azure.com/scalesetpriority": {"spot": "spot", "regular": "on-demand"},
}

#: Kubernetes' own taints for a cordoned or not-ready node (TaintNodesByCondition).
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "NoSchedule"}
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "value": "", "effect": "NoSchedule"}
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

Instance = tuple[str, int]


@dataclass
class NodeInfo:
    """One node as the request will see it, plus what exporting and running pods need to know."""

    obj: Obj
    name: str
    labels: dict[str, str]
    cpu: Fraction
    memory: Fraction  # bytes
    taints: list[dict[str, str]]
    gpu_model: str | None = None
    gpus: int = 0
    mig: dict[int, list[Instance]] = field(default_factory=dict)
    sharing: tuple[str, int] | None = None  # (mode, replicas) of every GPU
    #: MIG profile (the catalog's name) -> (mode, replicas): the device plugin shares every instance of it
    mig_sharing: dict[str, tuple[str, int]] = field(default_factory=dict)
    unhealthy: list[int] = field(default_factory=list)
    strategy: str = "none"
    pool_base: str | None = None
    capacity_type: str = "on-demand"
    pool: str = "on-demand"

    def mig_ways(self, profile: str) -> tuple[str, int] | None:
        """(mode, replicas) when the device plugin shares this node's instances of `profile`, else None."""
        key = catalog.normalize_profile(profile)
        return next((ways for p, ways in self.mig_sharing.items() if catalog.normalize_profile(p) == key), None)

    @property
    def hostname(self) -> str:
        return self.labels.get(HOSTNAME, self.name)

    def wire(self, rack_label: str | None, block_label: str | None) -> dict[str, Any]:
        """The v1 Node."""
        topology = {"nvlink_domain": self.labels.get(CLIQUE) or None,
                    "rack": self.labels.get(rack_label) if rack_label else None,
                    "block": self.labels.get(block_label) if block_label else None}
        out: dict[str, Any] = {
            "name": self.name, "pool": self.pool, "gpus": self.gpus, "cpu": float(self.cpu),
            "memory_gib": float(self.memory / GIB), "labels": dict(self.labels), "taints": self.taints,
            "topology": {k: v for k, v in topology.items() if v},
        }
        if self.gpu_model:
            out["gpu_model"] = self.gpu_model
        if self.mig:
            out["mig"] = {g: [{"profile": p, "start": s, **({"sharing": {"mode": self.mig_sharing[p][0],
                                                                        "replicas": self.mig_sharing[p][1]}}
                                                           if p in self.mig_sharing else {})} for p, s in layout]
                          for g, layout in sorted(self.mig.items())}
        if self.sharing:
            mode, replicas = self.sharing
            out["sharing"] = {g: {"mode": mode, "replicas": replicas} for g in range(self.gpus)
                              if g not in self.unhealthy}
        if self.unhealthy:
            out["unhealthy_gpus"] = self.unhealthy
        return out


def read_node(obj: Obj, pool_labels: tuple[str, ...], warnings: Warnings) -> NodeInfo:
    """A Node object -> NodeInfo; raises KubeError naming the node and field for anything malformed."""
    root = obj.view()
    labels = obj.labels()
    status = root.sub("status")
    allocatable = quantities(status.sub("allocatable"))
    capacity = quantities(status.sub("capacity"))
    cpu = allocatable.get("cpu", capacity.get("cpu"))
    memory = allocatable.get("memory", capacity.get("memory"))
    if cpu is None or memory is None:
        status.sub("allocatable").fail("cpu" if cpu is None else "memory",
                                       "required: the node's allocatable cpu and memory (kubectl get nodes -o json)")
    if cpu < 0 or memory < 0:
        status.sub("allocatable").fail("cpu" if cpu < 0 else "memory", "must not be negative")
    info = NodeInfo(obj=obj, name=obj.name, labels=labels, cpu=cpu, memory=memory,
                    taints=_taints(root, warnings))
    _gpus(info, status, allocatable, capacity, warnings)
    _pool(info, pool_labels)
    return info


def quantities(view: View) -> dict[str, Fraction]:
    """A resource map (allocatable, requests, limits, overhead) parsed exactly; errors name the field."""
    out: dict[str, Fraction] = {}
    for name, v in view.mapping_items():
        try:
            out[name] = parse_quantity(v.value)
        except QuantityError as exc:
            v.fail(None, str(exc))
        if out[name] < 0:
            v.fail(None, f"{v.value} must not be negative")
    return out


def _taints(root: View, warnings: Warnings) -> list[dict[str, str]]:
    spec = root.sub("spec")
    taints = []
    for t in spec.items("taints"):
        key = t.text("key", required=True)
        if not key:
            t.fail("key", "must not be empty")
        effect = t.text("effect", required=True)
        if effect not in _EFFECTS:
            t.fail("effect", f"'{effect}' is not a taint effect ({', '.join(_EFFECTS)})")
        taints.append({"key": key, "value": t.text("value", "") or "", "effect": effect})
    keys = {t["key"] for t in taints}
    if spec.get("unschedulable", bool, False) and UNSCHEDULABLE_TAINT["key"] not in keys:
        taints.append(dict(UNSCHEDULABLE_TAINT))  # cordoned: what the node controller adds
    ready = [c for c in root.sub("status").items("conditions") if c.text("type") == "Ready"]
    if ready and ready[0].text("status") != "True" and not keys & {NOT_READY_TAINT["key"],
                                                                       "node.kubernetes.io/unreachable"}:
        taints.append(dict(NOT_READY_TAINT))
        warnings.add(root.obj.where, "status.conditions[Ready]", "node is not Ready: imported with the not-ready "
                     "taint, so only pods that tolerate it are placed there")
    return taints


# --------------------------------------------------------------------------------------------
# GPUs


def _gpus(info: NodeInfo, status: View, allocatable: dict[str, Fraction], capacity: dict[str, Fraction],
          warnings: Warnings) -> None:
    labels = info.labels
    alloc = status.sub("allocatable")
    whole = _whole(alloc, allocatable.get(GPU, Fraction(0)), GPU)
    shared = _whole(alloc, allocatable.get(GPU_SHARED, Fraction(0)), GPU_SHARED)
    mig_counts: dict[str, int] = {}
    mig_sharing: dict[str, tuple[str, int]] = {}  # by the resource's profile name
    for name, q in allocatable.items():
        if name.startswith(MIG_PREFIX) and _whole(alloc, q, name) > 0:
            profile = shared_profile(name[len(MIG_PREFIX):])
            offered = _whole(alloc, q, name)
            ways = _mig_ways(info, name, profile, renamed=profile != name[len(MIG_PREFIX):])
            if ways is not None:  # time-slicing/MPS on these MIG devices: each offered `replicas` times
                offered = _instances(info, f"status.allocatable.{name}", offered, ways[1])
                mig_sharing[profile] = ways
            mig_counts[profile] = mig_counts.get(profile, 0) + offered
    product = labels.get(PRODUCT)
    if not (whole or shared or mig_counts):
        if product and (_label_int(info, COUNT) or 0) > 0:
            warnings.add(info.obj.where, "status.allocatable", f"GFD labels {product} GPUs but the node offers "
                         "no nvidia.com/* resource (device plugin not running?): imported without GPUs")
        return
    if not product:
        info.obj.view().fail("metadata.labels", f"the node offers GPUs ({GPU}) but has no '{PRODUCT}' label: "
                             "GPU Feature Discovery names the model; label the node or deploy GFD")
    if product.upper().endswith("-MIG-INVALID"):
        info.obj.view().fail(f"metadata.labels.{PRODUCT}", f"'{product}': GFD found an invalid MIG 'single' "
                             "configuration (mixed MIG modes, an empty MIG GPU or several profiles)")
    model = catalog.lookup(product)
    if model is None:
        info.obj.view().fail(f"metadata.labels.{PRODUCT}", f"unknown GPU model '{product}' on node '{info.name}' "
                             f"(known: {', '.join(catalog.known_models())}; aliases in placement/catalog/gpus.json)")
    info.gpu_model = model.name
    info.strategy = labels.get(MIG_STRATEGY, "none") or "none"
    count = _label_int(info, COUNT)
    sharing = _sharing(info)
    if info.strategy == "single" and "-MIG-" in product.upper():
        offered = whole or shared
        if sharing is None and (shared or shared_profile(product) != product):
            sharing = _single_ways(info, product, offered, count)
        if sharing is not None:  # the device plugin offers each MIG device `replicas` times
            where = f"status.allocatable.{GPU_SHARED if shared else GPU}"
            offered = _instances(info, where, offered, sharing[1])
        _single(info, model.mig, shared_profile(product), offered, count, warnings)
        if sharing is not None:
            info.mig_sharing = {layout[0][0]: sharing for layout in info.mig.values() if layout}
    elif mig_counts:  # strategy mixed in use (with no instance anywhere, missing GPUs are unhealthy ones)
        _mixed(info, model.mig, whole, mig_counts, count, warnings)
        info.mig_sharing = {_profile(info, model.mig, p).name: ways for p, ways in mig_sharing.items()}
    elif sharing is not None:
        mode, replicas = sharing
        offered = whole or shared
        physical = count if count is not None else math.ceil(offered / replicas)
        info.gpus, info.sharing = physical, (mode, replicas)
        healthy = offered // replicas
        info.unhealthy = list(range(healthy, physical)) if healthy < physical else []
    else:
        physical = count if count is not None else _whole(status.sub("capacity"), capacity.get(GPU, Fraction(whole)),
                                                          GPU)
        info.gpus = max(physical, whole)
        info.unhealthy = list(range(whole, info.gpus))
    for profile, (mode, replicas) in sorted(info.mig_sharing.items()):
        warnings.add(info.obj.where, "metadata.labels", f"MIG {profile} devices shared {replicas} ways ({mode}): "
                     f"imported as shared instances; a pod asking for one device takes 1/{replicas} of an instance")
    if info.unhealthy:
        warnings.add(info.obj.where, "status.allocatable", f"{len(info.unhealthy)} of {info.gpus} GPUs are not "
                     f"allocatable (unhealthy): imported as unhealthy GPU(s) {info.unhealthy} (Kubernetes does "
                     "not say which)")


def _whole(view: View, q: Fraction, name: str) -> int:
    if q.denominator != 1 or q < 0:
        view.fail(name, f"{q} is not a whole, non-negative number of devices")
    return int(q)


def _label_int(info: NodeInfo, key: str) -> int | None:
    text = info.labels.get(key)
    if text is None or text == "":
        return None
    try:
        value = int(text)
    except ValueError:
        info.obj.view().fail(f"metadata.labels.{key}", f"'{text}' is not a whole number")
    if value < 0:
        info.obj.view().fail(f"metadata.labels.{key}", f"'{text}' must not be negative")
    return value


def _sharing(info: NodeInfo) -> tuple[str, int] | None:
    replicas = _label_int(info, REPLICAS)
    if replicas is None or replicas <= 1:
        return None
    mode = info.labels.get(SHARING_STRATEGY, "time-slicing")
    if mode not in ("time-slicing", "mps"):
        info.obj.view().fail(f"metadata.labels.{SHARING_STRATEGY}", f"'{mode}' is not a sharing strategy "
                             "(time-slicing, mps)")
    return mode, replicas


def shared_profile(name: str) -> str:
    """A MIG profile or product name without the mark GFD and the device plugin add to shared devices
    (`1g.5gb-SHARED`, `1g.5gb.shared`)."""
    for mark in ("-SHARED", ".shared"):
        if name.upper().endswith(mark.upper()):
            return name[: -len(mark)]
    return name


def _mig_ways(info: NodeInfo, name: str, profile: str, renamed: bool) -> tuple[str, int] | None:
    """(mode, replicas) of a MIG resource the device plugin shares, None when it does not: GFD labels the
    profile's resource (`nvidia.com/mig-<profile>.replicas`, `.sharing-strategy`); a renamed resource
    (`...shared`) is shared whatever its labels say, by the node's `nvidia.com/gpu.replicas` if the profile has
    none."""
    own = f"{MIG_PREFIX}{profile}"
    label = next((k for k in (f"{name}.replicas", f"{own}.replicas") if (_label_int(info, k) or 1) > 1), None)
    replicas = _label_int(info, label) if label is not None else None
    if replicas is None and renamed:
        replicas = _label_int(info, REPLICAS)
        if replicas is None or replicas <= 1:
            info.obj.view().fail(f"status.allocatable.{name}", f"a shared MIG resource, but no '{own}.replicas' "
                                 "label says how many ways: GPU Feature Discovery publishes it (deploy GFD, or label "
                                 "the node)")
    if replicas is None:
        return None
    strategy_label = next((k for k in (f"{own}.sharing-strategy", SHARING_STRATEGY) if info.labels.get(k)
                           and info.labels[k] != "none"), None)
    return _mode(info, strategy_label), replicas


def _single_ways(info: NodeInfo, product: str, offered: int, count: int | None) -> tuple[str, int]:
    """Strategy single with a `-SHARED` product (or the renamed `nvidia.com/gpu.shared`) but no
    `nvidia.com/gpu.replicas`: the replicas are the devices offered over the MIG devices GFD counts."""
    if count and offered % count == 0 and offered // count > 1:
        return _mode(info, SHARING_STRATEGY if info.labels.get(SHARING_STRATEGY) else None), offered // count
    info.obj.view().fail(f"metadata.labels.{PRODUCT}", f"'{product}': MIG devices shared by time-slicing or MPS, "
                         f"but neither '{REPLICAS}' nor '{COUNT}' says how many ways (GFD publishes both)")


def _mode(info: NodeInfo, label: str | None) -> str:
    mode = info.labels.get(label, "time-slicing") if label is not None else "time-slicing"
    if mode not in ("time-slicing", "mps"):
        info.obj.view().fail(f"metadata.labels.{label}", f"'{mode}' is not a sharing strategy (time-slicing, mps)")
    return mode


def _instances(info: NodeInfo, where: str, offered: int, replicas: int) -> int:
    """MIG devices behind `offered` replicas of devices shared `replicas` ways."""
    if offered % replicas:
        info.obj.view().fail(where, f"{offered} devices offered is not a whole number of MIG devices shared "
                             f"{replicas} ways")
    return offered // replicas


def _profile(info: NodeInfo, geo: MigGeometry | None, name: str, where: str = "status.allocatable") -> MigProfile:
    p = geo.profile(name) if geo is not None else None
    if p is None:
        known = ", ".join(q.name for q in geo.profiles) if geo else "none: the model has no MIG"
        what = f"'{MIG_PREFIX}{name}'" if where == "status.allocatable" else f"'{info.labels.get(PRODUCT)}'"
        info.obj.view().fail(where, f"{what}: {info.gpu_model} has no MIG profile '{name}' (profiles: {known})")
    return p


def _single(info: NodeInfo, geo: MigGeometry | None, product: str, devices_: int, count: int | None,
            warnings: Warnings) -> None:
    """Strategy single: `nvidia.com/gpu` counts MIG instances of the one profile in the product name."""
    name = product[product.upper().index("-MIG-") + len("-MIG-"):]
    p = _profile(info, geo, name, f"metadata.labels.{PRODUCT}")
    assert geo is not None
    total = count if count is not None else devices_
    per_gpu = max_per_gpu(geo, p)
    gpus = math.ceil(total / per_gpu) if total else 0
    layouts = pack_mig(geo, {p.name: total}, gpus)
    if layouts is None:  # cannot happen with gpus = ceil(total / per_gpu); kept as a guard
        info.obj.view().fail("status.allocatable", f"{total} {p.name} instances do not fit {gpus} GPUs")
    info.gpus = gpus
    info.mig = dict(enumerate(layouts))
    warnings.add(info.obj.where, f"metadata.labels.{MIG_STRATEGY}", f"MIG strategy 'single': the {total} "
                 f"{p.name} instances Kubernetes offers as {GPU} are imported as MIG instances on {gpus} GPU(s): a pod "
                 f"asking for {GPU} there takes one {p.name} instance")


def _mixed(info: NodeInfo, geo: MigGeometry | None, whole: int, counts: dict[str, int], count: int | None,
           warnings: Warnings) -> None:
    """Strategy mixed: whole GPUs plus per-profile MIG resources; rebuild which GPU holds what."""
    profiles = {_profile(info, geo, name).name: n for name, n in counts.items()}
    assert geo is not None  # _profile refused the resources of a model without MIG
    if count is not None:
        mig_gpus = count - whole
        if mig_gpus < 0:
            info.obj.view().fail(f"metadata.labels.{COUNT}", f"{count} GPUs but {whole} whole GPUs allocatable")
    elif profiles:
        mig_gpus = next((m for m in range(1, 65) if pack_mig(geo, profiles, m) is not None), 0)
    else:
        mig_gpus = 0
    template = _template(info, geo, profiles, mig_gpus)
    layouts = template or pack_mig(geo, profiles, mig_gpus)
    if layouts is None:
        have = ", ".join(f"{n}× {p}" for p, n in sorted(profiles.items()))
        info.obj.view().fail("status.allocatable", f"MIG instances {have} do not fit the {mig_gpus} MIG-enabled "
                             f"GPU(s) ({COUNT} {count} minus {whole} whole GPUs) of a {info.gpu_model}")
    info.gpus = whole + mig_gpus
    info.mig = {whole + k: layout for k, layout in enumerate(layouts)}
    if profiles:
        how = f"the mig-parted config '{info.labels[MIG_CONFIG]}'" if template else "a legal packing"
        warnings.add(info.obj.where, "status.allocatable", "MIG layout rebuilt from the per-profile counts "
                     f"(Kubernetes does not say which GPU holds which instance): GPUs {whole}..{info.gpus - 1} "
                     f"partitioned as {how}")


def _template(info: NodeInfo, geo: MigGeometry, profiles: dict[str, int], gpus: int) -> list[list[Instance]] | None:
    """The layout of the mig-parted config the node is labelled with, when it explains the counts exactly."""
    config = info.labels.get(MIG_CONFIG, "")
    per_gpu: dict[str, int] | None = geo.templates.get(config)
    if per_gpu is None and config.startswith("all-"):
        p = geo.profile(config[len("all-"):])
        per_gpu = {p.name: max_per_gpu(geo, p)} if p is not None else None
    if not per_gpu or not gpus or {p: n * gpus for p, n in per_gpu.items()} != profiles:
        return None
    one = pack_mig(geo, per_gpu, 1)
    return None if one is None else [list(one[0]) for _ in range(gpus)]


def max_per_gpu(geo: MigGeometry, p: MigProfile) -> int:
    """How many instances of one profile a GPU holds (mig-parted's `all-<profile>`)."""
    return max(k for k in range(1, geo.max_instances + 1) if pack_mig(geo, {p.name: k}, 1) is not None)


def pack_mig(geo: MigGeometry, wanted: dict[str, int], gpus: int) -> list[list[Instance]] | None:
    """Legal layouts for `gpus` GPUs holding exactly `wanted` instances, or None if none exists.

    Depth-first, largest instances first, each at its lowest legal start; GPUs in the same state
    are tried once (they are interchangeable), which keeps the search to a few hundred steps for
    any real node.
    """
    items: list[MigProfile] = []
    for name, n in wanted.items():
        p = geo.profile(name)
        assert p is not None, name
        items.extend([p] * n)
    items.sort(key=lambda p: (-p.memory_slices, -p.compute_slices, p.name))
    if len(items) > gpus * geo.max_instances:
        return None
    layouts: list[list[Instance]] = [[] for _ in range(gpus)]
    masks = [0] * gpus
    counts = [Counter[str]() for _ in range(gpus)]
    media = [False] * gpus
    budget = [50_000]

    def place(i: int) -> bool:
        if i == len(items):
            return True
        budget[0] -= 1
        if budget[0] < 0:
            return False
        p = items[i]
        tried: set[tuple[int, tuple[tuple[str, int], ...], bool]] = set()
        for g in range(gpus):
            state = (masks[g], tuple(sorted(counts[g].items())), media[g])
            if state in tried or len(layouts[g]) >= geo.max_instances:
                continue
            tried.add(state)
            if counts[g][p.name] >= p.max_count or (p.media and media[g]):
                continue
            for start in p.starts:
                bits = ((1 << p.memory_slices) - 1) << start
                if masks[g] & bits:
                    continue
                masks[g] |= bits
                counts[g][p.name] += 1
                was_media, media[g] = media[g], media[g] or p.media
                layouts[g].append((p.name, start))
                if place(i + 1):
                    return True
                layouts[g].pop()
                media[g] = was_media
                counts[g][p.name] -= 1
                masks[g] &= ~bits
        return False

    if not place(0):
        return None
    result = [sorted(layout, key=lambda inst: inst[1]) for layout in layouts]
    assert all(not devices.layout_problems(geo, layout) for layout in result)
    return result


# --------------------------------------------------------------------------------------------
# Pools


def _pool(info: NodeInfo, pool_labels: tuple[str, ...]) -> None:
    info.pool_base = next((info.labels[k] for k in pool_labels if info.labels.get(k)), None)
    for label, values in CAPACITY_LABELS.items():
        found = next((v for k, v in info.labels.items() if k.lower() == label), None)
        if found is None:
            continue
        kind = values.get(found.lower())
        if kind is None:
            info.obj.view().fail(f"metadata.labels.{label}", f"'{found}' is not a capacity type this importer "
                                 f"knows ({', '.join(values)})")
        info.capacity_type = kind
        break


def assign_pools(nodes: list[NodeInfo], prices: dict[str, float]) -> list[dict[str, Any]]:
    """Pools by node group label and capacity type; a group that mixes types is split per type."""
    types: dict[str | None, set[str]] = {}
    for n in nodes:
        types.setdefault(n.pool_base, set()).add(n.capacity_type)
    pools: dict[str, str] = {}
    for n in nodes:
        if n.pool_base is None:
            n.pool = n.capacity_type
        elif len(types[n.pool_base]) > 1:
            n.pool = f"{n.pool_base}-{n.capacity_type}"
        else:
            n.pool = n.pool_base
        if pools.setdefault(n.pool, n.capacity_type) != n.capacity_type:  # a group named like a capacity type
            n.pool = f"{n.pool}-{n.capacity_type}"
            pools.setdefault(n.pool, n.capacity_type)
    out = []
    for name, kind in pools.items():
        pool: dict[str, Any] = {"name": name, "capacity_type": kind}
        if name in prices:
            pool["gpu_hour_price"] = prices[name]
        out.append(pool)
    return out
