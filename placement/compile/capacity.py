"""Capacity: on every node, new pods fit in what running pods leave free (GPUs, CPU, RAM).

A running job the plan preempts (`ctx.evicted[r]`, see ModelContext) leaves its resources free:
on its nodes the row reads Σ demand·x − Σ use_r·evicted_r ≤ free.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from placement.compile.context import ModelContext
from placement.problem import DIMS


def apply(ctx: ModelContext) -> None:
    problem = ctx.problem
    demands = ctx.demands
    for n, pairs in enumerate(ctx.node_terms()):
        if not pairs:
            continue
        variables = [var for var, _, _ in pairs]
        released = ctx.released(n)
        for d in range(len(DIMS)):
            coefs = [demands[t][d] for _, t, _ in pairs]
            worst = sum(c * ub for c, (_, _, ub) in zip(coefs, pairs, strict=True))
            if worst <= problem.free[n, d]:
                continue  # cannot overflow: no row needed
            gives = [(var, -int(use[d])) for var, use in released if use[d]]
            ctx.model.add(cp_model.LinearExpr.weighted_sum(variables + [v for v, _ in gives],
                                                           coefs + [c for _, c in gives]) <= int(problem.free[n, d]))
