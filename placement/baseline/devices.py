"""The greedy planner's device ledger: where MIG and shared pods go, which GPUs change layout.

First-fit into free instances and shares, then (when allowed) the cheapest re-partition or a
newly shared plain GPU. The baseline planner uses it, and so do pending reasons (a job "fits"
when the same ledger can place it).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from placement_models import (
    Task,
)

from placement.baseline import mig_sharing
from placement.baseline.device_state import (
    CHANGED_BELOW,
    NODE_BITS,
    NONE,
    SERIALS,
    GpuState,
    NodeState,
    Option,
    distinct_gpus,
    free_code,
    free_options,
    repartition_code,
    repartition_node,
    slices_of,
)
from placement.catalog import MigProfile
from placement.devices.pods import profile_for, share_demand, share_room
from placement.devices.view import is_instance_share, is_mig, uses_devices
from placement.picks import pod_picks
from placement.problem import Problem
from placement.solution import Placement

#: baseline.gangs.place_task's signature: (problem, task, free, counts, allowed nodes, pod limit) -> pods placed
Placer = Callable[..., int]


class GreedyDevices:
    """The greedy planner's device ledger: where MIG and shared pods go, which GPUs change layout."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.view = problem.device_view()
        self.nodes: dict[int, NodeState] = {}
        self.own: set[int] = set()
        self.changes = 0
        self.changed_nodes: set[int] = set()  # nodes with a GPU whose layout this plan changes
        self.shares: dict[tuple[int, int], list[int]] = {}
        self.instance_shares: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (task, node) -> (gpu, start)s
        self.opened = 0  # plain GPUs this plan shares (policy.max_sharing_changes caps them)
        #: per node, the `serial` of its state here (-1: no state yet): what NodeAnswers entries are checked against
        self.serial = np.full(len(self.view.mig), -1, dtype=np.int64)

    # -- trials: a gang's placement is tried on a copy and committed whole, or dropped

    def trial(self) -> GreedyDevices:
        other = GreedyDevices.__new__(GreedyDevices)
        other.problem, other.view = self.problem, self.view
        other.nodes, other.own, other.changes = dict(self.nodes), set(), self.changes
        other.changed_nodes = set(self.changed_nodes)
        other.shares = {k: list(v) for k, v in self.shares.items()}
        other.instance_shares = {k: list(v) for k, v in self.instance_shares.items()}
        other.opened = self.opened
        other.serial = self.serial.copy()
        return other

    def commit(self, trial: GreedyDevices) -> None:
        self.nodes, self.own, self.changes, self.shares = trial.nodes, set(), trial.changes, trial.shares
        self.changed_nodes, self.opened, self.serial = trial.changed_nodes, trial.opened, trial.serial
        self.instance_shares = trial.instance_shares

    def node(self, n: int) -> NodeState:
        """Node n's state, to change: copied on first write in a trial, and given a fresh serial on every call
        (callers change it right after, before any NodeAnswers lookup)."""
        if n not in self.own:
            state = self.nodes.get(n)
            self.nodes[n] = state.copy() if state is not None else NodeState(self.view, n)
            self.own.add(n)
        state = self.nodes[n]
        state.serial = next(SERIALS)
        self.serial[n] = state.serial
        return state

    def peek(self, n: int) -> NodeState:
        state = self.nodes.get(n)
        if state is None:
            state = self.nodes[n] = NodeState(self.view, n)
            self.serial[n] = 0
        return state

    # -- placing

    def placer(self, whole: Placer) -> Placer:
        """A task placer with baseline.gangs.place_task's signature: MIG/shared tasks go through this ledger."""

        def place(problem: Problem, t: int, free: np.ndarray, counts: dict[tuple[int, int], int],
                  allowed: np.ndarray | None = None, limit: int | None = None) -> int:
            if uses_devices(problem.tasks[t].spec):
                return self.place_task(t, free, counts, allowed, limit)
            idle = self._convertible()
            if problem.tasks[t].demand[0] == 0 or not idle.any():
                return whole(problem, t, free, counts, allowed, limit)
            # plain GPUs first: make a partitioned GPU whole only for pods that fit nowhere else
            plain = free.copy()
            plain[:, 0] = np.maximum(free[:, 0] - idle, 0)
            before = plain.copy()
            got = whole(problem, t, plain, counts, allowed, limit)
            free -= before - plain
            want = problem.tasks[t].replicas if limit is None else min(limit, problem.tasks[t].replicas)
            return got + (whole(problem, t, free, counts, allowed, want - got) if got < want else 0)

        return place

    def _convertible(self) -> np.ndarray:
        """Per node, idle partitioned GPUs still counted in whole-GPU capacity (re-partitioning on)."""
        if not self.view.changes:
            return np.zeros(len(self.view.mig), dtype=np.int64)
        # Cached per node state (serial), as NodeAnswers are: asked once per whole-GPU task, the scan over
        # every node cost 0.7 s of a profiled plan at 1,024 nodes (mig-XL).
        cached = self.view.memo.get("convertible")
        if cached is None:
            idle = np.array([sum(g.idle for g in gpus) for gpus in self.view.mig], dtype=np.int64)
            cached = self.view.memo["convertible"] = (np.zeros(len(self.view.mig), dtype=np.int64), idle)
        serials, counts = cached  # type: ignore[misc]
        current = np.maximum(self.serial, 0)
        for n in np.nonzero(serials != current)[0].tolist():
            state = self.nodes.get(n)
            counts[n] = len(state.in_w) if state is not None else sum(g.idle for g in self.view.mig[n])
            serials[n] = current[n]
        return counts.copy()

    def place_task(self, t: int, free: np.ndarray, counts: dict[tuple[int, int], int],
                   allowed: np.ndarray | None = None, limit: int | None = None) -> int:
        """Place as many pods of MIG/shared task t as fit, one at a time; updates `free` and `counts`.

        `allowed` (a bool per node) and `limit` (pods) confine it as baseline.gangs.place_task's do.
        """
        task = self.problem.tasks[t]
        d = task.demand
        cand = task.candidates if allowed is None else task.candidates[allowed[task.candidates]]
        want = task.replicas if limit is None else min(limit, task.replicas)
        placed = 0
        while placed < want:
            ok = cand[np.all(free[cand, 1:] >= d[1:], axis=1)]
            if is_instance_share(task.spec):
                pick = self._instance_pod(t, ok, free)
            else:
                pick = self._mig_pod(t, ok, free) if is_mig(task.spec) else self._share_pod(t, ok, free)
            if pick is None:
                break
            free[pick, 1:] -= d[1:]
            counts[t, pick] = counts.get((t, pick), 0) + 1
            placed += 1
        return placed

    def _share_pod(self, t: int, nodes: np.ndarray, free: np.ndarray) -> int | None:
        """One pod: best fit onto a shared GPU (declared, or shared earlier by this plan: either costs nothing
        more), else, when allowed, onto a plain GPU the plan shares now."""
        spec = self.problem.tasks[t].spec
        best: tuple[int, int, int] | None = None
        for n in nodes.tolist():
            state = self.peek(n)
            if not state.shared:
                continue
            need_parts, need_memory = share_demand(spec, self.view.fresh_share(n))  # one GPU model per node
            for gpu, (pods, parts, memory) in state.shared.items():
                if pods >= 1 and parts >= need_parts and memory >= need_memory:
                    key = (parts - need_parts, n, gpu)  # best fit: the fullest GPU that still fits
                    best = key if best is None or key < best else best
        if best is not None:
            _, n, gpu = best
        else:
            found = self._share_plain(spec, nodes, free)
            if found is None:
                return None
            n, gpu = found
        need_parts, need_memory = share_demand(spec, self.view.fresh_share(n))
        left = self.node(n).shared[gpu]
        left[0] -= 1
        left[1] -= need_parts
        left[2] -= need_memory
        self.shares.setdefault((t, n), []).append(gpu)
        return n

    def _instance_pod(self, t: int, nodes: np.ndarray, free: np.ndarray) -> int | None:
        """One pod sharing a MIG instance: best fit onto a shared instance of its profile (declared, or made
        shared earlier by this plan), else, re-partitioning on, a new shared instance (baseline.mig_sharing)."""
        spec = self.problem.tasks[t].spec
        best = None
        for n in nodes.tolist():
            state = self.nodes.get(n)
            if (state.instances if state is not None else self.view.shared_instances(n)):
                p = profile_for(spec, self.view.geometry(n))
                found = None if p is None else mig_sharing.best_fit(
                    self.peek(n), n, spec, p, self.view.fresh_instance(n, p.name))
                best = found if best is None or (found is not None and found < best) else best
        if best is None and self.view.changes:
            budget = self.view.max_changes is None or self.changes < self.view.max_changes
            for n in nodes.tolist():
                geo = self.view.geometry(n)
                p = profile_for(spec, geo)
                if geo is None or p is None:
                    continue
                found = mig_sharing.new_instance(self.peek(n), n, geo, p, bool(free[n, 0] >= 1), budget)
                best = found if best is None or (found is not None and found < best) else best
        if best is None:
            return None
        _, n, gpu, start = best
        p = profile_for(spec, self.view.geometry(n))
        assert p is not None
        if (gpu, start) not in self.peek(n).instances:  # a new shared instance: taken as a MIG pod takes one
            was = gpu >= 0 and self.peek(n).mig[gpu].changed()
            gpu = self._take(n, gpu, start, p, free)
            if not was and not self.nodes[n].mig[gpu].changed():
                self.changes += 1  # a free instance shared on an unchanged GPU: the sharing is its change
                self.changed_nodes.add(n)
        mig_sharing.take(self.node(n), gpu, start, self.view.fresh_instance(n, p.name), spec)
        self.instance_shares.setdefault((t, n), []).append((gpu, start))
        return n

    def _share_plain(self, spec: Task, nodes: np.ndarray, free: np.ndarray) -> tuple[int, int] | None:
        """Share a plain GPU for one pod: on the node with the fewest whole GPUs free (whole nodes stay whole
        for gangs), its highest index (whole-GPU pods keep the low ones); None when not allowed or none fits."""
        view = self.view
        if not view.sharing_changes or (view.max_sharing_changes is not None
                                        and self.opened >= view.max_sharing_changes):
            return None
        best: tuple[int, int] | None = None
        for n in nodes[free[nodes, 0] >= 1].tolist():
            if not view.convertible(n) or share_room(spec, view.fresh_share(n)) < 1:
                continue
            if self.peek(n).plain_unclaimed() >= 1:
                best = (int(free[n, 0]), n) if best is None else min(best, (int(free[n, 0]), n))
        if best is None:
            return None
        n = best[1]
        self._open(n, self.node(n).plain[-1], free)
        return n, self.node(n).opened[-1]

    def _open(self, n: int, gpu: int, free: np.ndarray) -> None:
        """Plain GPU `gpu` of node n becomes a shared GPU (policy.sharing_default): out of whole-GPU capacity."""
        state = self.node(n)
        state.plain.remove(gpu)
        g = self.view.fresh_share(n)
        state.shared[gpu] = [g.pods_left, g.parts_left, g.memory_left]
        state.opened.append(gpu)
        free[n, 0] -= 1
        self.opened += 1

    def _mig_pod(self, t: int, nodes: np.ndarray, free: np.ndarray) -> int | None:
        """One pod: first fit into a free instance (GPUs outside whole-GPU capacity first), else the cheapest
        re-partition (a GPU this plan already changes, then one left out of whole-GPU capacity, ...).

        Node by node this is `_mig_pod_options` and `_repartition_options` (the reference, kept for tests);
        their answers per node are cached in `NodeAnswers` and the minimum over nodes taken with numpy: the
        scans over every node for every pod took 29 s of a profiled plan at 1,024 nodes (mig-XL)."""
        spec = self.problem.tasks[t].spec
        option = self._first_fit(spec, nodes, free)
        if option is None and self.view.changes:
            touched = nodes[np.isin(nodes, list(self.changed_nodes))]
            option = self._best_repartition(spec, touched, free, changed_only=True)
            if option is None:
                option = self._best_repartition(spec, nodes, free, changed_only=False)
        if option is None:
            return None
        _, n, gpu, start = option
        self._take(n, gpu, start, profile_for(spec, self.view.geometry(n)), free)
        return n

    def _mig_pod_options(self, spec: Task, nodes: np.ndarray, free: np.ndarray) -> Option | None:
        """The free instance `_mig_pod` takes, node by node (the reference `_first_fit` must agree with)."""
        options: list[Option] = []  # (key, node, gpu, start)
        for n in nodes.tolist():
            if not self.view.mig[n] and n not in self.nodes:
                continue  # nothing partitioned here (yet)
            state = self.peek(n)
            if options and len(state.in_w) + len(state.converted) == len(state.mig):
                continue  # only GPUs in whole-GPU capacity here; an earlier node already offers one
            p = profile_for(spec, self.view.geometry(n))
            if p is None:
                continue
            options.extend(free_options(state, n, p, bool(free[n, 0] >= 1)))
            if options and min(options)[0][1] == 0:
                break  # first fit: a free instance that costs no whole GPU
        return min(options) if options else None

    def _first_fit(self, spec: Task, nodes: np.ndarray, free: np.ndarray) -> Option | None:
        """`_mig_pod_options` from cached per-node answers: the first node (in `nodes` order) with a free
        instance outside whole-GPU capacity gives its best; without one, the lowest key among the first node
        with any free instance and the later ones that have a GPU outside whole-GPU capacity (the others the
        reference skips once it holds an option)."""
        if nodes.size == 0:
            return None
        answers = self._answers(spec)
        answers.refresh_free(self, spec, nodes)
        ok = (free[nodes, 0] >= 1).astype(np.intp)
        w0 = answers.w0[nodes, ok]
        if w0.any():
            i = int(np.argmax(w0))
            return answers.free_best[int(nodes[i])][ok[i]]
        found = answers.any[nodes, ok]
        if not found.any():
            return None
        f = int(np.argmax(found))
        kept = found & ~answers.allw[nodes]
        kept[: f + 1] = False
        kept[f] = True
        codes = np.where(kept, answers.free_code[nodes, ok], NONE)
        i = int(np.argmin(codes))
        return answers.free_best[int(nodes[i])][ok[i]]

    def _best_repartition(self, spec: Task, nodes: np.ndarray, free: np.ndarray, changed_only: bool) -> Option | None:
        """min(`_repartition_options`) (only GPUs this plan changed already, when `changed_only`), from cached
        per-node answers."""
        if nodes.size == 0:
            return None
        answers = self._answers(spec)
        answers.refresh_repartition(self, spec, nodes)
        budget = self.view.max_changes is None or self.changes < self.view.max_changes
        variant = (free[nodes, 0] >= 1).astype(np.intp) * 2 + int(budget)
        codes = answers.re_code[nodes, variant]
        if changed_only:
            codes = np.where(codes < CHANGED_BELOW, codes, NONE)
        i = int(np.argmin(codes))
        if codes[i] == NONE:
            return None
        return answers.re_best[int(nodes[i])][variant[i]]

    def _answers(self, spec: Task) -> NodeAnswers:
        key = ("node_answers", spec.mig_profile, spec.gpu_memory_gib)
        found = self.view.memo.get(key)
        if found is None:
            found = self.view.memo[key] = NodeAnswers(len(self.view.mig))
        return found  # type: ignore[return-value]

    def _repartition_options(self, spec: Task, nodes: np.ndarray, free: np.ndarray) -> list[Option]:
        """Every re-partition that could take one pod, node by node (the reference `_best_repartition` must
        agree with)."""
        options: list[Option] = []
        budget = self.view.max_changes is None or self.changes < self.view.max_changes
        for n in nodes.tolist():
            geo = self.view.geometry(n)
            p = profile_for(spec, geo)
            if geo is None or p is None:
                continue
            options.extend(repartition_node(self.peek(n), n, geo, p, bool(free[n, 0] >= 1), budget))
        return options

    def _take(self, n: int, gpu: int, start: int, p: MigProfile | None, free: np.ndarray) -> int:
        """Take instance (gpu, start) of profile p on node n, re-laying the GPU if needed (gpu -1: a plain GPU
        partitioned now); returns the GPU's index."""
        assert p is not None
        state = self.node(n)
        was_changed = gpu >= 0 and state.mig[gpu].changed()
        if gpu < 0:  # partition a plain GPU: the highest index, so whole-GPU pods keep the low ones
            gpu = state.plain.pop()
            state.mig[gpu] = GpuState(gpu, None, ())
            state.in_w.add(gpu)
        g = state.mig[gpu]
        if gpu in state.in_w:
            state.in_w.discard(gpu)
            free[n, 0] -= 1
        geo = self.view.geometry(n)
        assert geo is not None
        if g.inst.get(start) != p.name or start in g.busy:
            for s in [s for s, name in g.inst.items() if set(slices_of(geo, name, s)) & set(p.slices(start))]:
                assert s not in g.busy
                del g.inst[s]
            g.inst[start] = p.name
            g.touch()
        g.busy.add(start)
        if g.changed() and not was_changed:
            self.changes += 1
            self.changed_nodes.add(n)
        return gpu

    def settle(self, counts: dict[tuple[int, int], int]) -> bool:
        """After a gang: make idle partitioned GPUs whole where its whole-GPU pods need more than the plain
        GPUs left; False when that would exceed policy.max_mig_changes (the gang is then rolled back)."""
        need: dict[int, int] = {}
        for (t, n), k in counts.items():
            gpus = int(self.problem.tasks[t].demand[0])
            if gpus and k:
                need[n] = need.get(n, 0) + gpus * k
        for n, k in need.items():
            if not self.view.mig[n] and n not in self.nodes:
                continue  # nothing partitioned here: whole pods simply take plain GPUs
            state = self.node(n)
            state.whole_taken += k
            short = -state.plain_unclaimed() - len(state.converted)
            for g in sorted(state.in_w - set(state.plain)):
                if short <= 0:
                    break
                if self.view.max_changes is not None and self.changes >= self.view.max_changes:
                    return False
                state.in_w.discard(g)
                state.converted.add(g)
                self.changes += 1
                short -= 1
            if short > 0:
                return False
        return True

    def apply(self, placement: Placement, free: np.ndarray) -> None:
        """Load a placement into the ledger (its new layouts, GPUs it shares, taken instances, shares, whole GPUs
        taken), and take out of `free[:, 0]` the GPUs it removes from whole-GPU capacity by partitioning, sharing
        or using them."""
        problem = self.problem
        for n, gpu in sorted(placement.sharing_changes):
            self._open(n, gpu, free)
        for (n, gpu), layout in placement.mig_layouts.items():
            state = self.node(n)
            self.changes += 1
            if layout is None:
                state.converted.add(gpu)
                state.in_w.discard(gpu)
                continue
            if gpu not in state.mig:
                state.plain.remove(gpu)
                state.mig[gpu] = GpuState(gpu, None, ())
                free[n, 0] -= 1
            elif gpu in state.in_w:
                state.in_w.discard(gpu)
                free[n, 0] -= 1
            state.mig[gpu].inst = {s: name for name, s in layout}
            state.mig[gpu].touch()
        for (t, n), picks in pod_picks(problem, placement).items():
            state = self.node(n)
            spec = problem.tasks[t].spec
            for gpu, inst in picks:
                if inst is not None and is_instance_share(spec):  # a share: made shared on its first pod
                    mig_sharing.take(state, gpu, inst[1], self.view.fresh_instance(n, inst[0]), spec)
                    continue
                if inst is not None:
                    state.mig[gpu].busy.add(inst[1])
                    if gpu in state.in_w:
                        state.in_w.discard(gpu)
                        free[n, 0] -= 1
                    continue
                parts, memory = share_demand(spec, self.view.fresh_share(n))  # one GPU model per node
                left = state.shared[gpu]
                left[0] -= 1
                left[1] -= parts
                left[2] -= memory
        for (t, n), k in placement.counts.items():
            gpus = int(problem.tasks[t].demand[0]) * k
            if gpus and (self.view.mig[n] or n in self.nodes):
                self.node(n).whole_taken += gpus
        self.own = set()

    def finish(self, placement: Placement) -> None:
        """Write the picks into the placement: new layouts of changed GPUs, GPUs it shares, the GPU of each
        shared pod."""
        for n, state in sorted(self.nodes.items()):
            placement.sharing_changes.update((n, gpu) for gpu in state.opened)
            for gpu, g in sorted(state.mig.items()):
                if gpu in state.converted:
                    placement.mig_layouts[n, gpu] = None
                elif g.changed():
                    placement.mig_layouts[n, gpu] = g.layout()
        for key, gpus in sorted(self.shares.items()):
            placement.shares[key] = sorted(gpus)
        for n, state in sorted(self.nodes.items()):
            placement.shared_instances.update((n, gpu, s) for gpu, g in state.mig.items() for s in g.shared)
        for pair, instances in sorted(self.instance_shares.items()):
            placement.instance_shares[pair] = sorted(instances)


class NodeAnswers:
    """Per node, what `free_options` and `repartition_node` give one MIG task shape (mig_profile,
    gpu_memory_gib), for each way the rest of the ledger can matter (node has a whole GPU free or not;
    max_mig_changes reached or not), with the `serial` of the node state each answer came from.

    A node state with a given serial never changes (GreedyDevices.node() gives a fresh one before any
    change; 0 is the view's own state), so an answer is good for every ledger whose node has that serial:
    one object per view and shape serves the greedy, its trials and every pending reason. Minimums over
    nodes become numpy argmins over `codes`, integers ordered as the options' keys are, node index last.
    """

    def __init__(self, n_nodes: int) -> None:
        assert n_nodes < 1 << NODE_BITS
        self.free_serial = np.full(n_nodes, -2, dtype=np.int64)
        self.w0 = np.zeros((n_nodes, 2), dtype=bool)  # a free instance outside whole-GPU capacity
        self.any = np.zeros((n_nodes, 2), dtype=bool)  # any free instance
        self.allw = np.zeros(n_nodes, dtype=bool)  # every GPU in whole-GPU capacity or made whole
        self.free_code = np.full((n_nodes, 2), NONE, dtype=np.int64)  # key of the best (key[1:3]), node
        self.free_best: list[list[Option | None]] = [[None, None] for _ in range(n_nodes)]
        self.re_serial = np.full(n_nodes, -2, dtype=np.int64)
        self.re_code = np.full((n_nodes, 4), NONE, dtype=np.int64)  # variant: free_ok * 2 + budget
        self.re_best: list[list[Option | None]] = [[None] * 4 for _ in range(n_nodes)]

    def refresh_free(self, ledger: GreedyDevices, spec: Task, nodes: np.ndarray) -> None:
        """Recompute the free-instance answers of `nodes` whose state changed. Nodes without a state yet are
        the view's (no state is created for them: `_mig_pod_options` peeks only nodes it would use)."""
        serial = np.maximum(ledger.serial[nodes], 0)
        for n in nodes[self.free_serial[nodes] != serial].tolist():
            state = ledger.nodes.get(n) or NodeState(ledger.view, n)
            p = profile_for(spec, ledger.view.geometry(n))
            self.allw[n] = len(state.in_w) + len(state.converted) == len(state.mig)
            for ok in (0, 1):
                options = free_options(state, n, p, bool(ok)) if p is not None else []
                best = min(options) if options else None
                self.free_best[n][ok] = best
                self.any[n, ok] = best is not None
                self.w0[n, ok] = best is not None and best[0][1] == 0
                self.free_code[n, ok] = NONE if best is None else free_code(best)
            self.free_serial[n] = max(state.serial, 0)

    def refresh_repartition(self, ledger: GreedyDevices, spec: Task, nodes: np.ndarray) -> None:
        """Recompute the re-partition answers of `nodes` whose state changed, and give a state to every node
        with a profile for the shape that has none (as the node-by-node scan's peek does)."""
        view = ledger.view
        for n in nodes[self.re_serial[nodes] != ledger.serial[nodes]].tolist():
            geo = view.geometry(n)
            p = profile_for(spec, geo)
            if geo is None or p is None:
                self.re_code[n] = NONE
                self.re_best[n] = [None] * 4
                continue  # no state: re_serial stays, so the check repeats (cheap: profile_for is cached)
            state = ledger.peek(n)
            if self.re_serial[n] != state.serial:
                mig_gpus = distinct_gpus(state)
                for v in range(4):
                    options = repartition_node(state, n, geo, p, bool(v >> 1), bool(v & 1), mig_gpus)
                    best = min(options) if options else None
                    self.re_best[n][v] = best
                    self.re_code[n, v] = NONE if best is None else repartition_code(best)
                self.re_serial[n] = state.serial
