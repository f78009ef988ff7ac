"""Capacity: on every node, new pods fit in what running pods leave free (GPUs, CPU, RAM)."""

from __future__ import annotations

from ortools.sat.python import cp_model

from placement.compile.context import ModelContext
from placement.problem import DIMS


def apply(ctx: ModelContext) -> None:
    problem = ctx.problem
    for n, pairs in enumerate(ctx.node_terms()):
        if not pairs:
            continue
        variables = [var for var, _, _ in pairs]
        for d in range(len(DIMS)):
            coefs = [int(problem.tasks[t].demand[d]) for _, t, _ in pairs]
            worst = sum(c * ub for c, (_, _, ub) in zip(coefs, pairs, strict=True))
            if worst <= problem.free[n, d]:
                continue  # cannot overflow: no row needed
            ctx.model.add(cp_model.LinearExpr.weighted_sum(variables, coefs) <= int(problem.free[n, d]))
