"""Turnaround, recomputed: each placed job earns weights.turnaround × 1 / (1 + expected_runtime_h), once.

A job without `expected_runtime_h` counts as one hour (½). One model unit per placed job (its flag's
coefficient is rounded once).
"""

from __future__ import annotations

from placement.verify.context import Context, Expected

#: Hours a job without `expected_runtime_h` counts as.
UNKNOWN_RUNTIME_H = 1.0


def shortness(runtime_h: float | None) -> float:
    return 1.0 / (1.0 + (UNKNOWN_RUNTIME_H if runtime_h is None else runtime_h))


def check_turnaround_term(ctx: Context) -> list[Expected] | None:
    weight = ctx.request.policy.weights.turnaround
    placed = {r.job.name: r.job for r in ctx.resolved}
    value = sum(weight * shortness(job.expected_runtime_h) for job in placed.values())
    return [Expected.exact(value, len(placed))]
