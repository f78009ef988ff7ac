"""Topology as graphs: which GPUs inside a node talk fast, and which nodes sit in one domain.

Two layers, both plain networkx so that the compiler, the verifier and the benchmarks read the
same facts:

* **in-node GPU graphs** (`gpu_graph`, `parse_topo_matrix`): an undirected graph on GPU indices
  with `bandwidth_gbs` on every edge. After the solve, `best_gpu_set` picks which k GPUs of a
  node a pod gets, so that a 4-GPU pod on a DGX-1 lands on a fully NVLinked quad rather than on
  GPUs that only meet over the CPU interconnect.
* **the cluster hierarchy** (`build_hierarchy`): node → nvlink_domain → rack → block → cluster,
  a tree like Kueue's Topology levels, which the compiler turns into one boolean per
  (job, domain).

Bandwidth unit: GB/s **per direction** for one GPU pair (the figure NCCL point-to-point can at
best reach), from ../shared/HARDWARE.md §6.3. Bidirectional datasheet figures are twice these.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np
from placement_models import ErrorList, Node, PlacementRequest

from placement import provision

if TYPE_CHECKING:  # the problem view sits above this module; only its type is needed here
    from placement.problem import Problem

# --------------------------------------------------------------------------------------------
# Link rates per GPU generation
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Generation:
    """Link rates of one GPU generation, all in GB/s per direction.

    `nvswitch_links` is the NV# that `nvidia-smi topo -m` prints for every pair on an NVSwitch
    board of this generation (the GPU's links into the switch fabric), so that the preset and a
    parsed matrix of the same machine give the same graph. `nvlink_gbs == 0` means the
    generation has no NVLink at all (L40S and friends), which the NVLink presets refuse.
    """

    name: str
    nvlink_gbs: float
    nvswitch_links: int
    pcie_gbs: float


# HARDWARE.md §6.3 "Bandwidth reference": NVLink 2/3/4 = 25 GB/s per link per direction, NVLink 5
# = 50; PCIe Gen4 x16 ~31.5, Gen5 x16 ~63 per direction. NV# per NVSwitch board from §6.2:
# DGX-2 NV6, DGX A100 NV12, DGX H100 NV18, HGX B200 NV18. Two figures are not in HARDWARE.md:
# V100's PCIe Gen3 x16 (15.75, half of Gen4 by the PCIe standard) and Blackwell's host PCIe
# generation (taken as Gen5; an assumption — it only ranks PCIe paths below NVLink).
GENERATIONS: dict[str, Generation] = {
    "volta": Generation("volta", nvlink_gbs=25.0, nvswitch_links=6, pcie_gbs=15.75),
    "ampere": Generation("ampere", nvlink_gbs=25.0, nvswitch_links=12, pcie_gbs=31.5),
    "hopper": Generation("hopper", nvlink_gbs=25.0, nvswitch_links=18, pcie_gbs=63.0),
    "blackwell": Generation("blackwell", nvlink_gbs=50.0, nvswitch_links=18, pcie_gbs=63.0),
    "ada": Generation("ada", nvlink_gbs=0.0, nvswitch_links=0, pcie_gbs=31.5),
}

# Used when the GPU model is unknown or not given: NVLink 2-4 share 25 GB/s per link, so a
# parsed NV# is right for every pre-Blackwell board; NV12/Gen4 is the A100-class middle ground.
DEFAULT_GENERATION = Generation("unknown", nvlink_gbs=25.0, nvswitch_links=12, pcie_gbs=31.5)

# Model-name prefixes (at the start of a name token, so "NVIDIA-H100-80GB-HBM3" and "h100" both
# match) and GPU Feature Discovery `nvidia.com/gpu.family` values per generation.
_GENERATION_PATTERNS: dict[str, tuple[str, ...]] = {
    "blackwell": ("gb200", "gb300", "b200", "b300", "blackwell"),
    "hopper": ("gh200", "h100", "h200", "h800", "h20", "hopper"),
    "ampere": ("a100", "a800", "a30", "ampere"),
    "volta": ("v100", "volta"),
    "ada": ("l40", "l4", "4090", "ada"),
}


def generation_of(gpu_model: str | None) -> Generation | None:
    """The generation of a model name, alias or GFD family name; None when unknown.

    Lenient on purpose: node inventories spell models many ways, and an unknown model only
    changes the absolute bandwidth figures, never the ranking of GPU sets inside one node.
    """
    if not gpu_model:
        return None
    name = gpu_model.strip().lower()
    if name in GENERATIONS:
        return GENERATIONS[name]
    for generation, prefixes in _GENERATION_PATTERNS.items():
        if re.search(rf"(?<![a-z0-9])(?:{'|'.join(prefixes)})", name):
            return GENERATIONS[generation]
    return None


# --------------------------------------------------------------------------------------------
# Token → bandwidth
# --------------------------------------------------------------------------------------------

# PCIe paths as fractions of the generation's x16 per-direction rate. HARDWARE.md gives only the
# order (§6.1: NV# > PIX > PXB > PHB > NODE > SYS) and asks for measured numbers later (§6.4), so
# these are ranking figures: PIX runs at link rate through one switch, each extra hop (switch
# tree, host bridge, inter-root-complex fabric, CPU-to-CPU link) costs a step, SYS the most.
PCIE_FRACTIONS: dict[str, float] = {"PIX": 1.0, "PXB": 0.9, "PHB": 0.75, "NODE": 0.6, "SYS": 0.4}

# Drivers before SYS existed printed SOC ("socket-level link") for the same path.
_TOKEN_ALIASES = {"SOC": "SYS"}
_NV_TOKEN = re.compile(r"NV(\d+)")


def token_bandwidth(token: str, gpu_model: str | None = None) -> tuple[float, int]:
    """(bandwidth_gbs, nvlinks) of one `nvidia-smi topo -m` cell; ValueError when unknown.

    NV# is # links × the generation's per-link rate (on NVSwitch boards # is the GPU's links
    into the fabric, so this is also the pair's rate); PCIe tokens get PCIE_FRACTIONS of the
    generation's PCIe x16 rate.
    """
    generation = generation_of(gpu_model) or DEFAULT_GENERATION
    return _token_bandwidth(token, generation)


def _token_bandwidth(token: str, generation: Generation) -> tuple[float, int]:
    token = _TOKEN_ALIASES.get(token, token)
    match = _NV_TOKEN.fullmatch(token)
    if match:
        links = int(match.group(1))
        if links < 1:
            raise ValueError(f"topology token {token!r}: an NVLink bond needs at least one link")
        # A parsed NV# proves NVLink exists even if the model hint says otherwise.
        per_link = generation.nvlink_gbs or DEFAULT_GENERATION.nvlink_gbs
        return links * per_link, links
    if token in PCIE_FRACTIONS:
        return PCIE_FRACTIONS[token] * generation.pcie_gbs, 0
    known = ", ".join(["X", "NV#", *PCIE_FRACTIONS])
    raise ValueError(f"unknown topology token {token!r} (known: {known})")


def _add_edge(graph: nx.Graph, a: int, b: int, token: str, generation: Generation) -> None:
    bandwidth, links = _token_bandwidth(token, generation)
    graph.add_edge(a, b, bandwidth_gbs=bandwidth, links=links, token=token)


# --------------------------------------------------------------------------------------------
# In-node presets
# --------------------------------------------------------------------------------------------

# DGX-1 V100 hybrid cube-mesh, HARDWARE.md §6.2 edge list (every GPU has 6 NVLinks). The other
# 12 pairs have no NVLink and meet over the CPU interconnect (SYS in the real matrix).
DGX1_NVLINKS: dict[tuple[int, int], int] = {
    **{pair: 2 for pair in [(0, 3), (0, 4), (1, 2), (1, 5), (2, 3), (4, 7), (5, 6), (6, 7)]},
    **{pair: 1 for pair in [(0, 1), (0, 2), (1, 3), (2, 6), (3, 7), (4, 5), (4, 6), (5, 7)]},
}

# PCIe cards with NVLink bridges: A100 PCIe, H100 PCIe and H100 NVL bridges carry 600 GB/s
# bidirectional per pair (HARDWARE.md §6.2, status U) = 12 links × 25 GB/s per direction.
BRIDGE_LINKS = 12

# Without the real PCIe tree every non-NVLink pair is equal; PHB ("through the CPU root
# complex") is the typical path between GPUs on separate root ports, so presets use it.
PRESET_PCIE_TOKEN = "PHB"

PRESETS = ("nvswitch", "hybrid-cube-mesh", "pcie-pairs", "pcie")


def gpu_graph(preset: str, gpus: int, gpu_model: str | None = None) -> nx.Graph:
    """The in-node GPU graph of a preset: nodes 0..gpus-1, every pair an edge.

    Edge attributes: `bandwidth_gbs` (per direction), `links` (NVLink count, 0 over PCIe) and
    `token` (what `nvidia-smi topo -m` would print), so a preset equals the parsed matrix of
    the same machine. Every pair gets an edge, PCIe pairs at a lower figure, because a pod that
    cannot get NVLink still prefers the better PCIe path, and summing bandwidth then needs no
    special case for missing edges.

    * `nvswitch`: all pairs NV# of the generation (A100 NV12 = 300 GB/s, H100 NV18 = 450,
      B200 NV18 = 900, V100/DGX-2 NV6 = 150; unknown model: NV12 × 25).
    * `hybrid-cube-mesh`: the DGX-1 V100 (8 GPUs exactly), NV1/NV2 pairs as in HARDWARE.md §6.2,
      the rest SYS.
    * `pcie-pairs`: NVLink bridges (NV12) on pairs (0,1), (2,3), …; other pairs PHB.
    * `pcie`: no NVLink; all pairs PHB, so every k-set is equal (pass the real `topo -m`
      matrix through `parse_topo_matrix` when PIX vs SYS matters).

    `gpu_model` is a model name or GFD family ("A100-SXM4-80GB", "hopper"); it picks the link
    rates. ValueError names the preset when it is unknown or does not fit the GPU count or model.
    """
    if preset not in PRESETS:
        raise ValueError(f"unknown topology preset {preset!r} (known: {', '.join(PRESETS)})")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ValueError(f"topology preset {preset!r}: gpus must be a positive integer, got {gpus!r}")
    generation = generation_of(gpu_model)
    if preset in ("nvswitch", "hybrid-cube-mesh", "pcie-pairs") and generation and not generation.nvlink_gbs:
        raise ValueError(f"topology preset {preset!r}: {gpu_model} ({generation.name}) has no NVLink")

    graph = nx.Graph(preset=preset, gpu_model=gpu_model)
    graph.add_nodes_from(range(gpus))
    if preset == "hybrid-cube-mesh":
        if gpus != 8:
            raise ValueError(f"topology preset 'hybrid-cube-mesh' is the 8-GPU DGX-1, got {gpus} GPUs")
        if generation and generation.name != "volta":
            raise ValueError(f"topology preset 'hybrid-cube-mesh' is the DGX-1 V100, not {gpu_model}")
        generation = GENERATIONS["volta"]
        for a, b in itertools.combinations(range(gpus), 2):
            links = DGX1_NVLINKS.get((a, b))
            _add_edge(graph, a, b, f"NV{links}" if links else "SYS", generation)
    elif preset == "nvswitch":
        generation = generation or DEFAULT_GENERATION
        for a, b in itertools.combinations(range(gpus), 2):
            _add_edge(graph, a, b, f"NV{generation.nvswitch_links}", generation)
    elif preset == "pcie-pairs":
        if gpus % 2:
            raise ValueError(f"topology preset 'pcie-pairs' bridges GPU pairs, needs an even count, got {gpus}")
        generation = generation or DEFAULT_GENERATION
        for a, b in itertools.combinations(range(gpus), 2):
            bridged = a % 2 == 0 and b == a + 1
            _add_edge(graph, a, b, f"NV{BRIDGE_LINKS}" if bridged else PRESET_PCIE_TOKEN, generation)
    else:  # pcie
        generation = generation or DEFAULT_GENERATION
        for a, b in itertools.combinations(range(gpus), 2):
            _add_edge(graph, a, b, PRESET_PCIE_TOKEN, generation)
    graph.graph["generation"] = generation.name
    return graph


# --------------------------------------------------------------------------------------------
# nvidia-smi topo -m
# --------------------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # nvidia-smi underlines the header on a terminal
_GPU_NAME = re.compile(r"GPU(\d+)")


def parse_topo_matrix(text: str, gpu_model: str | None = None) -> nx.Graph:
    """The GPU graph of a node from its `nvidia-smi topo -m` output.

    Reads the header row (GPU0 GPU1 … then NIC and affinity columns, ignored) and one row per
    GPU; NIC rows, legends and anything after the table are ignored. Every GPU pair becomes an
    edge with `bandwidth_gbs`, `links` and the literal `token` (see `token_bandwidth`; SOC from
    old drivers reads as SYS). The matrix must be square over the GPUs, X on the diagonal and
    symmetric; otherwise ValueError with the 1-based line number, because a silently wrong
    matrix would steer every multi-GPU pod onto the slow pairs.
    """
    generation = generation_of(gpu_model) or DEFAULT_GENERATION
    lines = [_ANSI.sub("", line) for line in text.splitlines()]

    header_at, names = _find_header(lines)
    n = len(names)
    cells: dict[int, tuple[int, list[str]]] = {}  # gpu → (line number, its n cells)
    line_no = header_at
    for line_no, line in enumerate(lines[header_at:], start=header_at + 1):
        fields = line.split()
        if not fields:
            if cells:
                break  # the blank line that ends the table
            continue
        if fields[0].rstrip(":") in ("Legend", "NIC"):
            break
        if not fields[0].startswith("GPU"):
            continue  # NIC rows (mlx5_0, NIC0) describe the fabric, not GPU pairs
        match = _GPU_NAME.fullmatch(fields[0])
        if not match:
            raise ValueError(f"line {line_no}: row name {fields[0]!r} is not GPU<index>")
        gpu = int(match.group(1))
        if gpu >= n:
            raise ValueError(f"line {line_no}: row {fields[0]} but the header has only GPU0..GPU{n - 1}")
        if gpu in cells:
            raise ValueError(f"line {line_no}: row {fields[0]} appears twice (first on line {cells[gpu][0]})")
        if len(fields) < n + 1:
            raise ValueError(f"line {line_no}: row {fields[0]} has {len(fields) - 1} cells, needs {n} GPU columns")
        cells[gpu] = (line_no, fields[1 : n + 1])
    missing = [f"GPU{i}" for i in range(n) if i not in cells]
    if missing:
        raise ValueError(f"line {line_no}: matrix ends without rows {', '.join(missing)}")

    # Cells first, row by row, so an error names the line that holds the bad cell.
    for a in range(n):
        row_line, row = cells[a]
        if row[a] != "X":
            raise ValueError(f"line {row_line}: GPU{a} to itself must be 'X', got {row[a]!r}")
        for b in range(n):
            if b != a:
                try:
                    _token_bandwidth(row[b], generation)
                except ValueError as err:
                    raise ValueError(f"line {row_line}: GPU{a}-GPU{b}: {err}") from None

    graph = nx.Graph(preset="topo-matrix", gpu_model=gpu_model, generation=generation.name)
    graph.add_nodes_from(range(n))
    for a, b in itertools.combinations(range(n), 2):
        (row_line, row), (mirror_line, mirror_row) = cells[a], cells[b]
        token, mirror = row[b], mirror_row[a]
        if _TOKEN_ALIASES.get(token, token) != _TOKEN_ALIASES.get(mirror, mirror):
            raise ValueError(
                f"line {row_line}: GPU{a}-GPU{b} is {token!r} but GPU{b}-GPU{a} "
                f"(line {mirror_line}) is {mirror!r}; the matrix must be symmetric"
            )
        _add_edge(graph, a, b, token, generation)
    return graph


def _find_header(lines: list[str]) -> tuple[int, list[str]]:
    """(index of the header line, GPU column names): the first line whose first field is GPU0."""
    for index, line in enumerate(lines):
        fields = line.split()
        if not fields or fields[0] != "GPU0":
            continue
        names = list(itertools.takewhile(lambda f: _GPU_NAME.fullmatch(f) is not None, fields))
        expected = [f"GPU{i}" for i in range(len(names))]
        if names != expected:
            raise ValueError(f"line {index + 1}: header GPU columns {names} are not GPU0..GPU{len(names) - 1}")
        return index + 1, names
    raise ValueError("line 1: no `nvidia-smi topo -m` header row starting with GPU0 found")


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
# Cluster hierarchy
# --------------------------------------------------------------------------------------------

DEFAULT_LEVELS: tuple[str, ...] = ("nvlink_domain", "rack", "block")
ROOT = "cluster"
# GPU Feature Discovery puts the multi-node NVLink partition in this label (HARDWARE.md §7.1, §7.3):
# `<ClusterUUID>.<CliqueID>`, equal values ⇒ same NVLink partition — the nvlink_domain level.
CLIQUE_LABEL = "nvidia.com/gpu.clique"


def build_hierarchy(
    nodes: Sequence[tuple[str, dict[str, str | None]]],
    levels: Sequence[str] = DEFAULT_LEVELS,
) -> nx.DiGraph:
    """The domain tree: root "cluster" → … → (level, name) domains → node names (leaves).

    `nodes` is (node name, {level: label or None}); `levels` runs from the narrowest (just above
    the node) to the widest. Edges point from parent to child; every vertex carries `kind`
    ("root", "domain", "node") and domains their `level`; `tree.graph["levels"]` keeps the order.

    Each domain lies inside exactly one domain of the next level, decided by the labels of its
    nodes: one distinct label → that domain; none → a singleton domain wrapping just that
    child, named "<node>" (or "<level:label>" for a labelled child); two distinct → ValueError,
    since the levels would not nest (e.g. an NVL36×2 NVLink domain spans two racks: order the
    levels rack below nvlink_domain or label both racks as one).

    Why singletons: a required level must never be satisfied by guesswork. A node without a rack
    label could be anywhere, so "within one rack" for it means that node alone; a node missing
    a label whose NVLink domain-mates carry one inherits theirs, because nodes of one NVLink
    domain share its enclosing domains by construction of the tree.
    """
    levels = tuple(levels)
    if len(set(levels)) != len(levels) or ROOT in levels:
        raise ValueError(f"hierarchy levels must be distinct and not {ROOT!r}: {levels}")
    names = [name for name, _ in nodes]
    if len(set(names)) != len(names):
        twice = sorted({name for name in names if names.count(name) > 1})
        raise ValueError(f"hierarchy: nodes listed twice: {twice}")
    if ROOT in names:
        raise ValueError(f"hierarchy: a node may not be named {ROOT!r} (the root)")

    tree = nx.DiGraph(levels=levels)
    tree.add_node(ROOT, kind="root")
    labels = {name: node_labels for name, node_labels in nodes}
    members: dict[object, list[str]] = {}  # current top vertex → its nodes, in input order
    for order, name in enumerate(names):
        tree.add_node(name, kind="node", order=order)
        members[name] = [name]

    for level in levels:
        parents: dict[object, list[str]] = {}
        for child, child_nodes in members.items():
            found = {str(labels[n][level]) for n in child_nodes if labels[n].get(level) not in (None, "")}
            if len(found) > 1:
                raise ValueError(
                    f"hierarchy: {_describe(child)} lies in several {level} domains {sorted(found)}; "
                    f"levels {levels} must nest"
                )
            parent = (level, found.pop() if found else _singleton_name(child))
            tree.add_node(parent, kind="domain", level=level)
            tree.add_edge(parent, child)
            parents.setdefault(parent, []).extend(child_nodes)
        members = parents
    for top in members:
        tree.add_edge(ROOT, top)
    return tree


def _singleton_name(child: object) -> str:
    # '<' and ':' occur in neither Kubernetes node names nor label values: no clash with real names.
    if isinstance(child, tuple):
        level, name = child
        return name if name.startswith("<") else f"<{level}:{name}>"
    return f"<{child}>"


def _describe(vertex: object) -> str:
    return f"{vertex[0]} {vertex[1]!r}" if isinstance(vertex, tuple) else f"node {vertex!r}"


def domains_at(tree: nx.DiGraph, level: str) -> dict[str, list[str]]:
    """Domain name → its node names at one level (or "cluster"), both in input order of nodes."""
    _check_level(tree, level)
    if level == ROOT:
        return {ROOT: _leaves(tree, ROOT)}
    domains = [v for v, data in tree.nodes(data=True) if data.get("level") == level]
    result = {name: _leaves(tree, (lvl, name)) for lvl, name in domains}
    return dict(sorted(result.items(), key=lambda item: tree.nodes[item[1][0]]["order"]))


def domain_of(tree: nx.DiGraph, node: str, level: str) -> str:
    """The name of the domain at `level` that holds `node`."""
    _check_level(tree, level)
    if tree.nodes.get(node, {}).get("kind") != "node":
        raise ValueError(f"hierarchy has no node {node!r}")
    if level == ROOT:
        return ROOT
    vertex: object = node
    while True:
        (vertex,) = tree.predecessors(vertex)
        if tree.nodes[vertex].get("level") == level:
            return vertex[1]


def _check_level(tree: nx.DiGraph, level: str) -> None:
    levels = tree.graph.get("levels", ())
    if level != ROOT and level not in levels:
        raise ValueError(f"unknown hierarchy level {level!r} (levels: {', '.join([*levels, ROOT])})")


def _leaves(tree: nx.DiGraph, vertex: object) -> list[str]:
    leaves = [v for v in nx.descendants(tree, vertex) if tree.nodes[v]["kind"] == "node"]
    return sorted(leaves, key=lambda v: tree.nodes[v]["order"])


# --------------------------------------------------------------------------------------------
# The request's topology, indexed for the solver path
# --------------------------------------------------------------------------------------------

#: The implicit level below every named one: a single node (Kueue's `kubernetes.io/hostname`).
NODE_LEVEL = "node"
#: Levels read from `node.topology`; any other level name reads the node label of that name.
TOPOLOGY_FIELDS = ("nvlink_domain", "rack", "block")


def level_label(node: Node, level: str) -> str | None:
    """A node's label at one level: node.topology for the built-in levels (nvlink_domain falling
    back to the GFD clique label), else the node label named like the level; None when unset."""
    if level in TOPOLOGY_FIELDS:
        value = getattr(node.topology, level)
        if value is None and level == "nvlink_domain":
            value = node.labels.get(CLIQUE_LABEL)
    else:
        value = node.labels.get(level)
    return value or None


@dataclass(frozen=True)
class Level:
    """The domains of one level: which domain each node is in, and each domain's nodes."""

    name: str
    of_node: np.ndarray  # (N,) domain index of every node
    names: tuple[str, ...]  # domain names, in order of their first node
    members: tuple[np.ndarray, ...]  # node indices of each domain, ascending

    @property
    def count(self) -> int:
        return len(self.names)


@dataclass(frozen=True)
class ClusterTopology:
    """Domains per level and in-node GPU graphs of one request's nodes, as index arrays.

    `levels` are the named levels, narrowest first; `by_level` also holds NODE_LEVEL. `rank` orders
    nodes so that every domain of every level is one contiguous run (widest level first, then
    narrower, then node index): numbering pods along it puts consecutive ranks in one domain.
    """

    levels: tuple[str, ...]
    by_level: dict[str, Level]
    rank: np.ndarray  # (N,) position of each node in hierarchy order
    graphs: tuple[nx.Graph | None, ...]  # in-node GPU graph per node; None when not described

    def level(self, name: str) -> Level:
        return self.by_level[name]

    def height(self, name: str) -> int:
        """0 for a node, 1 for the narrowest named level, …: compares how wide two levels are."""
        return 0 if name == NODE_LEVEL else 1 + self.levels.index(name)

    def ordered(self, nodes: Iterable[int]) -> list[int]:
        return sorted(nodes, key=lambda n: (int(self.rank[n]), n))


def cluster_topology(request: PlacementRequest, nodes: Sequence[Node] | None = None) -> ClusterTopology:
    """Index the hierarchy and in-node graphs of `nodes` (default: the request's nodes).

    Bad topology input is the caller's error, reported as a pydantic ValidationError at its
    request path: a preset that does not fit the node, an unparsable or wrongly sized
    `topo_matrix`, or labels that do not nest under `cluster.topology_levels`.
    """
    nodes = tuple(request.cluster.nodes if nodes is None else nodes)
    levels = tuple(request.cluster.topology_levels)
    errors = ErrorList("PlacementRequest")
    graphs = tuple(_node_graph(request, i, node, errors) for i, node in enumerate(nodes))
    try:
        tree = build_hierarchy([(n.name, {lv: level_label(n, lv) for lv in levels}) for n in nodes], levels)
    except ValueError as err:
        errors.add(("cluster", "topology_levels"), f"{err}; reorder the levels or fix the node labels", list(levels))
    errors.raise_if_any()

    index = {n.name: i for i, n in enumerate(nodes)}
    by_level = {NODE_LEVEL: _level(NODE_LEVEL, {n.name: [n.name] for n in nodes}, index)}
    for level in levels:
        by_level[level] = _level(level, domains_at(tree, level), index)
    keys = [np.arange(len(nodes))] + [by_level[lv].of_node for lv in levels]  # lexsort: last key first
    order = np.lexsort(keys)
    rank = np.empty(len(nodes), dtype=np.intp)
    rank[order] = np.arange(len(nodes))
    return ClusterTopology(levels=levels, by_level=by_level, rank=rank, graphs=graphs)


def _level(name: str, domains: dict[str, list[str]], index: dict[str, int]) -> Level:
    of_node = np.zeros(len(index), dtype=np.intp)
    members = []
    for d, names in enumerate(domains.values()):
        idx = np.array(sorted(index[n] for n in names), dtype=np.intp)
        of_node[idx] = d
        members.append(idx)
    return Level(name=name, of_node=of_node, names=tuple(domains), members=tuple(members))


def _node_graph(request: PlacementRequest, i: int, node: Node, errors: ErrorList) -> nx.Graph | None:
    """The node's GPU graph from its topo_matrix (text or class name), else its nvlink preset."""
    spec = node.topology
    if node.gpus == 0 or (spec.nvlink is None and spec.topo_matrix is None):
        return None
    path = provision.field_path(request, i, "topology")
    try:
        if spec.topo_matrix is not None:
            text = request.cluster.topo_matrices.get(spec.topo_matrix, spec.topo_matrix)
            graph = _parsed(text, node.gpu_model)
            if graph.number_of_nodes() != node.gpus:
                raise ValueError(f"the matrix has {graph.number_of_nodes()} GPUs, the node {node.gpus}")
            return graph
        return _preset(spec.nvlink, node.gpus, node.gpu_model)
    except ValueError as err:
        field = "topo_matrix" if spec.topo_matrix is not None else "nvlink"
        errors.add((*path, field), str(err), None)
        return None


@lru_cache(maxsize=256)
def _parsed(text: str, gpu_model: str | None) -> nx.Graph:
    """Parsed once per distinct text and model: a class of identical nodes shares one graph."""
    return _mark_uniform(parse_topo_matrix(text, gpu_model))


@lru_cache(maxsize=256)
def _preset(preset: str, gpus: int, gpu_model: str | None) -> nx.Graph:
    return _mark_uniform(gpu_graph(preset, gpus, gpu_model))


def _mark_uniform(graph: nx.Graph) -> nx.Graph:
    """`uniform`: every pair equally fast, so which k GPUs a pod gets cannot matter (NVSwitch)."""
    graph.graph["uniform"] = len({bw for _, _, bw in graph.edges(data="bandwidth_gbs")}) <= 1
    return graph


def of_problem(problem: Problem) -> ClusterTopology:
    """The problem's topology, built once and kept in `problem.extras` (nodes include added ones)."""
    view = problem.extras.get("topology")
    if view is None:
        view = problem.extras["topology"] = cluster_topology(problem.request, problem.nodes)
    return view  # type: ignore[return-value]


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


# --------------------------------------------------------------------------------------------
# Topology-aware greedy (the baseline): whole domains first, Kueue's BestFit
# --------------------------------------------------------------------------------------------

#: baseline._place_task: (problem, task, free, counts, allowed node mask, pod limit) -> pods placed.
PlaceTask = Callable[["Problem", int, np.ndarray, dict[tuple[int, int], int], "np.ndarray | None", "int | None"], int]


def place_job(problem: Problem, j: int, free: np.ndarray, counts: dict[tuple[int, int], int],
              place_task: PlaceTask) -> int:
    """Place gang j honouring its `job.topology`; on success update `free` and `counts` and return
    the pods placed, else return 0 and leave both untouched.

    Scopes are tried in order, the whole gang inside one: with `required`, each domain of that
    level; with only `preferred`, each domain of that level, then of every wider level, then the
    whole cluster (Kueue's podset-preferred-topology). Within a level, BestFit: the domain with the
    fewest free GPUs that still holds the gang's GPUs, so big empty domains stay whole. Slices go
    group by group, each into the fullest slice-level domain of the scope that fits it.
    """
    job = problem.jobs[j]
    view = of_problem(problem)
    for scope in _scopes(problem, view, j, free):
        trial, got = free.copy(), {}
        placed = _fill(problem, view, j, scope, trial, got, place_task)
        if placed >= job.needed and placed > 0:
            free[:] = trial
            for key, k in got.items():
                counts[key] = counts.get(key, 0) + k
            return placed
    return 0


def job_gpus_needed(problem: Problem, j: int) -> int:
    """GPUs the gang must have to run: all of its tasks, or for an elastic gang its smallest pods."""
    job = problem.jobs[j]
    per_pod = sorted(int(problem.tasks[t].demand[0]) for t in problem.job_tasks[j]
                     for _ in range(problem.tasks[t].replicas))
    return sum(per_pod) if job.needed == job.pods else sum(per_pod[: job.needed])


def domain_free_gpus(problem: Problem, view: ClusterTopology, j: int, level: str, free: np.ndarray) -> np.ndarray:
    """Per domain of `level`: free GPUs on nodes where some GPU task of job j may run."""
    lvl = view.level(level)
    nodes = _gpu_candidates(problem, j)
    return np.bincount(lvl.of_node[nodes], weights=free[nodes, 0], minlength=lvl.count).astype(np.int64)


def _gpu_candidates(problem: Problem, j: int) -> np.ndarray:
    cands = [problem.tasks[t].candidates for t in problem.job_tasks[j] if problem.tasks[t].demand[0] > 0]
    if not cands:
        cands = [problem.tasks[t].candidates for t in problem.job_tasks[j]]
    return np.unique(np.concatenate(cands)) if cands else np.zeros(0, dtype=np.intp)


def best_fit(problem: Problem, view: ClusterTopology, j: int, level: str, free: np.ndarray) -> list[int]:
    """Domains of `level` that have the gang's GPUs free on its candidate nodes, fullest first."""
    room = domain_free_gpus(problem, view, j, level, free)
    touched = np.zeros(view.level(level).count, dtype=bool)
    for t in problem.job_tasks[j]:
        touched[view.level(level).of_node[problem.tasks[t].candidates]] = True
    ok = np.flatnonzero(touched & (room >= job_gpus_needed(problem, j)))
    return [int(d) for d in ok[np.argsort(room[ok], kind="stable")]]


def _scopes(problem: Problem, view: ClusterTopology, j: int, free: np.ndarray) -> Iterator[np.ndarray | None]:
    spec = problem.jobs[j].topology
    if spec is None:
        yield None
        return
    if spec.required is not None:
        # A narrower preferred level first: each of its domains lies inside one required domain, so
        # a gang whole in it meets both; then the required domains themselves.
        inner = spec.preferred if spec.preferred and view.height(spec.preferred) < view.height(spec.required) else None
        for level in ([inner] if inner else []) + [spec.required]:
            lvl = view.level(level)
            for d in best_fit(problem, view, j, level, free):
                yield lvl.of_node == d
        return
    if spec.preferred is not None:
        levels = [lv for lv in (NODE_LEVEL, *view.levels) if view.height(lv) >= view.height(spec.preferred)]
    else:
        levels = []
    for level in levels:
        lvl = view.level(level)
        for d in best_fit(problem, view, j, level, free):
            yield lvl.of_node == d
    yield None


def _fill(problem: Problem, view: ClusterTopology, j: int, scope: np.ndarray | None, free: np.ndarray,
          counts: dict[tuple[int, int], int], place_task: PlaceTask) -> int:
    job = problem.jobs[j]
    spec = job.topology
    all_required = job.needed == job.pods
    placed = 0
    for t in sorted(problem.job_tasks[j], key=lambda t: -int(problem.tasks[t].demand[0])):
        if spec is not None and spec.slice is not None and problem.tasks[t].demand[0] > 0:
            got = _fill_slices(problem, view, t, scope, free, counts, place_task)
        else:
            got = place_task(problem, t, free, counts, scope, None)
        placed += got
        if all_required and got < problem.tasks[t].replicas:
            break
    return placed


def _fill_slices(problem: Problem, view: ClusterTopology, t: int, scope: np.ndarray | None, free: np.ndarray,
                 counts: dict[tuple[int, int], int], place_task: PlaceTask) -> int:
    """Whole groups of `slice.size` pods, each inside one domain of the slice level (BestFit)."""
    task = problem.tasks[t]
    spec = problem.jobs[task.job].topology
    assert spec is not None and spec.slice is not None
    size, lvl = spec.slice.size, view.level(spec.slice.required)
    cand = task.candidates if scope is None else task.candidates[scope[task.candidates]]
    need = size * int(task.demand[0])
    got = 0
    while got + size <= task.replicas:
        room = np.bincount(lvl.of_node[cand], weights=free[cand, 0], minlength=lvl.count)
        touched = np.zeros(lvl.count, dtype=bool)
        touched[lvl.of_node[cand]] = True
        order = [int(d) for d in np.argsort(room, kind="stable") if touched[d] and room[d] >= need]
        for d in order:
            allowed = lvl.of_node == d if scope is None else (lvl.of_node == d) & scope
            trial, group = free.copy(), {}
            if place_task(problem, t, trial, group, allowed, size) == size:
                free[:] = trial
                for key, k in group.items():
                    counts[key] = counts.get(key, 0) + k
                got += size
                break
        else:
            break
    return got


def pending_reason(problem: Problem, j: int, left: np.ndarray, gang: str, place_task: PlaceTask) -> str | None:
    """Why a gang with required topology waits, when its topology is the reason; else None.

    Checked on the free capacity before the plan (then nothing else is to blame) and on what the
    plan leaves (then other jobs took the room). The message names the level, the GPUs a domain
    would need and the most any one domain has, e.g. "no rack with 32 free GPUs".
    """
    spec = problem.jobs[j].topology
    if spec is None or (spec.required is None and spec.slice is None):
        return None
    view = of_problem(problem)
    for free, before in ((problem.free, True), (left, False)):
        trial, counts = free.copy(), {}
        if place_job(problem, j, trial, counts, place_task):
            continue
        level = spec.required if spec.required is not None else spec.slice.required  # type: ignore[union-attr]
        need = job_gpus_needed(problem, j)
        if spec.required is None:
            need = spec.slice.size * max(int(problem.tasks[t].demand[0]) for t in problem.job_tasks[j])  # type: ignore[union-attr]
        # All free GPUs of the domains where some pod of the gang fits at all (other domains hold
        # none of its nodes: selector, taints, model); "fragmented" covers the GPUs it cannot use.
        lvl = view.level(level)
        room = np.bincount(lvl.of_node, weights=free[:, 0], minlength=lvl.count).astype(np.int64)
        touched = np.zeros(lvl.count, dtype=bool)
        for t in problem.job_tasks[j]:
            touched[lvl.of_node[problem.tasks[t].candidates]] = True
        room[~touched] = -1
        best = int(room.argmax()) if touched.any() else -1
        most = f"the most in one {level} is {int(room[best])} ({lvl.names[best]})" if best >= 0 else ""
        what = "a slice" if spec.required is None else "the gang"
        if best < 0 or room[best] < need:
            core = f"no {level} with {need} free GPUs for {what}; {most}"
        else:
            core = f"no {level} can hold {what}: those with {need} free GPUs are too fragmented for its pods"
        prefix = "topology" if before else "topology: capacity went to higher-value jobs"
        return f"{prefix}: required {level}: {core}; gang of {gang}"
    return None


def gpu_choice(problem: Problem, counts: dict[tuple[int, int], int],
               free_ids: Sequence[Sequence[int]]) -> dict[tuple[int, int], list[list[int]]]:
    """(task, node) -> the GPU indices of each of its pods there, from `pick_gpus` on the node's
    graph: per node, every new pod of every job together, biggest first."""
    view = of_problem(problem)
    by_node: dict[int, list[tuple[int, int]]] = {}
    for (t, n), k in sorted(counts.items()):
        if k:
            by_node.setdefault(n, []).append((t, k))
    out: dict[tuple[int, int], list[list[int]]] = {}
    for n, items in by_node.items():
        sizes = [problem.tasks[t].spec.gpus for t, k in items for _ in range(k)]
        sets = pick_gpus(view.graphs[n], list(free_ids[n]), sizes)
        start = 0
        for t, k in items:
            out[t, n] = sets[start:start + k]
            start += k
    return out


#: Domains each topology gang keeps when candidate lists are trimmed (CPSAT.md lesson 7: offering
#: every rack to every gang made 1.9M variables at 4,096 nodes; about 8 was enough).
MAX_DOMAINS = 8


def coherent_candidates(problem: Problem, counts: dict[tuple[int, int], int],
                        trimmed: list[np.ndarray]) -> list[np.ndarray]:
    """Trimmed candidate lists, redone for gangs with topology so that they hold whole domains.

    Node-by-node trimming keeps a few best-fit nodes in many domains, none of which may then hold
    the gang. Instead, at the gang's most binding level (required, else its slice level, else
    preferred) it keeps the domains its greedy placement used, then the best-fitting others
    (fewest free GPUs that still hold the gang, then the roomiest), up to MAX_DOMAINS (more for
    slices: twice the groups), and every task of the gang keeps all its candidates inside them.
    """
    view = of_problem(problem)
    out = list(trimmed)
    for j, job in enumerate(problem.jobs):
        spec = job.topology
        if spec is None:
            continue
        level = spec.required or (spec.slice.required if spec.slice else None) or spec.preferred
        if level is None:
            continue
        lvl = view.level(level)
        limit, need = MAX_DOMAINS, job_gpus_needed(problem, j)
        if spec.required is None and spec.slice is not None:
            gpu_pods = [(problem.tasks[t].replicas, int(problem.tasks[t].demand[0])) for t in problem.job_tasks[j]]
            limit = max(limit, 2 * sum(r for r, g in gpu_pods if g) // spec.slice.size)
            need = spec.slice.size * max(g for _, g in gpu_pods)
        used = [int(lvl.of_node[n]) for (t, n), k in sorted(counts.items()) if k and problem.tasks[t].job == j]
        room = domain_free_gpus(problem, view, j, level, problem.free)
        touched = np.zeros(lvl.count, dtype=bool)
        for t in problem.job_tasks[j]:
            touched[lvl.of_node[problem.tasks[t].candidates]] = True
        fits = [int(d) for d in np.argsort(room, kind="stable") if touched[d] and room[d] >= need]
        rest = [int(d) for d in np.argsort(-room, kind="stable") if touched[d] and room[d] < need]
        keep = list(dict.fromkeys(used))
        keep += [d for d in fits + rest if d not in keep][: max(0, limit - len(keep))]
        inside = np.isin(lvl.of_node, keep)
        for t in problem.job_tasks[j]:
            cand = problem.tasks[t].candidates
            out[t] = cand[inside[cand]]
    return out
