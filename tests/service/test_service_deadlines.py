"""Deadlines: the time limit is clamped, counted from arrival, enforced with the stop event, and a
client that hangs up stops its solve."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from conftest import settings, slow_planner, small_request
from fastapi import FastAPI
from fastapi.testclient import TestClient
from placement_models import PlacementRequest, Plan
from placement_service.app import create_app

from placement import parse, verify
from placement.api import plan as real_plan

Build = Callable[..., tuple[FastAPI, TestClient]]


def _recording(seen: list[PlacementRequest], pause_s: float = 0.0) -> Callable[..., Plan]:
    def planner(request: PlacementRequest, *, log: Any = None, stop: threading.Event | None = None) -> Plan:
        seen.append(request)
        if pause_s:
            time.sleep(pause_s)
        return real_plan(request, stop=stop)

    return planner


def test_time_limit_and_workers_are_clamped_on_a_copy(make_client: Build) -> None:
    seen: list[PlacementRequest] = []
    _, client = make_client(planner=_recording(seen), max_time_limit_s=0.5, max_solver_workers=1)
    request = small_request(time_limit_s=3600, workers=8)
    r = client.post("/v1/plans", json=request)
    assert r.status_code == 200
    assert r.headers["x-placement-time-limit"] == "0.5"
    policy = seen[0].policy
    assert 0.3 < policy.time_limit_s <= 0.5
    assert policy.workers == 1
    assert r.json()["solver"]["workers"] == 1
    assert verify(parse(request), Plan.model_validate(r.json())) == []


def test_a_limit_under_the_maximum_is_kept(make_client: Build) -> None:
    seen: list[PlacementRequest] = []
    _, client = make_client(planner=_recording(seen), max_time_limit_s=5)
    r = client.post("/v1/plans", json=small_request(time_limit_s=0.75))
    assert r.headers["x-placement-time-limit"] == "0.75"
    assert seen[0].policy.time_limit_s <= 0.75


def test_time_spent_queued_is_taken_off_the_solve(make_client: Build) -> None:
    seen: list[PlacementRequest] = []
    _, client = make_client(planner=_recording(seen, pause_s=0.4), max_concurrent_solves=1, max_queue=1,
                            max_time_limit_s=2)
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(
        client.post("/v1/plans", json=small_request(time_limit_s=2)).status_code)) for _ in range(2)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join(10)
    assert results == [200, 200]
    budgets = sorted(req.policy.time_limit_s for req in seen)
    assert budgets[0] <= 2 - 0.3  # the second solve waited ~0.4 s for the first


def test_deadline_stops_a_long_search_and_returns_a_verified_plan(make_client: Build) -> None:
    app, client = make_client(planner=slow_planner(30), max_time_limit_s=0.4, deadline_margin_s=0.5)
    request = small_request(time_limit_s=10)
    started = time.monotonic()
    r = client.post("/v1/plans", json=request)
    elapsed = time.monotonic() - started
    assert r.status_code == 200
    assert elapsed < 0.4 + 0.5
    assert verify(parse(request), Plan.model_validate(r.json())) == []
    assert 'placement_solves_stopped_total{reason="deadline"} 1.0' in client.get("/metrics").text


def test_a_planner_that_ignores_stop_gets_504_at_the_margin(make_client: Build) -> None:
    def stubborn(request: Any, *, log: Any = None, stop: threading.Event | None = None) -> Plan:
        time.sleep(1.2)
        return real_plan(request)

    app, client = make_client(planner=stubborn, max_time_limit_s=0.2, deadline_margin_s=0.2)
    started = time.monotonic()
    r = client.post("/v1/plans", json=small_request())
    assert time.monotonic() - started < 0.8
    assert r.status_code == 504
    assert r.json()["request_id"] == r.headers["x-request-id"]
    # The slot is held until the thread really ends, so threads never pile up beyond the pool.
    assert app.state.runtime.pool.in_flight == 1
    deadline = time.monotonic() + 3
    while app.state.runtime.pool.in_flight and time.monotonic() < deadline:
        time.sleep(0.02)
    assert app.state.runtime.pool.in_flight == 0


def test_client_disconnect_sets_the_stop_event() -> None:
    """Drive the ASGI app directly so the disconnect arrives exactly while the solve runs."""
    app = create_app(settings(max_time_limit_s=5))
    stopped = threading.Event()
    entered = threading.Event()

    def planner(request: Any, *, log: Any = None, stop: threading.Event | None = None) -> Plan:
        assert stop is not None
        entered.set()
        if stop.wait(5):
            stopped.set()
        return real_plan(request, stop=stop)

    app.state.runtime.planner = planner
    body = json.dumps(small_request(time_limit_s=5)).encode()
    messages: list[dict[str, Any]] = []

    async def scenario() -> float:
        gone = asyncio.Event()
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            messages.append(message)

        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
            "scheme": "http", "path": "/v1/plans", "raw_path": b"/v1/plans", "query_string": b"",
            "root_path": "", "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000), "state": {},
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
        task = asyncio.create_task(app(scope, receive, send))
        while not entered.is_set():
            await asyncio.sleep(0.01)
        hung_up = time.monotonic()
        gone.set()
        await asyncio.wait_for(task, 3)
        return hung_up

    try:
        hung_up = asyncio.run(scenario())
        assert stopped.wait(2)
        assert time.monotonic() - hung_up < 1.0
        metrics = app.state.runtime.metrics.render().decode()
        assert 'placement_solves_stopped_total{reason="disconnect"} 1.0' in metrics
        assert 'code="499"' in metrics
    finally:
        app.state.runtime.pool.close()


def test_a_request_that_waited_past_its_time_limit_is_shed_not_solved(make_client: Build) -> None:
    """The limit counts from arrival: a request still queued when too little of it is left gets a
    quick 503 with Retry-After instead of a late answer (or a 504 after solving in vain)."""
    seen: list[PlacementRequest] = []
    calls = iter(range(100))

    def planner(request: PlacementRequest, *, log: Any = None, stop: threading.Event | None = None) -> Plan:
        if next(calls) == 0:
            time.sleep(0.6)  # the first solve holds the only thread past the second's time limit
        seen.append(request)
        return real_plan(request, stop=stop)

    _, client = make_client(planner=planner, max_concurrent_solves=1, max_queue=1, max_time_limit_s=0.3,
                            deadline_margin_s=1.0)
    request = small_request()
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(client.post("/v1/plans", json=request)))
               for _ in range(2)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join(10)
    assert sorted(r.status_code for r in results) == [200, 503]
    assert len(seen) == 1  # the late one never reached the planner
    shed = next(r for r in results if r.status_code == 503)
    assert int(shed.headers["retry-after"]) >= 1
    # shed at admission (the queue ahead is estimated too long) or when its turn came (too late)
    assert re.search("would not let this request finish in time|waited in the queue past", shed.json()["detail"])
    assert shed.json()["request_id"] == shed.headers["x-request-id"]
    ok = next(r for r in results if r.status_code == 200)
    assert verify(parse(request), Plan.model_validate(ok.json())) == []
