"""Turnaround, recomputed: each placed job earns weights.turnaround × 1 / (1 + expected_runtime_h), once.

A job without `expected_runtime_h` counts as one hour (½). Each placed job's flag coefficient rounded to model
units, as the model holds it (`Tally`).
"""

from __future__ import annotations

from placement.verify.context import Context, Expected, Tally

#: Hours a job without `expected_runtime_h` counts as.
UNKNOWN_RUNTIME_H = 1.0


def shortness(runtime_h: float | None) -> float:
    return 1.0 / (1.0 + (UNKNOWN_RUNTIME_H if runtime_h is None else runtime_h))


def check_turnaround_term(ctx: Context) -> list[Expected] | None:
    weight = ctx.request.policy.weights.turnaround
    placed = {r.job.name: r.job for r in ctx.resolved}
    total = Tally()
    for job in placed.values():
        total.add(shortness(job.expected_runtime_h), 1, weight)
    return [total.expected()]
