"""The compiler: one CP-SAT model from a Problem, built by one module per concern.

Adding a concern means adding a module with `apply(ctx)` and listing it here; nothing else
changes. Modules meet only through the context, and the order of `MODULES` matters where one reads what
another writes there:

* gang and capacity come first: they shape feasibility;
* mig_sharing before mig: it writes `ctx.new_instances` (shared MIG instances the plan may make), which
  mig draws from its free-instance supply; its read rule is a late one, run after mig has read the layouts;
* mig before sharing and cost: mig writes `ctx.partitioned` (idle whole GPUs it partitions) and
  `ctx.whole_after` (GPUs whole after the plan); sharing reads both (an opened slot takes a plain GPU
  neither MIG nor a whole-GPU pod takes) and adds its own shared GPUs to `ctx.partitioned`; cost's peak
  reserve reads `ctx.partitioned` to see those GPUs go;
* throughput before waiting: it writes `ctx.slow` (the speed a job runs at), which turnaround reads;
* fragmentation, mig and sharing each add broken-node flags (`ctx.break_flag`) in any order: the one hint
  for all of them (compile/fragmentation.py) reads `ctx.broken` when the hint is built, after every module.

Objective term names come from `placement.compile.terms`.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from placement.compile import (
    alignment,
    capacity,
    cost,
    fairness,
    fragmentation,
    gang,
    mig,
    mig_sharing,
    migration,
    nominal,
    preemption,
    priority,
    quota,
    reservation,
    sharing,
    stability,
    throughput,
    topology,
    usage,
    waiting,
)
from placement.compile.context import SCALE, ModelContext
from placement.problem import Problem

# mig_sharing before mig, mig before sharing and cost (module docstring): each reads what the one before writes
MODULES: tuple[ModuleType, ...] = (gang, capacity, reservation, priority, fragmentation, quota, nominal, fairness,
                                   preemption, topology, mig_sharing, mig, sharing, cost, usage, stability, throughput,
                                   waiting, alignment, migration)


def build(problem: Problem, candidates: list[np.ndarray] | None = None,
          idle: frozenset[int] = frozenset(), *, objective: bool = True) -> ModelContext:
    """The model of `problem` over `candidates` (default: every task's own), where `idle` tasks have none
    (placement.compile.dominance). Without `objective` the model only scores plans term by term (its named terms
    are there, CP-SAT's objective is not set: `ctx.scores_only`), for a call with no time left to search."""
    ctx = ModelContext(problem, candidates, idle)
    for module in MODULES:
        module.apply(ctx)
    if objective:
        ctx.model.maximize(ctx.objective.expression(ctx.model))
    ctx.scores_only = not objective
    return ctx


__all__ = ["MODULES", "SCALE", "ModelContext", "build"]
