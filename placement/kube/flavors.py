"""Kueue ResourceFlavors: the nodes a flavor's quota counts, and the node labels and tolerations it gives pods.

When Kueue admits a workload it picks a flavor per pod set and injects the flavor's `nodeLabels`
into the pods' node selectors and its `tolerations` into their tolerations, so a ClusterQueue's
work lands only on its flavors' nodes. Two things carry that into a v1 request:

* Quota scopes. A v1 flavor quota counts the GPUs, CPU and memory of one pool, one GPU model or
  both. A flavor whose nodes form no such set (a node group label of Kueue's TAS examples, say)
  gets pools of its own: the nodes it selects are given a pool named after the flavor (split by
  capacity type as any pool), so its quota is a pool quota, exact. For a GPU quota only its GPU
  nodes need to form the set; for a CPU or memory quota every node it selects does, so a flavor
  with one (a CPU-only flavor on CPU nodes, say) moves its CPU nodes too. Prices carry over from
  the pool the nodes were in.
* Node selectors and tolerations. A ClusterQueue's pod gets the labels every flavor it may use
  has in common (with one flavor: exactly the flavor's `nodeLabels`), and the flavors' tolerations.
  With several flavors of disjoint labels the quota scopes keep the queue on its flavors' nodes
  (a queue has quota 0 and may not borrow in the scopes of flavors it does not list).

`nodeTaints` need nothing: the nodes carry their taints, and a pod without the toleration cannot
land there in Kubernetes either.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from placement.kube.nodes import NodeInfo, assign_pools
from placement.kube.objects import Obj
from placement.kube.pods import Shape, read_tolerations
from placement.kube.queues import CLUSTER, Scope, flavor_scope, resource_scope


def flavor_labels(obj: Obj) -> dict[str, str]:
    return obj.view().sub("spec").string_map("nodeLabels")


def flavor_tolerations(obj: Obj) -> list[tuple[tuple[str, Any], ...]]:
    """The flavor's tolerations in the shape placement.kube.pods reads a pod's."""
    return read_tolerations(obj.view().sub("spec"))


def split_pools(flavors: Iterable[Obj], nodes: list[NodeInfo], prices: dict[str, float],
                cpu_flavors: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Pools again, with the GPU nodes of each flavor no pool or GPU model expresses in pools of their own, and
    all the nodes of each flavor in `cpu_flavors` (those with a CPU or memory quota) no pool or model expresses."""
    pools = assign_pools(nodes, prices)
    flavors, cpu_flavors = list(flavors), set(cpu_flavors)
    loose = [f for f in flavors if flavor_scope(f, nodes)[1] is None and any(
        n.gpus for n in nodes if _selects(f, n))]
    loose_all = [f for f in flavors if f.name in cpu_flavors and resource_scope(f, nodes) is None
                 and any(_selects(f, n) for n in nodes)]
    if not loose and not loose_all:
        return pools
    price_of = {p["name"]: p.get("gpu_hour_price") for p in pools}
    old = {n.name: price_of.get(n.pool) for n in nodes}
    for n in nodes:
        mine = sorted({f.name for f in loose if n.gpus and _selects(f, n)}
                      | {f.name for f in loose_all if _selects(f, n)})
        if mine:
            n.pool_base = "+".join(mine)
    pools = assign_pools(nodes, prices)
    for p in pools:
        found = {old[n.name] for n in nodes if n.pool == p["name"]}
        if "gpu_hour_price" not in p and len(found) == 1 and (price := found.pop()) is not None:
            p["gpu_hour_price"] = price
    return pools


def _selects(flavor: Obj, node: NodeInfo) -> bool:
    return all(node.labels.get(k) == v for k, v in flavor_labels(flavor).items())


def admitted_shape(shape: Shape, flavors: list[tuple[dict[str, str], list[tuple[tuple[str, Any], ...]]]]) -> Shape:
    """The pod as Kueue admits it under one of `flavors` ((nodeLabels, tolerations) each): the labels all
    flavors it may take share join its selector, their tolerations its tolerations.

    A flavor whose labels contradict the pod's own selector is never chosen (Kueue skips it)."""
    own = dict(shape.node_selector)
    usable = [(labels, tols) for labels, tols in flavors if all(own.get(k, v) == v for k, v in labels.items())]
    if not usable:
        usable = flavors  # no flavor fits the pod: it stays pending, as in Kueue
    common = dict(usable[0][0])
    for labels, _ in usable[1:]:
        common = {k: v for k, v in common.items() if labels.get(k) == v}
    selector = {**common, **own}
    tolerations = list(shape.tolerations)
    for _, tols in usable:
        tolerations += [t for t in tols if t not in tolerations]
    return replace(shape, node_selector=tuple(sorted(selector.items())), tolerations=tuple(tolerations))


__all__ = ["CLUSTER", "Scope", "admitted_shape", "flavor_labels", "flavor_tolerations", "split_pools"]
