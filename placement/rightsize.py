"""Right-size offers: the usage stage of the pipeline, a rewrite of the request before it is indexed.

`placement usage annotate` writes `observed_gpu_memory_gib` (peak memory of one of the job's GPUs)
and `observed_sm_util` onto jobs. A job that opts in (`right_size: true`) gets, beside each of its
one-GPU tasks, an *alternative* task: the same pods, each on a MIG instance holding observed ×
`policy.right_size_headroom` (`mig_profile: auto`), on nodes where that instance also has
observed_sm_util × headroom of the SMs. Per pod the plan takes the GPU or the instance: the two
tasks together place exactly as many pods as the declared one has (the gang counts them as one).

Every later stage sees an ordinary MIG task beside its declared twin, and each handles the pair
where its own concern lives: the greedy keeps one choice per pod (`placement.baseline.gangs`),
the model values the instance and its saving (`placement.compile.usage`), decode gives the plan
back in the request's own names with the saving (`placement.decode.usage`), and the verifier
checks the instance against the observation (`placement.verify.usage`).

GPU_UTIL (the time any kernel ran) is an upper bound on the share of SMs a job keeps busy, so the
compute test is safe but strict: a job busy 12 % of the time does not fit a 1g (1/7) instance with
the default headroom, and only the smallest instance holding the memory is offered.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from placement_models import PlacementRequest

from placement import devices
from placement import problem as problem_mod
from placement.problem import Problem, Slot

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
    #: pods of the declared task the gang needs (`Job.task_minimum`): the two tasks place them together
    minimum: int = 0


@dataclass(frozen=True)
class Pair:
    """An offer in problem indices: job j, declared task t, alternative task a."""

    offer: Offer
    job: int
    task: int
    alternative: int


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
                                 job.observed_gpu_memory_gib * headroom, None if util is None else util * headroom,
                                 job.task_minimum(task)))
    return out


def with_alternatives(request: PlacementRequest, chosen: list[Offer]) -> PlacementRequest:
    """The request with each offer's MIG task added after its declared task; the gang keeps its size.

    The job's minimum is kept explicit (`min_available`: its `needed`; other tasks: their own minimum); a
    declared task and its alternative get `min_replicas` 0, as their shared minimum is the offer's
    (`gang_minimums`)."""
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
            offer = next((o for o in by_job[job.name] if o.task == task.name), None)
            raw_task["min_replicas"] = job.task_minimum(task) if offer is None else 0
            tasks.append(raw_task)
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
    problem.facts.put(_PAIRS, problem, found)
    return problem


#: The offers of a problem built by `build_problem` (none when nobody opts in).
_PAIRS: Slot[list[Pair]] = Slot("right_size")


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
    return problem.facts.slot(_PAIRS, problem, list)


def gang_minimums(problem: Problem, j: int) -> list[tuple[tuple[int, ...], int]]:
    """Job j's per-task minimums in problem indices: (tasks, pods they must place together) for each declared
    task, in the job's order. A task and its right-size alternative share the declared task's minimum (a pod
    takes the GPU or the instance); any other task is alone with `Job.task_minimum`."""
    job = problem.jobs[j]
    offered = pairs(problem)
    if not offered:  # no right-size offers (most requests): each task alone
        return [((t,), job.task_minimum(problem.tasks[t].spec)) for t in problem.job_tasks[j]]
    found = {p.task: p for p in offered if p.job == j}
    alternatives = {p.alternative for p in found.values()}
    out: list[tuple[tuple[int, ...], int]] = []
    for t in problem.job_tasks[j]:
        if t in alternatives:
            continue
        p = found.get(t)
        out.append(((t,), job.task_minimum(problem.tasks[t].spec)) if p is None
                   else ((t, p.alternative), p.offer.minimum))
    return out
