"""Provisioning: nodes a pool *could* add become candidate nodes, and the solver decides which to add.

A pool with ``provisionable: {max_nodes, node}`` contributes ``max_nodes`` identical, empty
nodes named ``<pool>/new-<k>`` (the wire format's `Provisionable.node_name`) after the cluster's
real nodes. They are ordinary nodes for every filter and constraint; only `compile/cost.py`
knows they must be paid for before use, and decode lists the ones a plan uses under
``Plan.provisioned``. Real nodes always come first, so ``index >= len(request.cluster.nodes)``
identifies an added node.
"""

from __future__ import annotations

from placement_models import Node, PlacementRequest, Provisioned


def added_nodes(request: PlacementRequest) -> tuple[Node, ...]:
    """Every node the request's pools may add, pool by pool in request order."""
    return tuple(
        pool.provisionable.materialise(pool.name, k)
        for pool in request.cluster.pools if pool.provisionable is not None
        for k in range(pool.provisionable.max_nodes)
    )


def first_added(request: PlacementRequest) -> int:
    """Index of the first added node in `Problem.nodes` (= number of real nodes)."""
    return len(request.cluster.nodes)


def opened(request: PlacementRequest, nodes: tuple[Node, ...], used: set[int]) -> list[Provisioned]:
    """The added nodes a placement uses, grouped by pool in request order (for `Plan.provisioned`)."""
    start = first_added(request)
    by_pool: dict[str, list[str]] = {}
    for n in sorted(i for i in used if i >= start):
        by_pool.setdefault(str(nodes[n].pool), []).append(nodes[n].name)
    order = [p.name for p in request.cluster.pools]
    return [Provisioned(pool=p, nodes=by_pool[p]) for p in order if p in by_pool]


def field_path(request: PlacementRequest, index: int, name: str) -> tuple[str | int, ...]:
    """The request path of a node field: the node itself, or the template an added node comes from."""
    if index < first_added(request):
        return ("cluster", "nodes", index, name)
    k = index - first_added(request)
    for i, pool in enumerate(request.cluster.pools):
        if pool.provisionable is None:
            continue
        if k < pool.provisionable.max_nodes:
            return ("cluster", "pools", i, "provisionable", "node", name)
        k -= pool.provisionable.max_nodes
    raise IndexError(index)
