"""`POST /v1/what-if`: the request and changed copies of it, solved one after another in one pool slot
and compared side by side.

Every scenario is applied before any solve, so a bad scenario costs no solver time; the sum of the
limits is bounded by `max_what_if_s`, since the answer waits for all of them.
"""

from __future__ import annotations

import threading
from typing import Any

from fastapi import APIRouter, Request, Response
from placement_models import PlacementRequest
from placement_service import bodies
from placement_service.runtime import GUARDED, POOLED_ERRORS, Runtime, render, runtime
from placement_service.schemas import WhatIfBody, WhatIfColumn, WhatIfResult, body_doc
from pydantic import ValidationError

from placement import whatif

#: Changes per what-if scenario.
MAX_CHANGES = 256

router = APIRouter()


def _prepare(rt: Runtime, data: Any) -> tuple[list[str], list[PlacementRequest], list[float]]:
    """Names, requests (base first, then each scenario applied) and the limit each solve gets; every bound
    of this server checked before any validation or solve."""
    settings = rt.settings
    if isinstance(data, dict):
        bodies.check_limits(data.get("request"), ["body", "request"], settings.max_nodes, settings.max_jobs)
        sent = data.get("scenarios")
        if isinstance(sent, list) and len(sent) > settings.max_scenarios:
            raise bodies.invalid(["body", "scenarios"], f"at most {settings.max_scenarios} scenarios per "
                                 f"what-if on this server (got {len(sent)})", "too_long")
        for i, scenario in enumerate(sent if isinstance(sent, list) else []):
            changes = scenario.get("changes") if isinstance(scenario, dict) else None
            if isinstance(changes, list) and len(changes) > MAX_CHANGES:
                raise bodies.invalid(["body", "scenarios", i, "changes"], f"at most {MAX_CHANGES} changes "
                                     f"per scenario (got {len(changes)})", "too_long")
    try:
        body = WhatIfBody.model_validate(data)
    except ValidationError as exc:
        raise bodies.unprocessable(exc) from None
    names, requests = ["base"], [body.request]
    for i, scenario in enumerate(body.scenarios):
        if scenario.name in names:
            raise bodies.invalid(["body", "scenarios", i, "name"], f"scenario names must be unique and "
                                 f"not 'base'; {scenario.name!r} is taken", "value_error")
        try:  # all applied before any solve: a bad scenario costs no solver time
            changed = whatif.apply(body.request, scenario)
        except whatif.ScenarioError as exc:
            at = [] if exc.change is None else ["changes", exc.change, exc.kind or ""]
            raise bodies.invalid(["body", "scenarios", i, *at], str(exc), "scenario_error") from None
        except ValidationError as exc:  # the changed request breaks a rule of the wire format
            raise bodies.unprocessable(exc, ["body", "scenarios", i, "changes"]) from None
        if len(changed.cluster.nodes) > settings.max_nodes:
            raise bodies.invalid(["body", "scenarios", i, "changes"], f"the scenario grows the cluster to "
                                 f"{len(changed.cluster.nodes)} nodes; at most {settings.max_nodes} on "
                                 "this server", "too_long")
        names.append(scenario.name)
        requests.append(changed)
    limits = [rt.applied_limit(r.policy, ["body", "request"] if k == 0 else ["body", "scenarios", k - 1])
              for k, r in enumerate(requests)]
    if sum(limits) > settings.max_what_if_s:
        raise bodies.invalid(["body", "scenarios"], f"{len(requests)} solves (base and scenarios) of up "
                             f"to {max(limits):g}s each need {sum(limits):g}s; at most "
                             f"{settings.max_what_if_s:g}s per what-if on this server: send fewer "
                             "scenarios or a lower policy.time_limit_s", "too_long")
    return names, requests, limits


@router.post(
    "/v1/what-if", response_model=WhatIfResult, dependencies=GUARDED,
    responses=POOLED_ERRORS,
    openapi_extra=body_doc("WhatIfBody", "{request, scenarios} (JSON, or YAML by content type)"),
    summary="Solve the request and changed copies of it, and compare the plans side by side",
)
async def what_if(request: Request) -> Response:
    """Base first, then each scenario: its row (placed, pending, cost, fairness...), diff and plan.

    Every solve gets `min(its policy.time_limit_s, max_time_limit_s)`; the sum over the base
    and the scenarios must stay within `max_what_if_s` (else 422 at `body.scenarios`).

    The solves run one after another in a single pool slot, not in the library's process
    pool: one request then holds exactly one slot, so admission, the queue bound and 503s
    mean the same as for /v1/plans; CP-SAT already uses `policy.workers` threads per solve;
    forking processes from a threaded server per request is slow and unsafe; and a stop
    event (deadline, disconnect, shutdown) cannot reach another process. The price is
    latency (the sum of the limits), which is why the total is bounded.
    """
    rt = runtime(request)
    clock, raw, kind = await rt.admit(request, rt.settings.max_what_if_s)
    planner = rt.planner

    def work(stop: threading.Event) -> WhatIfResult:
        names, requests, limits = _prepare(rt, rt.decode(raw, kind))
        clock.set(sum(limits), any(r.policy.deterministic for r in requests))
        rt.too_late(clock)
        ends = [clock.arrived + sum(limits[: k + 1]) for k in range(len(limits))]  # each solve's own deadline
        plans = []
        for k, (req, end) in enumerate(zip(requests, ends, strict=True)):
            try:
                plans.append(rt.planned(planner, req, end, stop))
            except ValidationError as exc:  # found while indexing, e.g. an unknown GPU model
                raise bodies.unprocessable(exc, ["body", "request"] if k == 0 else
                                           ["body", "scenarios", k - 1]) from None
        columns = [
            WhatIfColumn(name=name, time_limit_s=limit, row=whatif.summarise(name, req, plan, requests[0]),
                         diff=None if k == 0 else whatif.diff(plans[0], plan, requests[0]), plan=plan)
            for k, (name, req, plan, limit) in enumerate(zip(names, requests, plans, limits, strict=True))
        ]
        return WhatIfResult(scenarios=columns)

    result = await rt.run_on_pool(request, work, clock)
    for column in result.scenarios:
        rt.metrics.observe_plan(column.plan)
    return render(request, result, {"X-Placement-Time-Limit": f"{clock.limit:g}"})
