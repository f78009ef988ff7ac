"""The library's door: `plan(request) -> Plan`, verified before it leaves.

The pipeline, one stage per layer, each stage a module or package of its own:

    validate (placement_models) → index the request (placement.problem), with the usage stage's
    right-size offers (placement.rightsize) and without the jobs that can never fit
    (placement.screen) → greedy (placement.baseline, the floor, ready in milliseconds) → compile
    (placement.candidates, placement.compile) → search from the greedy plan (placement.search) →
    decode and explain (placement.decode, placement.explain) → independent verification
    (placement.verify).

docs/architecture.md draws the layers and says where each rule lives and where it is checked.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from placement_models import PlacementRequest, Plan

from placement import candidates, pricing, reservation, screen, search, timeline
from placement import compile as compiler
from placement.baseline import greedy
from placement.decode import decode, schedule
from placement.verify import check


def parse(request: PlacementRequest | dict[str, Any]) -> PlacementRequest:
    """Validate a request dict (raises pydantic ValidationError with paths)."""
    return request if isinstance(request, PlacementRequest) else PlacementRequest.model_validate(request)


def plan(request: PlacementRequest | dict[str, Any], *, log: Callable[[str], None] | None = None,
         stop: threading.Event | None = None) -> Plan:
    """Plan placements for every pending job; the plan always passes `placement.verify`.

    `log` receives CP-SAT's progress lines; setting `stop` ends the search early (the best plan so
    far, the greedy one at worst, is returned).
    """
    req = parse(request)
    start = time.perf_counter()
    planned, stopped = timeline.without_overdue(req)  # policy.overdue evict: overdue jobs' GPUs are free
    problem = screen.build_problem(planned)  # right-size offers beside declared tasks; jobs that can never fit out
    problem = reservation.attach(problem)  # starved jobs (policy.max_wait_h) start now or hold nodes
    baseline = greedy(problem, pricing.held_back(req, problem.nodes, problem.free))  # reserve honoured
    first_plan_s = time.perf_counter() - start

    ctx = compiler.build(problem, candidates.select(problem, baseline))
    found = search.run(ctx, baseline, start, first_plan_s, log=log, stop=stop)
    out = decode(problem, found.placement, found.terms, found.status, found.stats)  # in the request's own names
    out = schedule.with_evicted(out, stopped)
    check(req, out)
    return out
