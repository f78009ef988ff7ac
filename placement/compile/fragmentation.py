"""Fragmentation: keep whole nodes whole, so the next 8-GPU gang finds room.

A node whose healthy GPUs are all free costs a penalty (one GPU-equivalent times the policy
weight, 0.1 by default) once any GPU pod lands on it (a GPU the plan shares there has its own, smaller charge in
compile/sharing.py, so that a small share pod is never left waiting for it). Partly used nodes cost nothing, so small
pods fill the holes first: the packing Volcano's binpack and FGD chase, as one soft term.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from placement.compile.context import ModelContext
from placement.solution import Placement

NAME = "fragmentation"


def apply(ctx: ModelContext) -> None:
    problem = ctx.problem
    weight = problem.request.policy.weights.fragmentation
    empty = problem.gpu_empty()
    broken: dict[int, cp_model.IntVar] = {}
    for n, pairs in enumerate(ctx.node_terms()):
        gpu_pairs = [(v, t) for v, t, _ in pairs if problem.tasks[t].demand[0] > 0]
        if not empty[n] or not gpu_pairs or weight == 0:
            continue
        b = ctx.model.new_bool_var(f"broken[{n}]")
        coefs = [int(problem.tasks[t].demand[0]) for _, t in gpu_pairs]
        ctx.model.add(cp_model.LinearExpr.weighted_sum([v for v, _ in gpu_pairs], coefs)
                      <= int(problem.capacity[n, 0]) * b)
        broken[n] = b
    ctx.broken.update(broken)
    if broken:
        ctx.objective.add(NAME, list(broken.values()), [-1.0] * len(broken), weight)

    def hint(ctx: ModelContext, placement: Placement, values: dict[int, int]) -> None:
        gpus = placement.usage(ctx.problem)[:, 0]
        for n, b in broken.items():
            values[b.index] = int(gpus[n] > 0)

    ctx.on_hint(hint)
