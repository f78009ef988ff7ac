"""Real sockets: the service under uvicorn on 127.0.0.1, as a scheduler would call it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
import yaml
from conftest import settings, small_request
from placement_models import Plan
from placement_service.app import create_app

from placement import parse, verify
from placement.api import plan as real_plan

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(url: str, proc: subprocess.Popen[bytes] | None = None, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(f"{url}/healthz", timeout=0.5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("server did not become healthy")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """`python -m placement_service` in a subprocess, configured only through PLACEMENT_* variables."""
    port = _free_port()
    env = {**os.environ, "PLACEMENT_MAX_TIME_LIMIT_S": "2", "PLACEMENT_MAX_CONCURRENT_SOLVES": "1",
           "PLACEMENT_MAX_QUEUE": "2", "PLACEMENT_API_TOKEN": "tok", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "placement_service", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_real_server_plans_and_the_plan_verifies(server: str) -> None:
    auth = {"authorization": "Bearer tok"}
    request = small_request(time_limit_s=30)
    r = httpx.post(f"{server}/v1/plans", json=request, headers={**auth, "x-request-id": "cycle-1"}, timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["x-request-id"] == "cycle-1"
    assert r.headers["x-placement-time-limit"] == "2"  # clamped by PLACEMENT_MAX_TIME_LIMIT_S
    assert "server" not in r.headers
    plan = Plan.model_validate(r.json())
    assert verify(parse(request), plan) == []
    assert plan.assignments

    r = httpx.post(f"{server}/v1/plans", content=yaml.safe_dump(request),
                   headers={**auth, "content-type": "application/yaml"}, timeout=10)
    assert r.status_code == 200
    assert verify(parse(request), Plan.model_validate(r.json())) == []
    assert httpx.post(f"{server}/v1/plans", json=request, timeout=10).status_code == 401
    assert httpx.get(f"{server}/readyz", timeout=2).status_code == 200


def test_real_server_keeps_a_state_and_plans_changes_against_it(server: str) -> None:
    """A loop sends its cluster once (`/v1/states`), then what changed (`/v1/changes`): the plan is the one the
    full request gives (deterministic), and an unknown state or a change the state lacks is a 4xx at the field."""
    auth = {"authorization": "Bearer tok"}
    first = small_request(deterministic=True, time_limit_s=1, workers=1)
    r = httpx.post(f"{server}/v1/states", json=first, headers=auth, timeout=10)
    assert r.status_code == 200, r.text
    state = r.json()["state"]
    assert Plan.model_validate(r.json()["plan"]).assignments == real_plan(first).assignments
    change = {"base": state, "jobs_removed": ["infer"],
              "jobs_put": [{"name": "late", "tasks": [{"name": "w", "replicas": 4, "gpus": 2}]}]}
    r = httpx.post(f"{server}/v1/changes", json=change, headers=auth, timeout=10)
    assert r.status_code == 200, r.text
    full = {**first, "jobs": [first["jobs"][0], change["jobs_put"][0]]}
    got = Plan.model_validate(r.json()["plan"])
    assert got.assignments == real_plan(full).assignments and verify(parse(full), got) == []
    assert r.json()["state"] != state
    r = httpx.post(f"{server}/v1/changes", json={"base": "nope"}, headers=auth, timeout=10)
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["body", "base"]
    r = httpx.post(f"{server}/v1/changes", json={"base": state, "nodes_removed": ["ghost"]}, headers=auth, timeout=10)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "nodes_removed", 0]


def test_real_server_burst_has_no_5xx_and_only_verified_plans(server: str) -> None:
    request = small_request()
    parsed = parse(request)
    body = json.dumps(request)
    headers = {"authorization": "Bearer tok", "content-type": "application/json"}
    codes: list[int] = []
    plans: list[dict[str, Any]] = []
    lock = threading.Lock()

    def one() -> None:
        r = httpx.post(f"{server}/v1/plans", content=body, headers=headers, timeout=10)
        with lock:
            codes.append(r.status_code)
            if r.status_code == 200:
                plans.append(r.json())

    threads = [threading.Thread(target=one) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert len(codes) == 12
    assert set(codes) <= {200, 503}
    assert plans
    for p in plans:
        assert verify(parsed, Plan.model_validate(p)) == []


def test_real_socket_disconnect_stops_the_solve() -> None:
    """uvicorn in a thread (so the planner can be instrumented); the client hangs up mid-solve."""
    app = create_app(settings(max_time_limit_s=5))
    entered, stopped = threading.Event(), threading.Event()

    def planner(request: Any, *, log: Any = None, stop: threading.Event | None = None) -> Plan:
        assert stop is not None
        entered.set()
        if stop.wait(5):
            stopped.set()
        return real_plan(request, stop=stop)

    app.state.runtime.planner = planner
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        _wait_healthy(f"http://127.0.0.1:{port}")
        body = json.dumps(small_request(time_limit_s=5)).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            client.sendall(b"POST /v1/plans HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            assert entered.wait(5)
            hung_up = time.monotonic()
        assert stopped.wait(3)
        assert time.monotonic() - hung_up < 1.0
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
        assert 'placement_solves_stopped_total{reason="disconnect"} 1.0' in metrics
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
