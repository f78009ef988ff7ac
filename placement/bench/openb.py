"""Replay of the FGD paper's evaluation on the Alibaba openb GPU trace (issue 8).

Why this exists: we claim better plans than greedy schedulers, and the only claim worth making is
one measured on data and a protocol nobody here wrote. The protocol below is the one described in
``shared/data/README.md`` (FGD, USENIX ATC'23): arrival-only, one pod at a time, a pod that fits
nowhere fails for good, and the share of GPU milli allocated is read when 100 % and 130 % of the
cluster's GPU capacity has arrived. Reproducing the published BestFit and FGD numbers within half a
point is what proves the harness; only then do numbers for our own policies mean anything.

Layout:

* loading — :func:`resolve_data_dir`, :func:`load_nodes`, :func:`load_trace`;
* the protocol — :func:`arrival_order` (shuffle, inflate to 130 %, node tie-break ranks) and
  :func:`replay` (one seed, one policy), :func:`allocation_curve` (the metric);
* policies — :class:`RandomPolicy`, :class:`BestFitPolicy`, :class:`FGDPolicy`, vectorised with
  numpy over nodes; more can be added with :func:`register_policy`. Ours, ``cpsat-online`` and
  ``cpsat-batch`` / ``cpsat-batch50`` (windows of 200 / 50 queued pods), live in
  :mod:`placement.bench.cpsat_policies`; the table lists batch policies apart (``kind``);
* the face — :func:`run` (many seeds, summary dict) and :func:`main` (table and optional plot).

Adding a policy: write a class with ``name``, ``prepare(ctx)`` and either
``choose(state, pod) -> (node, gpu_indices) | None`` (online: sees one arrival) or
``window: int`` plus ``choose_batch(state, pods) -> list[(node, gpu_indices) | None]`` (batch:
sees ``window`` arrived pods at once and decides them together). Register a factory
``seed -> policy``. The harness never trusts a policy: each placement is checked against the
cluster state and an infeasible one raises :class:`InvalidPlacement`.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

#: Milli of one whole GPU: every GPU in the trace is 1000 milli.
GPU_MILLI = 1000
#: File of the GPU nodes the paper replays on (the CPU-only nodes are not part of the protocol).
NODE_FILE = "openb_node_list_gpu_node.csv"
POD_FILE_PREFIX = "openb_pod_list_"
#: Load the trace is inflated to, as a fraction of GPU capacity (the paper's 130 %).
INFLATE_TO = 1.3
#: Arrived-load points (percent of capacity) the paper reports.
REPORT_POINTS = (100, 130)
#: Share of pods the FGD typical-pod groups must cover.
TYPICAL_COVERAGE = 0.95
#: BestFit normalises CPU and GPU leftovers by the largest node shape in the trace (128 cores, 8 GPUs).
BESTFIT_CPU_SCALE = 128_000
BESTFIT_GPU_SCALE = 8_000

#: Published means of seeds 42..51 (authors' artifact), % of GPU milli allocated: (trace, arrived %) -> policy -> value.
PUBLISHED: dict[tuple[str, int], dict[str, float]] = {
    ("default", 100): {
        "random": 86.30,
        "dotprod": 90.62,
        "gpuclustering": 91.65,
        "gpupacking": 91.78,
        "bestfit": 92.86,
        "fgd": 95.23,
    },
    ("default", 130): {
        "random": 87.47,
        "dotprod": 90.85,
        "gpuclustering": 91.88,
        "gpupacking": 92.00,
        "bestfit": 93.08,
        "fgd": 95.39,
    },
    ("cpu200", 130): {
        "random": 83.77,
        "dotprod": 87.70,
        "gpuclustering": 89.92,
        "gpupacking": 90.22,
        "bestfit": 92.40,
        "fgd": 95.05,
    },
    ("gpushare100", 130): {
        "random": 79.44,
        "dotprod": 82.42,
        "gpuclustering": 82.65,
        "gpupacking": 82.57,
        "bestfit": 85.01,
        "fgd": 86.90,
    },
    ("gpuspec33", 130): {
        "random": 86.46,
        "dotprod": 89.14,
        "gpuclustering": 92.12,
        "gpupacking": 93.22,
        "bestfit": 93.09,
        "fgd": 94.55,
    },
    ("multigpu50", 130): {
        "random": 90.27,
        "dotprod": 94.85,
        "gpuclustering": 95.81,
        "gpupacking": 96.18,
        "bestfit": 95.74,
        "fgd": 97.18,
    },
}


# --------------------------------------------------------------------------------------------- data


class DataNotFound(FileNotFoundError):
    """The openb data is not on this machine; the message names every place that was looked at."""


@dataclass(frozen=True, eq=False)
class Pod:
    """One pod of a trace. Immutable, so the copies the 130 % inflation appends can share the object."""

    name: str
    cpu: int  #: milli-CPU
    mem: int  #: MiB
    num_gpu: int
    gpu_milli: int  #: per GPU; < 1000 with num_gpu == 1 is a shared fraction of one GPU
    spec: tuple[str, ...] = ()  #: allowed GPU models; empty means any model

    @property
    def demand(self) -> int:
        """GPU milli this pod asks for in total (what "arrived" and "used" count)."""
        return self.num_gpu * self.gpu_milli

    @property
    def is_share(self) -> bool:
        """A fraction of one GPU: the GPU it lands on matters, which is FGD's whole point."""
        return self.num_gpu == 1 and 0 < self.gpu_milli < GPU_MILLI


@dataclass(frozen=True, eq=False)
class NodeTable:
    """The GPU nodes, sorted by name (the order the tie-break ranks are a permutation of)."""

    names: tuple[str, ...]
    cpu: np.ndarray  #: (N,) milli-CPU
    mem: np.ndarray  #: (N,) MiB
    gpus: np.ndarray  #: (N,) GPUs per node
    model: np.ndarray  #: (N,) index into ``models``
    models: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.names)

    @property
    def total_gpus(self) -> int:
        """G of the paper: the metric divides by it."""
        return int(self.gpus.sum())

    @property
    def max_gpus(self) -> int:
        return int(self.gpus.max()) if self.size else 0


@dataclass(frozen=True, eq=False)
class Trace:
    """A pod list, sorted by name as the protocol requires before shuffling."""

    name: str
    pods: tuple[Pod, ...]

    @property
    def demand(self) -> int:
        return sum(p.demand for p in self.pods)


def _candidate_dirs(data: Path | str | None) -> list[Path]:
    if data is not None:
        return [Path(data)]
    env = os.environ.get("PLACEMENT_DATA")
    if env:
        return [Path(env)]
    repo = Path(__file__).resolve().parents[2]
    out = [Path.cwd() / ".." / "shared" / "data", repo / ".." / "shared" / "data"]
    return list(dict.fromkeys(p.resolve() for p in out))


def resolve_data_dir(data: Path | str | None = None) -> Path:
    """The folder holding the openb CSVs: ``data``, else ``$PLACEMENT_DATA``, else ``../shared/data``.

    Either the ``openb`` folder itself or its parent (the shared data root) is accepted, so
    ``--data ../shared/data`` and ``--data ../shared/data/openb`` both work.
    """
    tried: list[Path] = []
    for base in _candidate_dirs(data):
        for d in (base, base / "openb"):
            tried.append(d / NODE_FILE)
            if (d / NODE_FILE).is_file():
                return d
    where = ", ".join(str(p) for p in tried)
    raise DataNotFound(
        f"openb data not found: no {NODE_FILE} at {where}. Pass --data DIR or set PLACEMENT_DATA to the folder "
        "holding the Alibaba cluster-trace-gpu-v2023 CSVs (see shared/data/README.md)."
    )


def list_traces(data: Path | str | None = None) -> list[str]:
    """Trace names available in the data folder (``default``, ``cpu050``, ``gpushare100``, ...)."""
    d = resolve_data_dir(data)
    return sorted(p.name[len(POD_FILE_PREFIX) : -4] for p in d.glob(f"{POD_FILE_PREFIX}*.csv"))


def trace_file(trace: str, data: Path | str | None = None) -> Path:
    """Path of a trace's pod CSV; ``trace`` is a name such as ``default`` or a path to a CSV."""
    if trace.endswith(".csv") and Path(trace).is_file():
        return Path(trace)
    d = resolve_data_dir(data)
    path = d / f"{POD_FILE_PREFIX}{trace}.csv"
    if not path.is_file():
        known = ", ".join(list_traces(d)) or "none"
        raise DataNotFound(f"trace {trace!r} not found: no {path}. Traces in {d}: {known}")
    return path


def _parse_spec(raw: str | None) -> tuple[str, ...]:
    if not raw:
        return ()
    return tuple(sorted({m.strip() for m in raw.split("|") if m.strip()}))


def load_nodes(data: Path | str | None = None) -> NodeTable:
    """Read the 1,213 GPU nodes (``sn,cpu_milli,memory_mib,gpu,model``), sorted by name."""
    path = resolve_data_dir(data) / NODE_FILE
    with path.open(newline="") as fh:
        rows = sorted(csv.DictReader(fh), key=lambda r: r["sn"])
    return nodes_from_rows(rows)


def nodes_from_rows(rows: Sequence[dict[str, str]]) -> NodeTable:
    """Build a node table from CSV-like rows (also how the tests make small synthetic clusters)."""
    rows = sorted(rows, key=lambda r: r["sn"])
    models = tuple(sorted({r["model"] for r in rows}))
    index = {m: i for i, m in enumerate(models)}
    return NodeTable(
        names=tuple(r["sn"] for r in rows),
        cpu=np.array([int(r["cpu_milli"]) for r in rows], dtype=np.int64),
        mem=np.array([int(r["memory_mib"]) for r in rows], dtype=np.int64),
        gpus=np.array([int(r["gpu"]) for r in rows], dtype=np.int64),
        model=np.array([index[r["model"]] for r in rows], dtype=np.int64),
        models=models,
    )


def load_trace(trace: str = "default", data: Path | str | None = None) -> Trace:
    """Read ``openb_pod_list_<trace>.csv`` sorted by name; timestamps and phases are ignored (pods never end)."""
    path = trace_file(trace, data)
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    name = trace if not trace.endswith(".csv") else path.stem.removeprefix(POD_FILE_PREFIX)
    return trace_from_rows(name, rows)


def trace_from_rows(name: str, rows: Sequence[dict[str, str]]) -> Trace:
    """Build a trace from CSV-like rows; ``gpu_spec`` is optional (the multigpu files lack it)."""
    pods = [
        Pod(
            name=r["name"],
            cpu=int(r["cpu_milli"]),
            mem=int(r["memory_mib"]),
            num_gpu=int(r["num_gpu"]),
            gpu_milli=int(r["gpu_milli"]) if int(r["num_gpu"]) > 0 else 0,
            spec=_parse_spec(r.get("gpu_spec")),
        )
        for r in rows
    ]
    pods.sort(key=lambda p: p.name)
    return Trace(name=name, pods=tuple(pods))


# ----------------------------------------------------------------------------------------- protocol


def arrival_order(
    trace: Trace, nodes: NodeTable, seed: int, inflate_to: float = INFLATE_TO
) -> tuple[list[Pod], np.ndarray]:
    """The seeded arrival sequence and the node tie-break ranks.

    Shuffle the name-sorted pods; then append uniform draws (with replacement) from the name-sorted
    pods until the next draw would overshoot ``inflate_to`` × capacity. The overshoot test adds the
    draw's *per-GPU* milli, not its total demand: a quirk of the paper's simulator that we keep
    because it decides when inflation stops. Ranks are a permutation over the name-sorted nodes.
    """
    rng = np.random.default_rng(seed)
    base = trace.pods
    order = [base[i] for i in rng.permutation(len(base))]
    # Integer form of D + milli > inflate_to * 1000 * G, so no float rounding decides the last pod.
    scale = 1000
    target = round(inflate_to * scale) * GPU_MILLI * nodes.total_gpus
    demand = trace.demand
    while base:
        stop = False
        for i in rng.integers(0, len(base), size=1024):
            pod = base[int(i)]
            if (demand + pod.gpu_milli) * scale > target:
                stop = True
                break
            order.append(pod)
            demand += pod.demand
        if stop:
            break
    rank = rng.permutation(nodes.size).astype(np.int64)
    return order, rank


#: A decision: the node index and the GPU indices on it (empty for CPU-only pods).
Placement = tuple[int, tuple[int, ...]]


class InvalidPlacement(ValueError):
    """A policy returned a placement the cluster cannot take: a bug in the policy, never a fail."""


class ClusterState:
    """Free resources of every node, as numpy arrays so policies can score all nodes at once.

    ``idle`` is (nodes × max GPUs) idle milli per GPU; GPU slots a node does not have hold 0, which
    no GPU pod fits on and which adds nothing to any sum, so policies need no separate mask.
    ``version[n]`` grows whenever node ``n`` changes: policies may cache per-node scores and
    recompute only nodes whose version moved (FGD does).
    """

    def __init__(self, nodes: NodeTable, rank: np.ndarray | None = None) -> None:
        self.nodes = nodes
        n, g = nodes.size, max(nodes.max_gpus, 1)
        self.cpu_free = nodes.cpu.copy()
        self.mem_free = nodes.mem.copy()
        self.idle = np.where(np.arange(g)[None, :] < nodes.gpus[:, None], GPU_MILLI, 0).astype(np.int64)
        self.rank = np.arange(n, dtype=np.int64) if rank is None else np.asarray(rank, dtype=np.int64)
        self.version = np.zeros(n, dtype=np.int64)
        self.capacity_milli = GPU_MILLI * nodes.total_gpus
        self.used_milli = 0
        self._model_ok: dict[tuple[str, ...], np.ndarray] = {}

    def model_ok(self, spec: tuple[str, ...]) -> np.ndarray:
        """(N,) bool: nodes whose GPU model is allowed by ``spec`` (all nodes when spec is empty)."""
        mask = self._model_ok.get(spec)
        if mask is None:
            if spec:
                allowed = np.array([m in spec for m in self.nodes.models], dtype=bool)
                mask = allowed[self.nodes.model]
            else:
                mask = np.ones(self.nodes.size, dtype=bool)
            self._model_ok[spec] = mask
        return mask

    def feasible(self, pod: Pod) -> np.ndarray:
        """(N,) bool, the protocol's filter: CPU, memory, GPU model, and a GPU fit for GPU pods."""
        ok = (self.cpu_free >= pod.cpu) & (self.mem_free >= pod.mem)
        if pod.num_gpu == 0:
            return ok
        ok &= self.model_ok(pod.spec)
        if pod.num_gpu == 1:
            return ok & (self.idle.max(axis=1) >= pod.gpu_milli)
        return ok & ((self.idle >= GPU_MILLI).sum(axis=1) >= pod.num_gpu)

    def fitting_gpus(self, node: int, pod: Pod) -> np.ndarray:
        """GPU indices on ``node`` a one-GPU pod may use (idle ≥ its milli), in index order."""
        return np.flatnonzero(self.idle[node] >= pod.gpu_milli)

    def whole_gpus(self, node: int, count: int) -> tuple[int, ...]:
        """The ``count`` lowest-indexed fully idle GPUs: how whole-GPU pods are bound by every peer."""
        return tuple(int(i) for i in np.flatnonzero(self.idle[node] >= GPU_MILLI)[:count])

    def check(self, pod: Pod, placement: Placement) -> str | None:
        """Why ``placement`` is invalid for ``pod`` now, or None when the cluster can take it."""
        node, gpus = placement
        if not 0 <= node < self.nodes.size:
            return f"node index {node} out of range"
        if self.cpu_free[node] < pod.cpu or self.mem_free[node] < pod.mem:
            return f"node {self.nodes.names[node]} lacks CPU or memory"
        if pod.num_gpu and not self.model_ok(pod.spec)[node]:
            return f"node {self.nodes.names[node]} has a GPU model outside {pod.spec}"
        if len(gpus) != pod.num_gpu or len(set(gpus)) != len(gpus):
            return f"{len(gpus)} GPU indices for a pod of {pod.num_gpu} GPUs"
        for g in gpus:
            if not 0 <= g < self.nodes.gpus[node]:
                return f"GPU index {g} out of range on {self.nodes.names[node]}"
            need = pod.gpu_milli if pod.num_gpu == 1 else GPU_MILLI
            if self.idle[node, g] < need:
                return f"GPU {g} of {self.nodes.names[node]} has {self.idle[node, g]} idle milli, needs {need}"
        return None

    def place(self, pod: Pod, placement: Placement) -> None:
        """Bind ``pod``; raises :class:`InvalidPlacement` instead of corrupting the state."""
        why = self.check(pod, placement)
        if why is not None:
            raise InvalidPlacement(f"pod {pod.name}: {why}")
        node, gpus = placement
        self.cpu_free[node] -= pod.cpu
        self.mem_free[node] -= pod.mem
        for g in gpus:
            self.idle[node, g] -= pod.gpu_milli
        self.used_milli += pod.demand
        self.version[node] += 1


def pick_node(score: np.ndarray, feasible: np.ndarray, rank: np.ndarray) -> int | None:
    """Highest score among feasible nodes, ties to the lowest rank; None when nothing is feasible."""
    cand = np.flatnonzero(feasible)
    if cand.size == 0:
        return None
    s = score[cand]
    best = cand[s == s.max()]
    return int(best[np.argmin(rank[best])])


# ----------------------------------------------------------------------------------------- policies


@dataclass(frozen=True)
class ReplayContext:
    """What a policy may know before the first arrival: the cluster, the original trace, the seed."""

    nodes: NodeTable
    trace: Trace
    seed: int


class OnlinePolicy(Protocol):
    """Sees one arrival at a time; returns a placement or None (the pod fails for good)."""

    name: str

    def prepare(self, ctx: ReplayContext) -> None: ...

    def choose(self, state: ClusterState, pod: Pod) -> Placement | None: ...


class BatchPolicy(Protocol):
    """Sees ``window`` arrived pods at once (the scheduler-cycle view); never moves a placed pod.

    The harness applies the returned placements in arrival order, checking each against the state
    left by the ones before, so a batch must be consistent in that order.
    """

    name: str
    window: int

    def prepare(self, ctx: ReplayContext) -> None: ...

    def choose_batch(self, state: ClusterState, pods: Sequence[Pod]) -> list[Placement | None]: ...


class RandomPolicy:
    """A feasible node uniformly at random; a shared pod on a uniformly chosen fitting GPU."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        # Offset so the policy's draws are not the same stream as the arrival order's.
        self.rng = np.random.default_rng(seed + 1_000_003)

    def prepare(self, ctx: ReplayContext) -> None:
        self.rng = np.random.default_rng(ctx.seed + 1_000_003)

    def choose(self, state: ClusterState, pod: Pod) -> Placement | None:
        cand = np.flatnonzero(state.feasible(pod))
        if cand.size == 0:
            return None
        node = int(cand[self.rng.integers(cand.size)])
        if pod.is_share:
            fits = state.fitting_gpus(node, pod)
            return node, (int(fits[self.rng.integers(fits.size)]),)
        return node, state.whole_gpus(node, pod.num_gpu)


class BestFitPolicy:
    """Least CPU and GPU left over, equally weighted, on the simulator's integer score.

    raw = trunc(100 · (1 − [½ (cpu_free − cpu)/128000 + ½ (gpu_idle − demand)/8000])), min-max
    normalised to 0..100 with integer division over the feasible nodes. The truncations create
    ties, which go to the lowest node rank: they move the published number, so we keep them.
    """

    name = "bestfit"

    def __init__(self, seed: int = 0) -> None:
        del seed  # deterministic given the node ranks

    def prepare(self, ctx: ReplayContext) -> None:
        pass

    @staticmethod
    def raw_scores(state: ClusterState, pod: Pod) -> np.ndarray:
        """(N,) integer raw scores, exact: 100·(1 − ½a/128000 − ½b/8000) = (256000 − a − 16b)/2560."""
        a = state.cpu_free - pod.cpu
        b = state.idle.sum(axis=1) - pod.demand
        # The exact rational keeps equal leftovers equal; float arithmetic could split a tie.
        num = 2 * BESTFIT_CPU_SCALE - a - (BESTFIT_CPU_SCALE // BESTFIT_GPU_SCALE) * b
        den = 2 * BESTFIT_CPU_SCALE // 100
        return np.where(num >= 0, num // den, -((-num) // den))

    def choose(self, state: ClusterState, pod: Pod) -> Placement | None:
        feasible = state.feasible(pod)
        if not feasible.any():
            return None
        raw = self.raw_scores(state, pod)
        lo, hi = raw[feasible].min(), raw[feasible].max()
        score = np.zeros_like(raw) if hi == lo else (raw - lo) * 100 // (hi - lo)
        node = pick_node(score, feasible, state.rank)
        assert node is not None
        if pod.is_share:
            fits = state.fitting_gpus(node, pod)
            return node, (int(fits[np.argmin(state.idle[node, fits])]),)
        return node, state.whole_gpus(node, pod.num_gpu)


@dataclass(frozen=True, eq=False)
class TypicalPods:
    """FGD's workload model: the most frequent pod shapes and their counts.

    Shapes are (cpu, gpu_milli, num_gpu, spec) from the original trace, CPU-only pods included;
    groups are kept by count, largest first, until they cover ≥ 95 % of the pods. Counts stay
    integers (the frequencies are counts / ``counts.sum()``) so fragmentation deltas are exact.
    """

    cpu: np.ndarray  #: (T,)
    milli: np.ndarray  #: (T,)
    num: np.ndarray  #: (T,)
    spec: tuple[tuple[str, ...], ...]
    counts: np.ndarray  #: (T,)

    @property
    def freq(self) -> np.ndarray:
        return self.counts / self.counts.sum()

    @classmethod
    def from_trace(cls, pods: Sequence[Pod], coverage: float = TYPICAL_COVERAGE) -> TypicalPods:
        groups: dict[tuple[int, int, int, tuple[str, ...]], int] = {}
        for p in pods:
            key = (p.cpu, p.gpu_milli, p.num_gpu, p.spec)
            groups[key] = groups.get(key, 0) + 1
        # Count descending; equal counts keep first-seen order (dicts keep insertion order).
        ranked = sorted(groups.items(), key=lambda kv: -kv[1])
        kept: list[tuple[tuple[int, int, int, tuple[str, ...]], int]] = []
        covered = 0
        for key, count in ranked:
            kept.append((key, count))
            covered += count
            if covered >= coverage * len(pods):
                break
        return cls(
            cpu=np.array([k[0] for k, _ in kept], dtype=np.int64),
            milli=np.array([k[1] for k, _ in kept], dtype=np.int64),
            num=np.array([k[2] for k, _ in kept], dtype=np.int64),
            spec=tuple(k[3] for k, _ in kept),
            counts=np.array([c for _, c in kept], dtype=np.int64),
        )

    def __len__(self) -> int:
        return len(self.counts)


def fgd_score(delta_count_milli: np.ndarray, total_count: int) -> np.ndarray:
    """FGD's node score: trunc(100 / (1 + e^(−Δ/1000))), Δ = fragmentation decrease in milli.

    Takes Δ·total_count (an exact integer) so a move that changes nothing scores exactly 50.
    """
    delta = delta_count_milli / total_count
    with np.errstate(over="ignore"):
        return np.floor(100.0 / (1.0 + np.exp(-delta / 1000.0))).astype(np.int64)


class FGDPolicy:
    """Fragmentation Gradient Descent: put the pod where the expected fragmentation grows least.

    Node fragmentation F(n) = Σ_t f_t · frag_t(n) over the typical pods t: frag_t(n) is the
    node's idle GPU milli if t cannot run there (CPU-only, wrong model, no fit), else the idle milli
    stranded on GPUs too small for t. Each feasible node scores trunc(sigmoid(F before − F after));
    highest wins, ties to the lowest rank. A shared pod tries every fitting GPU; the node scores
    its best GPU (lowest index among equal scores) and that GPU is bound.

    Speed: a node's score for a pod depends only on that node's state and the pod's (cpu, num,
    milli), and one arrival changes one node, so scores are cached per pod shape and recomputed
    only for nodes whose ``state.version`` moved. Per-node terms (counts of GPUs fitting each
    typical pod, idle milli stranded below each) are kept so a one-GPU change is scored
    incrementally over (nodes × GPUs × typical pods) instead of recomputing every node.
    """

    name = "fgd"

    def __init__(self, seed: int = 0) -> None:
        del seed  # deterministic given the node ranks
        self.typical: TypicalPods | None = None
        self._state: ClusterState | None = None

    def prepare(self, ctx: ReplayContext) -> None:
        self.typical = TypicalPods.from_trace(ctx.trace.pods)
        self._state = None

    # -- per-node terms ------------------------------------------------------------------------

    def _bind(self, state: ClusterState) -> None:
        """Set up caches for a new replay (a new ``ClusterState`` object)."""
        t = self.typical
        assert t is not None
        self._state = state
        n = state.nodes.size
        static = np.zeros((n, len(t)), dtype=bool)
        for j, spec in enumerate(t.spec):
            if t.num[j] > 0:
                static[:, j] = state.model_ok(spec)
        self._static = static  # (N, T): typical pod j is a GPU pod allowed on the node's model
        self._tm = t.milli[None, :]
        self._tn = t.num[None, :]
        self._tc = t.cpu[None, :]
        self._ge = np.zeros((n, len(t)), dtype=np.int64)  # GPUs with idle ≥ milli_t
        self._lt = np.zeros((n, len(t)), dtype=np.int64)  # idle milli on GPUs with idle < milli_t
        self._frag = np.zeros((n, len(t)), dtype=np.int64)  # frag_t(n), milli
        self._stamp = np.full(n, -1, dtype=np.int64)
        self._cache: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def _frag_terms(self, idle: np.ndarray, cpu_free: np.ndarray, static: np.ndarray) -> tuple[np.ndarray, ...]:
        """(ge, lt, frag) over the typical pods for nodes given as ``idle`` (k, G) and ``cpu_free`` (k,)."""
        v = idle[:, :, None]
        ge = (v >= self._tm[:, None, :]).sum(axis=1)
        lt = np.where(v < self._tm[:, None, :], v, 0).sum(axis=1)
        fits = static & (ge >= self._tn) & (cpu_free[:, None] >= self._tc)
        frag = np.where(fits, lt, idle.sum(axis=1)[:, None])
        return ge, lt, frag

    def _refresh(self, state: ClusterState) -> None:
        stale = np.flatnonzero(self._stamp != state.version)
        if stale.size:
            ge, lt, frag = self._frag_terms(state.idle[stale], state.cpu_free[stale], self._static[stale])
            self._ge[stale], self._lt[stale], self._frag[stale] = ge, lt, frag
            self._stamp[stale] = state.version[stale]

    def fragmentation(self, state: ClusterState) -> np.ndarray:
        """(N,) F(n) in milli: the expected idle GPU milli a typical pod could not use."""
        if self._state is not state:
            self._bind(state)
        self._refresh(state)
        assert self.typical is not None
        return self._frag @ self.typical.freq

    # -- scoring -------------------------------------------------------------------------------

    def _score_nodes(self, state: ClusterState, nodes: np.ndarray, pod: Pod) -> tuple[np.ndarray, np.ndarray]:
        """Scores and the GPU to bind (−1 when the pod does not fit) for the given nodes."""
        t = self.typical
        assert t is not None
        k = nodes.size
        idle = state.idle[nodes]
        cpu_after = state.cpu_free[nodes] - pod.cpu
        static = self._static[nodes]
        before = self._frag[nodes]
        if pod.num_gpu == 1:
            m = pod.gpu_milli
            v = idle[:, :, None]  # (k, G, 1)
            v2 = v - m
            tm = self._tm[:, None, :]  # (1, 1, T)
            ge = self._ge[nodes][:, None, :] - (v >= tm) + (v2 >= tm)
            lt = self._lt[nodes][:, None, :] - np.where(v < tm, v, 0) + np.where(v2 < tm, v2, 0)
            fits = (
                static[:, None, :] & (ge >= self._tn[:, None, :]) & (cpu_after[:, None, None] >= self._tc[:, None, :])
            )
            total_after = (idle.sum(axis=1) - m)[:, None, None]
            after = np.where(fits, lt, total_after)  # (k, G, T)
            delta = (before[:, None, :] - after) @ t.counts  # (k, G)
            score = fgd_score(delta, int(t.counts.sum()))
            score = np.where(idle >= m, score, -1)
            gpu = np.argmax(score, axis=1)  # first maximum: lowest index among equal scores
            best = score[np.arange(k), gpu]
            return best, np.where(best >= 0, gpu, -1)
        idle_after = idle.copy()
        ok = np.ones(k, dtype=bool)
        if pod.num_gpu > 1:
            whole = idle >= GPU_MILLI
            take = whole & (np.cumsum(whole, axis=1) <= pod.num_gpu)  # lowest-indexed idle GPUs
            ok = whole.sum(axis=1) >= pod.num_gpu
            idle_after = idle - np.where(take, pod.gpu_milli, 0)
        _, _, after = self._frag_terms(idle_after, cpu_after, static)
        delta = (before - after) @ t.counts
        score = np.where(ok, fgd_score(delta, int(t.counts.sum())), -1)
        return score, np.zeros(k, dtype=np.int64)

    def node_scores(self, state: ClusterState, pod: Pod) -> tuple[np.ndarray, np.ndarray]:
        """(N,) scores and GPU choices for ``pod`` on every node (cached; stale nodes recomputed)."""
        if self._state is not state:
            self._bind(state)
        self._refresh(state)
        key = (pod.cpu, pod.num_gpu, pod.gpu_milli)
        entry = self._cache.get(key)
        n = state.nodes.size
        if entry is None:
            entry = (np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.full(n, -1, dtype=np.int64))
            self._cache[key] = entry
        score, gpu, stamp = entry
        stale = np.flatnonzero(stamp != state.version)
        if stale.size:
            score[stale], gpu[stale] = self._score_nodes(state, stale, pod)
            stamp[stale] = state.version[stale]
        return score, gpu

    def choose(self, state: ClusterState, pod: Pod) -> Placement | None:
        feasible = state.feasible(pod)
        if not feasible.any():
            return None
        score, gpu = self.node_scores(state, pod)
        node = pick_node(score, feasible, state.rank)
        assert node is not None
        if pod.num_gpu == 1:
            return node, (int(gpu[node]),)
        return node, state.whole_gpus(node, pod.num_gpu)


PolicyFactory = Callable[[int], Any]
#: name -> factory(seed) returning an :class:`OnlinePolicy` or :class:`BatchPolicy`.
POLICIES: dict[str, PolicyFactory] = {
    "random": RandomPolicy,
    "bestfit": BestFitPolicy,
    "fgd": FGDPolicy,
}


def register_policy(name: str, factory: PolicyFactory) -> None:
    """Make a policy available to :func:`run` and the CLI (e.g. ``cpsat-online``, ``cpsat-batch``)."""
    POLICIES[name.lower()] = factory


def _cpsat_online(seed: int) -> Any:
    from placement.bench.cpsat_policies import CpsatOnlinePolicy  # imports this module: load lazily

    return CpsatOnlinePolicy(seed)


def _cpsat_batch(window: int) -> PolicyFactory:
    def factory(seed: int) -> Any:
        from placement.bench.cpsat_policies import CpsatBatchPolicy

        return CpsatBatchPolicy(seed, window=window)

    return factory


# Ours (placement/bench/cpsat_policies.py). The batch policies see a window of queued pods: report apart.
register_policy("cpsat-online", _cpsat_online)
register_policy("cpsat-batch", _cpsat_batch(200))
register_policy("cpsat-batch50", _cpsat_batch(50))


def _oracle_refuse810(seed: int) -> Any:
    from placement.bench.cpsat_policies import RefusingOracle

    return RefusingOracle(seed, refuse_milli=810)


# Not a policy: an analysis oracle that knows more demand is coming (see cpsat_policies' docstring).
register_policy("oracle-refuse810", _oracle_refuse810)


def policy_kind(policy: Any) -> str:
    """``online`` or ``batch W=…``: a batch sees its window of queued pods, so it is not like-for-like."""
    return f"batch W={int(policy.window)}" if hasattr(policy, "choose_batch") else "online"


def make_policy(name: str, seed: int) -> Any:
    """A fresh policy per seed, so no state (RNG, caches) leaks from one replay into the next."""
    try:
        factory = POLICIES[name.lower()]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}") from None
    return factory(seed)


# -------------------------------------------------------------------------------------------- replay


@dataclass
class SeedResult:
    """One replay: per-pod arrived/used milli (the curve is computed from them) and decision times."""

    seed: int
    pods: int
    failed: int
    failed_while_feasible: int  #: fails although some node could take the pod (a policy's choice)
    arrived: np.ndarray  #: (pods,) cumulative demand, failed pods included
    used: np.ndarray  #: (pods,) GPU milli allocated after each pod
    latency_ms: np.ndarray  #: (pods,) decision time per pod
    capacity_milli: int
    seconds: float
    curve: dict[int, float] = field(default_factory=dict)
    #: GPUs' worth of milli left unallocated at the end, by where it sits (:func:`unallocated_by`)
    leftover: dict[str, float] = field(default_factory=dict)

    def at(self, x: int) -> float:
        """Allocation % at arrived X % (NaN when the replay never got there, e.g. a ``limit`` slice)."""
        return self.curve.get(x, math.nan)


def allocation_curve(arrived: np.ndarray, used: np.ndarray, total_gpus: int) -> dict[int, float]:
    """The paper's metric: x = round(A/(10G)) (half to even), y = round(U/(10G), 2), mean y per x."""
    if arrived.size == 0:
        return {}
    x = np.round(arrived / (10 * total_gpus)).astype(np.int64)  # numpy rounds half to even
    y = np.round(used / (10 * total_gpus), 2)
    xs, inv = np.unique(x, return_inverse=True)
    means = np.bincount(inv, weights=y) / np.bincount(inv)
    return {int(a): float(b) for a, b in zip(xs, means, strict=True)}


WHOLE_IDLE = "idle whole GPUs"


def unallocated_by(state: ClusterState, largest: np.ndarray) -> dict[str, float]:
    """Where the unallocated milli sits at the end, in GPUs' worth, largest share first.

    ``largest[n, g]`` is the biggest shared pod (milli) GPU ``g`` of node ``n`` ever took. The idle
    rest of a partly used GPU is filed under that pod ("beside 810-milli pods"): an 810-milli pod
    leaves 190 that only the rare ≤ 190-milli pods can use, so this says which pod sizes the loss
    comes from, which an allocation ratio alone cannot. Fully idle GPUs are filed apart.
    """
    idle = state.idle
    whole = idle >= GPU_MILLI
    out: dict[str, float] = {}
    if whole.any():
        out[WHOLE_IDLE] = float(idle[whole].sum()) / GPU_MILLI
    part = (idle > 0) & ~whole
    sizes = largest[part]
    for m in sorted(set(sizes.tolist()), reverse=True):
        out[f"beside {m}-milli pods"] = float(idle[part][sizes == m].sum()) / GPU_MILLI
    return out


def replay(nodes: NodeTable, trace: Trace, policy: Any, seed: int, limit: int | None = None) -> SeedResult:
    """One seed of the protocol: every arrival decided once, placed at once or failed for good."""
    order, rank = arrival_order(trace, nodes, seed)
    if limit is not None:
        order = order[:limit]
    state = ClusterState(nodes, rank)
    policy.prepare(ReplayContext(nodes=nodes, trace=trace, seed=seed))
    n = len(order)
    arrived = np.cumsum(np.fromiter((p.demand for p in order), dtype=np.int64, count=n))
    used = np.zeros(n, dtype=np.int64)
    latency = np.zeros(n, dtype=np.float64)
    failed = failed_feasible = 0
    largest = np.zeros_like(state.idle)
    batch = hasattr(policy, "choose_batch")
    step = max(1, int(policy.window)) if batch else 1
    t_start = time.perf_counter()
    i = 0
    while i < n:
        pods = order[i : i + step]
        t0 = time.perf_counter()
        decisions = policy.choose_batch(state, pods) if batch else [policy.choose(state, pods[0])]
        dt = (time.perf_counter() - t0) * 1000.0 / len(pods)
        if len(decisions) != len(pods):
            raise InvalidPlacement(f"{policy.name} returned {len(decisions)} decisions for {len(pods)} pods")
        for pod, decision in zip(pods, decisions, strict=True):
            if decision is None:
                failed += 1
                failed_feasible += bool(state.feasible(pod).any())
            else:
                node, gpus = int(decision[0]), tuple(int(g) for g in decision[1])
                state.place(pod, (node, gpus))
                for g in gpus:
                    largest[node, g] = max(largest[node, g], pod.gpu_milli)
            used[i] = state.used_milli
            latency[i] = dt
            i += 1
    seconds = time.perf_counter() - t_start
    return SeedResult(
        seed=seed,
        pods=n,
        failed=failed,
        failed_while_feasible=failed_feasible,
        arrived=arrived,
        used=used,
        latency_ms=latency,
        capacity_milli=state.capacity_milli,
        seconds=seconds,
        curve=allocation_curve(arrived, used, nodes.total_gpus),
        leftover=unallocated_by(state, largest),
    )


def _mean(values: Sequence[float]) -> float:
    vals = [v for v in values if not math.isnan(v)]
    return float(np.mean(vals)) if vals else math.nan


def run(
    trace: str,
    policy: str,
    seeds: list[int],
    data: Path | str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """Replay ``policy`` on ``trace`` for each seed; per-seed and mean numbers, JSON-friendly.

    Keys: ``trace``, ``policy``, ``seeds`` (list of per-seed dicts), ``mean`` (alloc_100, alloc_130,
    final_alloc, unallocated_gpus, latency_p50_ms, latency_p99_ms, seconds, failed), ``curve``
    (list of [arrived %, mean allocation %] over seeds), ``published`` (paper's value at 100/130
    when known). Allocation values are percent of GPU milli; NaN when a ``limit`` slice ends first.
    """
    nodes = load_nodes(data)
    tr = load_trace(trace, data)
    per_seed: list[dict[str, Any]] = []
    curves: dict[int, list[float]] = {}
    kind = "online"
    for seed in seeds:
        pol = make_policy(policy, seed)
        kind = policy_kind(pol)
        res = replay(nodes, tr, pol, seed, limit=limit)
        for x, y in res.curve.items():
            curves.setdefault(x, []).append(y)
        per_seed.append(
            {
                "seed": seed,
                "alloc_100": res.at(100),
                "alloc_130": res.at(130),
                "final_alloc": 100.0 * res.used[-1] / res.capacity_milli if res.pods else math.nan,
                "unallocated_gpus": (res.capacity_milli - (res.used[-1] if res.pods else 0)) / GPU_MILLI,
                "pods": res.pods,
                "failed": res.failed,
                "failed_while_feasible": res.failed_while_feasible,
                "latency_p50_ms": float(np.percentile(res.latency_ms, 50)) if res.pods else math.nan,
                "latency_p99_ms": float(np.percentile(res.latency_ms, 99)) if res.pods else math.nan,
                "seconds": res.seconds,
                "leftover": res.leftover,
            }
        )
    keys = (
        "alloc_100",
        "alloc_130",
        "final_alloc",
        "unallocated_gpus",
        "latency_p50_ms",
        "latency_p99_ms",
        "seconds",
        "failed",
        "failed_while_feasible",
    )
    places = list(dict.fromkeys(k for s in per_seed for k in s["leftover"]))
    return {
        "trace": tr.name,
        "policy": policy,
        "kind": kind,
        "seeds": per_seed,
        "mean": {k: _mean([s[k] for s in per_seed]) for k in keys},
        "leftover": {k: _mean([s["leftover"].get(k, 0.0) for s in per_seed]) for k in places},
        "curve": [[x, float(np.mean(ys))] for x, ys in sorted(curves.items())],
        "published": {x: PUBLISHED.get((tr.name, x), {}).get(policy.lower()) for x in REPORT_POINTS},
    }


# ---------------------------------------------------------------------------------------------- face


def parse_seeds(text: str) -> list[int]:
    """``42-51`` → 42..51 inclusive; ``1,5,7`` and mixtures such as ``42-44,50`` also work."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, _, hi = part.partition("-")
            seeds.extend(range(int(lo), int(hi) + 1))
        else:
            seeds.append(int(part))
    if not seeds:
        raise ValueError(f"no seeds in {text!r}")
    return seeds


def _fmt(v: float | None, spec: str = ".2f") -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def format_table(results: Sequence[dict[str, Any]]) -> str:
    """A plain-text table: one row per (trace, policy), the paper's value beside ours.

    ``declined`` counts pods that failed although some node could take them: always 0 for the
    peers and the online policy (they place whatever fits); a batch may leave a pod out.
    """
    head = (
        "trace",
        "policy",
        "kind",
        "alloc@100",
        "paper@100",
        "alloc@130",
        "paper@130",
        "Δ130",
        "unalloc GPUs",
        "failed",
        "declined",
        "p50 ms",
        "p99 ms",
        "s/seed",
    )
    rows = [head]
    # Batch policies see a window of queued pods: list them after the online ones of each trace.
    traces = list(dict.fromkeys(r["trace"] for r in results))
    ordered = sorted(results, key=lambda r: (traces.index(r["trace"]), r.get("kind", "online") != "online"))
    for r in ordered:
        m, pub = r["mean"], r["published"]
        p130 = pub.get(130)
        diff = None if p130 is None or math.isnan(m["alloc_130"]) else m["alloc_130"] - p130
        rows.append(
            (
                r["trace"],
                r["policy"],
                r.get("kind", "online"),
                _fmt(m["alloc_100"]),
                _fmt(pub.get(100)),
                _fmt(m["alloc_130"]),
                _fmt(p130),
                _fmt(diff, "+.2f"),
                _fmt(m["unallocated_gpus"], ".1f"),
                _fmt(m["failed"], ".0f"),
                _fmt(m.get("failed_while_feasible"), ".0f"),
                _fmt(m["latency_p50_ms"], ".3f"),
                _fmt(m["latency_p99_ms"], ".3f"),
                _fmt(m["seconds"], ".1f"),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = [
        "  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_leftover(results: Sequence[dict[str, Any]], top: int = 4) -> str:
    """Per policy, where the unallocated GPUs sit at the end (mean over seeds), biggest first."""
    lines = ["unallocated at the end, by where it sits (GPUs, mean over seeds; see unallocated_by):"]
    for r in results:
        left = sorted(r.get("leftover", {}).items(), key=lambda kv: -kv[1])
        if not left:
            continue
        shown = ", ".join(f"{k} {v:.1f}" for k, v in left[:top])
        rest = sum(v for _, v in left[top:])
        more = f", elsewhere {rest:.1f}" if left[top:] else ""
        lines.append(f"  {r['trace']} {r['policy']}: {shown}{more}")
    return "\n".join(lines)


def plot(results: Sequence[dict[str, Any]], path: Path) -> list[Path]:
    """Allocation % against arrived % per policy, one PNG per trace (as the paper's Fig. 9a).

    matplotlib is optional: raises ImportError when it is absent, which :func:`main` reports.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    traces = list(dict.fromkeys(r["trace"] for r in results))
    written: list[Path] = []
    for tr in traces:
        out = path if len(traces) == 1 else path.with_name(f"{path.stem}-{tr}{path.suffix or '.png'}")
        fig, ax = plt.subplots(figsize=(6, 4.2))
        top = 100
        for r in results:
            if r["trace"] != tr or not r["curve"]:
                continue
            xs, ys = zip(*r["curve"], strict=True)
            top = max(top, max(xs))
            ax.plot(xs, ys, label=f"{r['policy']} ({_fmt(r['mean']['alloc_130'])} % at 130)")
        ax.plot([0, 100, top], [0, 100, 100], color="grey", linestyle=":", linewidth=1, label="all allocated")
        ax.set_xlabel("arrived workload (% of GPU capacity)")
        ax.set_ylabel("GPU allocation ratio (%)")
        ax.set_title(f"openb {tr}: allocation vs arrived load")
        ax.set_xlim(60, top)
        ax.set_ylim(60, 101)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        fig.savefig(out, dpi=120)
        plt.close(fig)
        written.append(out)
    return written


def main(argv: list[str] | None = None) -> int:
    """``placement bench openb``: replay policies on openb traces and print the table."""
    ap = argparse.ArgumentParser(prog="placement bench openb", description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="default", help="trace name(s), comma-separated, or 'all' (default: default)")
    ap.add_argument("--policies", default="random,bestfit,fgd", help=f"comma-separated; known: {','.join(POLICIES)}")
    ap.add_argument("--seeds", default="42-51", help="e.g. 42-51 or 42,43 (default: 42-51, the paper's)")
    ap.add_argument(
        "--data", type=Path, default=None, help="folder with the openb CSVs (else $PLACEMENT_DATA, ../shared/data)"
    )
    ap.add_argument("--plot", type=Path, default=None, help="write allocation-vs-load PNG here (needs matplotlib)")
    ap.add_argument("--limit-pods", type=int, default=None, help="replay only the first N arrivals (a quick slice)")
    ap.add_argument("--json", type=Path, default=None, help="also write all results as JSON here")
    args = ap.parse_args(argv)

    try:
        seeds = parse_seeds(args.seeds)
        data = resolve_data_dir(args.data)
        traces = list_traces(data) if args.trace == "all" else [t.strip() for t in args.trace.split(",") if t.strip()]
        policies = [p.strip().lower() for p in args.policies.split(",") if p.strip()]
        for p in policies:
            if p not in POLICIES:
                raise ValueError(f"unknown policy {p!r}; known: {', '.join(sorted(POLICIES))}")
        results = []
        for tr in traces:
            for p in policies:
                r = run(tr, p, seeds, data, limit=args.limit_pods)
                results.append(r)
                print(
                    f"# {tr} {p}: {_fmt(r['mean']['alloc_130'])} % at 130 ({_fmt(r['mean']['seconds'], '.1f')} s/seed)",
                    file=sys.stderr,
                    flush=True,
                )
    except (DataNotFound, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    print(f"openb replay, seeds {args.seeds} ({len(seeds)}), % of GPU milli allocated (paper: FGD, ATC'23)")
    print(format_table(results))
    print(format_leftover(results))
    if args.json is not None:
        import json

        args.json.write_text(json.dumps(results, indent=1, default=float))
        print(f"results written to {args.json}")
    if args.plot is not None:
        try:
            for out in plot(results, args.plot):
                print(f"plot written to {out}")
        except ImportError:
            print("plot skipped: matplotlib is not installed (pip install matplotlib)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
