"""Overload: more requests than solver threads plus queue get quick 503s; the rest get verified
plans; nothing hangs and health answers fast throughout."""

from __future__ import annotations

import asyncio
import time

import httpx
from conftest import settings, slow_planner, small_request
from placement_models import Plan
from placement_service.app import create_app
from placement_service.settings import Settings

from placement import parse, verify


def test_burst_beyond_pool_and_queue() -> None:
    app = create_app(settings(max_concurrent_solves=2, max_queue=2, max_time_limit_s=5))
    app.state.runtime.planner = slow_planner(0.3)  # real plans, each held 0.3 s like a longer search
    request = small_request()
    transport = httpx.ASGITransport(app=app)

    async def burst() -> tuple[list[httpx.Response], list[float]]:
        async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=10) as client:
            solves = [asyncio.create_task(client.post("/v1/plans", json=request)) for _ in range(16)]
            await asyncio.sleep(0.05)
            health = []
            for _ in range(5):
                t = time.monotonic()
                assert (await client.get("/healthz")).status_code == 200
                health.append(time.monotonic() - t)
            return await asyncio.wait_for(asyncio.gather(*solves), 10), health

    started = time.monotonic()
    try:
        responses, health = asyncio.run(burst())
    finally:
        app.state.runtime.pool.close()
    elapsed = time.monotonic() - started
    codes = [r.status_code for r in responses]
    assert set(codes) <= {200, 503}, codes
    assert codes.count(200) >= 4  # 2 running + 2 queued
    assert codes.count(503) >= 1
    assert elapsed < 5
    assert max(health) < 0.5
    parsed = parse(request)
    for r in responses:
        if r.status_code == 200:
            assert verify(parsed, Plan.model_validate(r.json())) == []
        else:
            assert int(r.headers["retry-after"]) >= 1
    assert app.state.runtime.pool.in_flight == 0


def test_a_burst_of_small_calls_within_their_deadlines_is_queued_not_shed() -> None:
    """A scheduler's burst of quick calls (50 at once, as the load test sends) waits its turn under the default
    queue: nothing is refused while every call can still finish by its deadline."""
    app = create_app(settings(max_concurrent_solves=2, max_time_limit_s=5, max_queue=Settings().max_queue))
    request = small_request()
    transport = httpx.ASGITransport(app=app)

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=30) as client:
            return await asyncio.gather(*(client.post("/v1/plans", json=request) for _ in range(50)))

    try:
        responses = asyncio.run(burst())
    finally:
        app.state.runtime.pool.close()
    assert [r.status_code for r in responses] == [200] * 50
