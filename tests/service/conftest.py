"""Shared helpers for the HTTP service tests: tiny hand-built requests and app/client builders.

Requests are written out here (a few 8-GPU H100 nodes) rather than loaded from instances/, so
the tests depend only on the wire format and solve in milliseconds.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi import FastAPI

with warnings.catch_warnings():
    # Starlette 1.x warns that its TestClient will move from httpx to httpx2; nothing to act on here.
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from placement_models import Plan
from placement_service.app import create_app
from placement_service.settings import Settings

from placement.api import plan as real_plan

H100 = "H100-SXM5-80GB"


def node(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "gpu_model": H100, "gpus": 8, "cpu": 192, "memory_gib": 2048, **extra}


def small_request(nodes: int = 3, **policy: Any) -> dict[str, Any]:
    """Two gangs that fit on three nodes; optional policy fields (time_limit_s, workers...)."""
    request: dict[str, Any] = {
        "api_version": "placement/v1",
        "cluster": {"nodes": [node(f"n{i:03d}") for i in range(nodes)]},
        "jobs": [
            {"name": "train", "priority": 10, "tasks": [{"name": "worker", "replicas": 2, "gpus": 8, "cpu": 32}]},
            {"name": "infer", "tasks": [{"name": "server", "replicas": 3, "gpus": 1, "memory_gib": 64}]},
        ],
        "policy": {"time_limit_s": 2, "workers": 1, **policy},
    }
    return request


def settings(**overrides: Any) -> Settings:
    """Explicit settings, so a developer's PLACEMENT_* environment cannot change test outcomes."""
    base: dict[str, Any] = {
        "max_time_limit_s": 5.0, "deadline_margin_s": 0.5, "max_concurrent_solves": 2, "max_queue": 2,
        "max_solver_workers": 1, "max_body_bytes": 256 * 1024, "max_nodes": 50, "max_jobs": 50,
        "api_token": None, "cors_origins": [],
    }
    base.update(overrides)
    return Settings(**base)


def slow_planner(delay_s: float) -> Callable[..., Plan]:
    """The real planner after a pause that releases the GIL, like a long CP-SAT search would;
    the pause ends early when the solve is told to stop, as CP-SAT's does."""

    def planner(request: Any, *, log: Any = None, stop: threading.Event | None = None) -> Plan:
        (stop or threading.Event()).wait(delay_s)
        return real_plan(request, log=log, stop=stop)

    return planner


@pytest.fixture
def make_client() -> Iterator[Callable[..., tuple[FastAPI, TestClient]]]:
    """Build an app from settings overrides and enter its TestClient (runs the lifespan)."""
    clients: list[TestClient] = []

    def build(planner: Callable[..., Plan] | None = None, **overrides: Any) -> tuple[FastAPI, TestClient]:
        app = create_app(settings(**overrides))
        if planner is not None:
            app.state.runtime.planner = planner
        client = TestClient(app, raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        return app, client

    yield build
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Callable[..., tuple[FastAPI, TestClient]]) -> TestClient:
    return make_client()[1]
