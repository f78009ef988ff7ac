"""Topology graphs: presets, `nvidia-smi topo -m` parsing, in-node GPU choice, domain tree.

Expected GPU sets are hand-computed from docs/hardware.md §5.2 (link counts noted beside each case);
a brute-force enumeration in the test is only a second check, never the source of an answer.
"""

from __future__ import annotations

import itertools
import re

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from placement_models import PlacementRequest

from placement import topology
from placement.topology import (
    CLIQUE_LABEL,
    DEFAULT_LEVELS,
    NODE_LEVEL,
    bandwidth_shortfall,
    best_gpu_set,
    build_hierarchy,
    cluster_topology,
    domain_of,
    domains_at,
    generation_of,
    gpu_graph,
    parse_topo_matrix,
    pick_gpus,
    set_bandwidth,
    token_bandwidth,
)

# DGX-1 V100 as nvidia-smi prints it: GPU block from docs/hardware.md §5.2, four EDR NICs each on a
# PCIe switch with a GPU pair, GPUs 0-3 on CPU0 and 4-7 on CPU1.
DGX1_TOPO = """\
        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    mlx5_0  mlx5_1  mlx5_2  mlx5_3  CPU Affinity
GPU0     X      NV1     NV1     NV2     NV2     SYS     SYS     SYS     PIX     PHB     SYS     SYS     0-11,24-35
GPU1    NV1      X      NV2     NV1     SYS     NV2     SYS     SYS     PIX     PHB     SYS     SYS     0-11,24-35
GPU2    NV1     NV2      X      NV2     SYS     SYS     NV1     SYS     PHB     PIX     SYS     SYS     0-11,24-35
GPU3    NV2     NV1     NV2      X      SYS     SYS     SYS     NV1     PHB     PIX     SYS     SYS     0-11,24-35
GPU4    NV2     SYS     SYS     SYS      X      NV1     NV1     NV2     SYS     SYS     PIX     PHB     12-23,36-47
GPU5    SYS     NV2     SYS     SYS     NV1      X      NV2     NV1     SYS     SYS     PIX     PHB     12-23,36-47
GPU6    SYS     SYS     NV1     SYS     NV1     NV2      X      NV2     SYS     SYS     PHB     PIX     12-23,36-47
GPU7    SYS     SYS     SYS     NV1     NV2     NV1     NV2      X      SYS     SYS     PHB     PIX     12-23,36-47
mlx5_0  PIX     PIX     PHB     PHB     SYS     SYS     SYS     SYS      X      PHB     SYS     SYS
mlx5_1  PHB     PHB     PIX     PIX     SYS     SYS     SYS     SYS     PHB      X      SYS     SYS
mlx5_2  SYS     SYS     SYS     SYS     PIX     PIX     PHB     PHB     SYS     SYS      X      PHB
mlx5_3  SYS     SYS     SYS     SYS     PHB     PHB     PIX     PIX     SYS     SYS     PHB      X

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""  # noqa: E501

# DGX H100: NV18 between all pairs through the NVSwitches (docs/hardware.md §5.2), one ConnectX-7 per
# GPU (§5.4) named NIC0..NIC7 with a NIC legend, two NUMA nodes, newer-driver affinity columns.
DGX_H100_TOPO = """\
        GPU0  GPU1  GPU2  GPU3  GPU4  GPU5  GPU6  GPU7  NIC0  NIC1  NIC2  NIC3  NIC4  NIC5  NIC6  NIC7  CPU Affinity  NUMA Affinity  GPU NUMA ID
GPU0     X    NV18  NV18  NV18  NV18  NV18  NV18  NV18  PIX   NODE  NODE  NODE  SYS   SYS   SYS   SYS   0-55,112-167  0              N/A
GPU1    NV18   X    NV18  NV18  NV18  NV18  NV18  NV18  NODE  PIX   NODE  NODE  SYS   SYS   SYS   SYS   0-55,112-167  0              N/A
GPU2    NV18  NV18   X    NV18  NV18  NV18  NV18  NV18  NODE  NODE  PIX   NODE  SYS   SYS   SYS   SYS   0-55,112-167  0              N/A
GPU3    NV18  NV18  NV18   X    NV18  NV18  NV18  NV18  NODE  NODE  NODE  PIX   SYS   SYS   SYS   SYS   0-55,112-167  0              N/A
GPU4    NV18  NV18  NV18  NV18   X    NV18  NV18  NV18  SYS   SYS   SYS   SYS   PIX   NODE  NODE  NODE  56-111,168-223  1            N/A
GPU5    NV18  NV18  NV18  NV18  NV18   X    NV18  NV18  SYS   SYS   SYS   SYS   NODE  PIX   NODE  NODE  56-111,168-223  1            N/A
GPU6    NV18  NV18  NV18  NV18  NV18  NV18   X    NV18  SYS   SYS   SYS   SYS   NODE  NODE  PIX   NODE  56-111,168-223  1            N/A
GPU7    NV18  NV18  NV18  NV18  NV18  NV18  NV18   X    SYS   SYS   SYS   SYS   NODE  NODE  NODE  PIX   56-111,168-223  1            N/A
NIC0    PIX   NODE  NODE  NODE  SYS   SYS   SYS   SYS    X    NODE  NODE  NODE  SYS   SYS   SYS   SYS
NIC1    NODE  PIX   NODE  NODE  SYS   SYS   SYS   SYS   NODE   X    NODE  NODE  SYS   SYS   SYS   SYS
NIC2    NODE  NODE  PIX   NODE  SYS   SYS   SYS   SYS   NODE  NODE   X    NODE  SYS   SYS   SYS   SYS
NIC3    NODE  NODE  NODE  PIX   SYS   SYS   SYS   SYS   NODE  NODE  NODE   X    SYS   SYS   SYS   SYS
NIC4    SYS   SYS   SYS   SYS   PIX   NODE  NODE  NODE  SYS   SYS   SYS   SYS    X    NODE  NODE  NODE
NIC5    SYS   SYS   SYS   SYS   NODE  PIX   NODE  NODE  SYS   SYS   SYS   SYS   NODE   X    NODE  NODE
NIC6    SYS   SYS   SYS   SYS   NODE  NODE  PIX   NODE  SYS   SYS   SYS   SYS   NODE  NODE   X    NODE
NIC7    SYS   SYS   SYS   SYS   NODE  NODE  NODE  PIX   SYS   SYS   SYS   SYS   NODE  NODE  NODE   X

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks

NIC Legend:

  NIC0: mlx5_0
  NIC1: mlx5_1
  NIC2: mlx5_2
  NIC3: mlx5_3
  NIC4: mlx5_4
  NIC5: mlx5_5
  NIC6: mlx5_6
  NIC7: mlx5_7
"""  # noqa: E501

# A PCIe server with every PCIe token between GPUs: 8× A100 PCIe, bridges only on 0-1 and 6-7;
# 0,1 and 2,3 on two switches under one upstream switch; 4,5 on separate root ports of one host
# bridge; 6,7 behind a second host bridge of the same socket; sockets joined by UPI.
PCIE_BOX_TOPO = """\
        GPU0  GPU1  GPU2  GPU3  GPU4  GPU5  GPU6  GPU7  CPU Affinity  NUMA Affinity
GPU0     X    NV12  PXB   PXB   SYS   SYS   SYS   SYS   0-31          0
GPU1    NV12   X    PXB   PXB   SYS   SYS   SYS   SYS   0-31          0
GPU2    PXB   PXB    X    PIX   SYS   SYS   SYS   SYS   0-31          0
GPU3    PXB   PXB   PIX    X    SYS   SYS   SYS   SYS   0-31          0
GPU4    SYS   SYS   SYS   SYS    X    PHB   NODE  NODE  32-63         1
GPU5    SYS   SYS   SYS   SYS   PHB    X    NODE  NODE  32-63         1
GPU6    SYS   SYS   SYS   SYS   NODE  NODE   X    NV12  32-63         1
GPU7    SYS   SYS   SYS   SYS   NODE  NODE  NV12   X    32-63         1
"""


def _as_terminal_output(text: str) -> str:
    """Tab-separated with an underlined header, as nvidia-smi writes to a terminal."""
    lines = [re.sub(r" {2,}", "\t", line.strip()) for line in text.splitlines()]
    lines[0] = "\x1b[4m\t" + lines[0] + "\x1b[0m"
    return "\n".join(lines)


def _brute_force(graph: nx.Graph, free: list[int], k: int) -> float:
    return max(set_bandwidth(graph, combo) for combo in itertools.combinations(free, k))


# ------------------------------------------------------------------------------------ presets


def test_nvswitch_bandwidth_per_generation() -> None:
    # docs/hardware.md §5.3: NVLink3/4 25 GB/s per link, NVLink5 50; §5.2: NV12 A100, NV18 H100/B200.
    cases = {"A100-SXM4-80GB": 300.0, "NVIDIA-H100-80GB-HBM3": 450.0, "B200": 900.0, "volta": 150.0, None: 300.0}
    for model, bandwidth in cases.items():
        graph = gpu_graph("nvswitch", 8, model)
        assert graph.number_of_edges() == 28
        assert {d["bandwidth_gbs"] for _, _, d in graph.edges(data=True)} == {bandwidth}


def test_hybrid_cube_mesh_is_the_dgx1() -> None:
    graph = gpu_graph("hybrid-cube-mesh", 8)
    assert graph.number_of_edges() == 28
    for gpu in range(8):  # every V100 uses all six NVLinks
        assert sum(graph.edges[gpu, other]["links"] for other in graph[gpu]) == 6
    assert graph.edges[0, 3]["bandwidth_gbs"] == 50.0 and graph.edges[0, 3]["token"] == "NV2"
    assert graph.edges[0, 1]["bandwidth_gbs"] == 25.0 and graph.edges[0, 1]["token"] == "NV1"
    sys_pairs = {tuple(sorted(e)) for *e, t in graph.edges(data="token") if t == "SYS"}
    assert sys_pairs == {(0, 5), (0, 6), (0, 7), (1, 4), (1, 6), (1, 7), (2, 4), (2, 5), (2, 7), (3, 4), (3, 5), (3, 6)}


def test_pcie_presets_rank_bridges_above_pcie() -> None:
    pairs = gpu_graph("pcie-pairs", 4, "A100-PCIE-40GB")
    assert pairs.edges[0, 1]["bandwidth_gbs"] == pairs.edges[2, 3]["bandwidth_gbs"] == 300.0
    assert pairs.edges[1, 2]["bandwidth_gbs"] == pytest.approx(0.75 * 31.5)
    flat = gpu_graph("pcie", 3, "L40S")
    assert {d["links"] for _, _, d in flat.edges(data=True)} == {0}
    assert flat.number_of_edges() == 3


@pytest.mark.parametrize(
    ("preset", "gpus", "model", "needle"),
    [
        ("torus", 8, None, "'torus'"),
        ("hybrid-cube-mesh", 4, None, "'hybrid-cube-mesh'"),
        ("hybrid-cube-mesh", 8, "H100", "'hybrid-cube-mesh'"),
        ("pcie-pairs", 3, None, "'pcie-pairs'"),
        ("nvswitch", 8, "L40S", "'nvswitch'.*no NVLink"),
        ("nvswitch", 0, None, "'nvswitch'"),
    ],
)
def test_preset_errors_name_the_preset(preset: str, gpus: int, model: str | None, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        gpu_graph(preset, gpus, model)


def test_generation_of_reads_names_aliases_and_families() -> None:
    names = {
        "NVIDIA-H100-80GB-HBM3": "hopper", "H20": "hopper", "GH200-144GB": "hopper", "GB200": "blackwell",
        "A100-SXM4-40GB": "ampere", "A30-24GB": "ampere", "Tesla V100-SXM2-32GB": "volta",
        "L40S-48GB": "ada", "ada-lovelace": "ada", "hopper": "hopper",
    }  # fmt: skip
    for name, generation in names.items():
        assert generation_of(name).name == generation, name
    assert generation_of("RTX-A6000") is None and generation_of(None) is None


# --------------------------------------------------------------------------------- topo -m


def test_parse_dgx1_equals_the_preset() -> None:
    parsed = parse_topo_matrix(DGX1_TOPO, gpu_model="Tesla V100-SXM2-16GB")
    preset = gpu_graph("hybrid-cube-mesh", 8)
    assert sorted(parsed.nodes) == list(range(8))
    for a, b in itertools.combinations(range(8), 2):
        assert parsed.edges[a, b] == preset.edges[a, b], (a, b)


def test_parse_dgx_h100_terminal_output() -> None:
    parsed = parse_topo_matrix(_as_terminal_output(DGX_H100_TOPO), gpu_model="H100-SXM5-80GB")
    assert parsed.number_of_nodes() == 8 and parsed.number_of_edges() == 28
    cells = {(d["token"], d["links"], d["bandwidth_gbs"]) for _, _, d in parsed.edges(data=True)}
    assert cells == {("NV18", 18, 450.0)}
    assert nx.utils.graphs_equal(parsed, parse_topo_matrix(DGX_H100_TOPO, gpu_model="H100-SXM5-80GB"))


def test_parse_ranks_tokens_nv_pix_pxb_phb_node_sys() -> None:
    graph = parse_topo_matrix(PCIE_BOX_TOPO, gpu_model="A100-PCIE-40GB")
    bw = {graph.edges[e]["token"]: graph.edges[e]["bandwidth_gbs"] for e in graph.edges}
    assert bw["NV12"] > bw["PIX"] > bw["PXB"] > bw["PHB"] >= bw["NODE"] > bw["SYS"] > 0
    # Without a model hint the same order holds, and NV# still counts 25 GB/s per link.
    assert token_bandwidth("NV12")[0] == 300.0 > token_bandwidth("PIX")[0] > token_bandwidth("SYS")[0]
    assert token_bandwidth("SOC") == token_bandwidth("SYS")  # pre-SYS drivers
    assert best_gpu_set(graph, list(range(8)), 2) == [0, 1]  # tie with 6-7 (both NV12) → lowest
    assert best_gpu_set(graph, [1, 2, 3, 4, 5, 6], 2) == [2, 3]  # PIX beats PXB, PHB, NODE


def _corrupt(text: str, row: str, column: int, token: str) -> tuple[str, int]:
    """The text with one cell of one row replaced, and that row's 1-based line number."""
    lines = text.splitlines()
    index = next(i for i, line in enumerate(lines) if line.split()[:1] == [row])
    fields = lines[index].split()
    fields[column + 1] = token
    lines[index] = "  ".join(fields)
    return "\n".join(lines), index + 1


@pytest.mark.parametrize(
    ("row", "column", "token", "message"),
    [
        ("GPU2", 5, "NV9", "symmetric"),
        ("GPU3", 1, "QPI", "unknown topology token 'QPI'"),
        ("GPU4", 4, "NV2", "must be 'X'"),
        ("GPU6", 2, "NV0", "at least one link"),
    ],
)
def test_malformed_cells_name_their_line(row: str, column: int, token: str, message: str) -> None:
    text, line = _corrupt(DGX1_TOPO, row, column, token)
    with pytest.raises(ValueError, match=rf"^line {line}: .*{re.escape(message)}"):
        parse_topo_matrix(text)


def test_malformed_structure() -> None:
    with pytest.raises(ValueError, match=r"^line 1: no .*header"):
        parse_topo_matrix("nothing to see\n")
    with pytest.raises(ValueError, match=r"^line 1: header GPU columns"):
        parse_topo_matrix("GPU0 GPU2\nGPU0 X NV1\n")
    lines = DGX1_TOPO.splitlines()
    with pytest.raises(ValueError, match=r"^line 9: .*without rows GPU7"):  # blank line 9 ends the table
        parse_topo_matrix("\n".join([*lines[:8], "", *lines[9:]]))
    with pytest.raises(ValueError, match=r"^line 3: row GPU1 has 3 cells"):
        parse_topo_matrix("\n".join([lines[0], lines[1], "GPU1 NV1 X NV2", *lines[3:]]))
    with pytest.raises(ValueError, match=r"^line 3: row GPU0 appears twice \(first on line 2\)"):
        parse_topo_matrix("\n".join([lines[0], lines[1], lines[1], *lines[3:]]))
    with pytest.raises(ValueError, match=r"^line 2: row name 'GPUx'"):
        parse_topo_matrix("GPU0 GPU1\nGPUx X NV1\n")


# ----------------------------------------------------------------------------- GPU choice


@pytest.fixture(scope="module")
def dgx1() -> nx.Graph:
    return gpu_graph("hybrid-cube-mesh", 8)


def test_dgx1_full_node(dgx1: nx.Graph) -> None:
    everything = list(range(8))
    assert best_gpu_set(dgx1, everything, 0) == []
    assert best_gpu_set(dgx1, everything, 1) == [0]
    assert best_gpu_set(dgx1, everything, 2) == [0, 3]  # first of the eight 2-link pairs
    # Triangles with 5 links: {0,2,3}, {1,2,3}, {4,6,7}, {5,6,7} → lowest.
    assert best_gpu_set(dgx1, everything, 3) == [0, 2, 3]
    # Only {0,1,2,3} and {4,5,6,7} are fully linked (9 links each) → lowest.
    assert best_gpu_set(dgx1, everything, 4) == [0, 1, 2, 3]
    assert set_bandwidth(dgx1, [0, 1, 2, 3]) == set_bandwidth(dgx1, [4, 5, 6, 7]) == 9 * 25.0
    assert best_gpu_set(dgx1, everything, 8) == everything


def test_dgx1_with_busy_gpus(dgx1: nx.Graph) -> None:
    # GPU 0 busy: {1,2,3}+x has at most 7 links; {4,5,6,7} keeps its 9.
    assert best_gpu_set(dgx1, [1, 2, 3, 4, 5, 6, 7], 4) == [4, 5, 6, 7]
    # GPUs 3 and 4 busy: best 2-set is the 2-link pair 1-2 (also 1-5, 5-6, 6-7 tie).
    free = [0, 1, 2, 5, 6, 7]
    assert best_gpu_set(dgx1, free, 2) == [1, 2]
    # Quads: {1,2,5,6} = 1-2,1-5,5-6 (2 each) + 2-6 (1) = 7 links + SYS 1-6, 2-5;
    # {1,5,6,7} = 1-5,5-6,6-7 (2) + 5-7 (1) = 7 links + SYS 1-6, 1-7; every other quad ≤ 6 links.
    assert set_bandwidth(dgx1, [1, 2, 5, 6]) == pytest.approx(set_bandwidth(dgx1, [1, 5, 6, 7]))
    assert best_gpu_set(dgx1, free, 4) == [1, 2, 5, 6]
    assert set_bandwidth(dgx1, [1, 2, 5, 6]) == pytest.approx(_brute_force(dgx1, free, 4))


def test_nvswitch_any_set_equal_lowest_wins() -> None:
    graph = gpu_graph("nvswitch", 8, "H100")
    assert len({set_bandwidth(graph, c) for c in itertools.combinations(range(8), 3)}) == 1
    assert best_gpu_set(graph, [7, 3, 5, 1], 2) == [1, 3]
    assert best_gpu_set(graph, list(range(8)), 4) == [0, 1, 2, 3]


def test_pcie_pairs_prefers_a_bridged_pair() -> None:
    graph = gpu_graph("pcie-pairs", 8, "H100-NVL")
    assert best_gpu_set(graph, list(range(8)), 2) == [0, 1]
    assert best_gpu_set(graph, [1, 2, 4, 6, 7], 2) == [6, 7]
    assert best_gpu_set(graph, [1, 2, 4, 7], 2) == [1, 2]  # no bridged pair free: all PCIe equal
    assert best_gpu_set(graph, [0, 1, 3, 4, 5], 4) == [0, 1, 4, 5]  # two bridges beat one


def test_best_gpu_set_errors(dgx1: nx.Graph) -> None:
    with pytest.raises(ValueError, match="only 2 free"):
        best_gpu_set(dgx1, [0, 1], 3)
    with pytest.raises(ValueError, match="twice"):
        best_gpu_set(dgx1, [0, 0, 1], 1)
    with pytest.raises(ValueError, match=r"\[9\]"):
        best_gpu_set(dgx1, [0, 9], 1)
    with pytest.raises(ValueError, match="non-negative"):
        best_gpu_set(dgx1, [0, 1], -1)


def test_fallback_on_large_graphs(dgx1: nx.Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    # C(24, 12) = 2.7M subsets: the greedy + swap path, uniform graph → lowest indices.
    assert best_gpu_set(gpu_graph("nvswitch", 24), list(range(24)), 12) == list(range(12))
    # A planted 6-clique of NVLink among weak PCIe-like noise: C(30, 6) = 594k subsets.
    planted = [2, 5, 11, 17, 23, 29]
    graph = nx.complete_graph(30)
    nx.set_edge_attributes(graph, 1.0, "bandwidth_gbs")
    for a, b in itertools.combinations(planted, 2):
        graph.edges[a, b]["bandwidth_gbs"] = 100.0
    assert best_gpu_set(graph, list(range(30)), 6) == planted
    # Forced onto the fallback, the DGX-1 answers stay the exact ones.
    monkeypatch.setattr(topology, "EXACT_LIMIT", 0)
    assert best_gpu_set(dgx1, list(range(8)), 2) == [0, 3]
    assert best_gpu_set(dgx1, list(range(8)), 4) == [0, 1, 2, 3]


@st.composite
def _graph_free_k_other(draw: st.DrawFn) -> tuple[nx.Graph, list[int], int, list[int]]:
    n = draw(st.integers(1, 8))
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    for a, b in itertools.combinations(range(n), 2):
        bandwidth = draw(st.sampled_from([None, 6.3, 12.6, 25.0, 50.0, 300.0]))
        if bandwidth is not None:
            graph.add_edge(a, b, bandwidth_gbs=bandwidth)
    free = draw(st.lists(st.integers(0, n - 1), min_size=1, unique=True))
    k = draw(st.integers(0, len(free)))
    other = draw(st.permutations(free))[:k]
    return graph, free, k, other


@settings(max_examples=150, deadline=None)
@given(_graph_free_k_other())
def test_best_gpu_set_beats_any_subset(case: tuple[nx.Graph, list[int], int, list[int]]) -> None:
    graph, free, k, other = case
    chosen = best_gpu_set(graph, free, k)
    assert len(chosen) == len(set(chosen)) == k and set(chosen) <= set(free)
    assert chosen == sorted(chosen)
    assert set_bandwidth(graph, chosen) >= set_bandwidth(graph, other) - 1e-9


# ------------------------------------------------------------------------------ hierarchy


def _nvl72_cluster() -> list[tuple[str, dict[str, str | None]]]:
    """Four NVL72 racks (18 trays each, one NVLink domain per rack), two racks per block, plus a
    rack of NVLink-less HGX nodes and one node nobody labelled."""
    nodes: list[tuple[str, dict[str, str | None]]] = []
    for d in range(4):
        for tray in range(18):
            labels = {"nvlink_domain": f"uuid.{d}", "rack": f"r{d}", "block": f"b{d // 2}"}
            nodes.append((f"gb-{d}-{tray:02d}", labels))
    nodes += [(f"hgx-{i}", {"nvlink_domain": None, "rack": "r4", "block": "b1"}) for i in range(2)]
    nodes.append(("stray", {}))
    return nodes


def test_nvl72_hierarchy() -> None:
    nodes = _nvl72_cluster()
    tree = build_hierarchy(nodes)
    assert nx.is_arborescence(tree) and tree.graph["levels"] == DEFAULT_LEVELS
    assert {v for v in tree if tree.out_degree(v) == 0} == {name for name, _ in nodes}

    nvlink = domains_at(tree, "nvlink_domain")
    assert [len(nvlink[f"uuid.{d}"]) for d in range(4)] == [18] * 4
    assert nvlink["<hgx-0>"] == ["hgx-0"] and nvlink["<stray>"] == ["stray"]
    assert nvlink["uuid.2"][0] == "gb-2-00"  # input order kept
    racks = domains_at(tree, "rack")
    assert racks["r4"] == ["hgx-0", "hgx-1"] and racks["<stray>"] == ["stray"]
    blocks = domains_at(tree, "block")
    assert list(blocks) == ["b0", "b1", "<stray>"]
    assert len(blocks["b0"]) == 36 and len(blocks["b1"]) == 38
    assert domains_at(tree, "cluster") == {"cluster": [name for name, _ in nodes]}

    assert domain_of(tree, "gb-3-17", "nvlink_domain") == "uuid.3"
    assert domain_of(tree, "gb-3-17", "block") == "b1"
    assert domain_of(tree, "hgx-1", "nvlink_domain") == "<hgx-1>"
    assert domain_of(tree, "stray", "rack") == "<stray>"
    assert domain_of(tree, "stray", "cluster") == "cluster"


def test_missing_labels_never_split_a_domain() -> None:
    nodes = [
        ("a", {"nvlink_domain": "c1", "rack": "r1"}),
        ("b", {"nvlink_domain": "c1"}),  # rack unknown, but its NVLink domain-mate is in r1
        ("c", {"nvlink_domain": "c2"}),  # a whole clique without rack labels
        ("d", {"nvlink_domain": "c2", "rack": None}),
    ]
    tree = build_hierarchy(nodes)
    assert domain_of(tree, "b", "rack") == "r1"
    assert domains_at(tree, "rack")["<nvlink_domain:c2>"] == ["c", "d"]
    assert domain_of(tree, "d", "block") == "<nvlink_domain:c2>"


def test_hierarchy_errors() -> None:
    # An NVL36×2 clique labelled with both of its racks does not nest under the default order…
    split = [("a", {"nvlink_domain": "c1", "rack": "r1"}), ("b", {"nvlink_domain": "c1", "rack": "r2"})]
    with pytest.raises(ValueError, match=r"nvlink_domain 'c1' lies in several rack domains \['r1', 'r2'\]"):
        build_hierarchy(split)
    # …but does with rack below nvlink_domain.
    tree = build_hierarchy(split, levels=("rack", "nvlink_domain"))
    assert domains_at(tree, "nvlink_domain") == {"c1": ["a", "b"]}
    with pytest.raises(ValueError, match="twice"):
        build_hierarchy([("a", {}), ("a", {})])
    with pytest.raises(ValueError, match="cluster"):
        build_hierarchy([("cluster", {})])
    with pytest.raises(ValueError, match="distinct"):
        build_hierarchy([("a", {})], levels=("rack", "rack"))
    tree = build_hierarchy([("a", {"rack": "r"})])
    with pytest.raises(ValueError, match="unknown hierarchy level 'zone'"):
        domains_at(tree, "zone")
    with pytest.raises(ValueError, match="no node 'b'"):
        domain_of(tree, "b", "rack")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans(), st.booleans()), min_size=1, max_size=20))
def test_random_hierarchies_nest(specs: list[tuple[int, bool, bool]]) -> None:
    # Labels derived top-down (rack r//2 in block r//4) always nest; some are dropped at random.
    nodes = [
        (f"n{i}", {"nvlink_domain": f"c{r}" if keep_clique else None, "rack": f"r{r // 2}" if keep_rack else None,
                   "block": f"b{r // 4}"})
        for i, (r, keep_clique, keep_rack) in enumerate(specs)
    ]  # fmt: skip
    tree = build_hierarchy(nodes)
    assert nx.is_arborescence(tree)
    for lower, upper in itertools.pairwise(("nvlink_domain", *DEFAULT_LEVELS[1:], "cluster")):
        for members in domains_at(tree, lower).values():
            assert len({domain_of(tree, n, upper) for n in members}) == 1
    sizes = [len(m) for m in domains_at(tree, "rack").values()]
    assert sum(sizes) == len(nodes)


# ------------------------------------------------------------------ the request's topology view


def _request(nodes: list[dict[str, object]], **cluster: object) -> PlacementRequest:
    return PlacementRequest.model_validate({"cluster": {"nodes": nodes, **cluster}})


def _plain(name: str, labels: dict[str, str] | None = None, **topo: str) -> dict[str, object]:
    return {"name": name, "gpu_model": "H100-SXM5-80GB", "gpus": 8, "cpu": 64, "memory_gib": 512,
            "labels": labels or {}, "topology": topo}


def test_cluster_topology_domains_and_rank() -> None:
    # Input order interleaves racks; n3 takes its NVLink domain from the GFD clique label.
    nodes = [_plain("n0", rack="r0", nvlink_domain="c0"), _plain("n1", rack="r1"),
             _plain("n2", rack="r0", nvlink_domain="c0"), _plain("n3", {CLIQUE_LABEL: "c1"}, rack="r1"),
             _plain("n4", rack="r1", nvlink_domain="c1")]
    view = cluster_topology(_request(nodes))
    nvlink, rack = view.level("nvlink_domain"), view.level("rack")
    assert nvlink.names == ("c0", "<n1>", "c1") and [m.tolist() for m in nvlink.members] == [[0, 2], [1], [3, 4]]
    assert rack.names == ("r0", "r1") and rack.of_node.tolist() == [0, 1, 0, 1, 1]
    assert view.level(NODE_LEVEL).count == 5
    # Hierarchy order: r0 (c0: n0, n2), then r1 (n1 alone, then c1: n3, n4).
    assert view.ordered(range(5)) == [0, 2, 1, 3, 4]
    assert view.height("node") < view.height("nvlink_domain") < view.height("rack") < view.height("block")
    assert view.graphs == (None,) * 5  # no nvlink preset, no matrix: GPU choice falls back to lowest indices


def test_cluster_topology_reads_label_levels() -> None:
    spine = "network.topology.nvidia.com/spine"
    nodes = [_plain("a", {spine: "s1"}, rack="r0"), _plain("b", {spine: "s1"}, rack="r1"), _plain("c", rack="r2")]
    view = cluster_topology(_request(nodes, topology_levels=["rack", spine]))
    assert view.levels == ("rack", spine)
    assert view.level(spine).names == ("s1", "<rack:r2>")


def test_pick_gpus_biggest_pod_first(dgx1: nx.Graph) -> None:
    # Sizes 2, 4, 2 on an empty DGX-1: the quad {0,1,2,3} first, then pairs 4-7 and 5-6 (2 links each).
    assert pick_gpus(dgx1, list(range(8)), [2, 4, 2]) == [[4, 7], [0, 1, 2, 3], [5, 6]]
    # Without a graph: lowest free indices, still biggest first.
    assert pick_gpus(None, [1, 2, 3, 5, 6, 7], [2, 4]) == [[6, 7], [1, 2, 3, 5]]


def test_bandwidth_shortfall(dgx1: nx.Graph) -> None:
    # {4,5,6}: links 1 + 1 + 2 = 4 (100 GB/s) against the best triangle's 5 (125 GB/s): 1 - 0.8.
    marked = cluster_topology(_request([dict(_plain("d", nvlink="hybrid-cube-mesh"), gpu_model="V100-SXM2-32GB")]))
    graph = marked.graphs[0]
    assert graph is not None and not graph.graph["uniform"]
    assert bandwidth_shortfall(graph, [4, 5, 6]) == pytest.approx(0.2)
    assert bandwidth_shortfall(graph, [0, 1, 2, 3]) == 0.0 and bandwidth_shortfall(graph, [5]) == 0.0
    assert bandwidth_shortfall(gpu_graph("nvswitch", 8), [0, 7]) == 0.0  # no "uniform" mark, still all equal
