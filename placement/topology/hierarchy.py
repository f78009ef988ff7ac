"""The cluster hierarchy: node → nvlink_domain → rack → block → cluster, as a networkx tree.

Like Kueue's Topology levels: `cluster.topology_levels` names them, narrowest first; a level is
read from the node's `topology` field or from the node label of that name (the NVLink partition
also from GPU Feature Discovery's `nvidia.com/gpu.clique`). `ClusterTopology` indexes each level's
domains per node, which the compiler turns into one boolean per (job, domain).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import networkx as nx
import numpy as np
from placement_models import ErrorList, Node, PlacementRequest

from placement import provision
from placement.topology.gpus import gpu_graph, parse_topo_matrix

# --------------------------------------------------------------------------------------------
# Cluster hierarchy
# --------------------------------------------------------------------------------------------

DEFAULT_LEVELS: tuple[str, ...] = ("nvlink_domain", "rack", "block")
ROOT = "cluster"
# GPU Feature Discovery puts the multi-node NVLink partition in this label (docs/hardware.md §5.5, §6.1):
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
    names = [name for name, _ in nodes]
    _check_names(names, levels)

    tree = nx.DiGraph(levels=levels)
    tree.add_node(ROOT, kind="root")
    for order, name in enumerate(names):
        tree.add_node(name, kind="node", order=order)
    tops: list[object] = list(names)
    for level, edges in _nest(names, [labels for _, labels in nodes], levels):
        for parent, child in edges:
            tree.add_node(parent, kind="domain", level=level)
            tree.add_edge(parent, child)
        tops = list(dict.fromkeys(parent for parent, _ in edges))
    for top in tops:
        tree.add_edge(ROOT, top)
    return tree


def _nest(names: Sequence[str], labels: Sequence[dict[str, str | None]], levels: Sequence[str]
          ) -> list[tuple[str, list[tuple[tuple[str, str], object]]]]:
    """Per level, narrowest first, the (parent domain, child vertex) edges of the tree `build_hierarchy` draws:
    each vertex of the level below (a node name, or a (level, name) domain) lies in the one domain its nodes
    are labelled with, else in a singleton domain of its own; ValueError where its nodes carry two labels.
    Without networkx, so indexing a big cluster walks dicts, not a graph."""
    members: dict[object, list[int]] = {name: [i] for i, name in enumerate(names)}  # vertex -> its node indices
    out: list[tuple[str, list[tuple[tuple[str, str], object]]]] = []
    for level in levels:
        parents: dict[object, list[int]] = {}
        edges: list[tuple[tuple[str, str], object]] = []
        for child, child_nodes in members.items():
            found = {str(labels[i][level]) for i in child_nodes if labels[i].get(level) not in (None, "")}
            if len(found) > 1:
                raise ValueError(
                    f"hierarchy: {_describe(child)} lies in several {level} domains {sorted(found)}; "
                    f"levels {tuple(levels)} must nest"
                )
            parent = (level, found.pop() if found else _singleton_name(child))
            edges.append((parent, child))
            parents.setdefault(parent, []).extend(child_nodes)
        out.append((level, edges))
        members = parents
    return out


def _level_domains(names: Sequence[str], labels: Sequence[dict[str, str | None]], levels: Sequence[str]
                   ) -> dict[str, dict[str, list[int]]]:
    """Per level, domain name -> its node indices ascending, domains in order of their first node: what
    `domains_at` reads off the tree, from `_nest` directly."""
    out: dict[str, dict[str, list[int]]] = {}
    below: dict[object, list[int]] = {name: [i] for i, name in enumerate(names)}
    for level, edges in _nest(names, labels, levels):
        grouped: dict[tuple[str, str], list[int]] = {}
        for parent, child in edges:
            grouped.setdefault(parent, []).extend(below[child])
        found = [(name, sorted(idx)) for (_, name), idx in grouped.items()]
        found.sort(key=lambda item: item[1][0])
        out[level] = dict(found)
        below = dict(grouped)  # type: ignore[arg-type]
    return out


def _check_names(names: Sequence[str], levels: Sequence[str]) -> None:
    """ValueError unless the levels are distinct and not the root, and the node names distinct and not the root."""
    levels = tuple(levels)
    if len(set(levels)) != len(levels) or ROOT in levels:
        raise ValueError(f"hierarchy levels must be distinct and not {ROOT!r}: {levels}")
    if len(set(names)) != len(names):
        twice = sorted(name for name, count in Counter(names).items() if count > 1)
        raise ValueError(f"hierarchy: nodes listed twice: {twice}")
    if ROOT in names:
        raise ValueError(f"hierarchy: a node may not be named {ROOT!r} (the root)")


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
    names = [n.name for n in nodes]
    domains: dict[str, dict[str, list[int]]] = {}
    try:
        _check_names(names, levels)
        domains = _level_domains(names, [{lv: level_label(n, lv) for lv in levels} for n in nodes], levels)
    except ValueError as err:
        errors.add(("cluster", "topology_levels"), f"{err}; reorder the levels or fix the node labels", list(levels))
    errors.raise_if_any()

    by_level = {NODE_LEVEL: _level(NODE_LEVEL, {name: [i] for i, name in enumerate(names)}, len(nodes))}
    for level in levels:
        by_level[level] = _level(level, domains[level], len(nodes))
    keys = [np.arange(len(nodes))] + [by_level[lv].of_node for lv in levels]  # lexsort: last key first
    order = np.lexsort(keys)
    rank = np.empty(len(nodes), dtype=np.intp)
    rank[order] = np.arange(len(nodes))
    return ClusterTopology(levels=levels, by_level=by_level, rank=rank, graphs=graphs)


def _level(name: str, domains: dict[str, list[int]], n_nodes: int) -> Level:
    """One level from its domains' node indices (ascending), domains in order of their first node."""
    of_node = np.zeros(n_nodes, dtype=np.intp)
    members = []
    for d, found in enumerate(domains.values()):
        idx = np.array(found, dtype=np.intp)
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
