"""In-node GPU links as data: the link rates of each GPU generation, the presets of common boards and the
`nvidia-smi topo -m` matrix, each read into an undirected graph on GPU indices with `bandwidth_gbs` (and
`links`, `token`) on every edge.

These are facts about hardware, like the models and MIG profiles beside them, so they live in the catalog:
the planner (placement.topology, which chooses the GPUs of each pod) and the independent verifier (which
checks the plan's `topology.bandwidth` term from the GPUs chosen) read the same graphs and share nothing
else.

Bandwidth unit: GB/s **per direction** for one GPU pair (the figure NCCL point-to-point can at best
reach); bidirectional datasheet figures are twice these.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import networkx as nx

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


# docs/hardware.md §5.3 "Bandwidth per generation": NVLink 2/3/4 = 25 GB/s per link per direction,
# NVLink 5 = 50; PCIe Gen4 x16 ~31.5, Gen5 x16 ~63 per direction. NV# per NVSwitch board from §5.2:
# DGX-2 NV6, DGX A100 NV12, DGX H100 NV18, HGX B200 NV18. Two figures are our assumptions (§5.3):
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

# PCIe paths as fractions of the generation's x16 per-direction rate. docs/hardware.md gives only the
# order (§5.1: NV# > PIX > PXB > PHB > NODE > SYS) and asks for measured numbers later (§5.3), so
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

# DGX-1 V100 hybrid cube-mesh, docs/hardware.md §5.2 edge list (every GPU has 6 NVLinks). The other
# 12 pairs have no NVLink and meet over the CPU interconnect (SYS in the real matrix).
DGX1_NVLINKS: dict[tuple[int, int], int] = {
    **{pair: 2 for pair in [(0, 3), (0, 4), (1, 2), (1, 5), (2, 3), (4, 7), (5, 6), (6, 7)]},
    **{pair: 1 for pair in [(0, 1), (0, 2), (1, 3), (2, 6), (3, 7), (4, 5), (4, 6), (5, 7)]},
}

# PCIe cards with NVLink bridges: A100 PCIe, H100 PCIe and H100 NVL bridges carry 600 GB/s
# bidirectional per pair (docs/hardware.md §5.2, status U) = 12 links × 25 GB/s per direction.
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
    * `hybrid-cube-mesh`: the DGX-1 V100 (8 GPUs exactly), NV1/NV2 pairs as in docs/hardware.md §5.2,
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
