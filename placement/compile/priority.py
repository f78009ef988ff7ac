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
  With nominal quotas the classes rank in tiers, as Kueue admits: first GPUs within their team's
  nominal, class by class, then every placed pod, class by class (`nominal_bonus`, compile/quota.py);
  the same recursion gives each tier its weight.
* `weighted`: each distinct level weighs 1 (lowest) to 10 (highest) per GPU, so a high-priority
  gang outweighs several low ones of the same size but a huge low-priority gang is not worthless.

Only jobs that could fit at all are in the problem (placement.screen), so a job that can never
fit changes no weight.
"""

from __future__ import annotations

from placement.compile import terms, throughput
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
    return _tiers(problem)[0]


def nominal_bonus(problem: Problem) -> dict[int, float]:
    """Per level, what a GPU-equivalent placed within its team's nominal quota adds to the class weight (the
    quota term, × weights.priority; compile/quota.py). Kueue admits the workloads that fit their
    ClusterQueue's nominal before those that must borrow, and among either by priority; so strict
    classes rank in tiers, highest first: within nominal by class, then every placed pod by class.
    Weighted: TOP_WEIGHT for every level, above the 1..TOP_WEIGHT spread."""
    return _tiers(problem)[1]


def _tiers(problem: Problem) -> tuple[dict[int, float], dict[int, float]]:
    cached = problem.facts.class_tiers
    if cached is None:
        if problem.request.policy.priority_mode == "weighted":
            base = level_weights([job.priority for j, job in enumerate(problem.jobs) if j not in problem.twins])
            cached = (base, dict.fromkeys(base, TOP_WEIGHT))
        else:
            cached = strict_weights(problem)
        for j in problem.twins:  # a moving running job's class is worth nothing new (compile/migration.py)
            cached[0].setdefault(problem.jobs[j].priority, 0.0)
            cached[1].setdefault(problem.jobs[j].priority, 0.0)
        problem.facts.class_tiers = cached
    return cached


def with_nominal(problem: Problem) -> list[bool]:
    """Per team: does it hold a nominal GPU quota somewhere (so its work may rank in the within-nominal tiers)?"""
    index = problem.teams
    if index is None or not index.scopes:
        return []
    return [any(int(scope.nominal[team]) > 0 for scope in index.scopes) for team in range(index.size)]


def strict_weights(problem: Problem) -> tuple[dict[int, float], dict[int, float]]:
    """Lexicographic tier weights (module docstring): (class weights, within-nominal bonuses), capped at
    STRICT_CAP. A tier's total weight per GPU-equivalent exceeds everything the tiers below it could add."""
    asked: dict[int, float] = {}
    inside: dict[int, float] = {}
    smallest: dict[int, float] = {}
    smallest_in: dict[int, float] = {}
    teams = with_nominal(problem)
    for t, task in enumerate(problem.tasks):
        job = task.job
        if job in problem.twins:
            continue  # a running job moving (placement.migration) asks nothing of its class
        level = problem.jobs[job].priority
        value = pod_value(problem.gpu_value(t))
        asked[level] = asked.get(level, 0.0) + value * task.replicas
        if teams and problem.job_team[job] >= 0 and teams[problem.job_team[job]] and problem.gpu_value(t) > 0:
            inside[level] = inside.get(level, 0.0) + value * task.replicas
            # the least a job within nominal adds there: one GPU pod (an elastic job's credit moves by pods)
            smallest_in[level] = min(smallest_in.get(level, value), value)
        smallest[level] = min(smallest.get(level, value), value)
    for j, job in enumerate(problem.jobs):  # a job without tasks still has a class
        if j in problem.twins:
            continue
        asked.setdefault(job.priority, 0.0)
        smallest.setdefault(job.priority, 1.0)
    knobs = problem.request.policy.weights
    # the throughput term (compile/throughput.py) may take up to its weight per GPU-equivalent, where speeds are given
    paced = knobs.throughput if any(throughput.losses(problem, j) for j in range(len(problem.jobs))
                                    if j not in problem.twins) else 0.0
    margin = sum(asked.values()) * (1.0 + knobs.fairness + 30.0 * knobs.aging + knobs.topology + paced) + (
        len(problem.jobs) - len(problem.twins)) * knobs.turnaround
    weights: dict[int, float] = {}
    bonus: dict[int, float] = dict.fromkeys(asked, 0.0)
    below, top = 0.0, 0.0
    tiers = [(False, level) for level in sorted(asked)] + [(True, level) for level in sorted(inside)]
    for within, level in tiers:
        size = inside[level] if within else asked[level]
        w = 1.0 if not top else (below + margin) / (smallest_in if within else smallest)[level]
        cap = STRICT_CAP / max(size, 1.0)
        if w > cap:
            w = max(cap, top)
        top = max(top, w)
        if within:
            bonus[level] = w - weights[level]
            below += bonus[level] * size
        else:
            weights[level] = w
            below += w * size
    return weights, bonus


def pod_value(gpus: float) -> float:
    return float(gpus) if gpus > 0 else CPU_POD_VALUE


def apply(ctx: ModelContext) -> None:
    weights = class_weights(ctx.problem)
    weight = ctx.problem.request.policy.weights.priority
    for t, task in enumerate(ctx.problem.tasks):
        if task.job in ctx.problem.twins:
            continue  # a move earns what it gains in work (compile/migration.py), not its class again
        w = weights[ctx.problem.jobs[task.job].priority] * pod_value(ctx.problem.gpu_value(t))
        ctx.objective.add(terms.PRIORITY, ctx.x[t], [w] * len(ctx.x[t]), weight)
