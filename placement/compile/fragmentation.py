"""Fragmentation: keep whole nodes whole, so the next 8-GPU gang finds room.

A node whose healthy GPUs are all free costs a penalty (one GPU-equivalent times the policy
weight, 0.1 by default) once any GPU pod lands on it (a GPU the plan shares there has its own, smaller charge in
compile/sharing.py, so that a small share pod is never left waiting for it). Partly used nodes cost nothing, so small
pods fill the holes first: the packing Volcano's binpack and FGD chase, as one soft term.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from ortools.sat.python import cp_model

from placement import devices
from placement.compile import terms
from placement.compile.context import BY_GPU_PODS, BY_MIG, ModelContext
from placement.solution import Placement

NAME = terms.FRAGMENTATION


def apply(ctx: ModelContext) -> None:
    problem = ctx.problem
    weight = problem.request.policy.weights.fragmentation
    empty = ctx.whole_free
    demands = ctx.demands
    for n, pairs in enumerate(ctx.node_terms()):
        if not empty[n] or weight == 0:
            continue
        gpu_pairs = [(v, t) for v, t, _ in pairs if demands[t][0] > 0]
        if not gpu_pairs:
            continue
        b = ctx.break_flag(BY_GPU_PODS, n, f"broken[{n}]")
        coefs = [demands[t][0] for _, t in gpu_pairs]
        ctx.model.add(cp_model.LinearExpr.weighted_sum([v for v, _ in gpu_pairs], coefs)
                      <= int(problem.capacity[n, 0]) * b)
    broken = ctx.broken.get(BY_GPU_PODS, {})
    if broken:
        ctx.objective.add(NAME, list(broken.values()), [-1.0] * len(broken), weight)
    ctx.on_hint(_hint)  # also the flags compile/mig.py and compile/sharing.py add later: read at hint time


def _hint(ctx: ModelContext, placement: Placement, values: dict[int, int]) -> None:
    """Every broken-node flag, of every kind, is 1 iff the placement breaks its node that way."""
    for kind, flags in ctx.broken.items():
        hit = _breaks(ctx, placement, kind)
        for n, b in flags.items():
            values[b.index] = int(n in hit)


def _breaks(ctx: ModelContext, placement: Placement, kind: str) -> set[int]:
    """The nodes `placement` puts any GPU pod on (BY_GPU_PODS), a MIG pod or a new layout on (BY_MIG), or
    shares a GPU of (BY_SHARING)."""
    if kind == BY_GPU_PODS:
        return set(np.flatnonzero(placement.usage(ctx.problem)[:, 0] > 0).tolist())
    if kind == BY_MIG:
        tasks = ctx.problem.tasks  # pods on whole instances, and pods sharing one
        hit = {n for (t, n), k in placement.counts.items()
               if k and (devices.is_mig(tasks[t].spec) or devices.is_instance_share(tasks[t].spec))}
        return hit | {n for (n, _), layout in placement.mig_layouts.items() if layout is not None}
    return {n for n, _ in placement.sharing_changes}


def _capped_charge(ctx: ModelContext, levels: dict[int, float], tasks: Iterable[int], change_cost: float) -> float:
    """The charge for a whole free node broken by partial-GPU pods (shared GPUs, MIG instances) of `tasks`:
    weights.fragmentation, but at most half of what the smallest of them earns net of `change_cost` (the
    re-layout or sharing change it also pays), and 0 when nothing is left. A whole-GPU pod earns at least
    1 per GPU, far above the 0.1 charge; a 0.05-GPU share pod or a 1g MIG pod (0.125) does not, and
    without the cap it would wait beside idle GPUs: the charge must steer where such pods go, never whether.
    `levels` is priority.level_weights of the pending jobs (computed once by the caller)."""
    problem = ctx.problem
    weights = problem.request.policy.weights
    floor = min((levels[problem.jobs[problem.tasks[t].job].priority] * problem.gpu_value(t)
                 for t in tasks), default=0.0)
    return max(0.0, min(weights.fragmentation, 0.5 * (floor * weights.priority - change_cost)))


def partial_break(ctx: ModelContext, n: int, levels: dict[int, float], tasks: Iterable[int],
                  change_cost: float, kind: str) -> cp_model.IntVar | None:
    """A boolean, charged to this term at `_capped_charge`, that the caller's rows force to 1 when its
    partial-GPU pods of `tasks` (shared GPUs, MIG instances) break whole free node n; None when the
    charge is 0 (nothing to steer, or the pods earn too little to pay anything)."""
    charge = _capped_charge(ctx, levels, tasks, change_cost)
    if charge <= 0:
        return None
    b = ctx.break_flag(kind, n, f"{kind}_breaks[{n}]")
    ctx.objective.add(NAME, [b], [-1.0], charge)
    return b
