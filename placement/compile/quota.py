"""Quota (hard): no team holds more than nominal + borrowing limit, and borrowing comes only from idle nominal.

Per quota scope s and team T (placement/teams.py states the rules), with A_T the GPUs the team
holds after the plan on the scope's nodes (running jobs kept + pods placed):

    A_T ≤ cap_T                                    one row per team that could exceed its cap
    over_T ≥ A_T − guaranteed_T,  over_T ≥ 0       one integer per team that could borrow
    Σ_T over_T ≤ pool                              the cohort's lendable nominal

`over_T` is one-sided (it only appears in a ≤ row), so no equality is needed. A team below its
nominal gets its GPUs back from borrowers through the cohort row: once the pool is exhausted a
new placement there needs a borrower's running job to be preempted (compile/preemption.py decides
whether that is allowed).

Term `quota` (soft, Kueue's admission order): every GPU a team holds within its nominal is worth
`NOMINAL_VALUE` × weights.priority, more than the whole spread of priority levels, so a team's
demand within its nominal is served before another team borrows, whatever their priorities. Idle
nominal is lent only when its owner cannot use it in this plan, and the next cycle need not
reclaim what this one lent (Kueue users report unnecessary or looping preemptions under fair sharing):

    inside_T ≤ A_T,  inside_T ∈ [0, nominal_T],  maximise NOMINAL_VALUE·Σ_T inside_T
"""

from __future__ import annotations

import numpy as np
from ortools.sat.python import cp_model

from placement.compile.context import ModelContext
from placement.compile.priority import TOP_WEIGHT
from placement.holdings import held_after
from placement.solution import Placement
from placement.teams import UNLIMITED

#: Per GPU held within nominal, × weights.priority: above the 1..TOP_WEIGHT spread of priority levels.
NOMINAL_VALUE = TOP_WEIGHT


def team_gpus(ctx: ModelContext, mask: np.ndarray) -> list[tuple[list[cp_model.IntVar], list[int], int]]:
    """Per team, A_T on `mask` nodes as (variables, coefficients, constant): placed pods, minus preempted GPUs.

    Shared with the preemption module (reclaim needs "the reclaiming team ends within nominal").
    """
    problem = ctx.problem
    assert problem.teams is not None
    out: list[tuple[list[cp_model.IntVar], list[int], int]] = [([], [], 0) for _ in range(problem.teams.size)]
    for r in problem.running:
        if r.team < 0:
            continue
        here = int((r.use[:, 0] * mask[r.nodes]).sum())
        variables, coefs, const = out[r.team]
        if r.index in ctx.evicted and here:
            variables.append(ctx.evicted[r.index])
            coefs.append(-here)
        out[r.team] = (variables, coefs, const + here)
    for t, cand in enumerate(ctx.candidates):
        task = ctx.problem.tasks[t]
        team = problem.job_team[task.job]
        gpus = int(task.demand[0])
        if team < 0 or gpus == 0:
            continue
        for var, n in zip(ctx.x[t], cand.tolist(), strict=True):
            if mask[n]:
                out[team][0].append(var)
                out[team][1].append(gpus)
    return out


def bounds(var: cp_model.IntVar) -> tuple[int, int]:
    """(lowest, highest) value of a variable (the proto's repeated field does not index from the end)."""
    domain = list(var.proto.domain)
    return int(domain[0]), int(domain[-1])


def most(variables: list[cp_model.IntVar], coefs: list[int], const: int) -> int:
    """Largest value Σ coef·var + const can take (variables at their bounds)."""
    return const + sum(c * bounds(v)[1 if c > 0 else 0] for v, c in zip(variables, coefs, strict=True))


def apply(ctx: ModelContext) -> None:
    index = ctx.problem.teams
    if index is None or not index.scopes:
        return
    over_vars: dict[tuple[int, int], cp_model.IntVar] = {}
    inside_vars: dict[tuple[int, int], cp_model.IntVar] = {}
    value = NOMINAL_VALUE * ctx.problem.request.policy.weights.priority
    for s, scope in enumerate(index.scopes):
        guaranteed = scope.guaranteed
        borrowers: list[cp_model.IntVar] = []
        fixed_borrowed = 0
        for team, (variables, coefs, const) in enumerate(team_gpus(ctx, scope.mask)):
            top = most(variables, coefs, const)
            cap = int(scope.cap[team])
            if cap < UNLIMITED and top > cap:
                ctx.model.add(cp_model.LinearExpr.weighted_sum(variables, coefs) + const <= cap)
                top = cap
            if not variables:
                fixed_borrowed += max(0, const - int(guaranteed[team]))  # running work nobody may preempt
                continue
            if value and scope.nominal[team] > 0:
                inside = ctx.model.new_int_var(0, int(min(scope.nominal[team], top)), f"in_nominal[{s},{team}]")
                ctx.model.add(inside <= cp_model.LinearExpr.weighted_sum(variables, coefs) + const)
                ctx.objective.add("quota", [inside], [value])
                inside_vars[s, team] = inside
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

    def hint(ctx: ModelContext, placement: Placement, values: dict[int, int]) -> None:
        for s, scope in enumerate(index.scopes):
            alloc = held_after(ctx.problem, placement, scope.mask)
            for team in range(index.size):
                if (s, team) in over_vars:
                    var = over_vars[s, team]
                    values[var.index] = max(0, int(alloc[team] - scope.guaranteed[team]))
                if (s, team) in inside_vars:
                    var = inside_vars[s, team]
                    values[var.index] = min(int(alloc[team]), bounds(var)[1])

    ctx.on_hint(hint)
