"""Which GPU indices each pod gets on its node: the best-bandwidth sets, per node, biggest pods first."""

from __future__ import annotations

from collections.abc import Sequence

from placement.problem import Problem
from placement.topology import pick_gpus


def gpu_choice(problem: Problem, counts: dict[tuple[int, int], int],
               free_ids: Sequence[Sequence[int]]) -> dict[tuple[int, int], list[list[int]]]:
    """(task, node) -> the GPU indices of each of its pods there, from `pick_gpus` on the node's
    graph: per node, every new pod of every job together, biggest first."""
    view = problem.topology()
    by_node: dict[int, list[tuple[int, int]]] = {}
    for (t, n), k in sorted(counts.items()):
        if k:
            by_node.setdefault(n, []).append((t, k))
    out: dict[tuple[int, int], list[list[int]]] = {}
    # Thousands of nodes share a graph (one per node kind), a free set and the pods they get: about a hundred
    # distinct questions at 12,500 nodes, where asking each node cost 1.5 s. Graphs are shared objects (one per
    # kind, kept alive by the view), so their identity stands for their content.
    answers: dict[tuple[int, tuple[int, ...], tuple[int, ...]], list[list[int]]] = {}
    for n, items in by_node.items():
        sizes = tuple(problem.tasks[t].spec.gpus for t, k in items for _ in range(k))
        graph = view.graphs[n]
        key = (id(graph), tuple(free_ids[n]), sizes)
        if key not in answers:
            answers[key] = pick_gpus(graph, list(free_ids[n]), list(sizes))
        sets = [list(gpus) for gpus in answers[key]]  # each pod its own list
        start = 0
        for t, k in items:
            out[t, n] = sets[start:start + k]
            start += k
    return out
