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

The app is assembled here (middleware, error handlers, the OpenAPI document); the routes live in
routers of their own — `placement_service.plans` (`/v1/plans`, `/v1/verify`),
`placement_service.what_if` (`/v1/what-if`), `placement_service.health` (`/healthz`, `/readyz`,
`/metrics`) — over what they share, `placement_service.runtime` (the pool, deadlines, bodies).

The library never imports this module (faces sit on top: docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import logging
import re
import signal
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from placement_models import PlacementRequest
from placement_models.changes import ClusterChange
from placement_service import health, plans, states, what_if
from placement_service.metrics import Metrics
from placement_service.pool import PoolFull
from placement_service.runtime import Runtime, request_id
from placement_service.schemas import VerifyBody, WhatIfBody, state_domain_checks
from placement_service.settings import Settings
from pydantic.json_schema import models_json_schema
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("placement.service")

#: Caller-supplied request ids are reused only if they are short and safe to write into logs.
_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


# ------------------------------------------------------------------------------------------------
# Per-request context: id, arrival time, error catch-all, access log and request metrics.


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
# Draining.


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

    # Routers in the order the OpenAPI document lists their paths.
    app.include_router(plans.router)
    app.include_router(states.router)
    app.include_router(what_if.router)
    app.include_router(health.router)

    def openapi() -> dict[str, Any]:
        """FastAPI's schema plus the request-body models it cannot see (bodies are read by hand)."""
        if app.openapi_schema:
            return app.openapi_schema
        schema = FastAPI.openapi(app)
        _, extra = models_json_schema(
            [(PlacementRequest, "validation"), (VerifyBody, "validation"), (WhatIfBody, "validation"),
             (ClusterChange, "validation")],
            ref_template="#/components/schemas/{model}",
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for name, definition in extra.get("$defs", {}).items():
            components.setdefault(name, definition)
        # Bounds this server checks before validation, stated where a client reads the shapes.
        components["WhatIfBody"]["properties"]["scenarios"]["maxItems"] = settings.max_scenarios
        components["Scenario"]["properties"]["changes"]["maxItems"] = what_if.MAX_CHANGES
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
