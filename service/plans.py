"""`POST /v1/plans` and `POST /v1/verify`: one solve, or one check, in one pool slot.

Both read the body on the event loop and parse it on the pool thread (`Runtime.run_on_pool`), so a
costly body is paid for inside an admission slot.
"""

from __future__ import annotations

import threading
from typing import Any

from fastapi import APIRouter, Request, Response
from placement_models import PlacementRequest, Plan
from placement_service import bodies
from placement_service.runtime import GUARDED, POOLED_ERRORS, render, runtime
from placement_service.schemas import VerifyBody, VerifyResult, body_doc
from pydantic import ValidationError

from placement import api as placement_api
from placement.verify import verify as verify_plan

router = APIRouter()


@router.post(
    "/v1/plans", response_model=Plan, dependencies=GUARDED,
    responses=POOLED_ERRORS,
    openapi_extra=body_doc("PlacementRequest", "a placement request (JSON, or YAML by content type)"),
    summary="Plan placements for every pending job",
)
async def create_plan(request: Request) -> Response:
    """Solve within `min(policy.time_limit_s, max_time_limit_s)` counted from arrival.

    The plan always passes `placement.verify`; the `X-Placement-Time-Limit` header says which
    limit was applied. A deterministic request keeps its own limit and workers (at most the
    server's), so its plan equals the library's and the CLI's for the same request.
    """
    rt = runtime(request)
    settings = rt.settings
    clock, raw, kind = await rt.admit(request, settings.max_time_limit_s)  # load shed before the body is read
    planner = rt.planner

    def work(stop: threading.Event) -> tuple[Plan, float]:
        _, plan, limit = solve_body(rt, raw, kind, clock, planner, stop)
        return plan, limit

    plan, limit = await rt.run_on_pool(request, work, clock)
    rt.metrics.observe_plan(plan)
    return render(request, plan, {"X-Placement-Time-Limit": f"{limit:g}"})


def solve_body(rt: Any, raw: bytes, kind: str, clock: Any, planner: Any,
               stop: threading.Event) -> tuple[PlacementRequest, Plan, float]:
    """A request body read, bounded, validated and planned on a pool thread: (request, plan, limit applied).
    Shared by `/v1/plans` and `/v1/states` (placement_service.states)."""
    settings = rt.settings
    data = rt.decode(raw, kind)
    bodies.check_limits(data, ["body"], settings.max_nodes, settings.max_jobs)
    try:
        req = placement_api.parse(data)
    except ValidationError as exc:
        raise bodies.unprocessable(exc) from None
    limit = rt.applied_limit(req.policy, ["body"])
    clock.set(limit, req.policy.deterministic)
    rt.too_late(clock)
    return req, rt.planned(planner, req, clock.solve_end(), stop), limit


@router.post(
    "/v1/verify", response_model=VerifyResult, dependencies=GUARDED,
    responses=POOLED_ERRORS,
    openapi_extra=body_doc("VerifyBody", "{request, plan} (JSON, or YAML by content type)"),
    summary="Check a plan against a request with the independent verifier",
)
async def verify(request: Request) -> Response:
    """Every broken hard rule, one line each; `valid` is true when there are none.

    Parsed and checked in a pool slot like a solve: a big request costs a verification seconds.
    """
    rt = runtime(request)
    settings = rt.settings
    clock, raw, kind = await rt.admit(request, settings.max_time_limit_s)

    def check(_: threading.Event) -> VerifyResult:
        data = rt.decode(raw, kind)
        inner = data.get("request") if isinstance(data, dict) else None
        bodies.check_limits(inner, ["body", "request"], settings.max_nodes, settings.max_jobs)
        try:
            body = VerifyBody.model_validate(data)
        except ValidationError as exc:
            raise bodies.unprocessable(exc) from None
        violations = verify_plan(body.request, body.plan)
        return VerifyResult(valid=not violations, violations=violations)

    return render(request, await rt.run_on_pool(request, check, clock))
