"""This bench's own batch policy for the openb replay, ``bench-cpsat-batch`` (not the product's planner):
a window of queued pods solved together.

Why this exists: it is the scheduler-cycle view, where CP-SAT does real search; it sees
``window`` queued pods, which the protocol's peers do not, so the table reports it apart.

**cpsat-batch.** Pods of a window are grouped by shape (identical pods are interchangeable:
integer counts, not booleans); each shape gets its top candidate nodes by the online key
(:mod:`placement.bench.openb.cpsat_online`) plus wherever the online policy itself would put it.
Per candidate node the model has: an integer per (shape, partly used GPU), share pods on up to
``fresh_slots`` fully idle GPUs opened in order, whole-GPU pods counted against the fully idle GPUs
left, and CPU and memory rows. Objective, lexicographic by weights: allocated GPU milli, then pods
placed, then (the fragmentation tie-break) agreeing with the online policy's choice for the pod,
then FGD's score of the (shape, node, GPU). The online policy's decisions are a complete hint and
the fallback, so a window never places less milli than replaying it online would. Search time is
CP-SAT's *deterministic* time (``time_limit_s`` units, one worker): a replay gives the same numbers
on every run and machine. Pods the model leaves out (it sees only each shape's candidate nodes) are
then placed by the online policy on what the window leaves free when they fit there, so the batch,
like the protocol, fails only pods that fit nowhere; what it still fails although it fitted is
counted by ``failed_while_feasible`` (the table's ``declined``). Why a window does not lift the
ceiling every policy hits is argued in :mod:`placement.bench.openb.oracle`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from placement.bench.openb.cluster import Binding, ClusterState, ReplayContext
from placement.bench.openb.cpsat_online import CpsatOnlinePolicy, SolverCounters, top_candidates, unpack_key
from placement.bench.openb.trace import GPU_MILLI, Pod


def clone_state(state: ClusterState) -> ClusterState:
    """A private copy of the cluster for trying decisions out (the batch policy's hint runs on it)."""
    shadow = ClusterState(state.nodes, state.rank)
    sync_state(shadow, state)
    return shadow


def sync_state(shadow: ClusterState, state: ClusterState) -> None:
    """Make ``shadow`` equal to ``state``, bumping the version of every node that differed."""
    changed = (
        (shadow.cpu_free != state.cpu_free)
        | (shadow.mem_free != state.mem_free)
        | (shadow.idle != state.idle).any(axis=1)
    )
    shadow.cpu_free[:] = state.cpu_free
    shadow.mem_free[:] = state.mem_free
    shadow.idle[:] = state.idle
    shadow.used_milli = state.used_milli
    shadow.version[changed] += 1


#: A pod shape in a window: (cpu, mem, num_gpu, gpu_milli, spec). Pods of one shape are interchangeable.
Shape = tuple[int, int, int, int, tuple[str, ...]]


def _shape(p: Pod) -> Shape:
    return (p.cpu, p.mem, p.num_gpu, p.gpu_milli, p.spec)


#: Where a batch variable's pods go on its node: a partly used GPU's index, ("fresh", j), or None.
Slot = int | tuple[str, int] | None


@dataclass
class _Var:
    """One integer of the batch model: how many pods of ``shape`` go to ``node`` on ``slot``.

    ``slot``: a GPU index with 0 < idle < 1000 (share pods on a partly used GPU), ``("fresh", j)``
    (share pods on the j-th fully idle GPU the model opens on that node), or None (pods whose GPUs are
    whole: CPU-only, whole-GPU pods).
    """

    shape: int
    node: int
    slot: Slot
    var: cp_model.IntVar


class CpsatBatchPolicy:
    """A window of arrived pods solved together: most GPU milli first, fragmentation as tie-break."""

    def __init__(
        self,
        seed: int = 0,
        window: int = 200,
        top_k: int = 10,
        fresh_slots: int = 2,
        time_limit_s: float = 1.0,
        workers: int = 1,
    ) -> None:
        self.seed = seed
        self.window = window
        self.name = f"bench-cpsat-batch{window}" if window != 200 else "bench-cpsat-batch"
        self.top_k = top_k
        self.fresh_slots = fresh_slots
        self.time_limit_s = time_limit_s
        self.workers = workers
        self.online = CpsatOnlinePolicy(seed)
        self.stats = SolverCounters()
        self._shadow: ClusterState | None = None

    def prepare(self, ctx: ReplayContext) -> None:
        self.online.prepare(ctx)
        self.stats = SolverCounters()
        self._shadow = None

    # -- the hint: the online policy, pod by pod, on a private copy of the cluster -------------------

    def _hint(self, state: ClusterState, pods: Sequence[Pod]) -> list[Binding | None]:
        if self._shadow is None or self._shadow.nodes is not state.nodes:
            self._shadow = clone_state(state)
        else:
            sync_state(self._shadow, state)
        out: list[Binding | None] = []
        for pod in pods:
            d = self.online.choose_fast(self._shadow, pod)
            if d is not None:
                self._shadow.place(pod, d)
            out.append(d)
        return out

    def _candidates(self, state: ClusterState, pod: Pod) -> list[int]:
        """Top nodes by the online key on the window-start state, plus the tightest GPU fits for shares."""
        shadow = self._shadow
        assert shadow is not None
        cand = np.flatnonzero(state.feasible(pod))
        if cand.size == 0:
            return []
        keys, _ = self.online.scorer.node_scores(shadow, pod)  # shadow was synced to ``state`` at entry
        chosen = top_candidates(keys, state.rank, cand, self.top_k).tolist()
        if pod.num_gpu == 1 and pod.gpu_milli < GPU_MILLI:
            idle = state.idle[cand]
            left = np.where(idle >= pod.gpu_milli, idle - pod.gpu_milli, GPU_MILLI + 1).min(axis=1)
            order = np.lexsort((state.rank[cand], left))
            chosen += cand[order[: max(2, self.top_k // 2)]].tolist()
        return list(dict.fromkeys(chosen))

    # -- the model ------------------------------------------------------------------------------------

    def choose_batch(self, state: ClusterState, pods: Sequence[Pod]) -> list[Binding | None]:
        if not pods:
            return []
        shapes: dict[Shape, list[int]] = {}
        for i, p in enumerate(pods):
            shapes.setdefault(_shape(p), []).append(i)
        shape_list = list(shapes)
        reps = [pods[shapes[s][0]] for s in shape_list]
        # The hint first (the online policy on the shadow), then the shadow back to the window start,
        # where candidates and tie-break scores are computed.
        hint = self._hint(state, pods)
        hint_milli = sum(p.demand for p, d in zip(pods, hint, strict=True) if d is not None)
        assert self._shadow is not None
        sync_state(self._shadow, state)
        cands = [self._candidates(state, p) for p in reps]
        for si, s in enumerate(shape_list):
            for i in shapes[s]:
                if hint[i] is not None and hint[i][0] not in cands[si]:
                    cands[si].append(hint[i][0])
        if not any(cands):
            return [None] * len(pods)
        built = self._build(state, pods, shape_list, shapes, reps, cands, hint)
        model, variables, opened = built
        solver = cp_model.CpSolver()
        p = solver.parameters
        p.num_workers = self.workers
        # Deterministic time: the same window gives the same plan on every run; the wall clock is a safety net.
        p.max_deterministic_time = self.time_limit_s
        p.max_time_in_seconds = 10 * self.time_limit_s + 5
        p.random_seed = self.seed
        p.cp_model_probing_level = 0  # presolve, not search, is the cost at this scale
        t0 = time.perf_counter()
        code = solver.solve(model)
        self.stats.calls += 1
        self.stats.variables += len(model.proto.variables)
        self.stats.seconds += time.perf_counter() - t0
        if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            self.stats.fallbacks += 1
            return hint
        decided = self._decode(state, pods, shape_list, shapes, variables, opened, solver)  # consistent
        milli = sum(p.demand for p, d in zip(pods, decided, strict=True) if d is not None)
        if milli < hint_milli:  # never worse than the hint (cannot happen when the hint is feasible)
            self.stats.fallbacks += 1
            return hint
        self.stats.improved += milli > hint_milli
        return self._fill(state, pods, decided)

    def _fill(
        self, state: ClusterState, pods: Sequence[Pod], decided: list[Binding | None]
    ) -> list[Binding | None]:
        """Place the pods the model left out that still fit once the window's placements are made.

        The model sees only each shape's candidate nodes, so it can leave out a pod some other node
        could take; the protocol places whatever fits. Such pods go, by the online policy, onto what the
        whole window leaves free: resources free at the end of the window are free at every earlier
        arrival too, so the placements stay valid in arrival order.
        """
        if all(d is not None for d in decided):
            return decided
        shadow = self._shadow
        assert shadow is not None
        sync_state(shadow, state)
        for pod, d in zip(pods, decided, strict=True):
            if d is not None:
                shadow.place(pod, d)
        out = list(decided)
        for i, pod in enumerate(pods):
            if out[i] is None and shadow.feasible(pod).any():
                d = self.online.choose_fast(shadow, pod)
                if d is not None:
                    shadow.place(pod, d)
                    out[i] = d
                    self.stats.filled += 1
        return out

    def _build(
        self,
        state: ClusterState,
        pods: Sequence[Pod],
        shape_list: list[Shape],
        shapes: dict[Shape, list[int]],
        reps: list[Pod],
        cands: list[list[int]],
        hint: list[Binding | None],
    ) -> tuple[cp_model.CpModel, list[_Var], dict[tuple[int, int], cp_model.IntVar]]:
        """The window's model (see the module docstring), with the hint set on every variable."""
        model = cp_model.CpModel()
        g_max = state.idle.shape[1]
        w = len(pods)
        scorer = self.online.scorer
        shadow = self._shadow
        assert shadow is not None
        # Hint counts per (shape, node, slot) and fresh GPUs the hint opened per node, in order of use.
        hint_count: dict[tuple[int, int, Slot], int] = {}
        hint_fresh: dict[int, list[int]] = {}
        shape_of = {i: si for si, s in enumerate(shape_list) for i in shapes[s]}
        for i, d in enumerate(hint):
            if d is None:
                continue
            p, (n, gpus) = pods[i], d
            slot: Slot = None
            if p.num_gpu == 1 and p.gpu_milli < GPU_MILLI:
                g = gpus[0]
                if state.idle[n, g] >= GPU_MILLI:
                    order = hint_fresh.setdefault(n, [])
                    if g not in order:
                        order.append(g)
                    slot = ("fresh", order.index(g))
                else:
                    slot = g
            key = (shape_of[i], n, slot)
            hint_count[key] = hint_count.get(key, 0) + 1
        # Tie-break values per (shape, node, GPU): the FGD score (0..100) on the window-start state.
        tie_max = 100
        hint_bonus = 100
        w_pod = w * (tie_max + hint_bonus) + 1
        w_milli = (w + 1) * w_pod
        variables: list[_Var] = []
        objective: list[tuple[cp_model.IntVar, int]] = []
        bonus: list[cp_model.IntVar] = []
        per_node: dict[int, list[_Var]] = {}
        for si, s in enumerate(shape_list):
            cpu, mem, num, milli, _ = s
            count = len(shapes[s])
            nodes = np.array(sorted(cands[si]), dtype=np.int64)
            if nodes.size == 0:
                continue
            keys = scorer.gpu_keys(shadow, nodes, reps[si])  # the shadow equals the window-start state
            score, _ = unpack_key(keys)
            share = num == 1 and milli < GPU_MILLI
            for ni, n in enumerate(nodes.tolist()):
                idle = state.idle[n]
                fresh = int((idle >= GPU_MILLI).sum())
                cap_cpu = state.cpu_free[n] // cpu if cpu else count
                cap_mem = state.mem_free[n] // mem if mem else count
                ub_node = int(min(count, cap_cpu, cap_mem))
                if ub_node <= 0:
                    continue
                slots: list[tuple[Slot, int, int]] = []  # (slot, upper bound, tie value)
                if share:
                    for g in range(g_max):
                        if 0 < idle[g] < GPU_MILLI and idle[g] >= milli:
                            slots.append((g, int(min(ub_node, idle[g] // milli)), int(max(score[ni, g], 0))))
                    fresh_gpu = int(np.argmax(idle >= GPU_MILLI)) if fresh else -1
                    n_slots = min(fresh, max(self.fresh_slots, len(hint_fresh.get(n, []))))
                    for j in range(n_slots):
                        slots.append(
                            (("fresh", j), int(min(ub_node, GPU_MILLI // milli)), int(max(score[ni, fresh_gpu], 0)))
                        )
                elif num == 0:
                    slots.append((None, ub_node, int(max(score[ni, 0], 0))))
                else:
                    ub = int(min(ub_node, fresh // num))
                    if ub > 0:
                        slots.append((None, ub, int(max(score[ni].max(), 0))))
                for slot, ub, tie in slots:
                    if ub <= 0:
                        continue
                    v = model.new_int_var(0, ub, f"y[{si},{n},{slot}]")
                    var = _Var(si, n, slot, v)
                    variables.append(var)
                    per_node.setdefault(n, []).append(var)
                    objective.append((v, w_milli * num * milli + w_pod + tie))
                    h = hint_count.get((si, n, slot), 0)
                    if h:
                        b = model.new_int_var(0, min(h, ub), f"b[{si},{n},{slot}]")
                        model.add(b <= v)
                        bonus.append(b)
                        model.add_hint(v, h)
                    else:
                        model.add_hint(v, 0)
        # Per shape: no more pods than the window holds.
        by_shape: dict[int, list[cp_model.IntVar]] = {}
        for var in variables:
            by_shape.setdefault(var.shape, []).append(var.var)
        for si, vs in by_shape.items():
            model.add(cp_model.LinearExpr.sum(vs) <= len(shapes[shape_list[si]]))
        # Per node: CPU, memory, partly used GPUs, fresh GPUs (shared ones opened in order, whole ones).
        opened: dict[tuple[int, int], cp_model.IntVar] = {}
        for n, vs in per_node.items():
            sh = [shape_list[v.shape] for v in vs]
            model.add(
                cp_model.LinearExpr.weighted_sum([v.var for v in vs], [s[0] for s in sh]) <= int(state.cpu_free[n])
            )
            model.add(
                cp_model.LinearExpr.weighted_sum([v.var for v in vs], [s[1] for s in sh]) <= int(state.mem_free[n])
            )
            gpu_rows: dict[Slot, list[tuple[cp_model.IntVar, int]]] = {}
            whole: list[tuple[cp_model.IntVar, int]] = []
            for v, s in zip(vs, sh, strict=True):
                if v.slot is None:
                    if s[2] > 0:
                        whole.append((v.var, s[2]))
                else:
                    gpu_rows.setdefault(v.slot, []).append((v.var, s[3]))
            fresh_open: list[cp_model.IntVar] = []
            j = 0
            while ("fresh", j) in gpu_rows:
                o = model.new_bool_var(f"open[{n},{j}]")
                opened[n, j] = o
                fresh_open.append(o)
                model.add_hint(o, 1 if j < len(hint_fresh.get(n, [])) else 0)
                j += 1
            for slot, row in gpu_rows.items():
                expr = cp_model.LinearExpr.weighted_sum([r[0] for r in row], [r[1] for r in row])
                if isinstance(slot, tuple):
                    model.add(expr <= GPU_MILLI * opened[n, slot[1]])
                else:
                    model.add(expr <= int(state.idle[n, slot]))
            for a, b in zip(fresh_open, fresh_open[1:], strict=False):
                model.add(a >= b)
            if whole or fresh_open:
                fresh = int((state.idle[n] >= GPU_MILLI).sum())
                model.add(
                    cp_model.LinearExpr.weighted_sum(
                        [x for x, _ in whole] + fresh_open, [c for _, c in whole] + [1] * len(fresh_open)
                    )
                    <= fresh
                )
        model.maximize(
            cp_model.LinearExpr.weighted_sum([v for v, _ in objective], [c for _, c in objective])
            + hint_bonus * cp_model.LinearExpr.sum(bonus)
        )
        return model, variables, opened

    @staticmethod
    def _decode(
        state: ClusterState,
        pods: Sequence[Pod],
        shape_list: list[Shape],
        shapes: dict[Shape, list[int]],
        variables: list[_Var],
        opened: dict[tuple[int, int], cp_model.IntVar],
        solver: cp_model.CpSolver,
    ) -> list[Binding | None]:
        """Counts back to pods (arrival order within a shape) and GPU indices: fresh slot j is the
        node's j-th fully idle GPU; whole-GPU pods take the fully idle GPUs after the opened slots."""
        out: list[Binding | None] = [None] * len(pods)
        queue = {si: list(shapes[s]) for si, s in enumerate(shape_list)}  # arrival order within a shape
        by_node: dict[int, list[_Var]] = {}
        for v in variables:
            if solver.value(v.var) > 0:
                by_node.setdefault(v.node, []).append(v)
        for n, vs in by_node.items():
            fresh = np.flatnonzero(state.idle[n] >= GPU_MILLI).tolist()
            n_open = sum(1 for (m, _), o in opened.items() if m == n and solver.boolean_value(o))
            spare = fresh[n_open:]
            for v in vs:
                s = shape_list[v.shape]
                for _ in range(solver.value(v.var)):
                    i = queue[v.shape].pop(0)
                    if v.slot is None:
                        gpus = tuple(spare[: s[2]])
                        spare = spare[s[2] :]
                    elif isinstance(v.slot, tuple):
                        gpus = (fresh[v.slot[1]],)
                    else:
                        gpus = (int(v.slot),)
                    out[i] = (n, gpus)
        return out
