"""This bench's own online policy for the openb replay, ``bench-cpsat-online`` (not the product's planner),
and the fragmentation measure it scores with.

Why this exists: it is the like-for-like rival of FGD (one arrival at a time, no look-ahead), and
its key is what the batch policy (:mod:`placement.bench.openb.cpsat_batch`) builds on. Both know
what FGD knows and nothing more: the cluster, and the typical-pod distribution of the original
trace (:class:`~placement.bench.openb.policies.TypicalPods`). Neither ever moves a placed pod.

**The fragmentation measure.** FGD scores a node by how much its expected fragmentation drops,
F(n) = Σ_t f_t · frag_t(n), where frag_t counts the idle GPU milli that a typical pod t could not
use *if one copy of t were placed*. We keep FGD's integer score as the first criterion and break
its (frequent) ties by a second measure of the same distribution, the *multi-copy* fragmentation:

    copies_t(n) = min(Σ_g ⌊idle_g / milli_t⌋, ⌊cpu_free / cpu_t⌋)      (num_t = 1)
                = min(⌊whole idle GPUs / num_t⌋, ⌊cpu_free / cpu_t⌋)     (num_t > 1)
    frag*_t(n) = idle(n) − milli_t · num_t · copies_t(n)     (idle(n) when t cannot use n)

that is, the idle milli a stream of t-pods could never fill. Unlike FGD's, it sees the 190 milli an
810-milli pod leaves on a fresh GPU (so a 160-milli pod is steered onto the GPU that will take the
810 beside it), and CPU that runs out before the GPUs do (CPU-only pods are steered away from nodes
whose GPUs need that CPU). FGD's random rank breaks what is still tied.

**cpsat-online** (one arrival, no look-ahead). numpy scores every node (cached per pod shape and
recomputed only for nodes that changed, as FGD does); the top ``k`` feasible nodes become a CP-SAT
model with one boolean per (node, GPU) option, exactly one chosen, and the
objective ``BIG·fgd_score + MID·Δfrag* + rank tie-break`` (options are filtered to fit before the
model, so it needs no capacity rows). Said plainly: for a single pod this model
is an exact selection among pre-scored options, so the solver finds what an argmax of the same key
would (the tests check that); it carries no combinatorial search. The search lives in the batch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from placement.bench.openb.cluster import Binding, ClusterState, ReplayContext
from placement.bench.openb.policies import FGDPolicy, fgd_score
from placement.bench.openb.trace import GPU_MILLI, Pod

#: Δfrag* is clipped to ±DELTA_CLIP milli so that (FGD score, Δfrag*) packs into one int64 key.
DELTA_CLIP = 16_383
_KEY_SHIFT = 2 * DELTA_CLIP + 1


def pack_key(score: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """One integer ordering (FGD score, Δfrag*) lexicographically; −1 stays "does not fit"."""
    d = np.clip(np.rint(delta), -DELTA_CLIP, DELTA_CLIP).astype(np.int64) + DELTA_CLIP
    return np.where(score >= 0, score.astype(np.int64) * _KEY_SHIFT + d, -1)


def unpack_key(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(FGD score, Δfrag* in milli) back from :func:`pack_key`."""
    return key // _KEY_SHIFT, key % _KEY_SHIFT - DELTA_CLIP


class FragmentationScorer(FGDPolicy):
    """FGD's scores plus the multi-copy fragmentation Δ, per node and per GPU (numpy, cached).

    Reuses FGD's per-shape cache: :meth:`node_scores` returns packed keys (:func:`pack_key`) of
    each node's best GPU and that GPU. :meth:`gpu_keys` gives the key of every GPU of a few nodes.
    """

    name = "frag-scorer"

    def _bind(self, state: ClusterState) -> None:
        super()._bind(state)
        t = self.typical
        assert t is not None
        self._cpu_t = np.maximum(t.cpu, 1)
        self._milli_t = np.maximum(t.milli, 1)
        self._num_t = np.maximum(t.num, 1)
        self._is_one = t.num == 1
        self._cfrag = np.zeros((state.nodes.size, len(t)), dtype=np.int64)
        self._cstamp = np.full(state.nodes.size, -1, dtype=np.int64)

    def copies_frag(self, idle: np.ndarray, cpu_free: np.ndarray, static: np.ndarray) -> np.ndarray:
        """frag*_t for nodes given as ``idle`` (..., G), ``cpu_free`` (...), ``static`` (..., T)."""
        total = idle.sum(axis=-1)
        share = (idle[..., :, None] // self._milli_t).sum(axis=-2)
        whole = (idle >= GPU_MILLI).sum(axis=-1)[..., None] // self._num_t
        copies = np.minimum(np.where(self._is_one, share, whole), cpu_free[..., None] // self._cpu_t)
        usable = np.where(static, np.minimum(copies * self._milli_t * self._num_t, total[..., None]), 0)
        return total[..., None] - usable

    def _refresh(self, state: ClusterState) -> None:
        super()._refresh(state)
        stale = np.flatnonzero(self._cstamp != state.version)
        if stale.size:
            self._cfrag[stale] = self.copies_frag(state.idle[stale], state.cpu_free[stale], self._static[stale])
            self._cstamp[stale] = state.version[stale]

    def gpu_keys(self, state: ClusterState, nodes: np.ndarray, pod: Pod) -> np.ndarray:
        """(k, G) packed keys of putting ``pod`` on each GPU of ``nodes`` (share and whole-single pods).

        For other pods (CPU-only, several GPUs) column 0 holds the node's key and the rest −1: the
        GPUs they take are fixed (the lowest-indexed idle ones). −1 marks options that do not fit.
        """
        if self._state is not state:
            self._bind(state)
        self._refresh(state)
        t = self.typical
        assert t is not None
        k = nodes.size
        idle = state.idle[nodes]
        g = idle.shape[1]
        cpu_after = state.cpu_free[nodes] - pod.cpu
        static = self._static[nodes]
        total = int(t.counts.sum())
        if pod.num_gpu == 1:
            m = pod.gpu_milli
            # FGD's Δ per GPU, incrementally from the cached per-node terms (as FGDPolicy does).
            v = idle[:, :, None]
            v2 = v - m
            tm = self._tm[:, None, :]
            ge = self._ge[nodes][:, None, :] - (v >= tm) + (v2 >= tm)
            lt = self._lt[nodes][:, None, :] - np.where(v < tm, v, 0) + np.where(v2 < tm, v2, 0)
            fits = (
                static[:, None, :] & (ge >= self._tn[:, None, :]) & (cpu_after[:, None, None] >= self._tc[:, None, :])
            )
            after = np.where(fits, lt, (idle.sum(axis=1) - m)[:, None, None])
            score = fgd_score((self._frag[nodes][:, None, :] - after) @ t.counts, total)
            # Δfrag* per GPU: the node with that one GPU reduced by m.
            opts = np.repeat(idle[:, None, :], g, axis=1)
            opts[:, np.arange(g), np.arange(g)] -= m
            cafter = self.copies_frag(opts, np.repeat(cpu_after[:, None], g, axis=1), static[:, None, :])
            delta = (self._cfrag[nodes][:, None, :] - cafter) @ t.counts / total
            return np.where(idle >= m, pack_key(score, delta), -1)
        idle_after = idle.copy()
        ok = np.ones(k, dtype=bool)
        if pod.num_gpu > 1:
            whole = idle >= GPU_MILLI
            take = whole & (np.cumsum(whole, axis=1) <= pod.num_gpu)
            ok = whole.sum(axis=1) >= pod.num_gpu
            idle_after = idle - np.where(take, pod.gpu_milli, 0)
        _, _, after = self._frag_terms(idle_after, cpu_after, static)
        score = fgd_score((self._frag[nodes] - after) @ t.counts, total)
        cafter = self.copies_frag(idle_after, cpu_after, static)
        delta = (self._cfrag[nodes] - cafter) @ t.counts / total
        out = np.full((k, g), -1, dtype=np.int64)
        out[:, 0] = np.where(ok, pack_key(score, delta), -1)
        return out

    def _score_nodes(self, state: ClusterState, nodes: np.ndarray, pod: Pod) -> tuple[np.ndarray, np.ndarray]:
        keys = self.gpu_keys(state, nodes, pod)
        gpu = np.argmax(keys, axis=1)  # first maximum: lowest index among equal keys
        best = keys[np.arange(nodes.size), gpu]
        return best, np.where(best >= 0, gpu, -1)


def top_candidates(keys: np.ndarray, rank: np.ndarray, cand: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` candidates with the highest key, ties to the lowest rank, best first."""
    order = np.lexsort((rank[cand], -keys[cand]))
    return cand[order[:k]]


def _gpus_for(state: ClusterState, node: int, pod: Pod, gpu: int) -> tuple[int, ...]:
    """GPU indices of an option: the option's GPU for one-GPU pods, the lowest idle ones for more."""
    if pod.num_gpu == 0:
        return ()
    if pod.num_gpu == 1:
        return (gpu,)
    return state.whole_gpus(node, pod.num_gpu)


@dataclass
class SolverCounters:
    """How often the policy called CP-SAT and on what size of model (reported next to latency)."""

    calls: int = 0
    variables: int = 0
    seconds: float = 0.0
    fallbacks: int = 0  #: the solver returned no solution and the hint was used
    improved: int = 0  #: batch windows where the solver placed more milli than the hint
    filled: int = 0  #: pods the batch model left out that fitted elsewhere and were placed after it
    extra: dict[str, float] = field(default_factory=dict)


class CpsatOnlinePolicy:
    """One arrival at a time: CP-SAT picks (node, GPU) among the top-k nodes by the fragmentation key."""

    name = "bench-cpsat-online"

    def __init__(self, seed: int = 0, top_k: int = 8) -> None:
        del seed  # deterministic given the node ranks
        self.top_k = top_k
        self.scorer = FragmentationScorer()
        self.stats = SolverCounters()
        #: (N,) bool, nodes the next choice may not take (scarce nodes: placement.bench.openb.scarce)
        self.blocked: np.ndarray | None = None
        self._solver = cp_model.CpSolver()
        p = self._solver.parameters
        p.num_workers = 1
        p.cp_model_presolve = False  # a few dozen booleans: presolve costs more than it saves

    def prepare(self, ctx: ReplayContext) -> None:
        self.scorer.prepare(ctx)
        self.stats = SolverCounters()

    def options(self, state: ClusterState, pod: Pod) -> list[tuple[int, int, int]]:
        """(node, gpu, packed key) of every option on the top-k feasible nodes (empty: nothing fits)."""
        feasible = state.feasible(pod)
        if self.blocked is not None:
            feasible &= ~self.blocked
        cand = np.flatnonzero(feasible)
        if cand.size == 0:
            return []
        keys, _ = self.scorer.node_scores(state, pod)
        top = top_candidates(keys, state.rank, cand, self.top_k)
        per_gpu = self.scorer.gpu_keys(state, top, pod)
        out = []
        for i, n in enumerate(top.tolist()):
            for g in np.flatnonzero(per_gpu[i] >= 0).tolist():
                out.append((n, g, int(per_gpu[i, g])))
        return out

    def solve(self, state: ClusterState, options: list[tuple[int, int, int]]) -> int:
        """Index of the chosen option: max FGD score, then Δfrag*, then lowest node rank, then GPU index."""
        model = cp_model.CpModel()
        x = [model.new_bool_var(f"x[{n},{g}]") for n, g, _ in options]
        model.add_exactly_one(x)
        score, delta = unpack_key(np.array([k for _, _, k in options], dtype=np.int64))
        ranks = sorted({int(state.rank[n]) for n, _, _ in options})
        rank_pos = {r: i for i, r in enumerate(ranks)}
        g_max = state.idle.shape[1]
        # Tie-break term: lower rank, then lower GPU index, gets the larger value.
        tie = [(len(ranks) - rank_pos[int(state.rank[n])]) * (g_max + 1) + (g_max - g) for n, g, _ in options]
        tie_w = 1
        mid_w = (len(ranks) + 1) * (g_max + 1) + 1
        big_w = mid_w * (2 * DELTA_CLIP + 2)
        model.maximize(
            big_w * cp_model.LinearExpr.weighted_sum(x, score.tolist())
            + mid_w * cp_model.LinearExpr.weighted_sum(x, delta.tolist())
            + tie_w * cp_model.LinearExpr.weighted_sum(x, tie)
        )
        t0 = time.perf_counter()
        code = self._solver.solve(model)
        self.stats.calls += 1
        self.stats.variables += len(x)
        self.stats.seconds += time.perf_counter() - t0
        if code != cp_model.OPTIMAL:  # cannot happen for an exactly-one over booleans; stay safe
            self.stats.fallbacks += 1
            return int(np.argmax([big_w * s + mid_w * d + t for s, d, t in zip(score, delta, tie, strict=True)]))
        return next(i for i, v in enumerate(x) if self._solver.boolean_value(v))

    def choose(self, state: ClusterState, pod: Pod) -> Binding | None:
        opts = self.options(state, pod)
        if not opts:
            return None
        i = 0 if len(opts) == 1 else self.solve(state, opts)
        node, gpu, _ = opts[i]
        return node, _gpus_for(state, node, pod, gpu)

    def choose_fast(self, state: ClusterState, pod: Pod) -> Binding | None:
        """The same decision as :meth:`choose` by a numpy argmax over the same options, no solver.

        Options come best node first (key, then rank) and GPUs in index order, so the first option
        with the largest key is the one the CP-SAT objective prefers. The batch policy uses this for
        its hint; the tests check that both agree.
        """
        opts = self.options(state, pod)
        if not opts:
            return None
        keys = np.array([k for _, _, k in opts], dtype=np.int64)
        node, gpu, _ = opts[int(np.argmax(keys))]
        return node, _gpus_for(state, node, pod, gpu)
