"""Warm start with preemption: the greedy never preempts, so on a full cluster its plan is a poor hint.

This pass extends the greedy plan job by job, evicting on the node where a pod lands the victims
the rules of `policy.preemption` allow for that job (`Problem.eviction_rules`), in the model's order
of preference (lowest priority, then fewest, least work lost, newest: `eviction_costs`), as Kueue's
and KAI's victim searches do, but only as a starting point for the model: the rules of eviction live
in `placement.compile.preemption`, and the result is checked against the whole model with every
decision fixed before it is used as the hint.
"""

from __future__ import annotations

import time

import numpy as np
from ortools.sat.python import cp_model

from placement.baseline.topology import fill_gang
from placement.compile.context import ModelContext
from placement.compile.preemption import eviction_costs
from placement.compile.priority import class_weights, nominal_bonus, pod_value
from placement.holdings import held_after, pod_milli, running_use, use_of
from placement.rightsize import gang_minimums
from placement.solution import Placement
from placement.teams import MILLI

#: Share of the time limit the warm start may use.
WARM_SHARE = 0.15


def warm_start(ctx: ModelContext, base: Placement, budget_s: float
               ) -> tuple[Placement, dict[int, int], float] | None:
    """The greedy plan extended with preemptions, as (placement, every variable's value, objective).

    Every eviction is justified on the node where the new pod lands (higher priority, or reclaim
    by a team that stays within nominal), quotas hold, and a job goes in only if its value
    (priority, in-nominal GPUs) exceeds what its evictions cost. Rules of other modules (topology,
    reserve, ...) are not modelled here, so the result is checked against the whole model with
    every decision fixed. None when no running job may be preempted, when the extension does not
    beat `base`, or when the check fails: the caller keeps `base`.
    """
    if not ctx.victims or budget_s <= 0:
        return None
    start = time.perf_counter()
    floor = _score(ctx, ctx.assignment_of(base))
    # From the greedy plan, and from nothing (the greedy may have lent the cohort's idle nominal
    # to borrowers that only an eviction of new work, which is not allowed, could take back).
    tried = [_Warm(ctx, start_from).run(start + budget_s * k / 3) for k, start_from in ((1, base), (2, Placement()))]
    scored = sorted(((_score(ctx, _values(ctx, w)), i, w) for i, w in enumerate(tried) if w.evicted),
                    reverse=True)
    for score, _, warm in scored:
        if score <= floor + 1e-9:
            break
        solved = _complete(ctx, warm, max(0.05, budget_s - (time.perf_counter() - start)))
        if solved is not None:
            # The warm plan kept only counts and evictions: its MIG layouts and shared-GPU picks are the
            # completed solution's; every value then follows from the placement, as the hint rules give them.
            ctx.read_extras(solved, warm)
            values = ctx.assignment_of(warm)
            if _score(ctx, values) > floor + 1e-9:
                return warm, values, _score(ctx, values)
    return None


def _score(ctx: ModelContext, values: dict[int, int]) -> float:
    return sum(ctx.objective.values(lambda v: values[v.index]).values())


def _pinned(ctx: ModelContext, warm: Placement) -> dict[int, int]:
    """The decisions of a warm plan: every (task, node) count, placed job and eviction, read from the plan itself
    (the hint rules read a pod's device from the plan, which a warm plan has only once completed: a share pair
    with one shared GPU would read as no pod)."""
    pinned = {var.index: warm.counts.get((t, n), 0)
              for t, cand in enumerate(ctx.candidates) for var, n in zip(ctx.x[t], cand.tolist(), strict=True)}
    jobs = warm.placed_jobs(ctx.problem)
    pinned |= {var.index: int(j in jobs) for j, var in enumerate(ctx.placed)}
    pinned |= {var.index: int(r in warm.evicted) for r, var in ctx.evicted.items()}
    return pinned


def _values(ctx: ModelContext, warm: Placement) -> dict[int, int]:
    """Every variable's value for a warm plan not completed yet: its decisions, the rest as the hint rules give."""
    return ctx.assignment_of(warm) | _pinned(ctx, warm)


def _complete(ctx: ModelContext, warm: Placement, budget_s: float) -> dict[int, int] | None:
    """Fix every placement and eviction to the warm plan's and let CP-SAT fill in the rest (MIG layouts, shared-GPU
    picks, ...): the completed solution, or None if infeasible."""
    pinned = _pinned(ctx, warm)
    values = ctx.assignment_of(warm) | pinned
    model = ctx.model.clone()
    for index, value in pinned.items():
        domain = model.proto.variables[index].domain
        domain.clear()
        domain.extend([value] * 2)
    model.clear_hints()
    for index, value in values.items():
        model.add_hint(model.get_int_var_from_proto_index(index), value)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = budget_s
    if solver.solve(model) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return {i: int(solver.value(model.get_int_var_from_proto_index(i))) for i in range(len(model.proto.variables))}


class _Warm:
    def __init__(self, ctx: ModelContext, base: Placement) -> None:
        problem = ctx.problem
        self.ctx, self.problem = ctx, problem
        self.plan = Placement(counts=dict(base.counts), evicted=set(base.evicted))
        self.free = problem.free - base.usage(problem) + base.freed(problem)
        self.index = problem.teams
        # what each team holds per quota scope (`TeamIndex.all_scopes`: GPU scopes in milli-GPU first, then CPU
        # and memory), counted as the quota module counts it
        self.alloc = (np.array([held_after(problem, base, s.mask, s.resource) for s in self.index.all_scopes],
                               dtype=np.int64).reshape(len(self.index.all_scopes), self.index.size)
                      if self.index is not None and self.index.all_scopes else None)
        self.reclaimers: set[tuple[int, int]] = set()  # (team, scope) that reclaimed: must stay within nominal
        self.costs = eviction_costs(problem, ctx.victims)  # as the model weighs them: moves are not victims
        policy = problem.request.policy
        self.w_value = policy.weights.priority
        self.levels = class_weights(problem)
        self.on_node: dict[int, list[int]] = {}
        for r in ctx.victims:
            for n in problem.running[r].nodes.tolist():
                self.on_node.setdefault(n, []).append(r)
        self.slot = [dict(zip(c.tolist(), ub, strict=True)) for c, ub in zip(ctx.candidates, ctx.upper, strict=True)]

    def run(self, deadline: float) -> Placement:
        """Kueue's order: first jobs that keep their team within nominal, then the rest; priority, then age."""
        problem = self.problem
        order = sorted((j for j in range(len(problem.jobs)) if j not in problem.twins), key=self._order)
        for within in ((True, False) if self.alloc is not None else (False,)):
            done = self.plan.placed_jobs(problem)
            for j in order:
                if time.perf_counter() > deadline:
                    return self.plan
                if j not in done:
                    self._try(j, within)
        return self.plan

    def _order(self, j: int) -> tuple[int, float, str]:
        job = self.problem.jobs[j]
        return (-job.priority, job.submitted_at.timestamp() if job.submitted_at else 0.0, job.name)

    def _may_take(self, j: int, r: int) -> str | None:
        """The rule under which j may evict running job r, the least conditional first, else None: `within_team`,
        `borrow_within_cohort` (no condition on j's team), `reclaim_within_cohort` (j's team ends within nominal)."""
        rules = self.problem.eviction_rules(j, r)
        return next((rule for rule in ("within_team", "borrow_within_cohort", "reclaim_within_cohort")
                     if rule in rules), None)

    def _try(self, j: int, within: bool) -> None:
        problem = self.problem
        free = self.free.copy()
        counts: dict[tuple[int, int], int] = {}
        victims: dict[int, str] = {}
        # a task and its right-size alternative share the declared task's pods (placement.rightsize)
        share = {t: members for members, _ in gang_minimums(problem, j) for t in members}
        done = dict.fromkeys(problem.job_tasks[j], 0)

        def place(t: int, most: int) -> int:
            members = share[t]
            most = min(most, problem.tasks[members[0]].replicas - sum(done[u] for u in members))
            got = 0
            while got < most:
                n = self._pod(j, t, free, counts, victims)
                if n is None:
                    break
                counts[t, n] = counts.get((t, n), 0) + 1
                free[n] -= problem.tasks[t].demand
                got += 1
            done[t] += got
            return got

        # the greedy's gang rule: each task's minimum first (a task with its right-size alternative), then the
        # extra pods; 0 when a minimum or the job's `needed` is short
        if not fill_gang(problem, j, place):
            return
        after = self._quota_after(j, counts, victims)
        if after is None:
            return
        alloc, reclaims = after
        team = problem.job_team[j]
        if within and (alloc is None or team < 0 or any(
                alloc[s, team] > scope.nominal[team] for s, scope in enumerate(self.index.scopes))):
            return  # borrowing GPUs waits for the second pass
        if self._value(j, counts, alloc) - sum(self.costs[r] for r in victims) <= 0:
            return
        self.free = free
        self.plan.evicted |= set(victims)
        for (t, n), k in counts.items():
            self.plan.add(t, n, k)
        self.alloc = alloc
        self.reclaimers |= reclaims

    def _pod(self, j: int, t: int, free: np.ndarray, counts: dict[tuple[int, int], int],
             victims: dict[int, str]) -> int | None:
        """A node for one pod: best fit in free room, else the node whose justified victims cost least."""
        problem = self.problem
        demand = problem.tasks[t].demand
        slots = self.slot[t]
        nodes = [n for n, ub in slots.items() if counts.get((t, n), 0) < ub]
        if not nodes:
            return None
        arr = np.array(nodes)
        fits = np.all(free[arr] >= demand, axis=1)
        if fits.any():
            cand = arr[fits]
            left = free[cand, 0] - demand[0]
            return int(cand[np.lexsort((cand, left))[0]])
        best: tuple[float, int, list[tuple[int, str]]] | None = None
        for n in nodes:
            options = [(r, why) for r in self.on_node.get(n, ())
                       if r not in victims and r not in self.plan.evicted
                       and (why := self._may_take(j, r)) is not None]
            if not options:
                continue
            options.sort(key=lambda o: (self.costs[o[0]], problem.running[o[0]].order()))
            room = free[n].copy()
            chosen: list[tuple[int, str]] = []
            for r, why in options:
                chosen.append((r, why))
                info = problem.running[r]
                room += info.use[info.nodes.tolist().index(n)]
                if np.all(room >= demand):
                    chosen = self._fewest(n, free[n], demand, chosen)
                    cost = sum(self.costs[c] for c, _ in chosen)
                    if best is None or cost < best[0]:
                        best = (cost, n, list(chosen))
                    break
        if best is None:
            return None
        for r, why in best[2]:
            victims[r] = why
            info = problem.running[r]
            free[info.nodes] += info.use
        return best[1]

    def _fewest(self, n: int, free: np.ndarray, demand: np.ndarray, chosen: list[tuple[int, str]]
                ) -> list[tuple[int, str]]:
        """`chosen` (cheapest first, room for the pod on node n) without the victims the pod does not need,
        dearest dropped first, as Kueue's minimal victim set."""
        kept = list(chosen)
        for victim in sorted(chosen, key=lambda o: -self.costs[o[0]]):
            trial = [o for o in kept if o != victim]
            room = free.copy()
            for r, _ in trial:
                info = self.problem.running[r]
                room += info.use[info.nodes.tolist().index(n)]
            if np.all(room >= demand):
                kept = trial
        return kept

    def _quota_after(self, j: int, counts: dict[tuple[int, int], int], victims: dict[int, str]
                     ) -> tuple[np.ndarray | None, set[tuple[int, int]]] | None:
        """Quota arrays after the job and its evictions, and the (team, scope)s it reclaims in; None: a rule breaks."""
        if self.alloc is None:
            return (None, set()) if all(why == "within_team" for why in victims.values()) else None
        problem, index = self.problem, self.index
        team = problem.job_team[j]
        alloc = self.alloc.copy()
        for r in victims:
            info = problem.running[r]
            if info.team >= 0:
                lost = np.zeros((problem.n_nodes, 3), dtype=np.int64)
                lost[info.nodes] = running_use(problem, r)  # milli-GPU (MIG instances, shares), milli-CPU, MiB
                alloc[:, info.team] -= index.scope_use(lost)
        if team >= 0:
            alloc[:, team] += index.scope_use(use_of(problem, counts))
            for s, scope in enumerate(index.all_scopes):
                if alloc[s, team] > scope.cap[team] or scope.overdrawn(alloc[s]) is not None:
                    return None
                if (team, s) in self.reclaimers and alloc[s, team] > scope.nominal[team]:
                    return None
        reclaims: set[tuple[int, int]] = set()
        landed = {n for (_, n), k in counts.items() if k}
        for r, why in victims.items():
            if why == "within_team":
                continue
            info = problem.running[r]
            # the victim's team borrows where the job lands on its nodes; a reclaimer ends within nominal there
            ok = [s for s, scope in enumerate(index.scopes)
                  if scope.before[info.team] > scope.nominal[info.team]
                  and (why == "borrow_within_cohort" or alloc[s, team] <= scope.nominal[team])
                  and any(scope.mask[n] and n in landed for n in info.nodes.tolist())]
            if not ok:
                return None
            if why == "reclaim_within_cohort":
                reclaims.add((team, ok[0]))
        return alloc, reclaims

    def _value(self, j: int, counts: dict[tuple[int, int], int], alloc: np.ndarray | None) -> float:
        """Roughly what the objective gains, in its units: the pods' priority value (compile/priority.py) and, when
        the job keeps its team within nominal in every GPU scope, its class's `nominal_bonus` per GPU placed (the
        `quota` term of compile/nominal.py)."""
        problem = self.problem
        level = problem.jobs[j].priority
        value = sum(self.levels[level] * pod_value(problem.gpu_value(t)) * k
                    for (t, _), k in counts.items()) * self.w_value
        team = problem.job_team[j] if problem.job_team else -1
        if self.alloc is not None and alloc is not None and self.index.scopes and team >= 0:
            gpu = len(self.index.scopes)  # GPU scopes come first in all_scopes
            nominal = np.array([s.nominal[team] for s in self.index.scopes], dtype=np.int64)
            added = alloc[:gpu, team] - self.alloc[:gpu, team]
            if ((added <= 0) | (alloc[:gpu, team] <= nominal)).all():
                milli = sum(pod_milli(problem, t, n) * k for (t, n), k in counts.items())
                value += nominal_bonus(problem).get(level, 0.0) * self.w_value * milli / MILLI
        return value
