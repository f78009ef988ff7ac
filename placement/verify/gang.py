"""Gang: a job is placed whole (each task at least its min_replicas, the job at least its minimum in
all, no task over its replicas) or listed as pending with a reason; never both, never neither.

The minimums are derived here from the request's fields, not from the wire format's helpers: a
task's is its `min_replicas`, else every replica, or 0 when the job sets `min_available`; the job's
is max(min_available, the sum of its tasks' minimums, 1).
"""

from __future__ import annotations

from placement_models import Job, Task

from placement.verify.context import Context


def _task_minimum(job: Job, task: Task) -> int:
    if task.min_replicas is not None:
        return task.min_replicas
    return 0 if job.min_available is not None else task.replicas


def _job_minimum(job: Job) -> int:
    return max(1, job.min_available or 0, sum(_task_minimum(job, t) for t in job.tasks))


def check_gang(ctx: Context) -> list[str]:
    # Count distinct, in-range pods so a duplicated assignment cannot inflate a gang into
    # looking complete; raw counts per task catch a task given more pods than it has.
    distinct: dict[str, set[tuple[str, int]]] = {}
    raw: dict[tuple[str, str], int] = {}
    for r in ctx.resolved:
        raw[r.a.job, r.a.task] = raw.get((r.a.job, r.a.task), 0) + 1
        if 0 <= r.a.pod < r.task.replicas:
            distinct.setdefault(r.a.job, set()).add((r.a.task, r.a.pod))
    per_task: dict[tuple[str, str], int] = {}
    for name, found in distinct.items():
        for task, _ in found:
            per_task[name, task] = per_task.get((name, task), 0) + 1
    assigned = {a.job for a in ctx.plan.assignments}
    out: list[str] = []
    for job in ctx.request.jobs:
        if job.name not in assigned:
            continue  # an unplaced job is the pending rule's business, not the gang's
        pods = distinct.get(job.name, set())
        needed = _job_minimum(job)
        if len(pods) < needed:
            out.append(f"gang: job {job.name} has {len(pods)} of {needed} required pods")
        for task in job.tasks:
            n = raw.get((job.name, task.name), 0)
            if n > task.replicas:
                out.append(f"gang: task {job.name}/{task.name} has {n} pods assigned, more than its {task.replicas}")
            least = _task_minimum(job, task)
            have = per_task.get((job.name, task.name), 0)
            # every pod required: the job's count above already says it
            if have < least and needed < sum(t.replicas for t in job.tasks):
                why = "min_replicas" if task.min_replicas is not None else "every replica: it sets no min_replicas"
                out.append(f"gang: task {job.name}/{task.name} has {have} of its {least} required pods ({why})")
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
