"""The search: from the greedy plan to the best plan found in the time left, and how good it is.

One whole model where it fits a cycle, windows (LNS) where it does not, and windows again when a
mid-sized model's presolve eats its share of the budget without a solution. The greedy plan (or
its extension with preemptions, `warm`) is the complete hint, and the returned plan is the better
of the two by the same named terms, so it is never worse than greedy. Deterministic mode splits
CP-SAT's deterministic time the same way, never the wall clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from placement_models import PlanStatus, Policy, SolverStats

from placement.budget import Budget, collector_paused
from placement.compile.context import ModelContext
from placement.compile.priority import pod_value
from placement.problem import Problem
from placement.rightsize import pairs
from placement.search import bound, lns, solve, warm
from placement.solution import Placement
from placement.teams import MILLI

#: Decode and verify take about this many times the problem phase (3.1-3.8 at 12,500 and 25,000 nodes: 1.7-2.2 s
#: after 0.55-0.6 s of problem, 4.1 s after 1.3 s).
DECODE_PER_PROBLEM = 3.5
#: Share of `reserve_s` a call still needs once the model that scores the greedy plan is done, where decode runs
#: beside that model (placement.cores): verifying the plan (1.0 of 2.0 s at 12,500 nodes; decode the rest).
AFTER_SCORING_SHARE = 0.5
#: Share of the time limit the class relaxation's bound may take (it stops earlier when it meets the plan).
BOUND_SHARE = 0.1

_STATUS: dict[str, PlanStatus] = {
    "OPTIMAL": "optimal",
    "FEASIBLE": "feasible",
    "INFEASIBLE": "infeasible",
    "MODEL_INVALID": "invalid",
    "UNKNOWN": "no_solution_in_time",
}


@dataclass(frozen=True)
class Found:
    """The plan the search returns, in problem space, with its terms, status and statistics."""

    placement: Placement
    terms: dict[str, float]
    status: PlanStatus
    stats: SolverStats


def run(ctx: ModelContext, baseline: Placement, budget: Budget, *,
        log: Callable[[str], None] | None = None, stop: threading.Event | None = None,
        greedy_score: float | None = None, reserve: float | None = None) -> Found:
    """Search from `baseline` within what `budget` has left of `policy.time_limit_s`.

    `log` receives CP-SAT's progress lines; setting `stop` ends the search early (the best plan so
    far, the greedy one at worst, is returned). `greedy_score` is the greedy plan's objective when
    `baseline` is an earlier round's plan (reported as `baseline_objective`). `reserve`: the seconds the call
    needs after this returns (default `reserve_s`: decode and verify; less where decode runs beside).
    """
    policy = ctx.problem.request.policy
    start = budget.start
    with collector_paused():  # dicts over every variable; no CP-SAT runs here
        baseline_values = ctx.assignment_of(baseline)
        baseline_score = _score(ctx, baseline_values)
    if greedy_score is None:
        greedy_score = baseline_score  # reported as baseline_objective
    # The greedy never preempts; when preemption is on, extend it with justified evictions.
    extended = warm.warm_start(ctx, baseline, warm.WARM_SHARE * policy.time_limit_s)
    if extended is not None:
        baseline, baseline_values, baseline_score = extended
    restricted = ctx.restricted
    budget.lap("compile")
    build_s = budget.used()

    # The model's own bound covers the whole problem only when every task saw every node and one model
    # is solved; otherwise the class relaxation bounds it (placement.search.bound).
    # A model that only scores the greedy plan still bounds it where the time left allows.
    relaxed = None
    reserve = reserve_s(ctx.problem, policy, budget) if reserve is None else reserve
    out_of_time = ctx.scores_only or (not policy.deterministic and budget.left() <= reserve)
    bound_s = float("inf") if policy.deterministic else BOUND_SHARE * policy.time_limit_s
    if ctx.scores_only and not policy.deterministic:
        bound_s = min(bound_s, budget.left() - reserve)
    if (restricted or len(ctx.model.proto.variables) > lns.LNS_ABOVE) and (
            not out_of_time or ctx.scores_only and bound_s > 0):
        with collector_paused():  # numpy and dicts over the whole problem; no CP-SAT runs here
            relaxed = bound.relaxation(ctx, baseline_score, bound_s)
        budget.lap("bound")
    proven = (relaxed is not None
              and relaxed.value - baseline_score <= policy.relative_gap_limit * abs(relaxed.value) + 1e-9)
    if proven or out_of_time:
        # nothing left to find (the greedy plan is proven within the requested gap), or no time to look
        result = solve.SolveResult("SKIPPED", None, baseline_score, None, 0.0,
                                   "deterministic" if policy.deterministic else "wall-clock")
        chosen, winner, search = baseline, "baseline", "none"
        note = ("the greedy plan is within the gap limit of the bound; no search needed" if proven else
                f"the greedy plan, scored by a model of its own pairs{' and bounded' if relaxed else ''}: the time "
                f"left after it could not pay for a search and for decode and verify ({budget.used():.2f} s of "
                f"the {policy.time_limit_s:g} s limit gone)" if ctx.scores_only else
                f"the greedy plan: {budget.used():.2f} s of the {policy.time_limit_s:g} s limit were gone before "
                "the search, and decode and verify need the rest")
    else:
        ctx.hint(baseline_values)  # the search starts from the greedy plan (or its warm extension)
        result, chosen, winner, search = _search(ctx, policy, baseline, baseline_score, budget, log=log, stop=stop,
                                                 bound=None if relaxed is None else relaxed.value)
        note = None
    budget.lap("search")
    values = baseline_values if chosen is baseline else ctx.assignment_of(chosen)
    if winner == "solver" and policy.priority_mode == "strict" and _trades_down(ctx, chosen, values, baseline,
                                                                                 baseline_values):
        # Capped class weights (placement.compile.priority) let the model trade a higher class for lower
        # ones; the greedy plan, placed class by class, never does.
        chosen, winner, values = baseline, "baseline", baseline_values
    terms = ctx.objective.values(lambda v: values[v.index])
    score = sum(terms.values())
    bounds = [(relaxed.value, bound.RELAXATION)] if relaxed is not None else []
    if result.bound is not None and not restricted:
        bounds.append((result.bound, bound.MODEL))
    best_bound, bound_kind = min(bounds) if bounds else (None, "none")
    gap = None if best_bound is None else max(0.0, best_bound - score) / max(1.0, abs(best_bound))
    status = _STATUS.get(result.status, "feasible" if result.status in ("LNS", "SKIPPED") else "no_solution_in_time")
    cpsat_gap = _cpsat_gap(result)
    if restricted and status == "optimal" or status == "optimal" and cpsat_gap > 1e-9:
        # optimal among the kept candidate nodes only (placement.candidates), or CP-SAT's OPTIMAL for a
        # search its own relative_gap_limit ended: proven within the limit, not optimal
        status = "feasible"
    if status == "optimal" and gap is not None and gap > 1e-9:
        # CP-SAT proved its model's optimum, but the plan scores less than that bound: the terms of the plan
        # returned are counted as the product reports them (the quota term counts a team's work highest class
        # first, as Kueue admits it, where the model may pick any set within nominal), so nothing is proven
        status = "feasible"
    if status == "feasible" and gap is not None and gap <= 1e-9:
        status = "optimal"  # proven against a bound for the whole problem
    ended = _ended(result, gap, cpsat_gap, policy, proven, restricted, stop)
    stats = SolverStats(
        status=result.status, objective=round(score, 6),
        bound=None if best_bound is None else round(best_bound, 6), bound_kind=bound_kind,
        gap=None if gap is None else round(gap, 6), wall_s=round(time.perf_counter() - start, 4),
        build_s=round(build_s, 4),
        first_plan_s=round(budget.phases.get("problem", 0.0) + budget.phases.get("greedy", 0.0), 4),
        variables=len(ctx.model.proto.variables), constraints=len(ctx.model.proto.constraints),
        workers=policy.workers, seed=policy.seed, mode=result.mode,
        winner="solver" if score > greedy_score + 1e-9 else winner,
        baseline_objective=round(greedy_score, 6), search=search, restricted=restricted, note=note, ended=ended,
    )
    return Found(chosen, terms, status, stats)


def unscored(baseline: Placement, budget: Budget, policy: Policy, *, late: bool = False) -> Found:
    """The greedy plan as it is, with no model to score it: the time left after it could not pay for the model
    that scores it and for decode and verify, or (`late`) that model, built beside the call, was not done by the
    time verify needed the rest (the time limit is a promise for the whole call). Its objective is empty, as
    `placement.greedy_plan`'s; every hard rule is still verified."""
    used = budget.used()
    budget.lap("compile")
    why = ("the model that scores it, built beside the call, was not done in time for verify" if late else
           "the time left after it could not pay for the model that scores it and for decode and verify")
    note = f"the greedy plan, unscored: {why} ({used:.2f} s of the {policy.time_limit_s:g} s limit gone)"
    stats = SolverStats(
        status="SKIPPED", wall_s=round(used, 4), build_s=0.0,
        first_plan_s=round(budget.phases.get("problem", 0.0) + budget.phases.get("greedy", 0.0), 4),
        workers=policy.workers, seed=policy.seed, mode="deterministic" if policy.deterministic else "wall-clock",
        winner="baseline", search="none", note=note, ended="time_limit")
    return Found(baseline, {}, "feasible", stats)


def _cpsat_gap(result: solve.SolveResult) -> float:
    """CP-SAT's own relative gap at the end of a whole-model solve (0 without its numbers)."""
    if result.status != "OPTIMAL" or result.objective is None or result.bound is None:
        return 0.0
    return max(0.0, result.bound - result.objective) / max(1.0, abs(result.bound))


def _ended(result: solve.SolveResult, gap: float | None, cpsat_gap: float, policy: Policy, proven: bool,
           restricted: bool, stop: threading.Event | None) -> str:
    """Why the search took the time it took (`SolverStats.ended`): a caller who sees a 10 s solve should
    know whether more time could have helped (time_limit) or not (optimal, gap_limit)."""
    if gap is not None and gap <= 1e-9:
        return "optimal"
    if result.status == "OPTIMAL" and gap is not None and cpsat_gap <= 1e-9:
        return "trimmed_optimal"  # the model's optimum, which the plan's reported terms do not reach
    if result.status == "OPTIMAL" and not restricted and cpsat_gap <= 1e-9:
        return "optimal"
    if stop is not None and stop.is_set():
        return "stopped"
    limit = policy.relative_gap_limit
    if proven or result.gap_stop or result.status == "OPTIMAL" and not restricted or \
            limit > 0 and gap is not None and gap <= limit:
        return "gap_limit"
    if result.status == "OPTIMAL":
        return "trimmed_optimal"
    return "time_limit"


def _trades_down(ctx: ModelContext, chosen: Placement, chosen_values: dict[int, int], baseline: Placement,
                 baseline_values: dict[int, int]) -> bool:
    """Does `chosen` place less of some tier than `baseline` and more of a lower one? (Less of a tier alone
    is the other terms' call within it, cost for one; a higher tier given up for a lower one never is.)
    Tiers, highest first: GPUs within the teams' nominal quotas by class (Kueue admits what fits a
    ClusterQueue's nominal before what must borrow, each by priority), then all placed GPUs by class."""
    return _below(_tiers(ctx, chosen, chosen_values), _tiers(ctx, baseline, baseline_values))


def _tiers(ctx: ModelContext, placement: Placement, values: dict[int, int],
           unit: dict[int, float] | None = None) -> list[float]:
    """What a plan places per tier, highest first (`_trades_down`); `unit` caches each task's pod value."""
    return _in_nominal(ctx, values) + _by_class(ctx, placement, unit)


def _below(ours: list[float], theirs: list[float]) -> bool:
    """Less of some tier than `theirs` and more of a lower one (`_trades_down`)."""
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        if a < b:
            return any(x > y for x, y in zip(ours[i + 1:], theirs[i + 1:], strict=True))
        if a > b:
            return False
    return False


def _in_nominal(ctx: ModelContext, values: dict[int, int]) -> list[float]:
    """GPU-equivalents placed within the teams' nominal quotas per priority class, highest class first."""
    levels = sorted(ctx.in_nominal, reverse=True)
    return [round(sum(values.get(v.index, 0) * unit for v, unit in ctx.in_nominal[level]) / MILLI, 6)
            for level in levels]


def _by_class(ctx: ModelContext, placement: Placement, unit: dict[int, float] | None = None) -> list[float]:
    """GPU-equivalents placed per priority class, highest class first, rounded so that sums taken in another
    order compare equal: plans compare class by class, as strict priority classes rank them. `unit` keeps each
    task's pod value and level across calls (the windows compare every step's plan)."""
    problem = ctx.problem
    unit = {} if unit is None else unit
    if not unit:
        declared = {p.alternative: p.task for p in pairs(problem)}  # a right-sized pod is worth its declared GPU
        unit.update((t, pod_value(problem.gpu_value(declared.get(t, t)))) for t in range(len(problem.tasks)))
    value: dict[int, float] = {}
    for (t, _), k in placement.counts.items():
        if k:
            level = problem.jobs[problem.tasks[t].job].priority
            value[level] = value.get(level, 0.0) + k * unit[t]
    levels = sorted({job.priority for job in problem.jobs}, reverse=True)
    return [round(value.get(level, 0.0), 6) for level in levels]


def _score(ctx: ModelContext, values: dict[int, int]) -> float:
    return sum(ctx.objective.values(lambda v: values[v.index]).values())


def _search(ctx: ModelContext, policy: Policy, baseline: Placement, baseline_score: float, budget: Budget,
            *, log: Callable[[str], None] | None, stop: threading.Event | None, bound: float | None
            ) -> tuple[solve.SolveResult, Placement, str, str]:
    """(result, chosen plan, winner, search kind): see the module docstring. `bound` (the class relaxation's,
    when computed) lets the search end once its plan is within `policy.relative_gap_limit` of it."""
    n_vars = len(ctx.model.proto.variables)
    mode = "deterministic" if policy.deterministic else "wall-clock"

    reserve = reserve_s(ctx.problem, policy, budget)

    def remaining(share: float) -> float:
        return policy.time_limit_s * share if policy.deterministic else policy.time_limit_s - reserve - (
            time.perf_counter() - budget.start)

    def windows(share: float) -> tuple[solve.SolveResult, Placement, str]:
        accept = None
        if policy.priority_mode == "strict":  # each window's plan, not only the last, keeps the greedy's tiers
            unit: dict[int, float] = {}
            theirs = _tiers(ctx, baseline, ctx.assignment_of(baseline), unit)

            def accept(plan: Placement, values: dict[int, int]) -> bool:
                return not _below(_tiers(ctx, plan, values, unit), theirs)
        found = lns.improve(ctx, baseline, policy, remaining(share), lambda v: placement_from(ctx, v),
                            stop=stop, log=log, bound=bound, accept=accept)
        result = solve.SolveResult("LNS", None, found.score, None, found.wall_s, mode, gap_stop=found.gap_stop)
        return result, found.placement, "solver" if found.improved else "baseline"

    if n_vars > lns.LNS_ABOVE:
        return (*windows(1.0), "windows")
    share = 1.0 if n_vars <= lns.WHOLE_MODEL_SURE else lns.WHOLE_MODEL_SHARE
    result = solve.run(ctx, policy, remaining(share), share=share, log=log, stop=stop, bound=bound)
    if result.values is None:
        if share < 1.0 and not (stop is not None and stop.is_set()):
            return (*windows(1.0 - share), "model+windows")
        return result, baseline, "baseline", "model"
    solved = placement_from(ctx, result.values)
    solved_values = ctx.assignment_of(solved)
    solved_score = sum(ctx.objective.values(lambda v: solved_values[v.index]).values())
    if solved_score >= baseline_score - 1e-9:
        return result, solved, "solver", "model"
    return result, baseline, "baseline", "model"


def reserve_s(problem: Problem, policy: Policy, budget: Budget | None = None) -> float:
    """Seconds kept after the search for decode, pending reasons and verify, which count against the limit
    too: about 0.1 ms a pending job (measured 0.1 s at 1,024 nodes / 1,536 jobs, 1.7-2.2 s at 12,500 / 18,750,
    4.1 s at 25,000 / 37,500), at most half the limit. In wall-clock mode, also at least DECODE_PER_PROBLEM times
    what indexing the request took, which follows the machine's speed and the request's shape."""
    formula = 0.05 + 1e-4 * len(problem.jobs) + 4e-5 * problem.n_nodes
    if budget is not None and not budget.deterministic:
        formula = max(formula, DECODE_PER_PROBLEM * budget.phases.get("problem", 0.0))
    return min(0.5 * policy.time_limit_s, formula)


def placement_from(ctx: ModelContext, values: dict[int, int]) -> Placement:
    placement = Placement()
    for t, cand in enumerate(ctx.candidates):
        for var, n in zip(ctx.x[t], cand.tolist(), strict=True):
            placement.add(t, n, values.get(var.index, 0))
    placement.evicted = {r for r, var in ctx.evicted.items() if values.get(var.index, 0)}
    ctx.read_extras(values, placement)  # MIG layouts, shared-GPU picks
    return placement
