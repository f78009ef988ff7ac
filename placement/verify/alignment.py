"""Alignment, recomputed: each whole GPU of a placed pod costs its charge × min(1, the hours its job is expected to
run past the latest expected end already on its node / 24).

A node's latest end (hours from the planning time): over the running jobs the planner weighs (all but those
the plan stops for running past their limit), each job's start + its expected runtime, no earlier than now;
a running job without a start or a runtime never ends (nothing placed beside it delays the node); an idle
node ends now. A job's runtime is its `expected_runtime_h`, but where `policy.overdue` is `evict` no longer
than its max runtime (its own, else its team's): the plan may count on an enforced limit as an end. A
pending job without a runtime pays nothing. The charge per GPU is weights.alignment, at most half of what the
GPU earns (weights.priority × its class weight, placement.verify.priority), so the term steers where a job
runs, never whether. Each pod's coefficient in model units (`Tally`).

With `weights.alignment` 0 (after the request's preset is spelled out, as the planner reads it) the term is 0.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from placement_models import Job, RunningJob

from placement.verify.context import Context, Expected, Tally
from placement.verify.priority import tiers
from placement.verify.speeds import running_speed

#: Delay past which the cost stops growing, hours.
HORIZON_H = 24.0


def _limits(ctx: Context) -> dict[str, float] | None:
    """Teams' max runtimes the plan may count on, by team; None when `policy.overdue` does not enforce them."""
    if ctx.request.policy.overdue != "evict":
        return None
    return {t.name: t.max_runtime_h for t in ctx.request.teams if t.max_runtime_h is not None}


def runtime_h(job: Job | RunningJob, limits: dict[str, float] | None, speed: float = 1.0) -> float | None:
    """Hours the plan counts on the job running in all, its estimate at `speed` (module docstring); None when
    unknown."""
    expected = None if job.expected_runtime_h is None else job.expected_runtime_h / speed
    if limits is None:
        return expected
    limit = job.max_runtime_h if job.max_runtime_h is not None else (
        limits.get(job.team) if job.team is not None else None)
    if limit is None:
        return expected
    return limit if expected is None else min(expected, limit)


def node_ends_h(ctx: Context, now: datetime, limits: dict[str, float] | None) -> dict[str, float]:
    """Node -> hours from now until its last running job is expected to end (absent: idle, 0)."""
    out: dict[str, float] = {}
    for rj in ctx.request.cluster.running:
        if rj.job in ctx.stopped:
            continue
        runtime = runtime_h(rj, limits, running_speed(ctx, rj))
        if rj.started_at is None or runtime is None:
            h = math.inf
        else:
            h = (max(now, rj.started_at + timedelta(hours=runtime)) - now).total_seconds() / 3600.0
        for node in {pod.node for pod in rj.pods}:
            out[node] = max(out.get(node, 0.0), h)
    return out


def check_alignment_term(ctx: Context) -> list[Expected] | None:
    weight = ctx.request.policy.weights.alignment
    if weight == 0:
        return [Expected.exact(0.0)]  # the planner adds no such term (the request's preset spelled out first)
    found = tiers(ctx)
    if found is None:
        return None
    limits = _limits(ctx)
    ends = node_ends_h(ctx, ctx.request.planning_time(), limits)
    earns = ctx.request.policy.weights.priority
    out = []
    for tier in found:
        total = Tally()
        for r in ctx.new_work():
            runtime = runtime_h(r.job, limits)
            if r.task.gpus <= 0 or r.task.mig_profile is not None or r.task.gpu_share is not None or runtime is None:
                continue
            cost = min(1.0, max(0.0, runtime - ends.get(r.node.name, 0.0)) / HORIZON_H)
            charge = min(weight, 0.5 * earns * tier.weights.get(r.job.priority, 1.0))
            total.add(-r.task.gpus * cost, 1, charge)
        out.append(total.expected())
    return out
