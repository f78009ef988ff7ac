"""Gang: a job is placed whole (at least min_available pods, no task over its replicas) or listed as
pending with a reason; never both, never neither.
"""

from __future__ import annotations

from placement.verify.context import Context


def check_gang(ctx: Context) -> list[str]:
    # Count distinct, in-range pods so a duplicated assignment cannot inflate a gang into
    # looking complete; raw counts per task catch a task given more pods than it has.
    distinct: dict[str, set[tuple[str, int]]] = {}
    raw: dict[tuple[str, str], int] = {}
    for r in ctx.resolved:
        raw[r.a.job, r.a.task] = raw.get((r.a.job, r.a.task), 0) + 1
        if 0 <= r.a.pod < r.task.replicas:
            distinct.setdefault(r.a.job, set()).add((r.a.task, r.a.pod))
    assigned = {a.job for a in ctx.plan.assignments}
    out: list[str] = []
    for job in ctx.request.jobs:
        if job.name not in assigned:
            continue  # an unplaced job is the pending rule's business, not the gang's
        placed = len(distinct.get(job.name, ()))
        if placed < job.needed:
            out.append(f"gang: job {job.name} has {placed} of {job.needed} required pods")
        for task in job.tasks:
            n = raw.get((job.name, task.name), 0)
            if n > task.replicas:
                out.append(f"gang: task {job.name}/{task.name} has {n} pods assigned, more than its {task.replicas}")
    return out


def check_pending(ctx: Context) -> list[str]:
    out: list[str] = []
    placed = {a.job for a in ctx.plan.assignments}
    listed: dict[str, int] = {}
    for i, p in enumerate(ctx.plan.pending):
        where = f"entry {i} (job {p.job})"
        if p.job not in ctx.pending_jobs:
            kind = "running" if p.job in ctx.running_jobs else "unknown"
            out.append(f"pending: {where} names {kind} job {p.job}, not a pending one")
        if p.job in listed:
            out.append(f"pending: {where} duplicates entry {listed[p.job]}")
        else:
            listed[p.job] = i
        if not p.reason.strip():
            out.append(f"pending: {where} has an empty reason")
    for job in ctx.request.jobs:
        if job.name in placed and job.name in listed:
            out.append(f"pending: job {job.name} is both placed and listed as pending")
        elif job.name not in placed and job.name not in listed:
            out.append(f"pending: job {job.name} is neither placed nor listed as pending")
    return out
