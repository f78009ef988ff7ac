"""Within nominal (soft, Kueue's admission order): a workload that fits its team's nominal quota ranks
above every workload that must borrow, and among either the higher class goes first.

Kueue admits, in a cohort, the workloads that keep their ClusterQueue within its nominal quota before
those that borrow, then by priority. Per job j of a team with a nominal GPU quota, `within_j` says
the plan counts it as such a workload; the term `quota` values it at the `nominal_bonus` of its class
(compile/priority.py) per GPU-equivalent it places:

    within_j ≤ placed_j
    Σ_{j of T} c_{j,s} ≤ max(0, nominal_{T,s} − running_{T,s}) + evicted running_{T,s}   per GPU scope s
    c_{j,s} = U_{j,s} when within_j, else 0                       (U: the job's milli-GPU on s's nodes)

so the workloads a team counts within nominal fit it together, whole: a gang that would take its team
past its nominal borrows, and earns nothing here, however high its class. Which of them count is Kueue's
admission order, not the best set: per team and scope, its jobs highest class first, then in the request's
order, a prefix of what the counted ones take (`_admission_order`), and a placed job that fits what the
jobs before it leave, in every scope it touches, counts:

    prefix_k = prefix_{k−1} + c_k        prefix_{k−1} + U_k − room ≥ 1 − M·fits_k
    within_k ≥ placed_k + Σ_s fits_{k,s} − |S_k|

Strict tiers (within nominal by class, then all placed work by class) come from the bonuses' sizes. A
rigid job whose pods take the same GPUs on every node earns bonus × its GPUs × within_j; an elastic or
MIG job earns on `credit_j` (quanta of milli-GPU, `quantum`), at most its placed GPUs and nothing unless
within_j.
"""

from __future__ import annotations

import numpy as np
from ortools.sat.python import cp_model

from placement.compile.context import SCALE, ModelContext
from placement.compile.priority import nominal_bonus, with_nominal
from placement.compile.quota import bounds, quantum
from placement.compile.terms import QUOTA
from placement.holdings import held_in, pod_milli, running_use, task_milli
from placement.problem import Problem
from placement.rightsize import pairs
from placement.solution import Placement
from placement.teams import MILLI


def apply(ctx: ModelContext) -> None:
    problem = ctx.problem
    index = problem.teams
    weight = problem.request.policy.weights.priority
    if index is None or not index.scopes or not weight:
        return
    bonus = nominal_bonus(problem)
    candidates = _candidates(problem, bonus)
    if not candidates:
        return
    step = quantum(problem)
    uses = {j: _use(ctx, j) for j in candidates}  # each job's (variable, node, milli-GPU), read per scope
    by_team: dict[int, list[int]] = {}
    for j in candidates:
        by_team.setdefault(problem.job_team[j], []).append(j)
    within: dict[int, cp_model.IntVar] = {}
    credit: dict[int, cp_model.IntVar] = {}
    asked: dict[int, int] = {}
    for j, fixed in candidates.items():
        level = problem.jobs[j].priority
        flag = ctx.model.new_bool_var(f"within_nominal[{j}]")
        ctx.model.add_implication(flag, ctx.placed[j])
        within[j] = flag
        value = bonus[level] * weight / MILLI
        if fixed is not None:  # rigid, the same GPUs on every node: placed whole or not at all
            ctx.objective.add(QUOTA, [flag], [value * fixed])
            ctx.in_nominal.setdefault(level, []).append((flag, fixed))
            top = fixed
        else:
            variables, coefs = _on(uses[j], None)
            top = sum(c * bounds(v)[1] for v, c in zip(variables, coefs, strict=True))
            units = ctx.model.new_int_var(0, top // step, f"within_credit[{j}]")
            ctx.model.add(step * units <= cp_model.LinearExpr.weighted_sum(variables, coefs))
            ctx.model.add(units <= (top // step) * flag)
            ctx.objective.add(QUOTA, [units], [value * step])
            ctx.in_nominal.setdefault(level, []).append((units, step))
            credit[j] = units
        team = problem.job_team[j]
        asked[team] = asked.get(team, 0) + top
    for team, most in asked.items():  # what the term can add for the whole request, trimmed model or not
        top_bonus = max(bonus[problem.jobs[j].priority] for j in by_team[team])
        ctx.objective.cap(QUOTA, top_bonus * weight * most / MILLI)
    shares: list[tuple[int, int, int, cp_model.IntVar]] = []  # (scope, team, job, c)
    fits: dict[int, list[cp_model.IntVar]] = {}  # job -> per scope it may touch: it fits there in admission order
    # (steps of one team's admission order on one scope, the room's constant, its eviction variables, what each frees)
    orders: list[tuple[list[tuple[int, cp_model.IntVar, cp_model.IntVar, int]], int, list[cp_model.IntVar],
                       list[int]]] = []
    for s, scope in enumerate(index.scopes):
        running = _running(ctx, scope.mask)
        for team in asked:
            jobs = by_team[team]
            terms: list[cp_model.IntVar] = []
            weights: list[int] = []
            taken: dict[int, cp_model.LinearExprT] = {}  # job -> what it takes of the room when counted
            for j in jobs:
                variables, coefs = _on(uses[j], scope.mask)
                if not variables:
                    continue
                if candidates[j] is not None and _inside(ctx, j, scope.mask):
                    terms.append(within[j])  # rigid and only on this scope's nodes: its whole GPUs, a knapsack row
                    weights.append(int(candidates[j] or 0))
                    taken[j] = int(candidates[j] or 0) * within[j]
                    continue
                most = sum(c * bounds(v)[1] for v, c in zip(variables, coefs, strict=True))
                share = ctx.model.new_int_var(0, most, f"within_share[{s},{j}]")
                # exactly what it takes here when counted, nothing when not: the admission order's prefixes read it
                ctx.model.add(share == cp_model.LinearExpr.weighted_sum(variables, coefs)).only_enforce_if(within[j])
                ctx.model.add(share == 0).only_enforce_if(~within[j])
                terms.append(share)
                weights.append(1)
                shares.append((s, team, j, share))
                taken[j] = share
            if not terms:
                continue
            run_vars, run_coefs, held = running[team]
            freed = [-c for c in run_coefs]  # an evicted victim gives its GPUs back to the team's nominal
            # a team whose kept running work already passes its nominal here counts nothing on these nodes
            # unless evictions free room: max(0, nominal − held) keeps the row satisfiable with nothing
            # counted (exact without evictions, a little generous when the team evicts its own work)
            room = max(0, int(scope.nominal[team]) - held)
            ctx.model.add(cp_model.LinearExpr.weighted_sum(terms, weights)
                          <= cp_model.LinearExpr.weighted_sum(run_vars, freed) + room)
            steps = _admission_order(ctx, s, taken, uses, scope.mask, fits,
                                     cp_model.LinearExpr.weighted_sum(run_vars, freed) + room, room + sum(freed))
            orders.append((steps, room, run_vars, freed))
    for j, flags in fits.items():  # placed and fitting in every scope it touches, in order: counted
        ctx.model.add(within[j] >= ctx.placed[j] + cp_model.LinearExpr.sum(flags) - len(flags))

    def hint(ctx: ModelContext, placement: Placement, values: dict[int, int]) -> None:
        chosen = counted(ctx.problem, placement, set(within))
        for j, flag in within.items():
            values[flag.index] = int(j in chosen)
            if j in credit:
                values[credit[j].index] = min(chosen.get(j, 0) // step, bounds(credit[j])[1])
        per_scope = scope_use(ctx.problem, placement)
        for s, _team, j, share in shares:
            values[share.index] = int(per_scope.get(j, {}).get(s, 0)) if j in chosen else 0
        for steps, room, run_vars, freed in orders:
            left = room + sum(f * values.get(v.index, 0) for v, f in zip(run_vars, freed, strict=True))
            before = 0
            for j, flag, prefix, s in steps:
                use = int(per_scope.get(j, {}).get(s, 0))
                values[flag.index] = int(before + use <= left)
                before += use if j in chosen else 0
                values[prefix.index] = before

    ctx.on_hint(hint)


def _admission_order(ctx: ModelContext, s: int, taken: dict[int, cp_model.LinearExprT],
                     uses: dict[int, list[tuple[cp_model.IntVar, int, int]]], mask: np.ndarray,
                     fits: dict[int, list[cp_model.IntVar]], room: cp_model.LinearExprT,
                     most: int) -> list[tuple[int, cp_model.IntVar, cp_model.IntVar, int]]:
    """Kueue's admission order on one team's jobs in scope s: highest class first, then the request's order, a
    job counts within nominal when it fits the room the jobs counted before it leave. The knapsack rows say what
    counts fits together; these rows say a placed job that fits in order counts: `fits[j]` gets one flag per scope,
    0 only where the counted jobs before it (`prefix`) and its own use pass the room (`room`, at most `most`).
    Returns (job, flag, prefix after it, scope) per step, for the hint."""
    problem = ctx.problem
    steps: list[tuple[int, cp_model.IntVar, cp_model.IntVar, int]] = []
    before: cp_model.LinearExprT = 0
    top = 0
    for j in sorted(taken, key=lambda j: (-problem.jobs[j].priority, j)):
        variables, coefs = _on(uses[j], mask)
        flag = ctx.model.new_bool_var(f"fits_nominal[{s},{j}]")
        ctx.model.add(before + cp_model.LinearExpr.weighted_sum(variables, coefs) - room >= 1 - (most + 1) * flag)
        fits.setdefault(j, []).append(flag)
        top += sum(c * bounds(v)[1] for v, c in zip(variables, coefs, strict=True))
        prefix = ctx.model.new_int_var(0, top, f"nominal_prefix[{s},{j}]")
        ctx.model.add(prefix == before + taken[j])
        steps.append((j, flag, prefix, s))
        before = prefix
    return steps


def _candidates(problem: Problem, bonus: dict[int, float]) -> dict[int, int | None]:
    """Jobs that may count within nominal (a team with a nominal GPU quota somewhere, GPU pods, a bonus), each
    with its milli-GPU when that is fixed (rigid, same on every node), else None."""
    index = problem.teams
    assert index is not None
    holds = with_nominal(problem)
    offered = {problem.tasks[p.alternative].job for p in pairs(problem)}  # pods split between two tasks
    out: dict[int, int | None] = {}
    for j, job in enumerate(problem.jobs):
        team = problem.job_team[j]
        if team < 0 or not holds[team] or bonus.get(job.priority, 0.0) <= 0:
            continue
        total, fixed = 0, not job.elastic and j not in offered
        for t in problem.job_tasks[j]:
            each = np.unique(task_milli(problem, t, problem.tasks[t].candidates))
            if each.size > 1:
                fixed = False
            total += int(each.max(initial=0)) * problem.tasks[t].replicas
        if total > 0:
            out[j] = total if fixed else None
    return out


def _inside(ctx: ModelContext, j: int, mask: np.ndarray) -> bool:
    """Are all of job j's candidate nodes in the model on `mask`?"""
    return all(bool(mask[ctx.candidates[t]].all()) for t in ctx.problem.job_tasks[j])


def _use(ctx: ModelContext, j: int) -> list[tuple[cp_model.IntVar, int, int]]:
    """Job j's pod counts in the model as (variable, node, milli-GPU a pod takes there), GPU pods only."""
    out: list[tuple[cp_model.IntVar, int, int]] = []
    for t in ctx.problem.job_tasks[j]:
        cand = ctx.candidates[t]
        if not len(cand):
            continue
        for var, n, c in zip(ctx.x[t], cand.tolist(), task_milli(ctx.problem, t, cand).tolist(), strict=True):
            if c:
                out.append((var, n, int(c)))
    return out


def _on(use: list[tuple[cp_model.IntVar, int, int]], mask: np.ndarray | None) -> tuple[list[cp_model.IntVar],
                                                                                      list[int]]:
    """A job's use (`_use`) on `mask` nodes (all when None), as (variables, coefficients)."""
    kept = [(var, c) for var, n, c in use if mask is None or mask[n]]
    return [var for var, _ in kept], [c for _, c in kept]


def _running(ctx: ModelContext, mask: np.ndarray) -> dict[int, tuple[list[cp_model.IntVar], list[int], int]]:
    """Per team, its running work's milli-GPU on `mask` nodes as (eviction variables, −use, use)."""
    out: dict[int, tuple[list[cp_model.IntVar], list[int], int]] = {}
    for r in ctx.problem.running:
        if r.team < 0:
            continue
        here = int((running_use(ctx.problem, r.index)[:, 0] * mask[r.nodes]).sum())
        variables, coefs, held = out.get(r.team, ([], [], 0))
        if r.index in ctx.evicted and here:
            variables.append(ctx.evicted[r.index])
            coefs.append(-here)
        out[r.team] = (variables, coefs, held + here)
    return {team: out.get(team, ([], [], 0)) for team in range(ctx.problem.teams.size)}  # type: ignore[union-attr]


def scope_use(problem: Problem, placement: Placement) -> dict[int, dict[int, int]]:
    """Per placed job, its milli-GPU in each GPU scope it touches (scope index -> milli-GPU)."""
    index = problem.teams
    assert index is not None
    out: dict[int, dict[int, int]] = {}
    for (t, n), k in placement.counts.items():
        if not k:
            continue
        milli = pod_milli(problem, t, n) * k
        per = out.setdefault(problem.tasks[t].job, {})
        for s, scope in enumerate(index.scopes):
            if scope.mask[n]:
                per[s] = per.get(s, 0) + milli
    return out


def counted(problem: Problem, placement: Placement, jobs: set[int]) -> dict[int, int]:
    """The placed jobs among `jobs` a plan counts within their teams' nominal, with their milli-GPU: per team,
    highest class first (then the greedy's order), each taken while the team stays within its nominal in every
    GPU scope after its kept running work, as Kueue admits non-borrowing workloads."""
    index = problem.teams
    assert index is not None
    per_scope = scope_use(problem, placement)
    total: dict[int, int] = {}
    for (t, n), k in placement.counts.items():
        j = problem.tasks[t].job
        if k and j in jobs:
            total[j] = total.get(j, 0) + pod_milli(problem, t, n) * k
    room = np.zeros((len(index.scopes), index.size), dtype=np.int64)
    for s, scope in enumerate(index.scopes):
        placed = np.zeros(index.size, dtype=np.int64)
        for j, use in per_scope.items():
            if problem.job_team[j] >= 0:
                placed[problem.job_team[j]] += use.get(s, 0)
        room[s] = scope.nominal - (held_in(problem, placement, scope) - placed)  # nominal less kept running work
    chosen: dict[int, int] = {}
    for j in sorted(total, key=lambda j: (-problem.jobs[j].priority, j)):
        team = problem.job_team[j]
        use = per_scope.get(j, {})
        # a scope where the job takes no GPU (its CPU-only launcher on such a node) asks nothing of its room
        if all(room[s, team] >= milli for s, milli in use.items() if milli > 0):
            for s, milli in use.items():
                room[s, team] -= milli
            chosen[j] = total[j]
    return chosen


def value(problem: Problem, placement: Placement) -> float:
    """The `quota` term of a placement, as the model scores it: the jobs `counted` in admission order, each at its
    class's bonus (weight applied) per milli-GPU, a rigid job's whole, an elastic job's in quanta. A job swapped
    for an interchangeable one (compile/dominance.py) may change places in that order, so its value is read again."""
    index, weight = problem.teams, problem.request.policy.weights.priority
    if index is None or not index.scopes or not weight:
        return 0.0
    bonus = nominal_bonus(problem)
    found = _candidates(problem, bonus)
    step = quantum(problem)
    total = 0
    for j, milli in counted(problem, placement, set(found)).items():
        each = bonus[problem.jobs[j].priority] * weight / MILLI
        fixed = found[j]
        total += round(each * fixed * SCALE) if fixed is not None else round(each * step * SCALE) * (milli // step)
    return total / SCALE
