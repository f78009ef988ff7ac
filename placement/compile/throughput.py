"""Throughput (soft): on a mixed fleet, a placement is worth the work it does, not the GPUs it counts.

A job's speed differs by GPU model, and not by one factor for every job (Gavel, OSDI'20): a language
model may run three times faster on a V100 than on a K80 where an RL agent gains a third. A planner that
counts GPUs gives the fast GPUs to whichever job comes first; one that counts work gives them to the jobs
that gain most, and every job finishes sooner. So a placed job with a speed table (placement.speeds) is
charged, per GPU-equivalent it asks for, `weights.throughput` × the share of its best speed it loses:

    1 − s / s_best      s: the speed of its slowest GPU in the plan (a gang runs at its slowest member)
                        s_best: its best speed over the GPU models of the cluster's GPU nodes

At the default weight 1.0 a GPU-equivalent placed is worth (priority) what it does: a job at half speed earns
half, so a placement on slow GPUs still beats leaving the job pending (the term never exceeds the job's
value), and the fast GPUs go where the difference is largest. A scheduler's loop (the `completion` preset)
sets 2: there a faster GPU frees soon, and a job waits rather than start at less than half its best speed
when nothing better is worth more. A job without a table, or a cluster of one model, adds nothing: plans
are today's.

Model: the distinct losses 0 < c_1 < ... < c_K of a job's models are steps; `slow[j,k]` is 1 exactly
when some pod of the job sits on a GPU node losing at least c_k (one row each way per task), and the
term is −Σ_k (c_k − c_{k−1}) × slow[j,k] × G_j, G_j the job's GPU-equivalents with every pod placed. The
flags, with the speed each step stands for (`ctx.slow`), also give turnaround (compile/waiting.py) the
speed a job runs at, so they are built when either weight is on.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from placement import speeds
from placement.compile import terms
from placement.compile.context import ModelContext
from placement.problem import Problem
from placement.rightsize import SUFFIX
from placement.solution import Placement

NAME = terms.THROUGHPUT


def losses(problem: Problem, j: int) -> dict[str | None, float] | None:
    """GPU model (canonical; None: a GPU node without one) -> the share of its best speed job j loses there,
    over the models of the cluster's GPU nodes; None when the job has no table or loses nothing anywhere."""
    table = problem.speeds.pending[j] if problem.speeds.pending else None
    if table is None:
        return None
    models = problem.speeds.models
    if not models:
        return None
    best = max(speeds.speed(table, m) for m in models)
    loss = {m: 1.0 - speeds.speed(table, m) / best for m in models}
    return loss if any(v > 0 for v in loss.values()) else None


def job_gpus(problem: Problem, j: int) -> float:
    """GPU-equivalents job j asks for with every pod placed, over its declared tasks (not the MIG twins a
    right-size offer adds beside them; CPU-only tasks count nothing)."""
    return sum(problem.gpu_value(t) * problem.tasks[t].replicas for t in problem.job_tasks[j]
               if not problem.tasks[t].name.endswith(SUFFIX))


def apply(ctx: ModelContext) -> None:
    problem = ctx.problem
    weight = problem.request.policy.weights.throughput
    turnaround = problem.request.policy.weights.turnaround  # compile/waiting.py reads the flags too
    if (weight == 0 and turnaround == 0) or not problem.speeds.any:
        return
    flags: list[tuple[int, float, cp_model.IntVar]] = []  # (job, loss step, slow flag)
    coefs: list[float] = []
    for j in range(len(problem.jobs)):
        loss = losses(problem, j)
        if not loss:
            continue
        gpus = job_gpus(problem, j)
        table = problem.speeds.pending[j]
        best = speeds.best(table, problem.speeds.models)
        by_step = {v: speeds.speed(table, m) for m, v in loss.items() if v > 0}  # loss -> the speed it stands for
        previous = 0.0
        for k, step in enumerate(sorted(by_step)):
            at_least = [(ctx.x[t][i], ctx.upper[t][i]) for t in problem.job_tasks[j] if problem.gpu_value(t) > 0
                        for i, n in enumerate(ctx.candidates[t].tolist())
                        if loss.get(problem.gpu_models[n], 0.0) >= step]
            if not at_least:
                break  # no candidate that slow (a trimmed model): nor any slower one
            slow = ctx.model.new_bool_var(f"slow[{j},{k}]")
            pods = cp_model.LinearExpr.sum([v for v, _ in at_least])
            ctx.model.add(pods <= sum(u for _, u in at_least) * slow)
            ctx.model.add(pods >= slow)
            flags.append((j, step, slow))
            coefs.append(-(step - previous) * gpus)
            ctx.slow.setdefault(j, []).append((by_step[step], slow))
            previous = step
        ctx.best_speed[j] = best
    if not flags:
        return
    if weight > 0:
        ctx.objective.add(NAME, [f for _, _, f in flags], coefs, weight)

    def hint(ctx: ModelContext, placement: Placement, values: dict[int, int]) -> None:
        worst: dict[int, float] = {}
        for (t, n), k in placement.counts.items():
            j = problem.tasks[t].job
            loss = losses(problem, j) if k and problem.gpu_value(t) > 0 else None
            if loss:
                worst[j] = max(worst.get(j, 0.0), loss.get(problem.gpu_models[n], 0.0))
        for j, step, flag in flags:
            values[flag.index] = int(worst.get(j, 0.0) >= step)

    ctx.on_hint(hint)
