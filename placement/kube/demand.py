"""What a pod's GPU request means on the nodes it may land on: a whole GPU, a shared replica, a MIG instance.

The NVIDIA device plugin offers three different things under the one name `nvidia.com/gpu`:
whole GPUs; replicas of time-sliced or MPS GPUs (`renameByDefault: false`, the default: the node
offers GPUs × `nvidia.com/gpu.replicas`); and MIG instances under `nvidia.com/mig.strategy=single`.
A v1 task asks for exactly one kind, so a pod's request is read against the nodes its node
selector and tolerations admit, the way the kubelet would satisfy it there:

* only whole-GPU nodes: whole GPUs (the shape as read);
* only shared nodes: `N` replicas = a share N/replicas of one GPU (the fewest replicas among them,
  so the share never overcommits a GPU);
* only strategy-single nodes: one MIG instance of their profile.

A MIG request (`nvidia.com/mig-<profile>`, or `nvidia.com/gpu` on strategy-single nodes) is read the
same way against the nodes offering that profile: where the device plugin shares their instances
(time-slicing or MPS on MIG), `N` devices are a share N/replicas of one instance (the fewest replicas
among them); where it does not, one whole instance; where nodes of both kinds offer it, the whole
instance, with a warning (the shared nodes are not used). The renamed `...shared` resource is a share.

When the pod's nodes mix kinds, the whole-GPU reading wins (a shared or MIG GPU cannot hold a
whole-GPU task, so those nodes are simply not used) and a warning says so. `nvidia.com/gpu.shared`
(the renamed resource) and KAI's `gpu-memory`-only requests are resolved here too: their share
depends on the node's replicas or GPU memory.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from fractions import Fraction

from placement import catalog
from placement.catalog import normalize_profile
from placement.kube.nodes import GPU, GPU_SHARED, NodeInfo
from placement.kube.objects import KubeError, Problem, Warnings
from placement.kube.pods import Shape
from placement.kube.quantity import GIB

_FIELD = "spec.containers[*].resources"


def tolerates(shape: Shape, taint: dict[str, str]) -> bool:
    """Does one of the pod's tolerations match the taint (the kube-scheduler's rule)?"""
    if taint.get("effect") == "PreferNoSchedule":
        return True
    for entry in shape.tolerations:
        t = dict(entry)
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t["operator"] == "Exists" and (not t["key"] or t["key"] == taint["key"]):
            return True
        if t["operator"] == "Equal" and t["key"] == taint["key"] and t["value"] == taint.get("value", ""):
            return True
    return False


def admits(shape: Shape, node: NodeInfo) -> bool:
    """The node matches the pod's node selector and the pod tolerates the node's taints."""
    return all(node.labels.get(k) == v for k, v in shape.node_selector) and all(
        tolerates(shape, t) for t in node.taints)


def kind_of(node: NodeInfo) -> str | None:
    """What `nvidia.com/gpu` means on this node: whole, shared, single (MIG), or None (not offered)."""
    if node.sharing is not None:
        return "shared"
    if node.strategy == "single" and node.mig:
        return "single"
    return "whole" if node.gpus - len(node.mig) - len(node.unhealthy) > 0 else None


def resolve(shape: Shape, nodes: list[NodeInfo], where: str, warnings: Warnings) -> Shape:
    """The shape with its GPU request in the kind the pod's nodes give it."""
    mine = [n for n in nodes if n.gpus and admits(shape, n)]
    if shape.mig_profile and shape.gpu_share is None:  # nvidia.com/mig-<profile>: offered under strategy mixed
        return _mig_kind(shape, [n for n in mine if n.strategy != "single"], where, warnings)
    if not (shape.gpus or shape.shared_replicas or (shape.gpu_memory is not None and shape.gpu_share is None)):
        return shape
    if shape.mig_profile or shape.gpu_share is not None:
        return shape
    if shape.shared_replicas:
        shared = [n for n in mine if n.sharing is not None]
        return _as_share(shape, shape.shared_replicas, shared, where, GPU_SHARED, warnings)
    if shape.gpus == 0:
        return _memory_share(shape, mine, where, warnings)
    kinds: dict[str, list[NodeInfo]] = {}
    for n in mine:
        k = kind_of(n)
        if k is not None:
            kinds.setdefault(k, []).append(n)
    if "whole" in kinds or not kinds:
        others = sorted(k for k in kinds if k != "whole")
        if others:
            warnings.add(where, _FIELD, f"{GPU}: {shape.gpus} whole GPU(s); the pod's nodes also include "
                         f"{' and '.join(others)} nodes, where {GPU} is a {' or '.join(_MEANING[k] for k in others)}: "
                         "placed on whole-GPU nodes only")
        return shape
    if "shared" in kinds:
        if "single" in kinds:
            warnings.add(where, _FIELD, f"{GPU}: the pod's nodes offer both shared replicas and MIG devices: "
                         "imported as a shared replica (the MIG single-strategy nodes are not used)")
        return _as_share(shape, shape.gpus, kinds["shared"], where, GPU, warnings)
    return _mig_kind(_as_mig(shape, kinds["single"], where, warnings), kinds["single"], where, warnings)


_MEANING = {"shared": "shared replica", "single": "MIG instance"}


def _as_share(shape: Shape, count: int, nodes: list[NodeInfo], where: str, resource: str,
              warnings: Warnings) -> Shape:
    if not nodes:  # no node of the pod's shares GPUs: it waits, as it would in Kubernetes
        return dataclasses.replace(shape, gpus=0, shared_replicas=0, gpu_share=Fraction(1))
    replicas = sorted({n.sharing[1] for n in nodes if n.sharing})
    fewest = replicas[0]
    if count > fewest:
        _fail(where, f"{resource}: {count} replicas of a GPU shared {fewest} ways: placement/v1 gives a pod a "
              "share of one GPU")
    if len(replicas) > 1:
        warnings.add(where, _FIELD, f"{resource}: the pod's nodes share GPUs {', '.join(map(str, replicas))} ways: "
                     f"imported as {count}/{fewest} of a GPU everywhere (never more than a node gives)")
    if count > 1:
        warnings.add(where, _FIELD, f"{resource}: {count} replicas are imported as {count}/{fewest} of one GPU (the "
                     "device plugin may spread them over several)")
    return dataclasses.replace(shape, gpus=0, shared_replicas=0, gpu_share=Fraction(count, fewest))


def _as_mig(shape: Shape, nodes: list[NodeInfo], where: str, warnings: Warnings) -> Shape:
    profiles = Counter(n.mig[next(iter(n.mig))][0][0] for n in nodes)
    profile, _ = profiles.most_common(1)[0]
    if len(profiles) > 1:
        warnings.add(where, _FIELD, f"{GPU}: the pod's MIG single-strategy nodes offer profiles "
                     f"{', '.join(sorted(profiles))}: imported as {profile} (select a product to choose)")
    return dataclasses.replace(shape, gpus=0, mig_profile=profile, mig_count=shape.gpus)


def _mig_kind(shape: Shape, nodes: list[NodeInfo], where: str, warnings: Warnings) -> Shape:
    """A MIG request read against the pod's nodes that offer its resource and profile (module docstring): a
    whole instance, or a share of a shared one."""
    profile = normalize_profile(shape.mig_profile or "")
    count = shape.mig_count or 1
    offering = [n for n in nodes
                if any(normalize_profile(p) == profile for layout in n.mig.values() for p, _ in layout)]
    shared = [n for n in offering if n.mig_ways(profile) is not None]
    whole = [n for n in offering if n.mig_ways(profile) is None]
    if shape.mig_shared or (shared and not whole):
        return _as_instance_share(shape, count, shared, where, warnings)
    if shared:
        warnings.add(where, _FIELD, f"MIG {shape.mig_profile}: the pod's nodes offer it whole and shared (time-slicing "
                     "or MPS on MIG): imported as a whole instance (the nodes sharing it are not used)")
    if count > 1:
        _fail(where, f"MIG {shape.mig_profile}: {count} devices of one profile: placement/v1 gives a pod one MIG "
              "instance, or a share of one where the device plugin shares them")
    return shape


def _as_instance_share(shape: Shape, count: int, nodes: list[NodeInfo], where: str, warnings: Warnings) -> Shape:
    """`count` replicas of a shared MIG device: count/replicas of one instance (the fewest replicas among the
    nodes, so the share never overcommits an instance); with no such node it waits, as in Kubernetes."""
    profile = normalize_profile(shape.mig_profile or "")
    if not nodes:
        return dataclasses.replace(shape, gpu_share=Fraction(1))
    replicas = sorted({ways[1] for n in nodes if (ways := n.mig_ways(profile)) is not None})
    fewest = replicas[0]
    if count > fewest:
        _fail(where, f"MIG {shape.mig_profile}: {count} replicas of an instance shared {fewest} ways: placement/v1 "
              "gives a pod a share of one instance")
    if len(replicas) > 1:
        warnings.add(where, _FIELD, f"MIG {shape.mig_profile}: the pod's nodes share its instances "
                     f"{', '.join(map(str, replicas))} ways: imported as {count}/{fewest} of an instance everywhere")
    if count > 1:
        warnings.add(where, _FIELD, f"MIG {shape.mig_profile}: {count} replicas are imported as {count}/{fewest} of "
                     "one instance (the device plugin may spread them over several)")
    return dataclasses.replace(shape, gpu_share=Fraction(count, fewest))


def _memory_share(shape: Shape, nodes: list[NodeInfo], where: str, warnings: Warnings) -> Shape:
    """KAI's `gpu-memory` alone: that much memory of one GPU, so a share of memory / the GPU's memory."""
    assert shape.gpu_memory is not None
    sizes = sorted({m.memory_gib for n in nodes if n.gpu_model and (m := catalog.lookup(n.gpu_model))})
    if not sizes:
        _fail(where, "gpu-memory: none of the pod's nodes has GPUs of a known memory size")
    need = shape.gpu_memory / GIB
    largest = Fraction(repr(sizes[-1]))
    if need > largest:
        _fail(where, f"gpu-memory: {float(need):g} GiB is more than any of the pod's GPUs has ({sizes[-1]:g} GiB)")
    if len(sizes) > 1:
        warnings.add(where, "metadata.annotations.gpu-memory", f"GPUs of {', '.join(f'{s:g}' for s in sizes)} "
                     "GiB: the share is taken of the largest; the memory itself is checked on every GPU")
    return dataclasses.replace(shape, gpu_share=need / largest)


def _fail(where: str, reason: str) -> Shape:
    raise KubeError([Problem(where, _FIELD, reason)])
