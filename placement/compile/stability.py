"""Stability: a pending pod that keeps the node last cycle's plan gave it earns a little.

A scheduler that calls every cycle binds pods over several cycles (gangs wait for the last
member, nodes drain). If each cycle's plan reshuffled pending pods among equally good nodes,
half-applied plans would fight each other. `policy.previous_plan` names where pods were headed;
keeping a pod there is worth `weights.stability` per GPU (0.2: enough to break ties and absorb
small gains, never enough to keep a worse plan than one better by a whole GPU placed).

Kept pods per (task, node) are `k ≤ x` and `k ≤ previous count`: one small integer per pair the
previous plan used, nothing for the rest.
"""

from __future__ import annotations

from placement.compile import terms
from placement.compile.context import ModelContext
from placement.compile.priority import pod_value
from placement.solution import Placement

NAME = terms.STABILITY


def previous_counts(ctx: ModelContext) -> dict[tuple[int, int], int]:
    """(task, node) -> pods the previous plan put there, for tasks that are still pending."""
    previous = ctx.problem.request.policy.previous_plan
    if previous is None:
        return {}
    task_index = {(ctx.problem.jobs[t.job].name, t.name): t.index for t in ctx.problem.tasks
                  if t.job not in ctx.problem.twins}  # a running job's twin is no pending pod
    counts: dict[tuple[int, int], int] = {}
    for a in previous.assignments:
        t = task_index.get((a.job, a.task))
        n = ctx.problem.node_index.get(a.node)
        if t is not None and n is not None:
            counts[t, n] = counts.get((t, n), 0) + 1
    return counts


def apply(ctx: ModelContext) -> None:
    weight = ctx.problem.request.policy.weights.stability
    counts = previous_counts(ctx)
    if not counts or weight == 0:
        return
    ctx.objective.cap(NAME, sum(pod_value(ctx.problem.tasks[t].spec.gpus) * k for (t, _), k in counts.items()),
                      weight)
    kept = {}
    for t, cand in enumerate(ctx.candidates):
        for var, n in zip(ctx.x[t], cand.tolist(), strict=True):
            before = counts.get((t, n), 0)
            if before:
                k = ctx.model.new_int_var(0, before, f"kept[{t},{n}]")
                ctx.model.add(k <= var)
                kept[t, n] = k
    if not kept:
        return
    ctx.objective.add(NAME, list(kept.values()),
                      [pod_value(ctx.problem.tasks[t].spec.gpus) for t, _ in kept], weight)

    def hint(ctx: ModelContext, placement: Placement, values: dict[int, int]) -> None:
        for (t, n), k in kept.items():
            values[k.index] = min(placement.counts.get((t, n), 0), counts[t, n])

    ctx.on_hint(hint)
