"""Usage: what the last metrics window saw feeds this plan (issue 10).

`placement usage annotate` writes `observed_gpu_memory_gib` (peak memory of one of the job's GPUs)
and `observed_sm_util` onto jobs. Two things follow here:

* **usage.over_declared** — a pending task that declares `gpu_memory_gib` but whose job used less
  loses that unused fraction of its priority value, times `weights.over_declared`: declared 32 GiB,
  used 8 → 0.75 × 0.5 of its value with the default weight. Only a declaration is compared: a task
  that declares nothing asked for no memory in particular, and its idle GPU is the usage report's
  business (reclaim, right-sizing), not a penalty. An honest job beats an over-declared twin.

* **right-size offer** (`right_size: true`) — each one-GPU task of the job gets an *alternative*
  task beside it: the same pods, each on a MIG instance holding observed × `policy.right_size_headroom`
  (`mig_profile: auto`) on nodes where that instance also has observed_sm_util × headroom of the SMs
  (`build_problem`). Per pod the solver takes the GPU or the instance: the two tasks together
  place exactly as many pods as the declared one has (the gang counts them as one). An instance
  pod keeps the job's full priority value (it does the same work, by observation) and earns
  `weights.right_size` per GPU it frees, so, other terms equal, the solver right-sizes whenever an
  instance is there (the fairness term counts whole GPUs only: a team under its share may keep them).
  The offer is a rewrite of the request before the problem is indexed (`build_problem`), so every
  other module sees an ordinary MIG task; `trim` keeps the greedy plan to one choice per pod and
  `fold` gives the plan back in the request's own names, with the saving (`Plan.right_sized`).

GPU_UTIL (the time any kernel ran) is an upper bound on the share of SMs a job keeps busy, so the
compute test is safe but strict: a job busy 12 % of the time does not fit a 1g (1/7) instance with
the default headroom, and only the smallest instance holding the memory is offered.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from placement_models import Job, PlacementRequest, Plan, RightSized, Task

from placement import catalog, devices
from placement import problem as problem_mod
from placement.compile.context import ModelContext
from placement.compile.priority import level_weights
from placement.problem import Problem
from placement.solution import Placement

OVER_DECLARED = "usage.over_declared"
RIGHT_SIZE = "usage.right_size"
#: Key of the offers in `Problem.extras`.
EXTRA = "right_size"
#: The alternative task's name: the declared task's, with this suffix ('~' keeps it apart from real names).
SUFFIX = "~right-size"


@dataclass(frozen=True)
class Offer:
    """One one-GPU task of a `right_size` job, and the MIG task offered beside it."""

    job: str
    task: str
    alternative: str
    observed_gib: float
    needs_gib: float
    #: share of the GPU's SMs the instance must have: observed_sm_util × headroom (None: not observed)
    needs_compute: float | None = None


@dataclass(frozen=True)
class Pair:
    """An offer in problem indices: job j, declared task t, alternative task a."""

    offer: Offer
    job: int
    task: int
    alternative: int


# --------------------------------------------------------------------------------------------
# Offers: a rewrite of the request before it is indexed


def offers(request: PlacementRequest) -> list[Offer]:
    """Every one-GPU task of a `right_size` job with an observation (the model refuses other shapes)."""
    headroom = request.policy.right_size_headroom
    out = []
    for job in request.jobs:
        if not job.right_size or job.observed_gpu_memory_gib is None:
            continue
        names = {t.name for t in job.tasks}
        for task in job.tasks:
            alt = task.name + SUFFIX
            if task.gpus == 1 and alt not in names:
                util = job.observed_sm_util
                out.append(Offer(job.name, task.name, alt, job.observed_gpu_memory_gib,
                                 job.observed_gpu_memory_gib * headroom, None if util is None else util * headroom))
    return out


def with_alternatives(request: PlacementRequest, chosen: list[Offer]) -> PlacementRequest:
    """The request with each offer's MIG task added after its declared task; the gang keeps its size."""
    by_job: dict[str, list[Offer]] = {}
    for o in chosen:
        by_job.setdefault(o.job, []).append(o)
    data = request.model_dump(mode="json")
    for job, raw in zip(request.jobs, data["jobs"], strict=True):
        if job.name not in by_job:
            continue
        raw["min_available"] = job.needed
        tasks = []
        for task, raw_task in zip(job.tasks, raw["tasks"], strict=True):
            tasks.append(raw_task)
            offer = next((o for o in by_job[job.name] if o.task == task.name), None)
            if offer is not None:
                tasks.append({**raw_task, "name": offer.alternative, "gpus": 0, "mig_profile": "auto",
                              "gpu_memory_gib": offer.needs_gib})
        raw["tasks"] = tasks
    return PlacementRequest.model_validate(data)


def build_problem(request: PlacementRequest) -> Problem:
    """`problem.build`, with the right-size offers that some node could take (an offer no MIG node can
    hold would only clutter pending reasons, so it is withdrawn and the request indexed again).

    Compute: GPU_UTIL (the time any kernel ran) is at least the share of SMs a job keeps busy, so an
    instance with `compute_slices` ≥ observed_sm_util × headroom of the GPU's is sure to be enough;
    nodes whose instance (the smallest holding the memory) has fewer are dropped from the offer.
    """
    chosen = offers(request)
    if not chosen:
        return problem_mod.build(request)
    problem = problem_mod.build(with_alternatives(request, chosen))
    masks = {p.offer: _compute_ok(problem, p) for p in _pairs(problem, chosen)}
    live = [o for o in chosen if masks[o].any()]
    if len(live) < len(chosen):
        if not live:
            return problem_mod.build(request)
        problem = problem_mod.build(with_alternatives(request, live))
        masks = {p.offer: _compute_ok(problem, p) for p in _pairs(problem, live)}
    found = _pairs(problem, live)
    tasks = list(problem.tasks)
    for p in found:
        keep = masks[p.offer]
        info = tasks[p.alternative]
        tasks[p.alternative] = replace(info, candidates=info.candidates[keep], max_per_node=info.max_per_node[keep],
                                       funnel=(*info.funnel, ("right_size_compute", int(keep.sum()))))
    problem = replace(problem, tasks=tuple(tasks))
    problem.extras[EXTRA] = found
    return problem


def _compute_ok(problem: Problem, p: Pair) -> np.ndarray:
    """Per candidate node of the alternative: does its instance have the SM share the job needs?"""
    info = problem.tasks[p.alternative]
    need = p.offer.needs_compute
    view = problem.devices
    if need is None or view is None:
        return np.ones(info.candidates.size, dtype=bool)
    out = []
    for n in info.candidates.tolist():
        geo = view.geometry(n)
        profile = devices.profile_for(info.spec, geo)
        out.append(geo is not None and profile is not None
                   and profile.compute_slices / geo.compute_slices >= need - 1e-9)
    return np.array(out, dtype=bool)


def _pairs(problem: Problem, chosen: list[Offer]) -> list[Pair]:
    jobs = {job.name: j for j, job in enumerate(problem.jobs)}
    out = []
    for o in chosen:
        j = jobs[o.job]
        by_name = {problem.tasks[t].name: t for t in problem.job_tasks[j]}
        out.append(Pair(o, j, by_name[o.task], by_name[o.alternative]))
    return out


def pairs(problem: Problem) -> list[Pair]:
    found = problem.extras.get(EXTRA, [])
    assert isinstance(found, list)
    return found


# --------------------------------------------------------------------------------------------
# The model


def apply(ctx: ModelContext) -> None:
    _over_declared(ctx)
    _right_size(ctx)


def _priority_values(ctx: ModelContext) -> list[float]:
    """Per task, one pod's priority value (priority level weight × GPU-equivalents), as compile/priority.py."""
    problem = ctx.problem
    levels = level_weights([job.priority for job in problem.jobs])
    return [levels[problem.jobs[t.job].priority] * devices.gpu_value(problem, t.index) for t in problem.tasks]


def _over_declared(ctx: ModelContext) -> None:
    problem = ctx.problem
    weights = problem.request.policy.weights
    if not weights.over_declared or not any(j.observed_gpu_memory_gib is not None for j in problem.jobs):
        return
    values = _priority_values(ctx)
    for j, job in enumerate(problem.jobs):
        for t in problem.job_tasks[j]:
            unused = unused_fraction(job, problem.tasks[t].spec)
            if unused > 0:
                ctx.objective.add(OVER_DECLARED, ctx.x[t], [-unused * values[t]] * len(ctx.x[t]),
                                  weights.over_declared * weights.priority)


def unused_fraction(job: Job, task: Task) -> float:
    """The part of the task's declared GPU memory its job did not use (0 without a declaration or an
    observation; the right-size alternative declares observed × headroom, so it is never over-declared)."""
    declared, seen = task.gpu_memory_gib, job.observed_gpu_memory_gib
    if declared is None or seen is None or declared <= 0 or task.name.endswith(SUFFIX):
        return 0.0
    return max(0.0, 1.0 - seen / declared)


def _right_size(ctx: ModelContext) -> None:
    problem = ctx.problem
    found = pairs(problem)
    if not found:
        return
    weights = problem.request.policy.weights
    values = _priority_values(ctx)
    view = problem.devices
    assert view is not None
    for p in found:
        replicas = problem.tasks[p.task].replicas
        ctx.model.add(ctx.task_pods(p.task) + ctx.task_pods(p.alternative) <= replicas * ctx.placed[p.job])
        # Keep the declared value (a pod counts as one whole GPU in the priority term) and earn the saving.
        keep = (values[p.task] - values[p.alternative]) * weights.priority
        spec = problem.tasks[p.alternative].spec
        coefs = []
        for n in ctx.candidates[p.alternative].tolist():
            geo = view.geometry(n)
            profile = devices.profile_for(spec, geo)
            assert geo is not None and profile is not None, "candidate filtering keeps only nodes offering one"
            coefs.append(keep + weights.right_size * (1.0 - profile.memory_slices / geo.memory_slices))
        ctx.objective.add(RIGHT_SIZE, ctx.x[p.alternative], coefs)


# --------------------------------------------------------------------------------------------
# Around the solve: the greedy plan, and the plan in the request's own names


def trim(problem: Problem, placement: Placement) -> Placement:
    """One choice per pod in a greedy plan: the greedy fills both tasks of a pair, so drop the surplus
    whole-GPU pods (keeping the instances, the saving); a gang left short is dropped whole."""
    found = pairs(problem)
    if not found:
        return placement
    for p in found:
        surplus = placement.task_pods(p.task) + placement.task_pods(p.alternative) - problem.tasks[p.task].replicas
        for key in sorted((k for k in placement.counts if k[0] == p.task), reverse=True):
            if surplus <= 0:
                break
            take = min(surplus, placement.counts[key])
            placement.counts[key] -= take
            surplus -= take
            if not placement.counts[key]:
                del placement.counts[key]
    for j in {p.job for p in found}:
        tasks = set(problem.job_tasks[j])
        placed = sum(k for (t, _), k in placement.counts.items() if t in tasks)
        if 0 < placed < problem.jobs[j].needed:
            for key in [k for k in placement.counts if k[0] in tasks]:
                del placement.counts[key]
    return placement


def fold(problem: Problem, plan: Plan) -> Plan:
    """The plan in the request's names: an alternative's pods become the declared task's next pods,
    pending reasons name the declared task, and each offer taken is listed with its saving."""
    found = pairs(problem)
    if not found:
        return plan
    rename = {(p.offer.job, p.offer.alternative): p.offer for p in found}
    used = {}
    for a in plan.assignments:
        if (a.job, a.task) not in rename:
            used[a.job, a.task] = used.get((a.job, a.task), 0) + 1
    nodes = {n.name: n for n in problem.nodes}
    moved: dict[tuple[str, str], list[tuple[str, float]]] = {}
    assignments = []
    for a in plan.assignments:
        offer = rename.get((a.job, a.task))
        if offer is None or a.mig is None:
            assignments.append(a)
            continue
        base = used.get((a.job, offer.task), 0)
        assignments.append(a.model_copy(update={"task": offer.task, "pod": base + a.pod}))
        geo = catalog.mig_geometry(nodes[a.node].gpu_model)
        profile = geo.profile(a.mig.profile) if geo is not None else None
        share = profile.memory_slices / geo.memory_slices if geo is not None and profile is not None else 1.0
        moved.setdefault((a.job, offer.task), []).append((a.mig.profile, share))
    right_sized = []
    for p in found:
        got = moved.get((p.offer.job, p.offer.task))
        if got:
            right_sized.append(RightSized(
                job=p.offer.job, task=p.offer.task, pods=len(got), profiles=sorted({name for name, _ in got}),
                observed_gpu_memory_gib=p.offer.observed_gib, needs_gib=round(p.offer.needs_gib, 6),
                gpus_saved=round(sum(1.0 - share for _, share in got), 6)))
    pending = [q.model_copy(update={"reason": _renamed(q.reason, found)}) for q in plan.pending]
    return plan.model_copy(update={"assignments": assignments, "pending": pending, "right_sized": right_sized})


def _renamed(reason: str, found: list[Pair]) -> str:
    for p in found:
        reason = reason.replace(p.offer.alternative, f"{p.offer.task} (right-sized)")
    return reason
