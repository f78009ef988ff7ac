"""The library's door: `plan(request) -> Plan`, verified before it leaves.

One call runs as numbered phases (`_plan`), each phase a module or package of its own:

    1. front: presets spelled out (placement_models.presets), overdue jobs evicted (placement.timeline),
       the request indexed with the usage stage's right-size offers (placement.rightsize) and without
       the jobs that can never fit (placement.screen), reservations attached (placement.reservation),
       and the greedy floor (placement.baseline), ready in milliseconds;
    2. size: the (task, node) pairs the time left can compile (placement.budget);
    3. compile and search from the greedy plan (placement.candidates, placement.compile,
       placement.search), in rounds while they pay; with no time to search, a model only scores and bounds
       the greedy plan, on another core while this one runs phases 4 and 5 (placement.cores);
    4. arrival order restored among interchangeable jobs (placement.compile.dominance);
    5. decode and explain (placement.decode, placement.explain);
    6. independent verification (placement.verify).

`greedy_plan(request)` runs phase 1 alone and decodes its plan, so a bench that compares the solver with
the greedy measures the greedy the product starts from, not a pipeline of its own.

`policy.time_limit_s` bounds the whole call (placement.budget): the model is sized to the time
left after the greedy plan, the search stops early enough for decode and verify, and
`plan.solver.phases` says what each phase took. On big clusters the trimmed model may be solved
in rounds, each trimmed around the last round's plan, while time is left and rounds pay.

docs/architecture.md draws the layers and says where each rule lives and where it is checked.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from placement_models import PlacementRequest, Plan, PlanStatus, SolverStats, presets

from placement import candidates, cores, pricing, reservation, screen, search, timeline
from placement import compile as compiler
from placement.baseline import greedy
from placement.budget import Budget, PairLimits, collector_paused
from placement.compile import dominance
from placement.decode import decode, draft, finish, schedule
from placement.problem import Problem
from placement.solution import Placement
from placement.verify import check

#: Rounds of trimming and solving at most (wall-clock mode; deterministic mode runs one).
MAX_ROUNDS = 4
#: Tasks from which the model that only scores the greedy plan is built on another core (placement.cores):
#: a fork and the terms sent back cost 10-30 ms; compiling 2,000 tasks' pairs about 0.1 s.
BESIDE_TASKS = 2_000
#: Seconds a deterministic call waits at least for that model before scoring the plan itself (a stuck child).
DETERMINISTIC_WAIT_S = 60.0


def parse(request: PlacementRequest | dict[str, Any]) -> PlacementRequest:
    """Validate a request dict (raises pydantic ValidationError with paths)."""
    return request if isinstance(request, PlacementRequest) else PlacementRequest.model_validate(request)


def plan(request: PlacementRequest | dict[str, Any], *, log: Callable[[str], None] | None = None,
         stop: threading.Event | None = None) -> Plan:
    """Plan placements for every pending job; the plan always passes `placement.verify`.

    `log` receives CP-SAT's progress lines; setting `stop` ends the search early (the best plan so
    far, the greedy one at worst, is returned).
    """
    req = presets.resolve(parse(request))  # `policy.preset` spelled out as the fields it stands for
    return _plan(req, log, stop)


def greedy_plan(request: PlacementRequest | dict[str, Any]) -> Plan:
    """The greedy floor alone, decoded like any plan: phase 1 of `plan` (presets, overdue eviction, screen,
    reservations, the greedy with the pools' peak reserve held back), no model and no search.

    Benches that compare the solver with the greedy call this, so both sides see the same request the
    product sees. No model scores the plan: its objective terms are empty and its status is `feasible`;
    the plan is not verified here (a bench verifies what it measures).
    """
    req = presets.resolve(parse(request))
    budget = Budget(req.policy.time_limit_s, req.policy.deterministic)
    front = _front(req, budget)
    with collector_paused():
        out = decode(front.problem, front.baseline, {}, "feasible", SolverStats(status="SKIPPED"))
        return schedule.with_evicted(out, front.evicted)


@dataclass(frozen=True)
class _Front:
    """What phase 1 hands on: the indexed, screened problem, the greedy floor, and the overdue jobs
    evicted before indexing (decode lists them as preempted)."""

    problem: Problem
    baseline: Placement
    evicted: list[timeline.Late]


def _front(req: PlacementRequest, budget: Budget) -> _Front:
    """Phase 1, shared by `plan` and `greedy_plan` so both start from the same floor."""
    with collector_paused():
        planned, evicted = timeline.without_overdue(req)  # policy.overdue evict: overdue jobs' GPUs are free
        problem = screen.build_problem(planned)  # right-size offers beside declared tasks; never-fitting jobs out
        problem = reservation.attach(problem)  # starved jobs (policy.max_wait_h) start now or hold nodes
        budget.lap("problem")
        baseline = greedy(problem, pricing.held_back(req, problem.nodes, problem.free))  # reserve honoured
        budget.lap("greedy")
    return _Front(problem, baseline, evicted)


def _another_round(found: search.Found, improved: bool, rounds: int, last_s: float | None, budget: Budget,
                   reserve: float, stop: threading.Event | None, limit: float) -> bool:
    """Would another round of trimming and solving pay? Only after a trimmed model was solved to its own
    optimum (more time on it finds nothing) and the last round improved the plan, with a gap left to the
    whole-problem bound beyond what `policy.relative_gap_limit` accepts, fewer than MAX_ROUNDS rounds so
    far, and time for another round (`Budget.round_pays`: judged by the mean round so far and by the last
    one, `last_s`; None after the first round, which is its own mean)."""
    s = found.stats
    if not (improved and s.restricted and s.status == "OPTIMAL" and (s.gap or 0.0) > max(1e-6, limit)
            and not (stop is not None and stop.is_set()) and rounds < MAX_ROUNDS):
        return False
    mean_s = (budget.used() - (s.first_plan_s or 0.0)) / rounds
    return budget.round_pays(reserve, mean_s, mean_s if last_s is None else last_s)


def _compile(problem: Problem, around: Placement, limits: PairLimits, idle: frozenset[int], *,
             search: bool = True) -> compiler.ModelContext:
    """The model over the candidate pairs the limits allow, trimmed around `around` (the greedy plan, or the
    last round's); without `search`, one that only scores `around` (no CP-SAT objective is set)."""
    with collector_paused():
        chosen = candidates.select(problem, around, limits.total, limits.per_task, idle, each_task_seen=not search)
        return compiler.build(problem, chosen, idle, objective=search)


def _first_model(req: PlacementRequest, front: _Front,
                 budget: Budget) -> tuple[compiler.ModelContext, float, PairLimits, frozenset[int]]:
    """Phases 2 and 3 up to the search: (the first round's model, the seconds kept for decode and verify, the
    pair limits, the tasks dominance leaves without a variable)."""
    problem = front.problem
    # 2. Size: the model gets the pairs the time left can compile, after decode and verify's share; out of
    #    time, only the greedy plan's own pairs (the model then just scores it, and the search is skipped).
    reserve = search.reserve_s(problem, req.policy, budget)
    limits = budget.pair_limits(reserve, len(problem.tasks), candidates.MAX_PAIRS, candidates.MIN_PER_TASK)
    if not _searches(req, front, budget, reserve):
        # no time to search after compiling the greedy plan's pairs and the affordable ones: a model that only
        # scores the greedy plan (and bounds it where time is left)
        return _compile(problem, front.baseline, PairLimits(0, 0), frozenset(), search=False), reserve, limits, \
            frozenset()
    # 3. Compile, trimmed around the greedy plan.
    with collector_paused():
        idle = dominance.dominated_tasks(problem, front.baseline)  # interchangeable jobs no optimal plan needs
    return _compile(problem, front.baseline, limits, idle), reserve, limits, idle


def first_model(request: PlacementRequest | dict[str, Any]) -> tuple[compiler.ModelContext, Placement]:
    """The model `plan(request)` compiles in its first round, and the greedy plan it starts from: the same
    phases (presets, overdue eviction, right-size offers, screen, reservations, greedy, pair limits,
    dominance, candidates, modules), for `placement export` and solver research. In deterministic mode it is
    the very model plan() solves; in wall-clock mode its size follows the time left, as plan()'s does."""
    req = presets.resolve(parse(request))
    budget = Budget(req.policy.time_limit_s, req.policy.deterministic)
    front = _front(req, budget)
    ctx, _, _, _ = _first_model(req, front, budget)
    return ctx, front.baseline


def _searched(req: PlacementRequest, front: _Front, budget: Budget, log: Callable[[str], None] | None,
              stop: threading.Event | None) -> search.Found:
    """Phases 2-3: the first model, its search, and further rounds while they pay."""
    problem = front.problem
    ctx, reserve, limits, idle = _first_model(req, front, budget)
    found = search.run(ctx, front.baseline, budget, log=log, stop=stop)
    rounds, improved, last_s = 1, True, None
    while _another_round(found, improved, rounds, last_s, budget, reserve, stop, req.policy.relative_gap_limit):
        began = budget.used()
        again = search.run(_compile(problem, found.placement, limits, idle), found.placement, budget, log=log,
                           stop=stop, greedy_score=found.stats.baseline_objective)
        rounds += 1
        last_s = budget.used() - began
        improved = (again.stats.objective or 0.0) > (found.stats.objective or 0.0) + 1e-9
        found = again if improved else found
    if rounds > 1:
        found = replace(found, stats=found.stats.model_copy(update={"rounds": rounds}))
    return found


def _plan(req: PlacementRequest, log: Callable[[str], None] | None, stop: threading.Event | None) -> Plan:
    budget = Budget(req.policy.time_limit_s, req.policy.deterministic)
    # 1. Front: the request indexed and screened, reservations attached, the greedy floor.
    front = _front(req, budget)
    problem = front.problem

    # 2-3. Size and compile (`_first_model`), search; while rounds pay, trim again around the last plan (the
    #    repairs now aim at what still waits) and solve again. With no time to search, a model only scores the
    #    greedy plan, on another core while this one decodes it where the machine has one (`_scored_beside`).
    #    Without time even for that model, the greedy plan goes out as it is, unscored (the limit is a promise
    #    for the whole call).
    reserve = search.reserve_s(problem, req.policy, budget)
    beside = cores.available() and len(problem.tasks) >= BESIDE_TASKS
    overlap = (1.0 - search.AFTER_SCORING_SHARE) * reserve if beside else 0.0
    if not budget.scoring_pays(reserve, len(problem.tasks), overlap):
        found = search.unscored(front.baseline, budget, req.policy)
    elif beside and not _searches(req, front, budget, reserve):
        return _verified(req, _scored_beside(req, front, budget, reserve), budget)
    else:
        found = _searched(req, front, budget, log, stop)

    with collector_paused():
        # 4. Arrival order restored among interchangeable jobs (rounding ties go to the oldest).
        ordered, terms = dominance.in_arrival_order(problem, found.placement, found.terms)
        # 5. Decode and explain, in the request's own names.
        out = decode(problem, ordered, terms, found.status, found.stats)
        out = schedule.with_evicted(out, front.evicted)
        budget.lap("decode")
    return _verified(req, out, budget)


def _verified(req: PlacementRequest, out: Plan, budget: Budget) -> Plan:
    """6. Verify: independent of everything above. The plan with the seconds of each phase."""
    with collector_paused():
        check(req, out)
        budget.lap("verify")
    return out.model_copy(update={"solver": out.solver.model_copy(update={"phases": dict(budget.phases)})})


class _Scored(NamedTuple):
    """What the model that scores the greedy plan sends back from beside the call: the plan's terms, status and
    statistics, the plan itself only where the warm start extended it with preemptions (else None: the greedy
    plan the caller holds), and the phases it timed."""

    terms: dict[str, float]
    status: PlanStatus
    stats: SolverStats
    extended: Placement | None
    phases: dict[str, float]


def _scored_beside(req: PlacementRequest, front: _Front, budget: Budget, reserve: float) -> Plan:
    """Phases 3-5 where no search pays: the model that scores the greedy plan is compiled, scored and bounded on
    another core (placement.cores) while this one restores arrival order and drafts the plan's decode; the
    draft is finished with the terms that come back. Without a second core the scoring runs here, after the
    draft: the same plan. A child late past what verify needs leaves the plan unscored (wall-clock mode) or is
    scored here (deterministic mode: the same plan, late; a child stuck that long is a fault, not a cost)."""
    problem, policy = front.problem, req.policy
    after = search.AFTER_SCORING_SHARE * reserve  # what verify needs once the scores are back

    def score() -> _Scored:
        mine = Budget(budget.limit_s, budget.deterministic, start=budget.start, phases=dict(budget.phases))
        before = set(mine.phases)
        mine.resume()  # its own laps, sent back to the caller's (`Budget.merge`)
        model = _compile(problem, front.baseline, PairLimits(0, 0), frozenset(), search=False)
        found = search.run(model, front.baseline, mine, reserve=after)
        return _Scored(found.terms, found.status, found.stats,
                       None if found.placement is front.baseline else found.placement,
                       {phase: s for phase, s in mine.phases.items() if phase not in before})

    with cores.beside(score) as scoring:
        with collector_paused():
            ordered, moves = dominance.arrival_moves(problem, front.baseline)
            drafted = draft(problem, ordered, optimal=False)
        budget.lap("decode")
        wait = max(DETERMINISTIC_WAIT_S, 10 * policy.time_limit_s) if policy.deterministic else \
            max(0.0, budget.left() - after)
        try:
            scored: _Scored | None = scoring.result(wait)
        except cores.Late:
            scored = score() if policy.deterministic else None
    if scored is None:
        found = search.unscored(front.baseline, budget, policy, late=True)
        scored = _Scored(found.terms, found.status, found.stats, None, {})
    budget.merge(scored.phases)
    budget.resume()
    with collector_paused():
        if scored.extended is None:
            terms = dominance.moved_terms(problem, ordered, moves, scored.terms)
            out = finish(problem, ordered, drafted, terms, scored.status, scored.stats)
        else:  # the warm start preempted: another placement to decode
            ordered, terms = dominance.in_arrival_order(problem, scored.extended, scored.terms)
            out = decode(problem, ordered, terms, scored.status, scored.stats)
        out = schedule.with_evicted(out, front.evicted)
        budget.lap("decode")
    return out


def _searches(req: PlacementRequest, front: _Front, budget: Budget, reserve: float) -> bool:
    """Does a search pay after compiling the pairs the time left affords (`_first_model`'s test)?"""
    limits = budget.pair_limits(reserve, len(front.problem.tasks), candidates.MAX_PAIRS, candidates.MIN_PER_TASK)
    return budget.search_pays(reserve, len(front.problem.tasks) + limits.total)
