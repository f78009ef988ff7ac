"""Strict priority classes: an optimal plan leaves no higher-class job waiting that it could place instead of
lower-class ones.

`policy.priority_mode: strict` (the default) ranks plans class by class, highest first: the class weights
(placement.verify.priority) make one pod of a class worth more than everything the classes below could place.
The planner guarantees the best such plan only when it proves it (`status: optimal`; within a time limit it
guarantees only a plan no worse class by class than its greedy floor, which the verifier does not rebuild).
So for an optimal strict plan the verifier looks for a better one, built from the request and the plan alone:

for each pending job H above the lowest placed class (highest first, at most `MAX_TRIED`), the plan without
every placed job of a lower class (but those a preemption was made for) and with H's pods put first-fit on
the whole GPUs, CPU and memory left free. If that plan passes every hard rule the verifier checks and its
objective, recomputed term by term as the `objective` rule recomputes the plan's (the least each term may
be), exceeds the plan's reported total beyond the terms' tolerances, the plan was not optimal and H waited
for nothing: one line `priority: ...` naming H, its class and the jobs it would displace.

Only whole-GPU and CPU pods of H are placed (a MIG or shared task, or a job with topology rules, is not
tried), its pods go only where their selectors, taints, spot and GPU memory allow, and where a term of the other
plan is not derived its objective is unknown and nothing is said: the rule rejects only what it can prove.
"""

from __future__ import annotations

from collections.abc import Callable

from placement_models import Assignment, Job, Objective, Plan

from placement.verify import capacity, cost, gang, mig, quota, reservation, selectors, sharing, topology
from placement.verify.candidates import statically_allowed
from placement.verify.context import Context
from placement.verify.objective import TERMS, check_objective

#: Pending jobs tried per plan, highest class first: the check costs a verification each.
MAX_TRIED = 8

#: The hard rules the other plan must pass (the objective, pending and cost-summary rules describe a plan's
#: report, which the other plan does not have).
_HARD: tuple[Callable[[Context], list[str]], ...] = (
    capacity.check_gpus, capacity.check_cpu, capacity.check_memory, capacity.check_gpu_memory,
    selectors.check_selector, selectors.check_taints, gang.check_gang, topology.check_required,
    topology.check_slice, cost.check_spot, cost.check_reserve, cost.check_provisioning, quota.check_quota,
    mig.check_mig, sharing.check_sharing, reservation.check_reservation,
)


def check_strict(ctx: Context) -> list[str]:
    request, plan = ctx.request, ctx.plan
    if request.policy.priority_mode != "strict" or plan.status != "optimal" or check_objective(ctx):
        return []  # a plan whose own objective does not add up is reported by the objective rule
    placed = {r.job.name: r.job for r in ctx.new_work()}
    if not placed:
        return []
    lowest = min(job.priority for job in placed.values())
    waiting = [j for j in request.jobs if j.name not in placed and j.priority > lowest and _simple(j)]
    kept = {p.for_job for p in plan.preemptions if p.for_job}
    for job in sorted(waiting, key=lambda j: -j.priority)[:MAX_TRIED]:
        out = [a for a in plan.assignments if a.job not in placed or placed[a.job].priority >= job.priority
               or a.job in kept]
        shown = sorted({a.job for a in plan.assignments} - {a.job for a in out})
        if not shown:
            continue
        pods = _first_fit(ctx, job, out)
        if pods is None:
            continue
        better = _score(ctx, plan.model_copy(update={"assignments": out + pods}))
        reported = plan.objective.total
        if better is not None and better[0] - better[1] > reported:
            return [f"priority: job {job.name} (priority {job.priority}) waits, yet the plan says optimal and "
                    f"placing it instead of {', '.join(shown)} (lower classes) scores {better[0]:.6f}, more than "
                    f"the plan's {reported:.6f}"]
    return []


def _simple(job: Job) -> bool:
    """A job the rule tries: whole-GPU or CPU pods, no topology rule."""
    return job.topology is None and all(t.mig_profile is None and t.gpu_share is None for t in job.tasks)


def _first_fit(ctx: Context, job: Job, kept: list[Assignment]) -> list[Assignment] | None:
    """The job's pods first-fit on the nodes' whole GPUs, CPU and memory left free by running work (without
    the plan's preemptions) and `kept`; None when they do not all fit."""
    free_gpus: dict[str, list[int]] = {}
    cpu: dict[str, float] = {}
    mem: dict[str, float] = {}
    used = {(a.node, g) for a in kept for g in a.gpus}
    for n in ctx.nodes.values():
        free_gpus[n.name] = [g for g in range(n.gpus) if g not in n.unhealthy_gpus and g not in n.mig
                             and g not in n.sharing and (n.name, g) not in ctx.held and (n.name, g) not in used]
        cpu[n.name] = n.cpu - ctx.running_cpu.get(n.name, 0.0)
        mem[n.name] = n.memory_gib - ctx.running_mem.get(n.name, 0.0)
    tasks = {(job_.name, t.name): t for job_ in ctx.request.jobs for t in job_.tasks}
    spot = {p.name for p in ctx.request.cluster.pools if p.capacity_type == "spot"}
    for a in kept:
        task = tasks.get((a.job, a.task))
        if task is not None and a.node in cpu:
            cpu[a.node] -= task.cpu
            mem[a.node] -= task.memory_gib
    pods: list[Assignment] = []
    for task in job.tasks:
        for pod in range(task.replicas):
            node = next((n for n in ctx.nodes.values() if len(free_gpus[n.name]) >= task.gpus
                         and cpu[n.name] >= task.cpu - 1e-9 and mem[n.name] >= task.memory_gib - 1e-9
                         and statically_allowed(job, task, n, n.pool in spot)), None)
            if node is None:
                return None
            gpus, free_gpus[node.name] = free_gpus[node.name][:task.gpus], free_gpus[node.name][task.gpus:]
            cpu[node.name] -= task.cpu
            mem[node.name] -= task.memory_gib
            pods.append(Assignment(job=job.name, task=task.name, pod=pod, node=node.name, gpus=gpus))
    return pods


def _score(ctx: Context, other: Plan) -> tuple[float, float] | None:
    """(the least the other plan's objective may be, its tolerance), when it passes every hard rule and each of
    its terms is derived; else None."""
    theirs = Context.build(ctx.request, other.model_copy(update={"objective": Objective(total=0.0)}))
    if any(rule(theirs) for rule in _HARD):
        return None
    total = tolerance = 0.0
    for checker in TERMS.values():
        found = checker(theirs)
        if found is None:
            return None  # a term the verifier does not derive: the other plan's objective is unknown
        total += min(e.low for e in found)
        tolerance += max(e.tolerance() for e in found)
    return total, tolerance
