"""The FGD paper's peer policies, as the paper's simulator scores them: Random, BestFit and FGD.

Why this exists: our policies are only worth something measured against these, so they are
written from the paper and its simulator (integer scores, truncations and tie-breaks included,
since those move the published numbers), vectorised with numpy over nodes. :class:`FGDPolicy`'s
fragmentation measure is also the base our CP-SAT policies score with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from placement.bench.openb.cluster import Binding, ClusterState, ReplayContext
from placement.bench.openb.trace import GPU_MILLI, Pod

#: Share of pods the FGD typical-pod groups must cover.
TYPICAL_COVERAGE = 0.95
#: BestFit normalises CPU and GPU leftovers by the largest node shape in the trace (128 cores, 8 GPUs).
BESTFIT_CPU_SCALE = 128_000
BESTFIT_GPU_SCALE = 8_000


def pick_node(score: np.ndarray, feasible: np.ndarray, rank: np.ndarray) -> int | None:
    """Highest score among feasible nodes, ties to the lowest rank; None when nothing is feasible."""
    cand = np.flatnonzero(feasible)
    if cand.size == 0:
        return None
    s = score[cand]
    best = cand[s == s.max()]
    return int(best[np.argmin(rank[best])])


class RandomPolicy:
    """A feasible node uniformly at random; a shared pod on a uniformly chosen fitting GPU."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        # Offset so the policy's draws are not the same stream as the arrival order's.
        self.rng = np.random.default_rng(seed + 1_000_003)

    def prepare(self, ctx: ReplayContext) -> None:
        self.rng = np.random.default_rng(ctx.seed + 1_000_003)

    def choose(self, state: ClusterState, pod: Pod) -> Binding | None:
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

    def choose(self, state: ClusterState, pod: Pod) -> Binding | None:
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

    def choose(self, state: ClusterState, pod: Pod) -> Binding | None:
        feasible = state.feasible(pod)
        if not feasible.any():
            return None
        score, gpu = self.node_scores(state, pod)
        node = pick_node(score, feasible, state.rank)
        assert node is not None
        if pod.num_gpu == 1:
            return node, (int(gpu[node]),)
        return node, state.whole_gpus(node, pod.num_gpu)
