"""The compiler: one CP-SAT model from a Problem, built by one module per concern.

Adding a concern means adding a module with `apply(ctx)` and listing it here; nothing else
changes. Order matters only in that gang and capacity come first (they shape feasibility).
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
    nominal,
    preemption,
    priority,
    quota,
    reservation,
    sharing,
    stability,
    topology,
    usage,
    waiting,
)
from placement.compile.context import SCALE, ModelContext
from placement.problem import Problem

# cost comes after mig: its peak-reserve row counts the idle whole GPUs mig may partition
MODULES: tuple[ModuleType, ...] = (gang, capacity, reservation, priority, fragmentation, quota, nominal, fairness,
                                   preemption, topology, mig, sharing, cost, usage, stability, waiting,
                                   alignment)


def build(problem: Problem, candidates: list[np.ndarray] | None = None,
          idle: frozenset[int] = frozenset()) -> ModelContext:
    """The model of `problem` over `candidates` (default: every task's own), where `idle` tasks have none
    (placement.compile.dominance)."""
    ctx = ModelContext(problem, candidates, idle)
    for module in MODULES:
        module.apply(ctx)
    ctx.model.maximize(ctx.objective.expression())
    return ctx


__all__ = ["MODULES", "SCALE", "ModelContext", "build"]
