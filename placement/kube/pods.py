"""Pod specs -> what one pod needs: CPU, memory, GPUs (whole, MIG, shared), selectors and tolerations.

Requests follow the kubelet's arithmetic, so a pod fits here exactly when it fits in Kubernetes:
a container's request defaults to its limit; a pod needs the larger of (its app containers plus
sidecars) and (each init container plus the sidecars started before it), plus `spec.overhead`.

GPU requests map to the wire format's three kinds of GPU demand: `nvidia.com/gpu: N` whole GPUs,
`nvidia.com/mig-<profile>: 1` one MIG instance, and a share of a time-sliced/MPS GPU (KAI's
`gpu-fraction`/`gpu-memory` annotations, or the device plugin's renamed `nvidia.com/gpu.shared`).
A pod that mixes them, or asks for instances of two MIG profiles, cannot be expressed and is an error:
placing it as something smaller would overcommit the node. A MIG resource the device plugin shares
(`nvidia.com/mig-<profile>` with replicas, or the renamed `nvidia.com/mig-<profile>.shared`) gives a
share of one instance: the count asked is kept (`mig_count`) and placement.kube.demand reads it against
the replicas of the pod's nodes. Scheduling rules the request cannot carry (pod affinity, spread
constraints, host ports, other extended resources) become warnings.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from placement.catalog import normalize_profile
from placement.kube.nodes import GPU, GPU_SHARED, MIG_PREFIX, quantities, shared_profile
from placement.kube.objects import View, Warnings
from placement.kube.quantity import GIB, MIB, QuantityError, parse_quantity

#: KAI-Scheduler's GPU-sharing annotations (a fraction of one GPU, or GPU memory in MiB).
KAI_FRACTION = "gpu-fraction"
KAI_MEMORY = "gpu-memory"
KAI_FRACTION_DEVICES = "gpu-fraction-num-devices"

_OPERATORS = ("Equal", "Exists")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
#: Pod spec fields the kube-scheduler uses for placement that a v1 task cannot carry.
_UNHONOURED = {
    "topologySpreadConstraints": "spread constraints",
    "resourceClaims": "dynamic resource claims (DRA)",
    "hostNetwork": "host networking (port conflicts)",
}


@dataclass(frozen=True)
class Shape:
    """What one pod needs; equal shapes are pods of one task."""

    cpu: Fraction
    memory: Fraction  # bytes
    gpus: int = 0
    mig_profile: str | None = None
    gpu_share: Fraction | None = None
    gpu_memory: Fraction | None = None  # bytes of GPU memory a shared pod may use
    shared_replicas: int = 0  # nvidia.com/gpu.shared devices: a share decided by the node's replicas
    mig_count: int = 0  # devices of its MIG resource asked: one instance, or replicas of a shared one
    mig_shared: bool = False  # asked by the renamed `nvidia.com/mig-<profile>.shared`: a share, whatever the nodes
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[tuple[tuple[str, Any], ...], ...] = ()

    @property
    def uses_gpu(self) -> bool:
        return bool(self.gpus or self.mig_profile or self.gpu_share or self.shared_replicas)

    def task(self, name: str, replicas: int, share: Fraction | None = None) -> dict[str, Any]:
        """The v1 Task; `share` is the gpu_share to use for `nvidia.com/gpu.shared` pods."""
        out: dict[str, Any] = {"name": name, "replicas": replicas, "cpu": float(self.cpu),
                               "memory_gib": float(self.memory / GIB)}
        if self.gpus:
            out["gpus"] = self.gpus
        if self.mig_profile:
            out["mig_profile"] = self.mig_profile
        gpu_share = self.gpu_share if self.gpu_share is not None else share
        if gpu_share is not None:
            out["gpu_share"] = float(gpu_share)
        if self.gpu_memory is not None:
            out["gpu_memory_gib"] = float(self.gpu_memory / GIB)
        if self.node_selector:
            out["node_selector"] = dict(self.node_selector)
        if self.tolerations:
            out["tolerations"] = [dict(t) for t in self.tolerations]
        return out


def read_shape(spec: View, annotations: dict[str, str], meta: View, warnings: Warnings) -> Shape:
    """The shape of a pod (or pod template) whose spec is `spec` and metadata annotations `annotations`."""
    need = _requests(spec)
    cpu = need.pop("cpu", Fraction(0))
    memory = need.pop("memory", Fraction(0))
    gpus = _count(spec, need.pop(GPU, Fraction(0)), GPU)
    shared = _count(spec, need.pop(GPU_SHARED, Fraction(0)), GPU_SHARED)
    renamed = any(k.startswith(MIG_PREFIX) and shared_profile(k) != k and v > 0 for k, v in need.items())
    migs: dict[str, int] = {}
    for k, v in need.items():
        if k.startswith(MIG_PREFIX):
            profile = normalize_profile(shared_profile(k[len(MIG_PREFIX):]))
            migs[profile] = migs.get(profile, 0) + _count(spec, v, k)
    for k in list(need):
        if k.startswith(MIG_PREFIX):
            del need[k]
    migs = {p: n for p, n in migs.items() if n}
    for name, q in sorted(need.items()):
        if q > 0:
            warnings.add(spec.obj.where, spec.where("containers") + f"[*].resources.{name}",
                         f"resource '{name}' is not modelled by placement/v1: the plan does not check it fits")
    fraction, gpu_memory = _kai_share(meta, annotations, warnings)
    kinds = [k for k, on in (("nvidia.com/gpu", gpus), ("a MIG instance", migs), (GPU_SHARED, shared),
                             ("a KAI gpu-fraction/gpu-memory share", fraction or gpu_memory)) if on]
    if len(kinds) > 1:
        spec.fail("containers", f"the pod asks for {' and '.join(kinds)}: a placement/v1 pod takes whole GPUs, "
                  "one MIG instance or one GPU share, not several kinds")
    if len(migs) > 1:
        asked = ", ".join(f"{n}× {p}" for p, n in sorted(migs.items()))
        spec.fail("containers", f"the pod asks for MIG instances {asked}: placement/v1 gives a pod one instance")
    if shared > 1:
        spec.fail("containers", f"the pod asks for {shared} {GPU_SHARED}: placement/v1 gives a pod one share of "
                  "one GPU")
    _warn_unhonoured(spec, warnings)
    return Shape(cpu=cpu, memory=memory, gpus=gpus, mig_profile=next(iter(migs), None), gpu_share=fraction,
                 gpu_memory=gpu_memory, shared_replicas=shared, mig_count=next(iter(migs.values()), 0),
                 mig_shared=renamed, node_selector=tuple(sorted(_selector(spec, warnings).items())),
                 tolerations=tuple(read_tolerations(spec)))


def _container(c: View) -> dict[str, Fraction]:
    resources = c.sub("resources")
    requests, limits = quantities(resources.sub("requests")), quantities(resources.sub("limits"))
    for name in sorted(set(requests) & set(limits)):
        if name.startswith("nvidia.com/") and requests[name] != limits[name]:
            resources.sub("requests").fail(name, f"{requests[name]} differs from the limit {limits[name]}: "
                                           "extended resources are requested whole (request = limit)")
    return {**limits, **requests}  # a request defaults to the limit


def _add(a: dict[str, Fraction], b: dict[str, Fraction]) -> dict[str, Fraction]:
    return {k: a.get(k, Fraction(0)) + b.get(k, Fraction(0)) for k in set(a) | set(b)}


def _max(a: dict[str, Fraction], b: dict[str, Fraction]) -> dict[str, Fraction]:
    return {k: max(a.get(k, Fraction(0)), b.get(k, Fraction(0))) for k in set(a) | set(b)}


def _requests(spec: View) -> dict[str, Fraction]:
    containers = spec.items("containers")
    if not containers:
        spec.fail("containers", "required: a pod has at least one container")
    apps: dict[str, Fraction] = {}
    for c in containers:
        apps = _add(apps, _container(c))
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for c in spec.items("initContainers"):
        need = _container(c)
        if c.text("restartPolicy") == "Always":  # a sidecar: runs beside everything started after it
            sidecars = _add(sidecars, need)
        else:
            init_peak = _max(init_peak, _add(need, sidecars))
    return _add(_max(_add(apps, sidecars), init_peak), quantities(spec.sub("overhead")))


def _count(spec: View, q: Fraction, name: str) -> int:
    if q.denominator != 1:
        spec.fail("containers", f"{name}: {q} is not a whole number of devices")
    return int(q)


def _kai_share(meta: View, annotations: dict[str, str], warnings: Warnings) -> tuple[Fraction | None,
                                                                                     Fraction | None]:
    fraction = memory = None
    ann = meta.sub("annotations")
    if KAI_FRACTION in annotations:
        try:
            fraction = Fraction(annotations[KAI_FRACTION])
        except (ValueError, ZeroDivisionError):
            ann.fail(KAI_FRACTION, f"'{annotations[KAI_FRACTION]}' is not a number")
        if not 0 < fraction <= 1:
            ann.fail(KAI_FRACTION, f"{annotations[KAI_FRACTION]} must be in (0, 1]")
    if KAI_MEMORY in annotations:
        try:
            memory = parse_quantity(annotations[KAI_MEMORY]) * MIB  # KAI reads gpu-memory in MiB
        except QuantityError as exc:
            ann.fail(KAI_MEMORY, str(exc))
    if KAI_FRACTION_DEVICES in annotations and annotations[KAI_FRACTION_DEVICES] not in ("", "1"):
        warnings.add(meta.obj.where, f"metadata.annotations.{KAI_FRACTION_DEVICES}", "fractions of several GPUs "
                     "per pod are not expressible: imported as a fraction of one GPU")
    return fraction, memory


def _selector(spec: View, warnings: Warnings) -> dict[str, str]:
    """nodeSelector, plus required node affinity when it is one term of single-value `In` expressions."""
    selector = spec.string_map("nodeSelector")
    affinity = spec.sub("affinity")
    node = affinity.sub("nodeAffinity")
    terms = node.sub("requiredDuringSchedulingIgnoredDuringExecution").items("nodeSelectorTerms")
    if terms:
        simple = _single_term(terms)
        if simple is None:
            warnings.add(spec.obj.where, node.where("requiredDuringSchedulingIgnoredDuringExecution"),
                         "only one nodeSelectorTerm of single-value 'In' expressions maps to a node selector; "
                         "this required node affinity is not honoured")
        else:
            for key, value in simple.items():
                if selector.get(key, value) != value:
                    spec.fail("affinity", f"node affinity requires {key}={value} but nodeSelector says "
                              f"{key}={selector[key]}: no node can match")
                selector[key] = value
    for what, label in (("preferredDuringSchedulingIgnoredDuringExecution", "preferred node affinity"),):
        if node.has(what):
            warnings.add(spec.obj.where, node.where(what), f"{label} is not honoured")
    for what in ("podAffinity", "podAntiAffinity"):
        if affinity.has(what):
            warnings.add(spec.obj.where, affinity.where(what), "pod (anti-)affinity is not honoured")
    return selector


def _single_term(terms: list[View]) -> dict[str, str] | None:
    if len(terms) != 1 or terms[0].items("matchFields"):
        return None
    out = {}
    for e in terms[0].items("matchExpressions"):
        values = e.get("values", list, [])
        if e.text("operator") != "In" or len(values) != 1 or not isinstance(values[0], str):
            return None
        out[e.text("key", required=True)] = values[0]
    return out


def read_tolerations(spec: View) -> list[tuple[tuple[str, Any], ...]]:
    """`tolerations` of a pod spec (or a ResourceFlavor's spec), checked, in a hashable form."""
    out = []
    for t in spec.items("tolerations"):
        operator = t.text("operator", "Equal")
        if operator not in _OPERATORS:
            t.fail("operator", f"'{operator}' is not a toleration operator ({', '.join(_OPERATORS)})")
        key, value = t.text("key", "") or "", t.text("value", "") or ""
        if operator == "Exists" and value:
            t.fail("value", "must be empty when operator is Exists")
        if operator == "Equal" and not key:
            t.fail("key", "required unless operator is Exists (an empty key with Exists tolerates every taint)")
        effect = t.text("effect", "") or None
        if effect is not None and effect not in _EFFECTS:
            t.fail("effect", f"'{effect}' is not a taint effect ({', '.join(_EFFECTS)})")
        entry: dict[str, Any] = {"key": key, "operator": operator, "value": value}
        if effect:
            entry["effect"] = effect
        out.append(tuple(entry.items()))
    return out


def _warn_unhonoured(spec: View, warnings: Warnings) -> None:
    for key, what in _UNHONOURED.items():
        if spec.value.get(key):
            warnings.add(spec.obj.where, spec.where(key), f"{what}: not honoured by placement/v1")
    for c in spec.items("containers"):
        for p in c.items("ports"):
            if p.get("hostPort", int, 0):
                warnings.add(spec.obj.where, p.where("hostPort"), "host ports (one pod per node and port) are "
                             "not honoured")
