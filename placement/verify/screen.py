"""Which pending jobs the planner screened out before weighing the classes, derived again from the request.

The planner drops a job no plan could ever place (placement.screen): a task that cannot place its minimum
(`min_replicas`, or every replica of an all-or-nothing gang) on its candidate nodes, each node taking the
pods that fit it alone; a job whose candidates cannot take `needed` pods in all; a job whose required
topology level has no domain that holds them. Such a job changes no class weight, so the priority term
and the terms that read the weights (placement.verify.priority) must know which jobs those are.

The verifier runs the same tests on the candidates it derives (placement.verify.candidates) with two
bounds per task: the pods its sure candidates take for certain, and the most its possible candidates
could (every replica where evictions, MIG or shared devices, or a right-size offer decide the room). A
job failing a test even at the most is screened out for sure; one passing even at the least stays; any
other may have gone either way.
"""

from __future__ import annotations

from placement_models import Job

from placement.verify.candidates import NodeClass, all_nodes, class_room, classes, pod_total
from placement.verify.context import Context
from placement.verify.topology import weighed


def screened(ctx: Context) -> tuple[set[str], set[str]]:
    """(pending jobs the planner surely screened out, pending jobs it may have): placed jobs stayed. Once per
    check."""
    if "screened" not in ctx.memo:
        ctx.memo["screened"] = _screened(ctx)
    return ctx.memo["screened"]  # type: ignore[no-any-return]


def _screened(ctx: Context) -> tuple[set[str], set[str]]:
    placed = {r.job.name for r in ctx.resolved}
    sure: set[str] = set()
    maybe: set[str] = set()
    domains: dict[str, dict[str, str]] | None = None
    for job in ctx.request.jobs:
        if job.name in placed or not job.tasks:
            continue
        least, most = _slots(ctx, job)
        fails_surely = any(most[t.name][1] < job.task_minimum(t) for t in job.tasks) or sum(
            m[1] for m in most.values()) < job.needed
        fails_maybe = any(least[t.name][1] < job.task_minimum(t) for t in job.tasks) or sum(
            m[1] for m in least.values()) < job.needed
        level = job.topology.required if job.topology is not None else None
        if level is not None and level != "node" and level in ctx.request.cluster.topology_levels:
            if domains is None:
                domains = weighed(ctx)[1]  # over the same nodes
            fails_surely = fails_surely or not _one_domain(job, most, domains[level])
            fails_maybe = fails_maybe or not _one_domain(job, least, domains[level])
        if fails_surely:
            sure.add(job.name)
        elif fails_maybe:
            maybe.add(job.name)
    return sure, maybe


Slots = dict[str, tuple[list[tuple[NodeClass, int]], int]]  # task -> (pods per node by class, total)


def _slots(ctx: Context, job: Job) -> tuple[Slots, Slots]:
    """Per task, the pods its candidates take for certain and at most, per node (by class) and in all."""
    least: Slots = {}
    most: Slots = {}
    for task in job.tasks:
        least[task.name] = ((class_room(ctx, job, task, True), pod_total(ctx, job, task, True))
                            if not job.right_size else ([], 0))
        if job.right_size:  # a right-size offer may take a MIG instance where the declared GPUs do not fit
            every = [(c, task.replicas) for c in classes(ctx)]
            most[task.name] = (every, min(task.replicas, task.replicas * len(all_nodes(ctx))))
        else:
            most[task.name] = (class_room(ctx, job, task, False), pod_total(ctx, job, task, False))
    return least, most


def _one_domain(job: Job, room: Slots, of_node: dict[str, str]) -> bool:
    """Could one domain hold the job: each task its minimum and `needed` pods in all, from its nodes there?"""
    totals: dict[str, dict[str, int]] = {}
    for task in job.tasks:
        for c, pods in room[task.name][0]:
            if pods:
                for node in c.members:
                    per = totals.setdefault(of_node[node.name], {})
                    per[task.name] = per.get(task.name, 0) + pods
    for per in totals.values():
        capped = {t.name: min(t.replicas, per.get(t.name, 0)) for t in job.tasks}
        if all(capped[t.name] >= job.task_minimum(t) for t in job.tasks) and sum(capped.values()) >= job.needed:
            return True
    return False
