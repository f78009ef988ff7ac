"""Quota (hard): no team holds more than nominal + borrowing limit, and borrowing comes only from idle nominal.

Per quota scope s and team T (placement/teams.py states the rules), with A_T what the team holds
after the plan on the scope's nodes (running jobs kept + pods placed), in the scope's integer unit:
milli-GPU for GPU scopes (a pod of task t on node n counts its GPU-equivalents there: whole GPUs,
its share, or its MIG instance's fraction of that node's GPU), milli-CPU and MiB for CPU and
memory scopes:

    A_T ≤ cap_T                                    one row per team that could exceed its cap
    over_T ≥ A_T − guaranteed_T,  over_T ≥ 0       one integer per team that could borrow
    Σ_T over_T ≤ pool                              the cohort's lendable nominal

`over_T` is one-sided (it only appears in a ≤ row), so no equality is needed. A team below its
nominal gets its GPUs back from borrowers through the cohort row: once the pool is exhausted a
new placement there needs a borrower's running job to be preempted (compile/preemption.py decides
whether that is allowed).

Term `quota` (soft, Kueue's admission order): a GPU-equivalent a team's newly placed pod holds within
its nominal quota adds the `nominal_bonus` of the pod's priority level (compile/priority.py) ×
weights.priority. Strict classes rank in tiers: within nominal by class, then all placed work by
class, so a team's demand within its nominal is served before another team borrows, whatever their
priorities, and within the nominal a higher class goes first (a bigger low-priority job of the team
does not take the room of a smaller high-priority one). Idle nominal is lent only when its owner
cannot use it in this plan, and the next cycle need not reclaim what this one lent (Kueue users
report unnecessary or looping preemptions under fair sharing). Per GPU scope, team T and level k:

    QUANTUM·inside_{T,k} ≤ placed_{T,k},   Σ_k QUANTUM·inside_{T,k} ≤ nominal_T − kept running_T

on GPU scopes only, with `inside` counted in quanta (`quantum`): objective coefficients are
integers at `SCALE` per GPU-equivalent, too coarse per milli-GPU. The quantum is the largest that
divides every pod's milli-GPU and a GPU (1000 when every pod takes whole GPUs, 125 with 1g MIG
pods on 8-slice GPUs), and at least `QUANTUM` (1/40 GPU: shares such as 1/3 count in its steps).
"""

from __future__ import annotations

import math

import numpy as np
from ortools.sat.python import cp_model

from placement.compile.context import ModelContext
from placement.compile.priority import nominal_bonus
from placement.holdings import held_in, running_use, task_milli
from placement.problem import Problem
from placement.solution import Placement
from placement.teams import MILLI, UNLIMITED

#: Smallest milli-GPU per unit of the soft terms' variables (in-nominal GPUs here, fair-share segments in
#: fairness): see `quantum`.
QUANTUM = 25

Held = list[tuple[list[cp_model.IntVar], list[int], int]]


Parts = list[tuple[tuple[list[cp_model.IntVar], list[int], int], dict[int, tuple[list[cp_model.IntVar], list[int]]]]]


def team_use(ctx: ModelContext, mask: np.ndarray, resource: int = 0) -> Held:
    """Per team, A_T on `mask` nodes as (variables, coefficients, constant): placed pods, minus preempted
    running work; milli-GPU (resource 0, GPU-equivalents), milli-CPU (1) or MiB (2)."""
    return merged(team_parts(ctx, mask, resource))


def merged(parts: Parts) -> Held:
    """`team_parts` as `team_use` counts them: running and placed work in one sum per team."""
    out: Held = []
    for (variables, coefs, const), placed in parts:
        for level_vars, level_coefs in placed.values():
            variables = variables + level_vars
            coefs = coefs + level_coefs
        out.append((variables, coefs, const))
    return out


def team_parts(ctx: ModelContext, mask: np.ndarray, resource: int = 0) -> Parts:
    """Per team, on `mask` nodes: (its kept running work as (preemption variables, −use, use), and its placed
    pods per priority level as (variables, use)), in the unit of `team_use`."""
    problem = ctx.problem
    assert problem.teams is not None
    out: Parts = [(([], [], 0), {}) for _ in range(problem.teams.size)]
    for r in problem.running:
        if r.team < 0:
            continue
        here = int((running_use(problem, r.index)[:, resource] * mask[r.nodes]).sum())
        (variables, coefs, const), placed = out[r.team]
        if r.index in ctx.evicted and here:
            variables.append(ctx.evicted[r.index])
            coefs.append(-here)
        out[r.team] = ((variables, coefs, const + here), placed)
    for t, cand in enumerate(ctx.candidates):
        task = problem.tasks[t]
        team = problem.job_team[task.job]
        if team < 0 or not len(cand):
            continue
        each = task_milli(problem, t, cand) if resource == 0 else np.full(len(cand), int(task.demand[resource]))
        level_vars, level_coefs = out[team][1].setdefault(problem.jobs[task.job].priority, ([], []))
        for var, n, c in zip(ctx.x[t], cand.tolist(), each.tolist(), strict=True):
            if c and mask[n]:
                level_vars.append(var)
                level_coefs.append(int(c))
    return out


def quantum(problem: Problem) -> int:
    """Milli-GPU per unit of the soft terms' variables: gcd of a GPU and every pod's milli-GPU, at least QUANTUM."""
    cached = problem.extras.get("quota_quantum")
    if cached is None:
        step = MILLI
        for t in range(len(problem.tasks)):
            for value in np.unique(task_milli(problem, t, problem.tasks[t].candidates)).tolist():
                step = math.gcd(step, int(value))
        for r in problem.running:
            for value in running_use(problem, r.index)[:, 0].tolist():
                step = math.gcd(step, int(value))
        cached = problem.extras["quota_quantum"] = max(step, QUANTUM)
    return int(cached)  # type: ignore[call-overload]


def team_gpus(ctx: ModelContext, mask: np.ndarray) -> Held:
    """Per team, its milli-GPU on `mask` nodes (`team_use` of GPUs): the unit of GPU scopes.

    Shared with the preemption module (reclaim needs "the reclaiming team ends within nominal").
    """
    return team_use(ctx, mask, 0)


def bounds(var: cp_model.IntVar) -> tuple[int, int]:
    """(lowest, highest) value of a variable (the proto's repeated field does not index from the end)."""
    domain = list(var.proto.domain)
    return int(domain[0]), int(domain[-1])


def most(variables: list[cp_model.IntVar], coefs: list[int], const: int) -> int:
    """Largest value Σ coef·var + const can take (variables at their bounds)."""
    return const + sum(c * bounds(v)[1 if c > 0 else 0] for v, c in zip(variables, coefs, strict=True))


def apply(ctx: ModelContext) -> None:
    index = ctx.problem.teams
    if index is None or not index.all_scopes:
        return
    over_vars: dict[tuple[int, int], cp_model.IntVar] = {}
    gpu_parts: list[Parts] = []  # per GPU scope, for the within-nominal term
    for s, scope in enumerate(index.all_scopes):
        guaranteed = scope.guaranteed
        borrowers: list[cp_model.IntVar] = []
        fixed_borrowed = 0
        parts = team_parts(ctx, scope.mask, scope.resource)
        if scope.resource == 0:
            gpu_parts.append(parts)
        for team, (variables, coefs, const) in enumerate(merged(parts)):
            top = most(variables, coefs, const)
            cap = int(scope.cap[team])
            if cap < UNLIMITED and top > cap:
                ctx.model.add(cp_model.LinearExpr.weighted_sum(variables, coefs) + const <= cap)
                top = cap
            if not variables:
                fixed_borrowed += max(0, const - int(guaranteed[team]))  # running work nobody may preempt
                continue
            if top <= guaranteed[team]:
                continue  # can never draw on the cohort
            over = ctx.model.new_int_var(0, top - int(guaranteed[team]), f"borrowed[{s},{team}]")
            ctx.model.add(over >= cp_model.LinearExpr.weighted_sum(variables, coefs) + const - int(guaranteed[team]))
            borrowers.append(over)
            over_vars[s, team] = over
        if borrowers:
            most_borrowed = sum(bounds(v)[1] for v in borrowers) + fixed_borrowed
            if most_borrowed > scope.pool:
                ctx.model.add(cp_model.LinearExpr.sum(borrowers) <= scope.pool - fixed_borrowed)
    inside_vars = _within_nominal(ctx, gpu_parts)

    def hint(ctx: ModelContext, placement: Placement, values: dict[int, int]) -> None:
        for s, scope in enumerate(index.all_scopes):
            if not any((s, team) in over_vars for team in range(index.size)):
                continue
            alloc = held_in(ctx.problem, placement, scope)
            for team in range(index.size):
                if (s, team) in over_vars:
                    values[over_vars[s, team].index] = max(0, int(alloc[team] - scope.guaranteed[team]))
        if inside_vars:
            for (s, team, level), value in credit(ctx.problem, placement).items():
                var = inside_vars.get((s, team, level))
                if var is not None:
                    values[var.index] = min(value, bounds(var)[1])
            for var in inside_vars.values():
                values.setdefault(var.index, 0)

    ctx.on_hint(hint)


def _within_nominal(ctx: ModelContext, gpu_parts: list[Parts]) -> dict[tuple[int, int, int], cp_model.IntVar]:
    """The `quota` term: per GPU scope, team and priority level, the quanta its newly placed pods hold within
    the nominal its kept running work leaves, each worth the level's `nominal_bonus`:

        QUANTUM·inside_{T,k} ≤ placed_{T,k},   Σ_k QUANTUM·inside_{T,k} ≤ nominal_T − running_T (kept)

    The model gives the room to the highest levels first, as Kueue admits non-borrowing workloads by priority."""
    problem = ctx.problem
    index = problem.teams
    assert index is not None
    bonus = nominal_bonus(problem)
    weight = problem.request.policy.weights.priority
    step = quantum(problem)
    most_bonus = _most_bonus(problem, bonus)
    out: dict[tuple[int, int, int], cp_model.IntVar] = {}
    if not weight:
        return out
    for s, (scope, parts) in enumerate(zip(index.scopes, gpu_parts, strict=True)):  # GPU scopes lead all_scopes
        for team, ((run_vars, run_coefs, running), placed) in enumerate(parts):
            nominal = int(scope.nominal[team])
            if nominal < step or team not in most_bonus:
                continue
            ctx.objective.cap("quota", most_bonus[team] * weight * step / MILLI * (nominal // step))
            room_top = nominal - running + sum(-c for c in run_coefs)  # every preemptible victim evicted
            if room_top < step:
                continue
            chosen: list[cp_model.IntVar] = []
            for level, (variables, coefs) in sorted(placed.items(), reverse=True):
                if not variables or bonus.get(level, 0.0) <= 0:
                    continue
                ub = min(room_top, most(variables, coefs, 0)) // step
                if ub <= 0:
                    continue
                inside = ctx.model.new_int_var(0, ub, f"in_nominal[{s},{team},{level}]")
                ctx.model.add(step * inside <= cp_model.LinearExpr.weighted_sum(variables, coefs))
                ctx.objective.add("quota", [inside], [bonus[level] * weight * step / MILLI])
                ctx.in_nominal.setdefault(level, []).append(inside)
                out[s, team, level] = inside
                chosen.append(inside)
            if chosen and sum(bounds(v)[1] for v in chosen) * step > nominal - running:
                # room the kept running work leaves: evicting a victim gives its GPUs back to the team's nominal
                freed = [-c for c in run_coefs]
                ctx.model.add(step * cp_model.LinearExpr.sum(chosen)
                              <= cp_model.LinearExpr.weighted_sum(run_vars, freed) + nominal - running)
    ctx.in_nominal_step = step
    return out


def _most_bonus(problem: Problem, bonus: dict[int, float]) -> dict[int, float]:
    """Per team, the largest `nominal_bonus` among the levels of its pending jobs that take GPUs (capped class
    weights need not grow with the level): what one of its GPUs within nominal can add, at most."""
    most: dict[int, float] = {}
    for t, task in enumerate(problem.tasks):
        team = problem.job_team[task.job]
        if team >= 0 and problem.gpu_value(t) > 0:
            value = max(bonus.get(problem.jobs[task.job].priority, 0.0), 0.0)
            most[team] = max(most.get(team, value), value)
    return most


def credit(problem: Problem, placement: Placement) -> dict[tuple[int, int, int], int]:
    """What the `quota` term counts for a placement: per (GPU scope, team, level) the quanta within nominal,
    the room its kept running work leaves given to the highest levels first (the model's best for these pods)."""
    index = problem.teams
    out: dict[tuple[int, int, int], int] = {}
    if index is None or not index.scopes:
        return out
    step = quantum(problem)
    by_task: dict[int, tuple[list[int], list[int]]] = {}
    for (t, n), k in placement.counts.items():
        if k:
            nodes, counts = by_task.setdefault(t, ([], []))
            nodes.append(n)
            counts.append(k)
    for s, scope in enumerate(index.scopes):
        placed = np.zeros(index.size, dtype=np.int64)
        per_level: dict[tuple[int, int], int] = {}
        for t, (nodes, counts) in by_task.items():
            team = problem.job_team[problem.tasks[t].job]
            if team < 0:
                continue
            here = np.asarray(nodes, dtype=np.int64)
            use = int((task_milli(problem, t, here) * np.asarray(counts) * scope.mask[here]).sum())
            if use:
                key = (team, problem.jobs[problem.tasks[t].job].priority)
                per_level[key] = per_level.get(key, 0) + use
                placed[team] += use
        room = held_in(problem, placement, scope) - placed  # kept running work
        room = scope.nominal - room
        for (team, level), use in sorted(per_level.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
            quanta = max(0, min(use, int(room[team])) // step)
            if quanta:
                out[s, team, level] = quanta
                room[team] -= quanta * step
    return out
