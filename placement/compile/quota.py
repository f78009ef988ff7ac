"""Quota (hard): no team holds more than nominal + borrowing limit, and borrowing comes only from idle nominal.

Per quota scope s and team T (placement/teams.py states the rules), with A_T what the team holds
after the plan on the scope's nodes (running jobs kept + pods placed), in the scope's integer unit:
milli-GPU for GPU scopes (a pod of task t on node n counts its GPU-equivalents there: whole GPUs,
its share, or its MIG instance's fraction of that node's GPU), milli-CPU and MiB for CPU and
memory scopes:

    A_T ≤ cap_T                                    one row per team that could exceed its cap
    over_T ≥ A_T − guaranteed_T,  over_T ≥ 0       one integer per team that could borrow
    Σ_T over_T ≤ pool                              the cohort's lendable nominal

With cohorts (`Scope.tree`) the last row is one per cohort c that bounds what its children draw,
and a child cohort k draws through one more one-sided integer (placement/teams.py states the rule):

    over_k ≥ Σ_{x child of k} over_x − pool_k + lendable_k,  over_k ≥ 0
    Σ_{x child of c} over_x ≤ limit_c                  for a root, or a cohort with a borrowing limit

`over_T` is one-sided (it only appears in a ≤ row), so no equality is needed. A team below its
nominal gets its GPUs back from borrowers through the cohort row: once the pool is exhausted a
new placement there needs a borrower's running job to be preempted (compile/preemption.py decides
whether that is allowed).

The soft side, Kueue's admission order (within nominal before borrowing), is compile/nominal.py; it
counts in quanta of milli-GPU (`quantum`) where a job's GPUs vary, because objective coefficients are
integers at `SCALE` per GPU-equivalent, too coarse per milli-GPU. The quantum is the largest that
divides every pod's milli-GPU and a GPU (1000 when every pod takes whole GPUs, 125 with 1g MIG
pods on 8-slice GPUs), and at least `QUANTUM` (1/40 GPU: shares such as 1/3 count in its steps).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from ortools.sat.python import cp_model

from placement.compile.context import ModelContext
from placement.holdings import held_in, running_use, task_milli
from placement.problem import Problem
from placement.solution import Placement
from placement.teams import MILLI, UNLIMITED, Scope

#: Smallest milli-GPU per unit of the soft terms' variables (in-nominal GPUs here, fair-share segments in
#: fairness): see `quantum`.
QUANTUM = 25

Held = list[tuple[list[cp_model.IntVar], list[int], int]]


def team_use(ctx: ModelContext, mask: np.ndarray, resource: int = 0,
             weigh: tuple[Callable[[int], float], Callable[[int, int], float]] | None = None) -> Held:
    """Per team, A_T on `mask` nodes as (variables, coefficients, constant): placed pods, minus preempted
    running work; milli-GPU (resource 0, GPU-equivalents), milli-CPU (1) or MiB (2). `weigh`: (running job ->
    factor, (task, node) -> factor), each amount times its factor rounded (fairness in work, compile/fairness.py)."""
    problem = ctx.problem
    assert problem.teams is not None
    out: Held = [([], [], 0) for _ in range(problem.teams.size)]
    for r in problem.running:
        if r.team < 0:
            continue
        here = int((running_use(problem, r.index)[:, resource] * mask[r.nodes]).sum())
        if weigh is not None:
            here = round(here * weigh[0](r.index))
        variables, coefs, const = out[r.team]
        if r.index in ctx.evicted and here:
            variables.append(ctx.evicted[r.index])
            coefs.append(-here)
        out[r.team] = (variables, coefs, const + here)
    for t, cand in enumerate(ctx.candidates):
        task = problem.tasks[t]
        team = problem.job_team[task.job]
        if team < 0 or not len(cand):
            continue
        each = task_milli(problem, t, cand) if resource == 0 else np.full(len(cand), int(task.demand[resource]))
        for var, n, c in zip(ctx.x[t], cand.tolist(), each.tolist(), strict=True):
            if weigh is not None:
                c = round(c * weigh[1](t, n))
            if c and mask[n]:
                out[team][0].append(var)
                out[team][1].append(int(c))
    return out


def quantum(problem: Problem) -> int:
    """Milli-GPU per unit of the soft terms' variables: gcd of a GPU and every pod's milli-GPU, at least QUANTUM."""
    if problem.facts.quota_quantum is None:
        step = MILLI
        for t in range(len(problem.tasks)):
            for value in np.unique(task_milli(problem, t, problem.tasks[t].candidates)).tolist():
                step = math.gcd(step, int(value))
        for r in problem.running:
            for value in running_use(problem, r.index)[:, 0].tolist():
                step = math.gcd(step, int(value))
        problem.facts.quota_quantum = max(step, QUANTUM)
    return problem.facts.quota_quantum


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
    cohort_vars: dict[int, dict[int, cp_model.IntVar]] = {}
    for s, scope in enumerate(index.all_scopes):
        guaranteed = scope.guaranteed
        borrowers: list[cp_model.IntVar] = []
        fixed_borrowed = 0
        use = team_use(ctx, scope.mask, scope.resource)
        for team, (variables, coefs, const) in enumerate(use):
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
        if scope.tree is not None:
            cohort_vars[s] = _tree_rows(ctx, s, scope, use, over_vars)
            continue
        if borrowers:
            most_borrowed = sum(bounds(v)[1] for v in borrowers) + fixed_borrowed
            if most_borrowed > scope.pool:
                ctx.model.add(cp_model.LinearExpr.sum(borrowers) <= scope.pool - fixed_borrowed)

    def hint(ctx: ModelContext, placement: Placement, values: dict[int, int]) -> None:
        for s, scope in enumerate(index.all_scopes):
            if not any((s, team) in over_vars for team in range(index.size)):
                continue
            alloc = held_in(ctx.problem, placement, scope)
            for team in range(index.size):
                if (s, team) in over_vars:
                    values[over_vars[s, team].index] = max(0, int(alloc[team] - scope.guaranteed[team]))
            if scope.tree is not None:
                cohort_over = scope.tree.draws(alloc, scope.guaranteed)[0]
                for c, var in cohort_vars.get(s, {}).items():
                    values[var.index] = int(cohort_over[c])

    ctx.on_hint(hint)


def _tree_rows(ctx: ModelContext, s: int, scope: Scope, use: Held,
               over_vars: dict[tuple[int, int], cp_model.IntVar]) -> dict[int, cp_model.IntVar]:
    """The cohort rows of one scope, children before parents; returns the child cohorts' `over` variables.

    A child's draw is a variable (`over_vars`, `over_k`) or, when nothing placed or preempted can change
    it, a constant: running work the plan keeps.
    """
    tree = scope.tree
    assert tree is not None
    pool, lend = tree.pools()
    limit = tree.limit(scope.before, scope.guaranteed)
    draws: list[tuple[list[cp_model.IntVar], int]] = [([], 0) for _ in tree.names]
    for team, c in enumerate(tree.team_cohort.tolist()):
        if c < 0:
            continue
        if (s, team) in over_vars:
            draws[c][0].append(over_vars[s, team])
        elif not use[team][0]:
            draws[c] = (draws[c][0], draws[c][1] + max(0, use[team][2] - int(scope.guaranteed[team])))
    out: dict[int, cp_model.IntVar] = {}
    for c in tree.order:
        variables, const = draws[c]
        top = const + sum(bounds(v)[1] for v in variables)
        bounded = tree.parent[c] < 0 or tree.borrowing[c] < UNLIMITED
        if bounded and top > limit[c] and variables:
            ctx.model.add(cp_model.LinearExpr.sum(variables) + const <= int(limit[c]))
            top = int(limit[c])
        if tree.parent[c] < 0:
            continue
        slack = int(pool[c]) - int(lend[c])  # over_k = max(0, draw_k − slack)
        parent = int(tree.parent[c])
        if not variables:
            draws[parent] = (draws[parent][0], draws[parent][1] + max(0, const - slack))
        elif top > slack:
            over = ctx.model.new_int_var(0, top - slack, f"cohort_borrowed[{s},{tree.names[c]}]")
            ctx.model.add(over >= cp_model.LinearExpr.sum(variables) + const - slack)
            draws[parent][0].append(over)
            out[c] = over
    return out
