"""Objective: the plan's reported total is the sum of its terms (a NaN anywhere is reported, not accepted).

The terms themselves (priority, fragmentation, fairness, stability, ...) are preferences, not rules:
only their arithmetic is checked.
"""

from __future__ import annotations

from placement.verify.context import EPS, Context


def check_objective(ctx: Context) -> list[str]:
    obj = ctx.plan.objective
    terms = sum(obj.terms.values())
    # Written as "not <=" so that a NaN total or term is reported, not silently accepted.
    if not abs(obj.total - terms) <= EPS * max(1.0, abs(obj.total)):
        return [f"objective: total {obj.total!r} differs from the sum of its terms {terms!r}"]
    return []
