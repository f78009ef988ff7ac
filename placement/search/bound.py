"""A true upper bound for the whole problem: the model relaxed over classes of nodes.

On a big cluster the compiled model is restricted (each task sees a subset of its nodes,
placement.candidates) or searched by windows, so CP-SAT's own bound says nothing about the best
plan for the whole cluster. This module bounds the objective of *every* valid plan instead:

* Nodes are grouped into classes: same whole free GPUs, and the same pending kinds fit there
  (a kind is a set of tasks with one demand and one candidate list). A class's capacity is the sum
  of its nodes' free resources (plus what every preemptable job there would release, and the
  whole GPUs a MIG re-layout could free), and a kind may put there at most the sum of its
  per-node pod limits. Any plan, counted per class, meets these sums, so the relaxation contains it.
* Gangs stay all-or-nothing per job (`placed`), with the gang module's pod counts.
* The objective keeps each job's `placed` coefficients and, per pod, the best coefficient its task
  has on any node. Every other term (fragmentation, fairness segments, quota credit, evictions,
  ...) is bounded by the best value its variables' domains allow, or by the cap the term declared
  (`ObjectiveRegistry.cap`: quota credit, fairness, stability, whose domains follow a trimmed
  model's pairs); in a trimmed model a reward without a cap gives no bound. Where the model was restricted,
  a node a task never saw is credited the task's coefficient where a term gives every node the
  same, else the ceiling the term declared for the row (prices: 0); a varying coefficient without
  one gives no bound. Every task with candidates must keep at least one node in the model (so
  every term has shown its coefficient for every task); otherwise there is no bound. Tasks of
  dominated jobs (`ctx.idle`, compile/dominance.py) are the exception: some optimal plan leaves them
  out, so a bound of the plans without them bounds the optimum, and so every plan.

Dropped on purpose, each a relaxation: topology, quota caps, reservations, MIG and sharing
layouts, per-node packing inside a class. The relaxation is solved through its Lagrangian dual
in numpy (`_Relaxed`): any prices give a valid bound, so it may stop at any step. CP-SAT on the
same aggregated model needed 0.4-1.5 s at 1,000-4,000 nodes to get past presolve; the dual,
started from the one-pile knapsack's prices, matched its optimum in a tenth of that.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass

import numpy as np

from placement.compile.context import SCALE, ModelContext

#: Pods of a kind that need no resource the node counts: as many as the kind has (never binding).
UNLIMITED = 1 << 30

#: What `SolverStats.bound_kind` says of each bound.
MODEL = "model"
RELAXATION = "relaxation"


#: Descent steps at most; a step costs O(kinds × classes + tasks) numpy work.
ITERATIONS = 400
#: The first step's share of the Polyak step (the start is already the one-pile bound: small moves).
THETA = 0.5
#: Steps without a better bound before the step size halves.
STALL = 15
#: Stop once the bound is this close (relative) to the known plan: nothing left to prove.
GAP_DONE = 1e-6


@dataclass(frozen=True)
class Bound:
    """An upper bound on the objective of every valid plan, in GPU-equivalents."""

    value: float
    kind: str
    classes: int
    kinds: int
    steps: int
    wall_s: float


def relaxation(ctx: ModelContext, lower: float, budget_s: float, *, iterations: int = ITERATIONS) -> Bound | None:
    """The relaxation's bound, or None when the terms allow none (see the module docstring).

    `lower` is the value of a plan known to be valid (the greedy one): it steers the step sizes and
    stops the descent once the bound meets it. `iterations` bounds the work; `budget_s` stops it early
    on a slow machine (deterministic callers pass a budget that never binds). The starting prices are
    always evaluated: they alone give a valid bound.
    """
    start = time.perf_counter()
    parts = _objective_parts(ctx)
    if parts is None:
        return None
    relaxed = _Relaxed.of(ctx, *parts)
    best, steps = math.inf, 0
    lam = relaxed.start()
    mu = np.zeros_like(relaxed.pods_cap)
    theta, stale = THETA, 0
    target = lower * SCALE
    while steps < max(1, iterations) and (steps == 0 or time.perf_counter() - start < budget_s):
        value, g_lam, g_mu = relaxed.dual(lam, mu)
        steps += 1
        if not math.isfinite(best) or value < best - 1e-9 * abs(best):
            best, stale = value, 0
        else:
            stale += 1
            if stale >= STALL:
                theta, stale = theta / 2, 0
        norm = float((g_lam ** 2).sum() + (g_mu ** 2).sum())
        if best - target <= GAP_DONE * max(1.0, abs(target)) or norm == 0 or theta < 1e-4:
            break
        step = theta * max(value - target, 1e-9 * max(1.0, abs(value))) / norm
        lam = np.maximum(0.0, lam - step * g_lam)
        mu = np.maximum(0.0, mu - step * g_mu)
    if not math.isfinite(best):
        return None
    return Bound(best / SCALE, RELAXATION, relaxed.capacity.shape[0], relaxed.demand.shape[0], steps,
                 time.perf_counter() - start)


class _Relaxed:
    """The class relaxation, and its Lagrangian dual: capacities and per-class pod limits priced.

    For prices λ (per class and resource) and μ (per kind and class), every pod of a kind goes to the
    class where it costs least, every job whose gang is then worth more than nothing is placed, and
    Σλ·capacity + Σμ·limits + Σ those jobs' worth bounds every plan (weak duality); the descent lowers it.
    """

    def __init__(self, capacity: np.ndarray, pods_cap: np.ndarray, demand: np.ndarray, task_kind: np.ndarray,
                 task_job: np.ndarray, replicas: np.ndarray, per_pod: np.ndarray, per_job: np.ndarray,
                 whole: np.ndarray, constant: float) -> None:
        self.capacity = capacity  # (classes, 3) GPUs, milli-CPU, MiB
        self.pods_cap = pods_cap  # (kinds, classes) most pods of a kind a class takes, 0 where none fits
        self.demand = demand  # (kinds, 3) one pod's
        self.task_kind = task_kind  # kind per task, -1 for a task no node takes
        self.task_job = task_job
        self.replicas = replicas.astype(float)
        self.per_pod = per_pod
        self.per_job = per_job
        self.whole = whole  # per job: every pod required (else only its minimum, relaxed away)
        self.constant = constant
        self.fits = pods_cap > 0
        self.has_kind = task_kind >= 0
        # Rows scaled to a right-hand side of 1 (a price is then the worth of a whole row), so that
        # GPUs, milli-CPUs, MiB and pod counts weigh alike in the step.
        self.cap_scale = np.where(capacity > 0, capacity, 1.0)
        self.rhs = (capacity > 0).astype(float)
        self.pods_scale = np.where(self.fits, pods_cap, 1.0)

    @classmethod
    def of(cls, ctx: ModelContext, per_pod: dict[int, int], per_job: dict[int, int], constant: int) -> _Relaxed:
        problem = ctx.problem
        kind_of, kinds = _kinds(ctx)
        cap = _capacity(ctx)
        members = np.zeros((len(kinds), problem.n_nodes), dtype=np.int64)  # pods of kind k node n takes alone
        for k, t in enumerate(kinds):
            cand, demand = problem.tasks[t].candidates, problem.tasks[t].demand
            # every pod of the kind that fits the node's capacity, whichever task it belongs to (a task's
            # own max_per_node stops at its replicas, and other tasks of the kind may share the node)
            need = demand > 0
            fit = (cap[cand][:, need] // demand[need]).min(axis=1) if need.any() else np.full(cand.size, UNLIMITED)
            members[k, cand] = np.maximum(fit, 1)
        if kinds:
            key = np.concatenate([cap[:, :1], np.packbits(members > 0, axis=0).T.astype(np.int64)], axis=1)
            _, cls_of = np.unique(key, axis=0, return_inverse=True)
            cls_of = cls_of.reshape(-1)
        else:
            cls_of = np.zeros(problem.n_nodes, dtype=np.int64)
        n_cls = int(cls_of.max()) + 1 if problem.n_nodes else 0
        # sums per class by bincount (ufunc.at took 0.1 s at 12,500 nodes)
        class_cap = np.stack([np.bincount(cls_of, weights=cap[:, d], minlength=n_cls) for d in range(3)], axis=1) \
            if n_cls else np.zeros((0, 3))
        pods_cap = np.array([np.bincount(cls_of, weights=row, minlength=n_cls) for row in members],
                            dtype=float).reshape(len(kinds), n_cls)
        demand = np.array([problem.tasks[t].demand for t in kinds], dtype=float).reshape(len(kinds), 3)
        task_kind = np.full(len(problem.tasks), -1, dtype=np.int64)
        for k, tasks in enumerate(kind_of):
            task_kind[tasks] = k
        return cls(
            capacity=class_cap, pods_cap=pods_cap, demand=demand, task_kind=task_kind,
            task_job=np.array([t.job for t in problem.tasks], dtype=np.int64),
            replicas=np.array([t.replicas for t in problem.tasks], dtype=np.int64),
            per_pod=np.array([per_pod.get(t, 0) for t in range(len(problem.tasks))], dtype=float),
            per_job=np.array([per_job.get(j, 0) for j in range(len(problem.jobs))], dtype=float),
            whole=np.array([job.needed == job.pods for job in problem.jobs], dtype=bool), constant=float(constant))

    def start(self) -> np.ndarray:
        """Prices to start from: one price per GPU everywhere, the fractional knapsack's critical worth per
        GPU (the exact bound of the cluster seen as one pile of GPUs); the descent refines it per class."""
        lam = np.zeros_like(self.capacity)
        gpus = _sum_by(self.task_job, self.replicas * self.demand_of_tasks(0), self.per_job.size)
        worth = self.per_job + _sum_by(self.task_job, self.replicas * np.where(self.has_kind, self.per_pod, -np.inf),
                                       self.per_job.size)
        ok = (gpus > 0) & (worth > 0)
        density = worth[ok] / gpus[ok]
        order = np.argsort(-density, kind="stable")
        filled = np.cumsum(gpus[ok][order])
        total = float(self.capacity[:, 0].sum())
        cut = int(np.searchsorted(filled, total, side="right"))
        if cut >= order.size:
            return lam  # every job fits the GPUs: nothing to price
        lam[:, 0] = density[order[cut]] * self.capacity[:, 0]
        return lam

    def demand_of_tasks(self, d: int) -> np.ndarray:
        """Per task, its pod's demand of resource d (0 for a task no node takes)."""
        kind = np.where(self.has_kind, self.task_kind, 0)
        return np.where(self.has_kind, self.demand[kind, d] if self.demand.size else 0.0, 0.0)

    def dual(self, lam: np.ndarray, mu: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """(bound at these prices, its subgradient in λ, in μ)."""
        n_kinds, n_cls = self.pods_cap.shape
        per_unit = lam / self.cap_scale  # (classes, 3)
        price = np.where(self.fits, self.demand @ per_unit.T + mu / self.pods_scale, np.inf)  # (kinds, classes)
        where = price.argmin(axis=1) if n_cls else np.zeros(n_kinds, dtype=np.int64)
        cost = price[np.arange(n_kinds), where] if n_cls else np.full(n_kinds, np.inf)
        kind = np.where(self.has_kind, self.task_kind, 0)
        net = np.where(self.has_kind, self.per_pod - (cost[kind] if n_kinds else 0.0), -np.inf)
        n_jobs = self.per_job.size
        whole_task = self.whole[self.task_job]
        gain = self.replicas * np.where(whole_task, net, np.maximum(net, 0.0))  # -inf: a gang no node takes
        worth = self.per_job + _sum_by(self.task_job, gain, n_jobs)
        chosen = worth > 0
        taken = chosen[self.task_job] & self.has_kind & (whole_task | (net > 0))
        wanted = np.bincount(kind[taken], weights=self.replicas[taken], minlength=n_kinds).astype(float)
        # Pods of a kind spread over every class at its lowest price, by room: ties are the rule (equal
        # prices at the start), and piling a kind onto one of them makes the descent zigzag. Any split
        # is a valid direction; the bound itself only needs the lowest price.
        cheapest = self.fits & (price <= cost[:, None] + 1e-12 * np.abs(cost[:, None]))
        share = np.where(cheapest, self.pods_cap, 0.0)
        pods = share / np.maximum(share.sum(axis=1, keepdims=True), 1e-12) * wanted[:, None]
        value = float((lam * self.rhs).sum() + mu[self.fits].sum() + worth[chosen].sum() + self.constant)
        g_lam = self.rhs - (pods.T @ self.demand) / self.cap_scale
        g_mu = np.where(self.fits, 1.0 - pods / self.pods_scale, 0.0)
        return value, g_lam, g_mu


def _sum_by(index: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Σ values per index, where −inf stays −inf (bincount would turn it into nan with any +finite)."""
    out = np.zeros(size)
    finite = np.isfinite(values)
    out += np.bincount(index[finite], weights=values[finite], minlength=size)
    out[np.unique(index[~finite])] = -np.inf
    return out


def _objective_parts(ctx: ModelContext) -> tuple[dict[int, int], dict[int, int], int] | None:
    """(best scaled coefficient per pod of each task, per `placed` of each job, bound of the rest), or None
    when a term's coefficient varies by node without a ceiling for the nodes the model did not show."""
    if any(task.candidates.size and not row and t not in ctx.idle
           for t, (task, row) in enumerate(zip(ctx.problem.tasks, ctx.x, strict=True))):
        return None  # a task the model never showed: its terms' values are unknown
    x_task = {var.index: t for t, row in enumerate(ctx.x) for var in row}
    placed_job = {var.index: j for j, var in enumerate(ctx.placed)}
    restricted = ctx.restricted
    rest: dict[int, int] = {}
    per_job: dict[int, int] = {}
    per_pod: dict[int, int] = {}
    constant = 0
    for name, term in ctx.objective.terms.items():
        cap = ctx.objective.caps.get(name)
        if cap is not None:  # the term's own word for the whole problem, whatever this model's pairs
            constant += cap
        elif restricted and any(c > 0 and var.index not in x_task and var.index not in placed_job
                                for var, c in zip(term.variables, term.coefs, strict=True)):
            return None  # a reward on variables whose domains follow the trimmed pairs: nothing bounds it
    for name, term in ctx.objective.terms.items():
        capped = name in ctx.objective.caps
        seen: dict[int, list[int]] = {}
        ceiling: dict[int, int] = {}
        for var, c, top in zip(term.variables, term.coefs, term.ceilings, strict=True):
            t = x_task.get(var.index)
            if t is not None:
                seen.setdefault(t, []).append(c)
                if top is not None:
                    ceiling[t] = max(ceiling.get(t, top), top)
            elif var.index in placed_job:
                j = placed_job[var.index]
                per_job[j] = per_job.get(j, 0) + c
            elif not capped:
                rest[var.index] = rest.get(var.index, 0) + c
        for t, values in seen.items():
            best = max(values)
            if len(values) < ctx.problem.tasks[t].candidates.size:  # nodes the model did not give the task
                if t in ceiling:
                    best = max(best, ceiling[t])
                elif min(values) != best:
                    return None
            per_pod[t] = per_pod.get(t, 0) + best
    for index, c in rest.items():
        domain = ctx.model.proto.variables[index].domain
        constant += max(c * domain[0], c * domain[len(domain) - 1])  # CP-SAT's field reads no negative index
    return per_pod, per_job, constant


def _kinds(ctx: ModelContext) -> tuple[list[list[int]], list[int]]:
    """Tasks grouped by demand and candidate nodes: (tasks per kind, one task per kind)."""
    groups: dict[tuple[object, ...], int] = {}
    by_array: dict[int, bytes] = {}
    kind_of: list[list[int]] = []
    kinds: list[int] = []
    for t, task in enumerate(ctx.problem.tasks):
        if not task.candidates.size:
            continue
        ident = id(task.candidates)
        if ident not in by_array:  # a digest, not the bytes: thousands of node lists would not fit in memory
            by_array[ident] = hashlib.blake2b(task.candidates.tobytes(), digest_size=20).digest()
        key = (tuple(task.demand.tolist()), by_array[ident])
        k = groups.setdefault(key, len(kinds))
        if k == len(kinds):
            kinds.append(t)
            kind_of.append([])
        kind_of[k].append(t)
    return kind_of, kinds


def _capacity(ctx: ModelContext) -> np.ndarray:
    """Per node, the most any plan can use: free now, plus what preemptable jobs there would release,
    plus the whole GPUs a MIG re-layout could free."""
    problem = ctx.problem
    cap = problem.free.astype(np.int64).copy()
    for r in ctx.evicted:
        info = problem.running[r]
        cap[info.nodes] += info.use
    for n, (const, variables) in ctx.whole_after.items():
        cap[n, 0] = max(int(cap[n, 0]), const + len(variables))
    return cap
