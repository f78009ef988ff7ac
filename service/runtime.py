"""What every route shares: the settings, metrics and solve pool (`Runtime`), one request's deadlines
(`Clock`), and the steps of answering on the pool — read the body on the event loop, parse and solve in
a pool slot, stop at the deadline, on disconnect or at shutdown, render JSON or YAML.

Routes reach the runtime through `request.app.state.runtime`, so a test can replace its planner after
the app is built (`app.state.runtime.planner = ...`).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import threading
import time
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, HTTPException, Request, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from placement_models import PlacementRequest, Plan
from placement_service import bodies
from placement_service.metrics import Metrics
from placement_service.pool import PoolFull, SolvePool
from placement_service.schemas import error_responses
from placement_service.settings import Settings
from pydantic import BaseModel, ValidationError

from placement import api as placement_api

log = logging.getLogger("placement.service")

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

Planner = Callable[..., Plan]
T = TypeVar("T")


def request_id(request: Request) -> str:
    return str(request.scope.get("state", {}).get("request_id", "-"))


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


def runtime(request: Request) -> Runtime:
    """The app's runtime, as a route sees it."""
    rt: Runtime = request.app.state.runtime
    return rt


def render(request: Request, data: BaseModel, headers: dict[str, str] | None = None) -> Response:
    """JSON, or YAML when the client asks for it."""
    if bodies.wants_yaml(request):
        return Response(bodies.render_yaml(data.model_dump(mode="json")), media_type="application/yaml",
                        headers=headers)
    return Response(data.model_dump_json(), media_type="application/json", headers=headers)


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

    def clock(self, request: Request, limit: float) -> Clock:
        """The request's deadlines, counted from its arrival (`RequestContext` stamps it)."""
        return Clock(request.scope["state"]["arrived"], limit, self.settings.deadline_margin_s)

    async def admit(self, request: Request, limit: float) -> tuple[Clock, bytes, str]:
        """The first steps of every pooled route: its clock (`limit` until the body says its own), load shed
        before any time goes to the body (503), then the body read."""
        clock = self.clock(request, limit)
        self.pool.check(self.settings.max_time_limit_s)
        raw, kind = await self.read_body(request)
        return clock, raw, kind

    async def read_body(self, request: Request) -> tuple[bytes, str]:
        """Content type checked and the body read (bounded in size and time); parsing is left to the
        pool thread, so a costly body is paid for inside an admission slot, never on the event loop."""
        kind = bodies.check_content_type(request)
        raw = await bodies.read_limited(request, self.settings.max_body_bytes, self.settings.body_timeout_s)
        return raw, kind

    def decode(self, raw: bytes, kind: str) -> Any:
        return bodies.decode(raw, kind, self.settings.max_body_bytes)

    def applied_limit(self, policy: Any, loc: list[str | int]) -> float:
        """The limit this server gives a solve. A deterministic solve is never cut or re-budgeted (its
        plan must equal the CLI's for the same request), so a limit or worker count over this server's
        maximum is refused instead of clamped."""
        settings = self.settings
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

    def too_late(self, clock: Clock) -> None:
        """Shed a request whose wait in the queue left too little of its time to be worth solving."""
        if time.monotonic() > clock.latest_start():
            self.metrics.rejected.inc()
            raise PoolFull(self.pool.retry_after(), "the request waited in the queue past its time limit")

    def planned(self, planner: Planner, req: PlacementRequest, end: float, stop: threading.Event) -> Plan:
        """One solve on a pool thread, ending by `end` (monotonic), workers clamped; a deterministic
        solve runs exactly as the request says (its limit counts deterministic time, not the clock)."""
        if req.policy.deterministic:
            policy = req.policy
        else:
            # Time spent queued comes off the solve; past the deadline the greedy floor still runs.
            budget = max(_MIN_BUDGET_S, end - time.monotonic())
            workers = min(req.policy.workers, self.settings.max_solver_workers)
            policy = req.policy.model_copy(update={"time_limit_s": budget, "workers": workers})
        started = time.perf_counter()
        try:
            return planner(req.model_copy(update={"policy": policy}), stop=stop)
        except (OverflowError, FloatingPointError) as exc:
            raise bodies.invalid(["body"], f"the request's numbers are too large to plan with together ({exc}); "
                                 "use smaller prices, weights or runtimes", "value_error") from None
        finally:
            self.metrics.solve_seconds.observe(time.perf_counter() - started)

    async def run_on_pool(self, request: Request, work: Callable[[threading.Event], T], clock: Clock) -> T:
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

        future = self.pool.submit(job, stop)
        try:
            while not future.done():
                now = time.monotonic()
                hard = clock.hard_end()
                if now >= hard:
                    self.stop(stop, "deadline")
                    raise HTTPException(504, f"no plan within the time limit of {clock.limit:g}s plus "
                                        f"{self.settings.deadline_margin_s:g}s; the solve was stopped")
                stop_at = clock.stop_at()
                if stop_at is not None and now >= stop_at:
                    self.stop(stop, "deadline")  # the library should be returning already; make sure
                await asyncio.wait({future}, timeout=max(0.001, min(_POLL_S, hard - now)))
                if not future.done() and await request.is_disconnected():
                    self.stop(stop, "disconnect")
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

    def stop(self, stop: threading.Event, reason: str) -> None:
        """Tell a solve to return its best plan now, counting why once."""
        if not stop.is_set():
            stop.set()
            self.metrics.stopped.labels(reason).inc()


_bearer = HTTPBearer(auto_error=False, description="required when the server has PLACEMENT_API_TOKEN")


async def authorize(request: Request, creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> None:
    """Constant-time check, so response timing does not reveal how much of a guess was right."""
    token = request.app.state.runtime.settings.api_token
    if token is None:
        return
    given = creds.credentials.encode() if creds is not None else b""
    if not hmac.compare_digest(given, token.get_secret_value().encode()):
        raise HTTPException(401, "missing or invalid bearer token", headers={"WWW-Authenticate": "Bearer"})


#: Dependencies of every route that needs the bearer token.
GUARDED = [Depends(authorize)]
#: The answers a route that works in a pool slot may give beside its own (documented in the OpenAPI schema).
POOLED_ERRORS = error_responses(401, 408, 413, 415, 422, 500, 503, 504)
