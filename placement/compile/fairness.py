"""Fairness and aging (soft): under-served teams first, and a job's value grows while it waits.

**fairness.** Each team's entitlement E_T is its weighted max-min share of the cluster's GPUs
given its demand, quota and past usage (placement/teams.py). The team's utility is concave and
piecewise linear in the GPUs it holds after the plan, A_T: each quarter of E_T is worth less per
GPU than the one before (1, ¾, ½, ¼ × the weight), and GPUs beyond E_T add nothing here. So, at
equal priority, the next free GPUs go to the team furthest below its entitlement, and a team
above it gains nothing from taking more. Encoded one-sidedly (docs/solver.md §5):

    seg_{T,k} ∈ [0, E_T/4],   QUANTUM·Σ_k seg_{T,k} ≤ A_T,   maximise Σ slope_k·seg_{T,k}

Decreasing slopes make the solver fill the segments in order, so no ordering constraint is needed.
A_T counts GPU-equivalents in milli-GPU (MIG and shared pods their part of a GPU, as quotas do:
compile/quota.py); the segments count quanta (`compile.quota.quantum`: whole GPUs when every pod
takes whole GPUs), fine enough for a MIG instance or a share, coarse enough for integer objective
coefficients.

**fair share in work** (`policy.fair_share: work`): A_T counts each GPU-equivalent times its job's speed
there over the job's best on the cluster's GPU models (placement.speeds; 1 without a table), Gavel's
normalised throughput: a team whose jobs run on GPUs slow for them holds less, so it is served first. A
pending pod counts its own GPU's speed (linear), a running job its slowest GPU's; each coefficient is
rounded to milli-GPU. The entitlements stay in GPUs: a team's max-min share of the cluster.

**aging.** A placed pod is worth `weights.aging` × its GPU-equivalents (0.01 for a CPU-only pod,
as in the priority term) per day its job has waited since `submitted_at` (against the planning
time), capped at `MAX_AGE_DAYS`, so that a long wait eventually outweighs a gap in priority.
"""

from __future__ import annotations

import numpy as np
from ortools.sat.python import cp_model

from placement import speeds
from placement.compile import terms
from placement.compile.context import SCALE, ModelContext
from placement.compile.priority import pod_value
from placement.compile.quota import Held, bounds, quantum, team_gpus, team_use
from placement.holdings import held_after, problem_entitlements
from placement.problem import Problem
from placement.solution import Placement
from placement.teams import MILLI

#: Value per GPU of each successive quarter of a team's entitlement (× weights.fairness).
SLOPES = (1.0, 0.75, 0.5, 0.25)
#: Waiting counts up to this many days: bounds the objective and mirrors Slurm's PriorityMaxAge.
MAX_AGE_DAYS = 30.0


def segments(entitlement: float) -> list[int]:
    """Integer widths of the utility's segments: breakpoints at round(E·k/4), so they add up to round(E)."""
    points = [round(entitlement * k / len(SLOPES)) for k in range(len(SLOPES) + 1)]
    return [b - a for a, b in zip(points, points[1:], strict=False)]


def fill(held: int, widths: list[int]) -> list[int]:
    """How the GPUs a team holds fill the segments, lowest (most valuable) first."""
    out = []
    for w in widths:
        take = max(0, min(w, held))
        out.append(take)
        held -= take
    return out


def apply(ctx: ModelContext) -> None:
    _fairness(ctx)
    _aging(ctx)


def _fairness(ctx: ModelContext) -> None:
    problem = ctx.problem
    weight = problem.request.policy.weights.fairness
    if problem.teams is None or weight == 0:
        return
    entitled = problem_entitlements(problem)
    everywhere = np.ones(problem.n_nodes, dtype=bool)
    held = team_work(ctx) if problem.request.policy.fair_share == "work" else team_gpus(ctx, everywhere)
    segs: dict[int, list[cp_model.IntVar]] = {}
    step = quantum(problem)  # milli-GPU per segment unit
    per_quantum = step / MILLI  # GPUs per segment unit
    for team, (variables, coefs, const) in enumerate(held):
        widths = segments(float(entitled[team]) / per_quantum)
        ctx.objective.cap(terms.FAIRNESS, sum(slope * per_quantum * w for slope, w in zip(SLOPES, widths, strict=True)
                                          if slope > 0), weight)
        if not variables or not any(widths):
            continue  # nothing the plan can change, or nothing owed
        seg = [ctx.model.new_int_var(0, w, f"fair[{team},{k}]") for k, w in enumerate(widths)]
        ctx.model.add(step * cp_model.LinearExpr.sum(seg)
                      <= cp_model.LinearExpr.weighted_sum(variables, coefs) + const)
        ctx.objective.add(terms.FAIRNESS, seg, [slope * per_quantum for slope in SLOPES], weight)
        segs[team] = seg

    def hint(ctx: ModelContext, placement: Placement, values: dict[int, int]) -> None:
        if problem.request.policy.fair_share == "work":  # the held expression at the placement's values
            after = [sum(c * values[v.index] for v, c in zip(variables, coefs, strict=True)) + const
                     for variables, coefs, const in held]
        else:
            after = held_after(ctx.problem, placement)
        for team, seg in segs.items():
            for var, v in zip(seg, fill(int(after[team]) // step, [bounds(s)[1] for s in seg]), strict=True):
                values[var.index] = v

    if segs:
        ctx.on_hint(hint)


def team_work(ctx: ModelContext) -> Held:
    """Per team, its normalised work after the plan in milli-GPU (module docstring): `team_use` with each
    GPU-equivalent weighed by its job's speed there over its best."""
    problem = ctx.problem
    models = problem.speeds.models

    def running(r: int) -> float:
        table = problem.speeds.running[r] if problem.speeds.running else None
        return problem.speeds.running_pace[r] / speeds.best(table, models) if table is not None else 1.0

    def pending(t: int, n: int) -> float:
        table = problem.speeds.pending[problem.tasks[t].job] if problem.speeds.pending else None
        return speeds.normalised(table, problem.gpu_models[n], models)

    return team_use(ctx, np.ones(problem.n_nodes, dtype=bool), 0, (running, pending))


def waited_days(problem: Problem, j: int) -> float:
    """Days job j has waited at the planning time, capped at MAX_AGE_DAYS (0 without `submitted_at`)."""
    submitted = problem.jobs[j].submitted_at
    if submitted is None:
        return 0.0
    now = problem.request.planning_time()
    return min(MAX_AGE_DAYS, max(0.0, (now - submitted).total_seconds() / 86400.0))


def _aging(ctx: ModelContext) -> None:
    weight = ctx.problem.request.policy.weights.aging
    if weight == 0:
        return
    for t, task in enumerate(ctx.problem.tasks):
        if task.job in ctx.problem.twins:
            continue  # a running job moving has not waited
        days = waited_days(ctx.problem, task.job)
        value = pod_value(ctx.problem.gpu_value(t))
        if round(value * days * weight * SCALE) and ctx.x[t]:
            ctx.objective.add(terms.AGING, ctx.x[t], [value * days] * len(ctx.x[t]), weight)
