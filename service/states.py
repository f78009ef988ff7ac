"""`POST /v1/states` and `POST /v1/changes`: a loop sends its cluster once, then only what changed.

`/v1/states` plans a full request and keeps it (placement.states); its answer names the state. `/v1/changes`
takes a `ClusterChange` against a state the server keeps, plans the request it stands for (the same plan as that
request sent whole) and keeps that as a new state. The store is bounded (`max_states`); an unknown or evicted
state is a 404 at `body.base`, and a change naming a node or job the state lacks a 422 at the entry.
"""

from __future__ import annotations

import threading

from fastapi import APIRouter, HTTPException, Request, Response
from placement_models import Plan
from placement_models.changes import ClusterChange
from placement_service import bodies
from placement_service.plans import solve_body
from placement_service.runtime import GUARDED, POOLED_ERRORS, render, runtime
from placement_service.schemas import body_doc
from pydantic import BaseModel, ValidationError

from placement.states import ChangeError, States, UnknownState

router = APIRouter()


class Planned(BaseModel):
    """A plan and the state it was planned for: the `base` of the next change."""

    state: str
    plan: Plan


def _store(request: Request) -> States:
    app = request.app
    store = getattr(app.state, "placement_states", None)
    if store is None:
        store = app.state.placement_states = States(runtime(request).settings.max_states)
    return store


@router.post("/v1/states", response_model=Planned, dependencies=GUARDED, responses=POOLED_ERRORS,
             openapi_extra=body_doc("PlacementRequest", "a placement request (JSON, or YAML by content type)"),
             summary="Plan a full request and keep it as a state later changes apply to")
async def create_state(request: Request) -> Response:
    """As `POST /v1/plans`, and the request is kept: the answer's `state` is the base of the next change."""
    rt = runtime(request)
    settings = rt.settings
    store = _store(request)
    clock, raw, kind = await rt.admit(request, settings.max_time_limit_s)
    planner = rt.planner

    def work(stop: threading.Event) -> Planned:
        req, plan, _ = solve_body(rt, raw, kind, clock, planner, stop)
        return Planned(state=store.put(req), plan=plan)

    planned = await rt.run_on_pool(request, work, clock)
    rt.metrics.observe_plan(planned.plan)
    return render(request, planned)


@router.post("/v1/changes", response_model=Planned, dependencies=GUARDED,
             responses={**POOLED_ERRORS, 404: {"description": "unknown or expired state (`body.base`)"}},
             openapi_extra=body_doc("ClusterChange", "what changed since a kept state (JSON, or YAML by content type)"),
             summary="Plan what a change makes of a kept state, and keep the result")
async def create_change(request: Request) -> Response:
    """The change is applied to its base state; the result is planned as the full request and kept."""
    rt = runtime(request)
    settings = rt.settings
    store = _store(request)
    clock, raw, kind = await rt.admit(request, settings.max_time_limit_s)
    planner = rt.planner

    def work(stop: threading.Event) -> Planned:
        data = rt.decode(raw, kind)
        try:
            change = ClusterChange.model_validate(data)
        except ValidationError as exc:
            raise bodies.unprocessable(exc) from None
        try:
            req = store.request(change)
        except UnknownState as exc:
            raise HTTPException(404, [{"type": "unknown_state", "loc": ["body", "base"], "msg": str(exc)}]) from None
        except ChangeError as exc:
            raise bodies.invalid(["body", *exc.field], str(exc), "change_error") from None
        except ValidationError as exc:  # what the change makes of the state is not a valid request
            raise bodies.unprocessable(exc, ("state",)) from None
        # the server's bounds on what the change makes (only the lengths are read)
        bodies.check_limits({"cluster": {"nodes": req.cluster.nodes}, "jobs": req.jobs}, ["state"],
                            settings.max_nodes, settings.max_jobs)
        clock.set(rt.applied_limit(req.policy, ["body", "policy"]), req.policy.deterministic)
        rt.too_late(clock)
        plan = rt.planned(planner, req, clock.solve_end(), stop)
        return Planned(state=store.put(req), plan=plan)

    planned = await rt.run_on_pool(request, work, clock)
    rt.metrics.observe_plan(planned.plan)
    return render(request, planned)
