"""The library's door: `plan(request) -> Plan`, verified before it leaves.

The pipeline, one stage per layer, each stage a module or package of its own:

    validate (placement_models) → index the request (placement.problem), with the usage stage's
    right-size offers (placement.rightsize) and without the jobs that can never fit
    (placement.screen) → greedy (placement.baseline, the floor, ready in milliseconds) → compile
    (placement.candidates, placement.compile) → search from the greedy plan (placement.search) →
    decode and explain (placement.decode, placement.explain) → independent verification
    (placement.verify).

`policy.time_limit_s` bounds the whole call (placement.budget): the model is sized to the time
left after the greedy plan, the search stops early enough for decode and verify, and
`plan.solver.phases` says what each phase took. On big clusters the trimmed model may be solved
in rounds, each trimmed around the last round's plan, while time is left and rounds pay.

docs/architecture.md draws the layers and says where each rule lives and where it is checked.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from placement_models import PlacementRequest, Plan, presets

from placement import candidates, pricing, reservation, screen, search, timeline
from placement import compile as compiler
from placement.baseline import greedy
from placement.budget import Budget
from placement.compile import dominance
from placement.decode import decode, schedule
from placement.verify import check

#: Rounds of trimming and solving at most (wall-clock mode; deterministic mode runs one).
MAX_ROUNDS = 4


def _another_round(found: search.Found, budget: Budget, reserve: float, stop: threading.Event | None,
                   rounds: int, limit: float) -> bool:
    """Would another round of trimming and solving pay? Only after a trimmed model was solved to its own
    optimum (more time on it finds nothing), with a gap left to the whole-problem bound beyond what
    `policy.relative_gap_limit` accepts, and 1.5 times the time the rounds so far took each still left."""
    s = found.stats
    return (not budget.deterministic and s.restricted and s.status == "OPTIMAL"
            and (s.gap or 0.0) > max(1e-6, limit)
            and not (stop is not None and stop.is_set()) and rounds < MAX_ROUNDS
            and budget.left() - reserve > 1.5 * (budget.used() - (s.first_plan_s or 0.0)) / rounds)


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


_paused = 0
_paused_lock = threading.Lock()
_was_enabled = True


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection during the call: the request's and the index's millions of objects
    live for the whole call, and each full collection scanned them again (~0.7 s each at 12,500 nodes,
    several per call; measured: problem, greedy, decode and verify 1.3 s faster together). Not around
    the search: with the collector off there, CP-SAT found 2-3 % worse plans on the mig-M library
    instance in the same 10 s (same model, same hint; three runs each). A counter shared by concurrent
    calls (the service plans on threads) lets the last one out restore the collector as the first one
    in found it."""
    global _paused, _was_enabled
    with _paused_lock:
        if _paused == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _paused_lock:
            _paused -= 1
            if _paused == 0 and _was_enabled:
                gc.enable()


def _plan(req: PlacementRequest, log: Callable[[str], None] | None, stop: threading.Event | None) -> Plan:
    budget = Budget(req.policy.time_limit_s, req.policy.deterministic)
    with _collector_paused():
        planned, stopped = timeline.without_overdue(req)  # policy.overdue evict: overdue jobs' GPUs are free
        problem = screen.build_problem(planned)  # right-size offers beside declared tasks; never-fitting jobs out
        problem = reservation.attach(problem)  # starved jobs (policy.max_wait_h) start now or hold nodes
        budget.lap("problem")
        baseline = greedy(problem, pricing.held_back(req, problem.nodes, problem.free))  # reserve honoured
        budget.lap("greedy")

    # The model gets the pairs the time left can compile, after decode and verify's share; out of time,
    # only the greedy plan's own pairs (the model then just scores it, and the search is skipped).
    reserve = search.reserve_s(problem, req.policy, budget)
    affordable = budget.pairs(reserve)
    per_task = affordable // max(1, len(problem.tasks))
    max_pairs = min(candidates.MAX_PAIRS, affordable)
    min_per_task = 0 if not affordable else 1 if per_task < candidates.MIN_PER_TASK else candidates.MIN_PER_TASK
    with _collector_paused():
        idle = dominance.dominated_tasks(problem, baseline)  # interchangeable jobs no optimal plan needs
        ctx = compiler.build(problem, candidates.select(problem, baseline, max_pairs, min_per_task, idle),
                              idle)
    found = search.run(ctx, baseline, budget, log=log, stop=stop)
    rounds = 1
    while _another_round(found, budget, reserve, stop, rounds, req.policy.relative_gap_limit):
        # The trimmed model is solved and time is left: trim again around its plan (the repairs now aim
        # at what still waits) and solve again, as long as rounds pay.
        began = budget.used()
        with _collector_paused():
            ctx = compiler.build(problem, candidates.select(problem, found.placement, max_pairs, min_per_task, idle),
                                  idle)
        again = search.run(ctx, found.placement, budget, log=log, stop=stop,
                           greedy_score=found.stats.baseline_objective)
        rounds += 1
        better = (again.stats.objective or 0.0) > (found.stats.objective or 0.0) + 1e-9
        found = again if better else found
        if not better or budget.left() - reserve < 1.5 * (budget.used() - began):
            break
    if rounds > 1:
        found = replace(found, stats=found.stats.model_copy(update={"rounds": rounds}))
    ordered, terms = dominance.in_arrival_order(problem, found.placement, found.terms)  # rounding ties: oldest
    found = replace(found, placement=ordered, terms=terms)
    with _collector_paused():
        out = decode(problem, found.placement, found.terms, found.status, found.stats)  # the request's own names
        out = schedule.with_evicted(out, stopped)
        budget.lap("decode")
        check(req, out)
        budget.lap("verify")
    return out.model_copy(update={"solver": out.solver.model_copy(update={"phases": dict(budget.phases)})})
