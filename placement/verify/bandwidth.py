"""`topology.bandwidth`: how far each multi-GPU pod's GPUs fall short of the best set of its size.

The planner picks a pod's GPU indices after the solve and reports −weights.topology × Σ over pods of
(1 − the bandwidth of its GPU set / the best bandwidth any set of that size has on the empty node), a
set's bandwidth being the sum of `bandwidth_gbs` over its pairs. The links are hardware facts, read from
the catalog (placement.catalog.links: the node's `topo_matrix`, else its `nvlink` preset); the best set is
found here by trying every set of that size, independently of the planner's search. The term is reported
only where some node's links differ between pairs (elsewhere every set is the best one and the term is 0).

Not derived where a node's set sizes allow more than `EXACT_SETS` combinations (the planner then searches
heuristically) or a plan names a node the verifier does not know.
"""

from __future__ import annotations

import itertools
import math

from placement_models import Node

from placement.catalog.links import gpu_graph, parse_topo_matrix
from placement.verify.context import Context, Expected

#: The most GPU sets tried for one node and pod size (every set of a 16-GPU node is 12,870).
EXACT_SETS = 20_000

Links = dict[tuple[int, int], float]


def _shape(node: Node) -> tuple[object, ...]:
    """What a node's links follow: nodes alike in it share one graph (a cluster has a few shapes, not 12,500)."""
    return node.gpus, node.gpu_model, node.topology.nvlink, node.topology.topo_matrix


def links(ctx: Context, node: Node) -> Links | None:
    """Pair -> bandwidth on the node (pairs without a link absent); None where the node describes none."""
    key = ("links", *_shape(node))
    if key not in ctx.memo:
        spec = node.topology
        graph = None
        if node.gpus and spec.topo_matrix is not None:
            text = ctx.request.cluster.topo_matrices.get(spec.topo_matrix, spec.topo_matrix)
            graph = parse_topo_matrix(text, node.gpu_model)
        elif node.gpus and spec.nvlink is not None:
            graph = gpu_graph(spec.nvlink, node.gpus, node.gpu_model)
        ctx.memo[key] = None if graph is None else {
            (min(a, b), max(a, b)): float(bw) for a, b, bw in graph.edges(data="bandwidth_gbs", default=0.0)}
    return ctx.memo[key]  # type: ignore[no-any-return]


def _total(pairs: Links, gpus: tuple[int, ...]) -> float:
    return sum(pairs.get((a, b), 0.0) for a, b in itertools.combinations(sorted(gpus), 2))


def _best(ctx: Context, node: Node, pairs: Links, k: int) -> float | None:
    """The best bandwidth of any k GPUs of the empty node, every set tried; None past EXACT_SETS sets."""
    key = ("best_set", *_shape(node), k)
    if key not in ctx.memo:
        sets = math.comb(node.gpus, k)
        ctx.memo[key] = None if sets > EXACT_SETS else max(
            _total(pairs, s) for s in itertools.combinations(range(node.gpus), k))
    return ctx.memo[key]  # type: ignore[no-any-return]


def _uneven(pairs: Links | None, gpus: int) -> bool:
    """Do the node's pairs differ in bandwidth (a missing pair counts as 0)?"""
    if pairs is None or gpus < 2:
        return False
    values = {pairs.get((a, b), 0.0) for a, b in itertools.combinations(range(gpus), 2)}
    return len(values) > 1


def check_bandwidth_term(ctx: Context) -> list[Expected] | None:
    shapes = {_shape(n): n for n in ctx.nodes.values()}
    if not any(_uneven(links(ctx, n), n.gpus) for n in shapes.values()):
        return [Expected.exact(0.0)]  # the planner reports no such term: every set is the best one
    loss = 0.0
    for a in ctx.plan.assignments:
        if len(a.gpus) < 2:
            continue
        node = ctx.nodes.get(a.node)
        if node is None:
            return None
        pairs = links(ctx, node)
        uneven = ("uneven", *_shape(node))
        if uneven not in ctx.memo:
            ctx.memo[uneven] = _uneven(pairs, node.gpus)
        if not ctx.memo[uneven]:
            continue
        assert pairs is not None
        best = _best(ctx, node, pairs, len(a.gpus))
        if best is None:
            return None
        if best > 0:
            loss += max(0.0, 1.0 - _total(pairs, tuple(a.gpus)) / best)
    return [Expected.exact(-ctx.request.policy.weights.topology * loss)]
