"""References: the plan speaks the request's wire version and names only pending jobs, their tasks
and pods, and nodes the cluster has or the plan adds; no pod is assigned twice.
"""

from __future__ import annotations

from placement_models import API_VERSION

from placement.verify.context import Context, find_task, pod_name


def check_api_version(ctx: Context) -> list[str]:
    # The Plan model pins the literal, but a plan built with model_construct or by a future
    # version of the decoder skips validation: check the value itself.
    if ctx.plan.api_version != API_VERSION:
        return [f"api_version: plan has '{ctx.plan.api_version}', expected '{API_VERSION}'"]
    return []


def check_reference(ctx: Context) -> list[str]:
    out: list[str] = []
    seen: dict[tuple[str, str, int], int] = {}
    for i, a in enumerate(ctx.plan.assignments):
        where = f"assignment {i} ({pod_name(a)})"
        job = ctx.pending_jobs.get(a.job)
        if job is None:
            if a.job in ctx.running_jobs:
                out.append(f"reference: {where} names running job {a.job}, not a pending one")
            else:
                out.append(f"reference: {where} names unknown job {a.job}")
        else:
            task = find_task(job, a.task)
            if task is None:
                out.append(f"reference: {where} names unknown task {a.task} of job {a.job}")
            elif not 0 <= a.pod < task.replicas:
                out.append(
                    f"reference: {where} pod index {a.pod} out of range 0..{task.replicas - 1} "
                    f"of task {a.job}/{a.task}"
                )
        if a.node not in ctx.nodes:
            out.append(f"reference: {where} names unknown node {a.node}")
        key = (a.job, a.task, a.pod)
        if key in seen:
            out.append(f"reference: {where} duplicates assignment {seen[key]}")
        else:
            seen[key] = i
    return out
