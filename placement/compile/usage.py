"""Usage: what the last metrics window saw, as terms of the model.

* **usage.over_declared** — a pending task that declares `gpu_memory_gib` but whose job used less
  loses that unused fraction of its priority value, times `weights.over_declared`: declared 32 GiB,
  used 8 → 0.75 × 0.5 of its value with the default weight. Only a declaration is compared: a task
  that declares nothing asked for no memory in particular, and its idle GPU is the usage report's
  business (reclaim, right-sizing), not a penalty. An honest job beats an over-declared twin.

* **usage.right_size** — a right-size offer (`placement.rightsize`) pairs a one-GPU task with a MIG
  alternative; the two place at most the declared task's pods, and only with the gang. An instance
  pod keeps the job's full priority value (it does the same work, by observation) and earns
  `weights.right_size` per GPU it frees, so, other terms equal, the solver right-sizes whenever an
  instance is there (the fairness term counts whole GPUs only: a team under its share may keep them).
"""

from __future__ import annotations

from placement_models import Job, Task

from placement import devices
from placement.compile import terms
from placement.compile.context import ModelContext
from placement.compile.priority import class_weights
from placement.rightsize import SUFFIX, pairs

OVER_DECLARED = terms.USAGE_OVER_DECLARED
RIGHT_SIZE = terms.USAGE_RIGHT_SIZE


def apply(ctx: ModelContext) -> None:
    _over_declared(ctx)
    _right_size(ctx)


def _priority_values(ctx: ModelContext) -> list[float]:
    """Per task, one pod's priority value (priority level weight × GPU-equivalents), as compile/priority.py."""
    problem = ctx.problem
    levels = class_weights(problem)
    return [levels[problem.jobs[t.job].priority] * problem.gpu_value(t.index) for t in problem.tasks]


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
        # a smaller slice saves at most the whole GPU
        ctx.objective.add(RIGHT_SIZE, ctx.x[p.alternative], coefs, ceiling=keep + weights.right_size)
