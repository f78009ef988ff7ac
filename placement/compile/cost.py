"""Cost: spot vs on-demand, reclaim risk, the peak reserve, off-peak deferral and provisioning.

Terms (all penalties, in GPU-equivalents; the arithmetic lives in `placement.pricing`):

* ``cost.compute`` — price × GPU-equivalents × expected runtime of every pod placed (a MIG or
  shared pod pays its fraction of a GPU, placement.pricing), *above the cheapest existing node
  the task could use* (over all its candidates, whatever a trimmed model kept): on the cluster it
  has, cost steers where a job runs, not whether (a 48 h job must not wait because it is long).
  The full price counts where it is a real choice to spend: a deferrable job during peak, and
  nodes a pool would add. The plan's `cost` block always reports the full dollars;
* ``cost.reclaim_risk`` — expected work lost to spot reclaims, priced (restart included);
* ``cost.provisioning`` — minimum billing of every node a pool adds;
* ``deferral`` — during peak a deferrable job is worth half its priority value (deferring it
  loses only the delay, not the work), so it yields to everything else of its priority and
  waits when its cost outweighs the rest; off-peak it is worth 5 % more, so it goes first
  among jobs of equal priority without jumping a priority level.

**Currency → GPU-equivalents.** ``policy.weights.cost`` is GPU-equivalents per currency unit:
a term's coefficient is ``-weight × dollars``. At the default 0.01, $100 of expected cost
weighs as much as placing one lowest-priority GPU; the plan's `cost` block reports the
dollars themselves. Objective coefficients are integers at `SCALE` = 1000 per GPU-equivalent,
so at the default weight the model sees costs to the dime. (Measured on the cost bench: at
0.001 the 0.1 penalty for breaking a whole node outweighed spot savings and plans used almost
no spot; at 0.01 they use spot like a spot-first greedy and cost 22 % less than all-on-demand.)

Hard rules: a job without ``spot_ok`` has no spot node among its candidates (`placement.problem`
filters them before any variable exists); during peak, new pods leave ``policy.reserve[pool]``
GPUs of a pool's existing nodes free; a pod may sit on an added node only if the plan adds it.
"""

from __future__ import annotations

import numpy as np
from ortools.sat.python import cp_model
from placement_models import Job

from placement import pricing, provision, speeds
from placement.baseline import place_task
from placement.baseline.topology import fill_gang
from placement.compile import terms
from placement.compile.context import ModelContext
from placement.compile.priority import class_weights, pod_value
from placement.holdings import job_milli, pod_gpus, task_milli
from placement.problem import Problem
from placement.solution import Placement
from placement.teams import MILLI

#: Most of a pod's value that its cost premium on existing nodes may cancel (see _premium).
PREMIUM_CAP = 0.5
#: Share of its priority value a deferrable job keeps during peak hours.
PEAK_VALUE_FACTOR = 0.5
#: Extra share of its priority value a deferrable job gets off-peak (goes first among equals).
OFF_PEAK_BONUS = 0.05


def apply(ctx: ModelContext) -> None:
    problem = ctx.problem
    request = problem.request
    prices = pricing.node_prices(request.cluster.pools, problem.nodes)
    weight = request.policy.weights.cost
    real = provision.first_added(request)
    if weight > 0 and pricing.priced(request):
        for t, task in enumerate(problem.tasks):
            if task.job in problem.twins:
                continue  # a running job's cost is not the plan's to weigh, where it runs now or moved
            job = problem.jobs[task.job]
            cand = ctx.candidates[t]
            gpus = task_milli(problem, t, cand) / MILLI  # GPU-equivalents: MIG and shared pods pay their part
            compute = np.asarray(pricing.compute_cost(job, gpus, prices.price[cand], paces(problem, t, cand)),
                                 dtype=float)
            risk = pricing.reclaim_risk(job, prices.price[cand], prices.reclaim[cand], gang_gpus(problem, task.job))
            cheapest = _cheapest_existing(problem, t, job, prices.price, real)
            if cheapest is not None and not (job.deferrable and request.in_peak):
                compute = np.minimum(compute - cheapest, PREMIUM_CAP * priority_value(problem, t) / weight)
            ctx.objective.add(terms.COST_COMPUTE, ctx.x[t], -np.asarray(compute), weight, ceiling=0.0)
            if prices.reclaim[cand].any():
                ctx.objective.add(terms.COST_RECLAIM_RISK, ctx.x[t], -np.asarray(risk), weight, ceiling=0.0)
    _reserve(ctx)
    _deferral(ctx)
    _provisioning(ctx, weight)


def _reserve(ctx: ModelContext) -> None:
    """During peak: GPUs new pods take on a pool's existing nodes <= free GPUs there − reserve."""
    problem = ctx.problem
    allowance = pricing.reserve_allowance(problem.request, problem.nodes, problem.free[:, 0])
    if not allowance:
        return
    real = provision.first_added(problem.request)
    per_node = ctx.node_terms()
    for pool, allowed in allowance.items():
        members = [n for n in range(real) if problem.nodes[n].pool == pool]
        pairs = [(var, int(problem.tasks[t].demand[0]), ub) for n in members
                 for var, t, ub in per_node[n] if problem.tasks[t].demand[0] > 0]
        pairs += [(var, 1, ub) for n in members for var, ub in ctx.partitioned.get(n, [])]  # whole GPUs MIG takes
        if sum(g * ub for _, g, ub in pairs) <= allowed:
            continue  # cannot reach the reserve: no row needed
        ctx.model.add(cp_model.LinearExpr.weighted_sum([v for v, _, _ in pairs], [g for _, g, _ in pairs])
                      <= allowed)


def _cheapest_existing(problem: Problem, t: int, job: Job, price: np.ndarray, real: int) -> float | None:
    """The compute cost of one pod of task t on the cheapest existing node among all its candidates (None
    without one). The premium a pod pays is its cost above this, capped (PREMIUM_CAP × its value): so
    placing a pod on any node is worth more than leaving it pending, and cost ranks the nodes (reclaim risk
    stays whole: a long job without checkpoints is better waiting than restarting on spot). Taken over every
    candidate, not the ones a trimmed model kept, so a plan's cost does not depend on the trimming."""
    nodes = problem.tasks[t].candidates
    nodes = nodes[nodes < real]
    if not nodes.size:
        return None
    gpus = task_milli(problem, t, nodes) / MILLI
    return float(np.min(pricing.compute_cost(job, gpus, price[nodes], paces(problem, t, nodes))))


def paces(problem: Problem, t: int, nodes: np.ndarray) -> np.ndarray | float:
    """Task t's job's speed on each of `nodes` (placement.speeds; 1.0 without a table): a pod is priced for the
    hours its work takes on its own GPU (linear, so exact for a gang on one model; the plan's cost block bills
    the gang at its slowest member)."""
    table = problem.speeds.pending[problem.tasks[t].job] if problem.speeds.pending else None
    if table is None:
        return 1.0
    return np.array([speeds.speed(table, problem.gpu_models[n]) for n in nodes.tolist()], dtype=float)


def priority_value(problem: Problem, t: int) -> float:
    """The value `compile/priority.py` gives one pod of task t (its weight applied)."""
    levels = class_weights(problem)
    task = problem.tasks[t]
    weight = problem.request.policy.weights.priority
    return weight * levels[problem.jobs[task.job].priority] * pod_value(problem.gpu_value(t))


def gang_gpus(problem: Problem, j: int) -> float:
    """The gang's GPU-equivalents for reclaim risk (placement.pricing): whole GPUs, shares and MIG fractions
    (at their smallest over the candidates), at least its whole GPUs."""
    return max(float(pricing.job_gpus(problem.jobs[j])), job_milli(problem, j) / MILLI)


def _deferral(ctx: ModelContext) -> None:
    problem = ctx.problem
    peak = problem.request.in_peak
    share = -(1.0 - PEAK_VALUE_FACTOR) if peak else OFF_PEAK_BONUS
    for t, task in enumerate(problem.tasks):
        if problem.jobs[task.job].deferrable:
            value = share * priority_value(problem, t)
            ctx.objective.add(terms.DEFERRAL, ctx.x[t], [value] * len(ctx.x[t]))


def _provisioning(ctx: ModelContext, weight: float) -> None:
    """One boolean per added node that some pod may use: pods go there only if the plan adds it."""
    problem = ctx.problem
    start = provision.first_added(problem.request)
    opened: dict[int, cp_model.IntVar] = {}
    for n in range(start, problem.n_nodes):
        pairs = ctx.node_terms()[n]
        if not pairs:
            continue
        b = ctx.model.new_bool_var(f"added[{n}]")
        for var, _, ub in pairs:
            ctx.model.add(var <= ub * b)
        opened[n] = b
    if not opened:
        return
    charges = [pricing.provisioning_charge(problem.request, problem.nodes[n]) for n in opened]
    ctx.objective.add(terms.COST_PROVISIONING, list(opened.values()), [-c for c in charges], weight)

    def hint(ctx: ModelContext, placement: Placement, values: dict[int, int]) -> None:
        used = {n for (_, n), k in placement.counts.items() if k}
        for n, b in opened.items():
            values[b.index] = int(n in used)

    ctx.on_hint(hint)


# --------------------------------------------------------------------------------------------
# Pending reasons that only this concern can give (called by decode after the generic reason).


def pending_reason(problem: Problem, j: int, placement: Placement, usage: np.ndarray, reason: str) -> str:
    """Refine the generic reason of a pending job when spot, the reserve or cost kept it out (the text of
    `refine_pending` when the generic reason's constraint is not known)."""
    return refine_pending(problem, j, placement, usage, reason, None)[1]


#: Generic constraints (placement.explain) under which the job fits what the plan leaves: there spot, the
#: peak reserve or its price may be what kept it out.
FITS_LEFT = ("objective", "time_limit")


def refine_pending(problem: Problem, j: int, placement: Placement, usage: np.ndarray, reason: str,
                   constraint: str | None) -> tuple[str, str]:
    """(constraint, reason) of a pending job, with `cost` named where this concern kept it out: `filter` for a
    job without spot_ok that only spot nodes could take; `cost` when it fits what the plan leaves but the peak
    reserve or its price outweighs its value, and for a deferrable job in peak that lost to the objective
    (its value halved). Other constraints bind before cost and are kept (None: try everything, as before)."""
    job = problem.jobs[j]
    for t in problem.job_tasks[j]:
        stage = next((s for s, left in problem.tasks[t].funnel if left == 0), None)
        if stage == "spot":
            return "filter", (f"task '{problem.tasks[t].name}' fits only on spot nodes and the job is not spot_ok "
                              "(set spot_ok: true if it can lose work to a reclaim)")
        if stage is not None:
            return constraint or "filter", reason
    specific = _reserve_or_cost(problem, j, placement, usage) if constraint in (None, *FITS_LEFT) else None
    if specific:
        constraint, reason = "cost", specific
    deferred = problem.request.in_peak and job.deferrable
    if deferred and constraint in (None, "cost", "objective"):
        return "cost", f"deferred to off-peak: {reason}"
    return constraint or "capacity", reason


def _reserve_or_cost(problem: Problem, j: int, placement: Placement, usage: np.ndarray) -> str | None:
    left = problem.free - usage
    trial = left.copy()
    counts: dict[tuple[int, int], int] = {}
    need = problem.jobs[j].needed

    def place(t: int, most: int) -> int:  # the smallest gang that runs: `needed` pods, no extra
        room = min(most, need - sum(counts.values()))
        return place_task(problem, t, trial, counts, None, room) if room > 0 else 0

    # the greedy's gang rule: each task's minimum first, then other pods (0: a minimum or `needed` is short)
    if not fill_gang(problem, j, place):
        return None
    request = problem.request
    allowance = pricing.reserve_allowance(request, problem.nodes, problem.free[:, 0])
    real = provision.first_added(request)
    for pool, allowed in allowance.items():
        taken = sum(int(usage[n, 0]) for n in range(real) if problem.nodes[n].pool == pool)
        wants = sum(int(problem.tasks[t].demand[0]) * k for (t, n), k in counts.items()
                    if n < real and problem.nodes[n].pool == pool)
        if wants and taken + wants > allowed:
            return (f"pool {pool} holds back {request.policy.reserve[pool]} GPUs during peak (policy.reserve); "
                    f"{allowed - taken} GPUs of it are left for new work and the gang would need {wants}")
    if not pricing.priced(request):
        return None
    prices = pricing.node_prices(request.cluster.pools, problem.nodes)
    job = problem.jobs[j]
    gang = gang_gpus(problem, j)
    dollars = sum(k * (pricing.compute_cost(job, pod_gpus(problem, t, n), prices.price[n],
                                            paces(problem, t, np.array([n]))[0] if problem.speeds.pending[j] else 1.0)
                       + pricing.reclaim_risk(job, prices.price[n], prices.reclaim[n], gang))
                  for (t, n), k in counts.items())
    value = sum(k * priority_value(problem, t) for (t, _), k in counts.items())
    if request.in_peak and job.deferrable:
        value *= PEAK_VALUE_FACTOR
    weighted = request.policy.weights.cost * float(dollars)
    if weighted > value:
        return (f"cost: expected {float(dollars):,.2f} in the free capacity weighs {weighted:.3g} GPU-equivalents "
                f"(policy.weights.cost), more than placing it is worth ({value:.3g})")
    return None
