"""Priority: the value of a plan is the priority-weighted GPUs it places.

A pod is worth its GPU-equivalents (whole GPUs, its share, or its MIG instance's part of a GPU:
`Problem.gpu_value`; CPU-only pods 0.01, so they are placed when free) times its class weight.

* `strict` (`policy.priority_mode`, the default), as Kubernetes PriorityClasses: one pod of a class
  outweighs everything every lower class could place together, so the model prefers any placement
  of a higher class to any amount of lower-class work, and within a class the other terms decide.
  The weight of class k is (Σ_{i<k} w_i·G_i + M) / v_k (G_i: the GPU-equivalents class i asks for;
  M: a margin for the other terms, which value a GPU at most a few units — fairness, 30 days of
  aging — times all pending GPU-equivalents; v_k: the smallest pod value of class k). The weights
  grow geometrically with the number of classes, so they are capped
  (`STRICT_CAP`) where CP-SAT's arithmetic would suffer; above the cap the search keeps the
  greedy plan (strict by construction) unless its own plan is at least as good class by class
  (placement.search.strategy).
* `weighted`: each distinct level weighs 1 (lowest) to 10 (highest) per GPU, so a high-priority
  gang outweighs several low ones of the same size but a huge low-priority gang is not worthless.

Only jobs that could fit at all are in the problem (placement.screen), so a job that can never
fit changes no weight.
"""

from __future__ import annotations

from placement.compile.context import ModelContext
from placement.problem import Problem

CPU_POD_VALUE = 0.01
TOP_WEIGHT = 10.0
#: Largest class weight × GPU-equivalents the strict weights may reach (objective units; × SCALE in the model).
STRICT_CAP = 1e9


def level_weights(priorities: list[int]) -> dict[int, float]:
    levels = sorted(set(priorities))
    if len(levels) <= 1:
        return dict.fromkeys(levels, 1.0)
    return {p: 1.0 + (TOP_WEIGHT - 1.0) * i / (len(levels) - 1) for i, p in enumerate(levels)}


def class_weights(problem: Problem) -> dict[int, float]:
    """Weight per GPU-equivalent of each priority level of the problem's jobs, for `policy.priority_mode`
    (computed once per problem: every module that values a pod asks)."""
    cached = problem.extras.get("class_weights")
    if cached is None:
        priorities = [job.priority for job in problem.jobs]
        if problem.request.policy.priority_mode == "weighted":
            cached = level_weights(priorities)
        else:
            cached = strict_weights(problem)
        problem.extras["class_weights"] = cached
    return cached  # type: ignore[return-value]


def strict_weights(problem: Problem) -> dict[int, float]:
    """Lexicographic class weights (module docstring), capped at STRICT_CAP."""
    asked: dict[int, float] = {}
    smallest: dict[int, float] = {}
    for t, task in enumerate(problem.tasks):
        level = problem.jobs[task.job].priority
        value = pod_value(problem.gpu_value(t))
        asked[level] = asked.get(level, 0.0) + value * task.replicas
        smallest[level] = min(smallest.get(level, value), value)
    for job in problem.jobs:  # a job without tasks still has a class
        asked.setdefault(job.priority, 0.0)
        smallest.setdefault(job.priority, 1.0)
    knobs = problem.request.policy.weights
    margin = sum(asked.values()) * (1.0 + knobs.fairness + 30.0 * knobs.aging + knobs.topology) + len(
        problem.jobs) * knobs.turnaround
    weights: dict[int, float] = {}
    below, capped = 0.0, False
    for level in sorted(asked):
        w = 1.0 if not weights else (below + margin) / smallest[level]
        cap = STRICT_CAP / max(asked[level], 1.0)
        if w > cap:
            w, capped = max(cap, max(weights.values())), True
        weights[level] = w
        below += w * asked[level]
    problem.extras["class_weights_capped"] = capped
    return weights


def nominal_value(problem: Problem) -> float:
    """Per GPU a team holds within its nominal quota (the quota term, × weights.priority): above every
    priority class, as Kueue admits a workload that fits its ClusterQueue's nominal quota before one that
    must borrow, whatever their priorities. Weighted: above the 1..TOP_WEIGHT spread of levels.

    The whole term (this × the cluster's GPUs) is held to STRICT_CAP like the class weights; where that
    binds, a plan that gives up in-nominal work for a class is caught by the search (placement.search.strategy)."""
    weights = class_weights(problem)
    if problem.request.policy.priority_mode == "weighted":
        return TOP_WEIGHT
    cached = problem.extras.get("nominal_value")
    if cached is None:
        asked = sum(pod_value(problem.gpu_value(t)) * task.replicas * weights[problem.jobs[task.job].priority]
                    for t, task in enumerate(problem.tasks))
        gpus = max(1.0, float(problem.capacity[:, 0].sum()))
        cached = max(TOP_WEIGHT, min(asked + max(weights.values(), default=1.0), STRICT_CAP / gpus))
        problem.extras["nominal_value"] = cached
    return float(cached)  # type: ignore[arg-type]


def is_strict(problem: Problem) -> bool:
    """Do the class weights separate every class (no cap reached)? Then the model itself is strict."""
    weights = class_weights(problem)
    if problem.request.policy.priority_mode != "strict" or len(weights) <= 1:
        return True
    return not problem.extras.get("class_weights_capped", False)


def pod_value(gpus: float) -> float:
    return float(gpus) if gpus > 0 else CPU_POD_VALUE


def apply(ctx: ModelContext) -> None:
    weights = class_weights(ctx.problem)
    weight = ctx.problem.request.policy.weights.priority
    for t, task in enumerate(ctx.problem.tasks):
        w = weights[ctx.problem.jobs[task.job].priority] * pod_value(ctx.problem.gpu_value(t))
        ctx.objective.add("priority", ctx.x[t], [w] * len(ctx.x[t]), weight)
