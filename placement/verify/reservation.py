"""Reservations: work that outlasts a reservation keeps off its GPUs, and the reservation is sound.

Recomputed from the request alone. For each of the plan's reservations (`Plan.reservations`) and
each reserved node: the GPUs free there now, plus those running jobs are expected to release by the
reservation's `earliest_start`, must cover the reserved GPUs plus the GPUs the plan's new pods take
there whose jobs are expected to run past that start (or give no runtime), unless they are of a
higher class than the reserved job or start as soon as they fit (waited `max_wait_h`, or reserved in
the previous plan). A job's expected runtime is its `expected_runtime_h` (a running job's end is
`started_at` plus that, no earlier than the planning time), capped under `policy.overdue: evict` by
its max runtime, its own else its team's. A reservation without a start (its nodes drain) counts
every running job as ended and every new pod as outlasting it. The reserved job itself stays pending.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from placement_models import Job, RunningJob

from placement.verify.context import Context, max_runtime
from placement.verify.speeds import running_speed


def _now(ctx: Context) -> datetime:
    return ctx.request.planning_time()


def _runtime(job: Job | RunningJob, ctx: Context, speed: float = 1.0) -> float | None:
    """The hours a job is counted on to run: its estimate at `speed`, capped by a max runtime eviction enforces."""
    hours = [None if job.expected_runtime_h is None else job.expected_runtime_h / speed]
    if ctx.request.policy.overdue == "evict":
        hours.append(max_runtime(ctx.request, job))
    known = [h for h in hours if h is not None]
    return min(known) if known else None


def _end(run: RunningJob, now: datetime, ctx: Context) -> datetime | None:
    runtime = _runtime(run, ctx, running_speed(ctx, run))
    if run.started_at is None or runtime is None:
        return None
    return max(now, run.started_at + timedelta(hours=runtime))


def _starting(ctx: Context, now: datetime) -> set[str]:
    """Pending jobs that start as soon as they fit: waited `max_wait_h`, or reserved in the previous plan."""
    policy = ctx.request.policy
    reserved = {r.job for r in policy.previous_plan.reservations} if policy.previous_plan is not None else set()
    out = set(reserved)
    if policy.max_wait_h is not None:
        out |= {name for name, job in ctx.pending_jobs.items() if job.submitted_at is not None
                and (now - job.submitted_at).total_seconds() / 3600.0 >= policy.max_wait_h}
    return out


def _binds(job: Job, held: Job, now: datetime, start: datetime | None, starting: set[str], ctx: Context) -> bool:
    """Is `job` bound by the reservation of `held`: not of a higher class, not bound to start as soon as it
    fits, and running past the reservation's start?"""
    if job.name == held.name or job.priority > held.priority or job.name in starting:
        return False
    runtime = _runtime(job, ctx)
    return start is None or runtime is None or now + timedelta(hours=runtime) > start


def _free_gpus(ctx: Context, node: str) -> int:
    spec = ctx.nodes[node]
    broken = set(spec.unhealthy_gpus)
    taken = {g for (n, g), _ in ctx.held.items() if n == node}
    return sum(1 for g in range(spec.gpus) if g not in broken and g not in taken)


def check_reservation(ctx: Context) -> list[str]:
    out: list[str] = []
    now = _now(ctx)
    starting = _starting(ctx, now) if ctx.plan.reservations else set()
    assigned = {a.job for a in ctx.plan.assignments}
    for res in ctx.plan.reservations:
        if res.job not in ctx.pending_jobs:
            out.append(f"reservation: job {res.job} is not a pending job of the request")
            continue
        if res.job in assigned:
            out.append(f"reservation: job {res.job} is placed by this plan and reserved too")
        for held in res.nodes:
            if held.node not in ctx.nodes:
                out.append(f"reservation: job {res.job} reserves unknown node {held.node}")
                continue
            released = 0
            for run in ctx.request.cluster.running:
                end = _end(run, now, ctx)
                if run.job in ctx.evicted:
                    continue
                if res.earliest_start is not None and (end is None or end > res.earliest_start):
                    continue
                released += sum(len([g for g in pod.gpus if g not in ctx.nodes[held.node].unhealthy_gpus])
                                for pod in run.pods if pod.node == held.node and pod.gpu_share is None)
            outlasting = sum(len(r.a.gpus) for r in ctx.resolved
                             if r.a.node == held.node and r.a.mig is None and r.a.gpu_share is None
                             and _binds(r.job, ctx.pending_jobs[res.job], now, res.earliest_start, starting, ctx))
            room = _free_gpus(ctx, held.node) + released
            if held.gpus + outlasting > room:
                when = res.earliest_start.isoformat() if res.earliest_start is not None else "when it drains"
                out.append(f"reservation: node {held.node} holds {held.gpus} GPUs for job {res.job} from {when} "
                           f"but the plan puts {outlasting} GPUs of work running past then there, and only {room} "
                           f"are free by then")
    return out
