"""Topology as graphs: which GPUs inside a node talk fast, and which nodes sit in one domain.

Two layers, both plain networkx, so that the compiler, the greedy, the decoder and the benchmarks
read the same facts:

* `gpus` — in-node GPU graphs (`gpu_graph`, `parse_topo_matrix`) with `bandwidth_gbs` on every
  edge, and the choice of which k GPUs of a node a pod gets (`best_gpu_set`, `pick_gpus`);
* `hierarchy` — the cluster hierarchy (`build_hierarchy`, `cluster_topology`): node →
  nvlink_domain → rack → block → cluster, a tree like Kueue's Topology levels, which the compiler
  turns into one boolean per (job, domain).

How a gang is placed on domains lives with the greedy (`placement.baseline.topology`), its pending
reasons with explain, and the GPU indices of each pod with decode.
"""

from placement.topology.gpus import (
    EXACT_LIMIT,
    GENERATIONS,
    PRESETS,
    Generation,
    bandwidth_shortfall,
    best_gpu_set,
    generation_of,
    gpu_graph,
    ideal_bandwidth,
    parse_topo_matrix,
    pick_gpus,
    set_bandwidth,
    token_bandwidth,
)
from placement.topology.hierarchy import (
    CLIQUE_LABEL,
    DEFAULT_LEVELS,
    NODE_LEVEL,
    ROOT,
    TOPOLOGY_FIELDS,
    ClusterTopology,
    Level,
    build_hierarchy,
    cluster_topology,
    domain_of,
    domains_at,
    level_label,
)

__all__ = [
    "CLIQUE_LABEL", "DEFAULT_LEVELS", "EXACT_LIMIT", "GENERATIONS", "NODE_LEVEL", "PRESETS", "ROOT", "TOPOLOGY_FIELDS",
    "ClusterTopology", "Generation", "Level", "bandwidth_shortfall", "best_gpu_set", "build_hierarchy",
    "cluster_topology", "domain_of", "domains_at", "generation_of", "gpu_graph", "ideal_bandwidth", "level_label",
    "parse_topo_matrix", "pick_gpus", "set_bandwidth", "token_bandwidth",
]
