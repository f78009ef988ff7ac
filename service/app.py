"""The HTTP face: a thin FastAPI app over `placement.plan`, `placement.verify` and what-if.

Schedulers call this every cycle, so the app is built around three promises:

* **an answer within the deadline** — `policy.time_limit_s` is clamped to the operator's
  maximum, counted from the request's arrival (time spent queued is taken off the solve), the
  solve is told to stop when the time is up, and the best plan so far (the greedy baseline at
  worst) comes back; only if even that misses the grace margin does the caller get a 504;
* **staying up under load** — solves run on a bounded thread pool with a bounded queue; beyond
  it the answer is an immediate 503 with Retry-After, and parsing happens off the event loop so
  health checks stay fast;
* **clear errors** — 4xx bodies carry the exact field paths; anything unexpected is logged with
  a request id and answered as a JSON 500 naming that id, never a traceback.

The library never imports this module (faces sit on top: docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
import signal
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypeVar

from fastapi import Depends, FastAPI, HTTPException, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from placement_models import PlacementRequest, Plan
from placement_service import bodies
from placement_service.metrics import Metrics
from placement_service.pool import PoolFull, SolvePool
from placement_service.schemas import (
    Health,
    VerifyBody,
    VerifyResult,
    WhatIfBody,
    WhatIfColumn,
    WhatIfResult,
    body_doc,
    error_responses,
    state_domain_checks,
)
from placement_service.settings import Settings
from pydantic import BaseModel, ValidationError
from pydantic.json_schema import models_json_schema
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from placement import api as placement_api
from placement import whatif
from placement.verify import verify as verify_plan

log = logging.getLogger("placement.service")

#: Caller-supplied request ids are reused only if they are short and safe to write into logs.
_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
#: How often a waiting handler checks whether its client hung up.
_POLL_S = 0.1
#: A solve that starts after its deadline still gets this long, so the greedy floor can be returned.
_MIN_BUDGET_S = 0.05
#: A request that would start with less than this share of its time limit left is shed (503) instead:
#: a solve needs some time beyond the greedy floor for its plan to be worth the wait.
_MIN_START_SHARE = 0.2
#: A deterministic solve counts deterministic time, which can run past the wall-clock limit: it is
#: stopped (504) only at this many times its limit after arrival, plus the margin.
DETERMINISTIC_SLACK = 2.0
#: Changes per what-if scenario.
MAX_CHANGES = 256

Planner = Callable[..., Plan]
T = TypeVar("T")


# ------------------------------------------------------------------------------------------------
# Per-request context: id, arrival time, error catch-all, access log and request metrics.


def request_id(request: Request) -> str:
    return str(request.scope.get("state", {}).get("request_id", "-"))


class RequestContext:
    """Pure ASGI middleware (no BaseHTTPMiddleware: it must not interfere with disconnect detection)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        arrived = time.monotonic()
        incoming = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"x-request-id"), "")
        rid = incoming if _SAFE_ID.match(incoming) else uuid.uuid4().hex
        state = scope.setdefault("state", {})
        state["request_id"] = rid
        state["arrived"] = arrived
        status = 0

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                MutableHeaders(scope=message)["X-Request-ID"] = rid
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            log.exception("rid=%s unhandled error in %s %s", rid, scope["method"], scope["path"])
            if status:  # the response had started: nothing more can be said on this connection
                raise
            body = {"detail": f"internal error; the server log has details under request id {rid}",
                    "request_id": rid}
            await JSONResponse(body, status_code=500)(scope, receive, send_with_id)
        finally:
            route = scope.get("route")
            label = getattr(route, "path", None) or "unmatched"
            code = str(status or 499)  # 499: the client went away before any response
            elapsed = time.monotonic() - arrived
            self.metrics.requests.labels(label, scope["method"], code).inc()
            self.metrics.request_seconds.labels(label).observe(elapsed)
            log.info("rid=%s %s %s %s %.1fms", rid, scope["method"], scope["path"], code, elapsed * 1000)


# ------------------------------------------------------------------------------------------------
# Deadlines and draining.


class Clock:
    """One request's deadlines, all counted from its arrival (not from when a thread got to it).

    Until the pool thread has parsed the body, the limit is the server's maximum; `set` then gives
    the request's own. A wall-clock solve is told to stop at arrival + limit and is answered with a
    504 only past the margin; a deterministic one is never stopped for time before the safety
    deadline (DETERMINISTIC_SLACK x limit), since stopping it would change its plan.
    """

    def __init__(self, arrived: float, limit: float, margin: float) -> None:
        self.arrived = arrived
        self.margin = margin
        self.limit = limit
        self.deterministic = False

    def set(self, limit: float, deterministic: bool) -> None:
        self.limit = limit
        self.deterministic = deterministic

    def solve_end(self) -> float:
        return self.arrived + self.limit

    def stop_at(self) -> float | None:
        return None if self.deterministic else self.solve_end()

    def hard_end(self) -> float:
        return self.arrived + (DETERMINISTIC_SLACK if self.deterministic else 1.0) * self.limit + self.margin

    def latest_start(self) -> float:
        """Past this, starting the work cannot give an answer worth its wait: shed it."""
        if self.deterministic:
            return self.arrived + (DETERMINISTIC_SLACK - 1.0) * self.limit
        return self.arrived + (1.0 - _MIN_START_SHARE) * self.limit


def _drain_on_sigterm(rt: Runtime, loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
    """Chain onto the server's SIGTERM handler: stop admitting at once (503 with Retry-After), let
    in-flight work run for `drain_grace_s`, then tell it to return its best plan now, so every
    request is answered, as JSON with its id, before the server's own shutdown timeout cancels it.

    uvicorn installs its handler before the lifespan starts and restores the original one after it
    ends; this wraps it for that span. Outside the main thread (tests) nothing is installed.
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGTERM)
    grace = rt.settings.drain_grace_s

    def stop_in_flight() -> None:
        told = rt.pool.stop_running("shutdown")
        log.info("drain grace of %gs over: %d running solves told to return their best plan", grace, told)

    def on_sigterm(sig: int, frame: Any) -> None:
        if not rt.pool.draining:
            rt.pool.draining = True
            log.info("SIGTERM: draining; %d requests in flight get up to %gs", rt.pool.in_flight, grace)
            loop.call_soon_threadsafe(loop.call_later, grace, stop_in_flight)
        if callable(previous):
            previous(sig, frame)

    signal.signal(signal.SIGTERM, on_sigterm)

    def restore() -> None:
        if signal.getsignal(signal.SIGTERM) is on_sigterm:
            signal.signal(signal.SIGTERM, previous)

    return restore


# ------------------------------------------------------------------------------------------------
# The app.


class Runtime:
    """What the routes share: settings, metrics, the pool, and the planner (replaceable in tests)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.metrics = Metrics()
        self.pool = SolvePool(
            settings.max_concurrent_solves, settings.max_queue, self.metrics,
            max_retry_after_s=settings.max_time_limit_s + settings.deadline_margin_s,
        )
        self.planner: Planner = placement_api.plan


_bearer = HTTPBearer(auto_error=False, description="required when the server has PLACEMENT_API_TOKEN")


async def authorize(request: Request, creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> None:
    """Constant-time check, so response timing does not reveal how much of a guess was right."""
    token = request.app.state.runtime.settings.api_token
    if token is None:
        return
    given = creds.credentials.encode() if creds is not None else b""
    if not hmac.compare_digest(given, token.get_secret_value().encode()):
        raise HTTPException(401, "missing or invalid bearer token", headers={"WWW-Authenticate": "Bearer"})


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; `settings` default to the environment (PLACEMENT_*)."""
    settings = settings or Settings()
    rt = Runtime(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        rt.pool.open()
        restore = _drain_on_sigterm(rt, asyncio.get_running_loop())
        log.info("placement service ready: %d solver threads, queue %d, time limit <= %gs, auth %s",
                 settings.max_concurrent_solves, settings.max_queue, settings.max_time_limit_s,
                 "on" if settings.api_token else "off")
        try:
            yield
        finally:
            restore()
            rt.pool.close()

    app = FastAPI(
        title="placement",
        summary="Whole-cluster GPU placement plans from a CP-SAT optimizer, checked by an independent verifier.",
        version="1",
        lifespan=lifespan,
        separate_input_output_schemas=False,
    )
    app.state.runtime = rt
    if settings.cors_origins:  # answers preflights itself, so they never reach auth
        app.add_middleware(
            CORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "Accept", "X-Request-ID"],
            expose_headers=["X-Request-ID", "Retry-After"],
        )
    # Added last = outermost: every response, preflights included, gets an id and is counted.
    app.add_middleware(RequestContext, metrics=rt.metrics)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        body = {"detail": jsonable_encoder(exc.detail), "request_id": request_id(request)}
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(PoolFull)
    async def pool_full(request: Request, exc: PoolFull) -> JSONResponse:
        body = {"detail": f"busy: {exc.reason}; retry after {exc.retry_after_s}s", "request_id": request_id(request)}
        return JSONResponse(body, status_code=503, headers={"Retry-After": str(exc.retry_after_s)})

    guarded = [Depends(authorize)]

    async def read_body(request: Request) -> tuple[bytes, str]:
        """Content type checked and the body read (bounded in size and time); parsing is left to the
        pool thread, so a costly body is paid for inside an admission slot, never on the event loop."""
        kind = bodies.check_content_type(request)
        raw = await bodies.read_limited(request, settings.max_body_bytes, settings.body_timeout_s)
        return raw, kind

    def decode(raw: bytes, kind: str) -> Any:
        return bodies.decode(raw, kind, settings.max_body_bytes)

    def render(request: Request, data: BaseModel, headers: dict[str, str] | None = None) -> Response:
        if bodies.wants_yaml(request):
            return Response(bodies.render_yaml(data.model_dump(mode="json")), media_type="application/yaml",
                            headers=headers)
        return Response(data.model_dump_json(), media_type="application/json", headers=headers)

    def applied_limit(policy: Any, loc: list[str | int]) -> float:
        """The limit this server gives a solve. A deterministic solve is never cut or re-budgeted (its
        plan must equal the CLI's for the same request), so a limit or worker count over this server's
        maximum is refused instead of clamped."""
        if policy.deterministic:
            if policy.time_limit_s > settings.max_time_limit_s:
                raise bodies.invalid([*loc, "policy", "time_limit_s"], f"a deterministic solve is not shortened; "
                                     f"at most {settings.max_time_limit_s:g}s on this server", "less_than_equal")
            if policy.workers > settings.max_solver_workers:
                raise bodies.invalid([*loc, "policy", "workers"], f"a deterministic solve keeps its workers (they "
                                     f"change the plan); at most {settings.max_solver_workers} on this server",
                                     "less_than_equal")
            return float(policy.time_limit_s)
        return min(policy.time_limit_s, settings.max_time_limit_s)

    def too_late(clock: Clock) -> None:
        """Shed a request whose wait in the queue left too little of its time to be worth solving."""
        if time.monotonic() > clock.latest_start():
            rt.metrics.rejected.inc()
            raise PoolFull(rt.pool.retry_after(), "the request waited in the queue past its time limit")

    @app.post(
        "/v1/plans", response_model=Plan, dependencies=guarded,
        responses=error_responses(401, 408, 413, 415, 422, 500, 503, 504),
        openapi_extra=body_doc("PlacementRequest", "a placement request (JSON, or YAML by content type)"),
        summary="Plan placements for every pending job",
    )
    async def create_plan(request: Request) -> Response:
        """Solve within `min(policy.time_limit_s, max_time_limit_s)` counted from arrival.

        The plan always passes `placement.verify`; the `X-Placement-Time-Limit` header says which
        limit was applied. A deterministic request keeps its own limit and workers (at most the
        server's), so its plan equals the library's and the CLI's for the same request.
        """
        clock = Clock(request.scope["state"]["arrived"], settings.max_time_limit_s, settings.deadline_margin_s)
        rt.pool.check(settings.max_time_limit_s)  # shed load before spending time on the body
        raw, kind = await read_body(request)
        planner = rt.planner

        def work(stop: threading.Event) -> tuple[Plan, float]:
            data = decode(raw, kind)
            bodies.check_limits(data, ["body"], settings.max_nodes, settings.max_jobs)
            try:
                req = placement_api.parse(data)
            except ValidationError as exc:
                raise bodies.unprocessable(exc) from None
            limit = applied_limit(req.policy, ["body"])
            clock.set(limit, req.policy.deterministic)
            too_late(clock)
            return planned(planner, req, clock, clock.solve_end(), stop), limit

        plan, limit = await run_on_pool(request, work, clock)
        rt.metrics.observe_plan(plan)
        return render(request, plan, {"X-Placement-Time-Limit": f"{limit:g}"})

    def planned(planner: Planner, req: PlacementRequest, clock: Clock, end: float, stop: threading.Event) -> Plan:
        """One solve on a pool thread, ending by `end` (monotonic), workers clamped; a deterministic
        solve runs exactly as the request says (its limit counts deterministic time, not the clock)."""
        if req.policy.deterministic:
            policy = req.policy
        else:
            # Time spent queued comes off the solve; past the deadline the greedy floor still runs.
            budget = max(_MIN_BUDGET_S, end - time.monotonic())
            workers = min(req.policy.workers, settings.max_solver_workers)
            policy = req.policy.model_copy(update={"time_limit_s": budget, "workers": workers})
        started = time.perf_counter()
        try:
            return planner(req.model_copy(update={"policy": policy}), stop=stop)
        except (OverflowError, FloatingPointError) as exc:
            raise bodies.invalid(["body"], f"the request's numbers are too large to plan with together ({exc}); "
                                 "use smaller prices, weights or runtimes", "value_error") from None
        finally:
            rt.metrics.solve_seconds.observe(time.perf_counter() - started)

    async def run_on_pool(request: Request, work: Callable[[threading.Event], T], clock: Clock) -> T:
        """Run `work(stop)` (parse, validate, solve) in one pool slot and wait for it without blocking
        the event loop.

        `stop` is set at the clock's solve deadline (the work should return its best so far; never
        for a deterministic solve, whose plan must not depend on timing), on client disconnect (499)
        and at shutdown; past the clock's hard deadline the answer is a 504. The clock learns the
        request's own limit once the pool thread has parsed it.
        """
        stop = threading.Event()  # ends the search: the best plan so far comes back
        abandoned = threading.Event()  # nobody will read the answer: skip the work if still queued

        def job() -> T | None:
            return None if abandoned.is_set() else work(stop)

        future = rt.pool.submit(job, stop)
        try:
            while not future.done():
                now = time.monotonic()
                hard = clock.hard_end()
                if now >= hard:
                    _stop(stop, "deadline")
                    raise HTTPException(504, f"no plan within the time limit of {clock.limit:g}s plus "
                                        f"{settings.deadline_margin_s:g}s; the solve was stopped")
                stop_at = clock.stop_at()
                if stop_at is not None and now >= stop_at:
                    _stop(stop, "deadline")  # the library should be returning already; make sure
                await asyncio.wait({future}, timeout=max(0.001, min(_POLL_S, hard - now)))
                if not future.done() and await request.is_disconnected():
                    _stop(stop, "disconnect")
                    log.info("rid=%s client disconnected; solve stopped", request_id(request))
                    raise HTTPException(499, "client closed the request")
            if future.cancelled():  # dropped from the queue by shutdown
                raise PoolFull(1, "shutting down")
            try:
                result = future.result()
            except ValidationError as exc:  # e.g. an unknown GPU model, found while indexing
                raise bodies.unprocessable(exc) from None
            if result is None:  # cannot happen while this handler waits; kept as a safe answer
                raise PoolFull(1, "solve dropped before it started")
            return result
        finally:
            if not future.done():
                # Leaving early (504, disconnect, cancellation): free the thread soon, or skip the
                # work entirely if it has not started; the pool slot returns when the thread ends.
                abandoned.set()
                stop.set()
                future.cancel()

    def _stop(stop: threading.Event, reason: str) -> None:
        if not stop.is_set():
            stop.set()
            rt.metrics.stopped.labels(reason).inc()

    @app.post(
        "/v1/verify", response_model=VerifyResult, dependencies=guarded,
        responses=error_responses(401, 408, 413, 415, 422, 500, 503, 504),
        openapi_extra=body_doc("VerifyBody", "{request, plan} (JSON, or YAML by content type)"),
        summary="Check a plan against a request with the independent verifier",
    )
    async def verify(request: Request) -> Response:
        """Every broken hard rule, one line each; `valid` is true when there are none.

        Parsed and checked in a pool slot like a solve: a big request costs a verification seconds.
        """
        clock = Clock(request.scope["state"]["arrived"], settings.max_time_limit_s, settings.deadline_margin_s)
        rt.pool.check(settings.max_time_limit_s)
        raw, kind = await read_body(request)

        def check(_: threading.Event) -> VerifyResult:
            data = decode(raw, kind)
            inner = data.get("request") if isinstance(data, dict) else None
            bodies.check_limits(inner, ["body", "request"], settings.max_nodes, settings.max_jobs)
            try:
                body = VerifyBody.model_validate(data)
            except ValidationError as exc:
                raise bodies.unprocessable(exc) from None
            violations = verify_plan(body.request, body.plan)
            return VerifyResult(valid=not violations, violations=violations)

        return render(request, await run_on_pool(request, check, clock))

    @app.post(
        "/v1/what-if", response_model=WhatIfResult, dependencies=guarded,
        responses=error_responses(401, 408, 413, 415, 422, 500, 503, 504),
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
        clock = Clock(request.scope["state"]["arrived"], settings.max_what_if_s, settings.deadline_margin_s)
        rt.pool.check(settings.max_time_limit_s)
        raw, kind = await read_body(request)
        planner = rt.planner

        def prepare(data: Any) -> tuple[list[str], list[PlacementRequest], list[float]]:
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
            limits = [applied_limit(r.policy, ["body", "request"] if k == 0 else ["body", "scenarios", k - 1])
                      for k, r in enumerate(requests)]
            if sum(limits) > settings.max_what_if_s:
                raise bodies.invalid(["body", "scenarios"], f"{len(requests)} solves (base and scenarios) of up "
                                     f"to {max(limits):g}s each need {sum(limits):g}s; at most "
                                     f"{settings.max_what_if_s:g}s per what-if on this server: send fewer "
                                     "scenarios or a lower policy.time_limit_s", "too_long")
            return names, requests, limits

        def work(stop: threading.Event) -> WhatIfResult:
            names, requests, limits = prepare(decode(raw, kind))
            clock.set(sum(limits), any(r.policy.deterministic for r in requests))
            too_late(clock)
            ends = [clock.arrived + sum(limits[: k + 1]) for k in range(len(limits))]  # each solve's own deadline
            plans = []
            for k, (req, end) in enumerate(zip(requests, ends, strict=True)):
                try:
                    plans.append(planned(planner, req, clock, end, stop))
                except ValidationError as exc:  # found while indexing, e.g. an unknown GPU model
                    raise bodies.unprocessable(exc, ["body", "request"] if k == 0 else
                                               ["body", "scenarios", k - 1]) from None
            columns = [
                WhatIfColumn(name=name, time_limit_s=limit, row=whatif.summarise(name, req, plan),
                             diff=None if k == 0 else whatif.diff(plans[0], plan, requests[0]), plan=plan)
                for k, (name, req, plan, limit) in enumerate(zip(names, requests, plans, limits, strict=True))
            ]
            return WhatIfResult(scenarios=columns)

        result = await run_on_pool(request, work, clock)
        for column in result.scenarios:
            rt.metrics.observe_plan(column.plan)
        return render(request, result, {"X-Placement-Time-Limit": f"{clock.limit:g}"})

    @app.get("/healthz", response_model=Health, summary="Liveness: the process answers")
    async def healthz() -> Response:
        return JSONResponse({"status": "ok"})  # no work at all: liveness must answer even when saturated

    @app.get("/readyz", response_model=Health, responses={503: {"model": Health}},
             summary="Readiness: 503 while shutting down or while the pool and queue are full")
    async def readyz() -> Response:
        pool = rt.pool
        status = "draining" if pool.draining else "saturated" if pool.saturated else "ready"
        body = Health(status=status, in_flight=pool.in_flight, capacity=pool.capacity)
        if status == "ready":
            return JSONResponse(body.model_dump())
        return JSONResponse(body.model_dump(), status_code=503, headers={"Retry-After": str(pool.retry_after())})

    @app.get("/metrics", dependencies=guarded, response_class=Response, responses=error_responses(401),
             summary="Prometheus metrics (text exposition format)")
    async def metrics() -> Response:
        return Response(rt.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    def openapi() -> dict[str, Any]:
        """FastAPI's schema plus the request-body models it cannot see (bodies are read by hand)."""
        if app.openapi_schema:
            return app.openapi_schema
        schema = FastAPI.openapi(app)
        _, extra = models_json_schema(
            [(PlacementRequest, "validation"), (VerifyBody, "validation"), (WhatIfBody, "validation")],
            ref_template="#/components/schemas/{model}",
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for name, definition in extra.get("$defs", {}).items():
            components.setdefault(name, definition)
        # Bounds this server checks before validation, stated where a client reads the shapes.
        components["WhatIfBody"]["properties"]["scenarios"]["maxItems"] = settings.max_scenarios
        components["Scenario"]["properties"]["changes"]["maxItems"] = MAX_CHANGES
        components["Cluster"]["properties"]["nodes"]["maxItems"] = settings.max_nodes
        components["PlacementRequest"]["properties"]["jobs"]["maxItems"] = settings.max_jobs
        state_domain_checks(components, settings.max_time_limit_s, settings.max_solver_workers)
        if not settings.api_token:  # no token set: the document must not ask clients for one
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    operation.pop("security", None)
                    operation.get("responses", {}).pop("401", None)
            schema["components"].pop("securitySchemes", None)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
