"""Which k GPUs inside a node a pod should get.

The in-node graphs themselves (`gpu_graph` for a preset: nvswitch, hybrid-cube-mesh, pcie-pairs, pcie;
`parse_topo_matrix` for an `nvidia-smi topo -m` text) are hardware facts and live in the catalog
(placement.catalog.links); they are re-exported here. After the solve, `best_gpu_set` / `pick_gpus`
choose which GPUs of a node each pod gets, so that a 4-GPU pod on a DGX-1 lands on a fully NVLinked
quad rather than on GPUs that only meet over the CPU interconnect.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from functools import lru_cache

import networkx as nx
import numpy as np

from placement.catalog.links import (
    BRIDGE_LINKS,
    DEFAULT_GENERATION,
    DGX1_NVLINKS,
    GENERATIONS,
    PCIE_FRACTIONS,
    PRESET_PCIE_TOKEN,
    PRESETS,
    Generation,
    generation_of,
    gpu_graph,
    parse_topo_matrix,
    token_bandwidth,
)

__all__ = [
    "BRIDGE_LINKS", "DEFAULT_GENERATION", "DGX1_NVLINKS", "EXACT_LIMIT", "GENERATIONS", "PCIE_FRACTIONS",
    "PRESETS", "PRESET_PCIE_TOKEN", "Generation", "bandwidth_shortfall", "best_gpu_set", "generation_of",
    "gpu_graph", "ideal_bandwidth", "parse_topo_matrix", "pick_gpus", "set_bandwidth", "token_bandwidth",
]

# --------------------------------------------------------------------------------------------
# Choosing GPUs inside a node
# --------------------------------------------------------------------------------------------

# C(16, 8) = 12,870: every subset of a 16-GPU node (DGX-2) is enumerated exactly; one numpy
# pass over that many combinations takes about a millisecond.
EXACT_LIMIT = 20_000
_TIE = 1e-9  # relative: equal sums added in another order may differ in the last bit


def set_bandwidth(graph: nx.Graph, gpus: Iterable[int]) -> float:
    """Sum of `bandwidth_gbs` over all pairs of `gpus` (0 for pairs without an edge)."""
    gpus = list(gpus)
    _check_gpus(graph, gpus, "gpus")
    total = 0.0
    for a, b in itertools.combinations(gpus, 2):
        data = graph.get_edge_data(a, b)
        total += float(data.get("bandwidth_gbs", 0.0)) if data else 0.0
    return total


def best_gpu_set(graph: nx.Graph, free: list[int], k: int) -> list[int]:
    """The k free GPUs (sorted) with the greatest total pairwise bandwidth.

    Total = `set_bandwidth`. Ties go to the lexicographically smallest sorted index list, so the
    answer is deterministic and packs low indices first on uniform (NVSwitch) nodes.

    Exact whenever C(len(free), k) ≤ EXACT_LIMIT (20,000: every 8- and 16-GPU node): all
    combinations are scored in one numpy pass. Beyond that (only for synthetic or very large
    graphs; the problem is densest-k-subgraph, NP-hard) it falls back to a heuristic: the best
    pair, grown greedily, then improved by single swaps until no swap gains — a 1-swap local
    optimum, exact on uniform and clique-structured graphs but not guaranteed in general.
    """
    _check_gpus(graph, free, "free")
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be a non-negative integer, got {k!r}")
    if k > len(free):
        raise ValueError(f"k={k} GPUs requested but only {len(free)} free: {sorted(free)}")
    candidates = sorted(free)
    if k <= 1:
        return candidates[:k]
    matrix = _bandwidth_matrix(graph, candidates)
    exact = math.comb(len(candidates), k) <= EXACT_LIMIT
    chosen = _exact(matrix, k) if exact else _greedy_swap(matrix, k)
    return [candidates[i] for i in chosen]


def _check_gpus(graph: nx.Graph, gpus: Sequence[int], what: str) -> None:
    if len(set(gpus)) != len(gpus):
        raise ValueError(f"{what} lists a GPU twice: {list(gpus)}")
    unknown = [g for g in gpus if g not in graph]
    if unknown:
        raise ValueError(f"{what} has GPUs {unknown} that are not in the node's graph ({graph.number_of_nodes()} GPUs)")


def _bandwidth_matrix(graph: nx.Graph, gpus: list[int]) -> np.ndarray:
    position = {gpu: i for i, gpu in enumerate(gpus)}
    matrix = np.zeros((len(gpus), len(gpus)))
    for a, b, bandwidth in graph.subgraph(gpus).edges(data="bandwidth_gbs", default=0.0):
        if a != b:
            matrix[position[a], position[b]] = matrix[position[b], position[a]] = bandwidth
    return matrix


@lru_cache(maxsize=64)
def _combinations(n: int, k: int) -> np.ndarray:
    """All k-subsets of range(n), lexicographic, one per row; cached because building the array
    costs far more than scoring it, and every pod on a node of the same shape asks again."""
    combos = np.array(list(itertools.combinations(range(n), k)), dtype=np.intp)
    combos.flags.writeable = False
    return combos


def _exact(matrix: np.ndarray, k: int) -> list[int]:
    # Rows are in lexicographic order, so the first maximum is the tie-break.
    combos = _combinations(len(matrix), k)
    totals = np.zeros(len(combos))
    for i, j in itertools.combinations(range(k), 2):
        totals += matrix[combos[:, i], combos[:, j]]
    best = totals.max()
    first = int(np.argmax(totals >= best - _TIE * max(1.0, abs(best))))
    return combos[first].tolist()


def _greedy_swap(matrix: np.ndarray, k: int) -> list[int]:
    n = len(matrix)
    upper = np.where(np.triu(np.ones((n, n), dtype=bool), 1), matrix, -np.inf)
    a, b = np.unravel_index(int(np.argmax(upper)), upper.shape)  # row-major: smallest tied pair
    chosen = [int(a), int(b)]
    inside = np.zeros(n, dtype=bool)
    inside[chosen] = True
    while len(chosen) < k:
        gain = np.where(inside, -np.inf, matrix[:, inside].sum(axis=1))
        pick = int(np.argmax(gain))
        chosen.append(pick)
        inside[pick] = True
    improved = True
    while improved:
        improved = False
        links = matrix[:, inside].sum(axis=1)  # each GPU's bandwidth into the chosen set
        total = matrix[np.ix_(inside, inside)].sum() / 2
        for out in np.flatnonzero(inside):
            for into in np.flatnonzero(~inside):
                delta = links[into] - matrix[into, out] - links[out]
                if delta > _TIE * max(1.0, total):
                    inside[out], inside[into] = False, True
                    improved = True
                    break
            if improved:
                break
    return np.flatnonzero(inside).tolist()



# --------------------------------------------------------------------------------------------
# GPU indices inside nodes, after the solve
# --------------------------------------------------------------------------------------------


def ideal_bandwidth(graph: nx.Graph, k: int) -> float:
    """The best total bandwidth any k GPUs of the node can have (the node empty)."""
    return _ideal(graph, k)


@lru_cache(maxsize=1024)
def _ideal(graph: nx.Graph, k: int) -> float:  # graphs hash by identity: one entry per cached graph
    return set_bandwidth(graph, best_gpu_set(graph, sorted(graph.nodes), k))


def pick_gpus(graph: nx.Graph | None, free: list[int], sizes: Sequence[int]) -> list[list[int]]:
    """GPU indices for pods of `sizes` GPUs on one node, biggest pod first, each the best set of
    what is left (best_gpu_set); without a graph, the lowest free indices. Returned in the order
    of `sizes`. Biggest first because a 4-GPU pod needs a whole quad that 2-GPU pods would split;
    the sequence is greedy across pods, exact for each pod."""
    left = sorted(free)
    out: list[list[int]] = [[] for _ in sizes]
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        k = sizes[i]
        chosen = left[:k] if graph is None or k <= 1 else best_gpu_set(graph, left, k)
        out[i] = chosen
        taken = set(chosen)
        left = [g for g in left if g not in taken]
    return out


def bandwidth_shortfall(graph: nx.Graph | None, gpus: Sequence[int]) -> float:
    """1 − bandwidth(chosen)/bandwidth(best k-set of the empty node): 0 on NVSwitch or for 1 GPU."""
    if graph is None or len(gpus) < 2 or graph.graph.get("uniform"):
        return 0.0
    ideal = ideal_bandwidth(graph, len(gpus))
    return 0.0 if ideal <= 0 else max(0.0, 1.0 - set_bandwidth(graph, gpus) / ideal)
