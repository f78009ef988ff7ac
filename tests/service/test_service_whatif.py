"""POST /v1/what-if: side-by-side columns equal separate /v1/plans solves; limits, paths, auth, load.

The request is the library test's small peak-hours case (two 8-GPU nodes, a reserve, a
deferrable job), so each scenario changes the outcome and every solve takes milliseconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from conftest import H100
from fastapi import FastAPI
from fastapi.testclient import TestClient
from placement_models import Plan

from placement import parse, verify
from placement.whatif import Scenario, apply

Build = Callable[..., tuple[FastAPI, TestClient]]


def _node(name: str, rack: str) -> dict[str, Any]:
    return {"name": name, "pool": "od", "gpu_model": H100, "gpus": 8, "cpu": 192, "memory_gib": 2048,
            "topology": {"rack": rack}}


def _request() -> dict[str, Any]:
    return {
        "cluster": {
            "pools": [{"name": "od", "gpu_hour_price": 4.0}],
            "nodes": [_node("a", "r1"), _node("b", "r2")],
            "running": [{"job": "old", "team": "t1", "priority": 5,
                         "pods": [{"task": "w", "node": "a", "gpus": [0, 1, 2, 3], "cpu": 8, "memory_gib": 64}]}],
        },
        "jobs": [{"name": "big", "team": "t1", "tasks": [{"name": "w", "gpus": 8}]},
                 {"name": "late", "team": "t2", "deferrable": True, "tasks": [{"name": "w", "gpus": 8}]}],
        "policy": {"deterministic": True, "time_limit_s": 2, "workers": 1, "peak": True, "reserve": {"od": 4}},
    }


SCENARIOS = [
    {"name": "off-peak", "changes": [{"peak": False}]},
    {"name": "grow", "changes": [{"add_nodes": {"pool": "od", "count": 1, "like": "b"}}]},
]


def _locs(response: Any) -> list[list[Any]]:
    assert response.status_code == 422, response.text
    return [item["loc"] for item in response.json()["detail"]]


def test_columns_equal_separate_plan_solves(client: TestClient) -> None:
    body = {"request": _request(), "scenarios": SCENARIOS}
    r = client.post("/v1/what-if", json=body)
    assert r.status_code == 200, r.text
    assert r.headers["x-placement-time-limit"] == "6"  # three solves of 2 s
    columns = r.json()["scenarios"]
    assert [c["name"] for c in columns] == ["base", "off-peak", "grow"]
    assert columns[0]["diff"] is None
    base = parse(_request())
    for column, scenario in zip(columns[1:], SCENARIOS, strict=True):
        changed = apply(base, Scenario.model_validate(scenario)).model_dump(mode="json")
        alone = client.post("/v1/plans", json=changed)
        assert alone.status_code == 200, alone.text
        got, want = Plan.model_validate(column["plan"]), Plan.model_validate(alone.json())
        assert verify(parse(changed), got) == []
        assert [a.model_dump() for a in got.assignments] == [a.model_dump() for a in want.assignments]
        assert column["row"]["gpus_placed"] == sum(len(a.gpus) for a in want.assignments)
        assert column["row"]["jobs_pending"] == len(want.pending)
    rows = {c["name"]: c["row"] for c in columns}
    assert (rows["base"]["gpus_placed"], rows["off-peak"]["gpus_placed"], rows["grow"]["gpus_placed"]) == (8, 8, 16)
    assert rows["base"]["placed_cost_per_hour"] == pytest.approx(32.0)
    assert (rows["off-peak"]["objective_comparable"], rows["grow"]["nodes_added"]) == (False, 1)
    # Off-peak the deferrable job goes first and takes the one free node from "big".
    assert (columns[1]["diff"]["placed"], columns[1]["diff"]["pending"]) == (["late"], ["big"])
    metrics = client.get("/metrics").text
    assert 'route="/v1/what-if"' in metrics


def test_yaml_in_and_out(client: TestClient) -> None:
    body = {"request": _request(), "scenarios": SCENARIOS[:1]}
    r = client.post("/v1/what-if", content=yaml.safe_dump(body),
                    headers={"content-type": "application/yaml", "accept": "application/yaml"})
    assert r.status_code == 200, r.text
    assert [c["name"] for c in yaml.safe_load(r.text)["scenarios"]] == ["base", "off-peak"]


@pytest.mark.parametrize(("scenarios", "loc"), [
    ([{"name": "x", "changes": [{"grow_gpus": 3}]}], ["body", "scenarios", 0, "changes", 0, "grow_gpus"]),
    ([SCENARIOS[0], {"name": "lose", "changes": [{"peak": True}, {"remove_rack": "r9"}]}],
     ["body", "scenarios", 1, "changes", 1, "remove_rack"]),
    ([{"name": "base", "changes": []}], ["body", "scenarios", 0, "name"]),
    ([], ["body", "scenarios"]),
])
def test_bad_scenarios_are_422_with_their_path(client: TestClient, scenarios: list[Any], loc: list[Any]) -> None:
    r = client.post("/v1/what-if", json={"request": _request(), "scenarios": scenarios})
    assert loc in _locs(r)
    assert client.get("/readyz").json()["in_flight"] == 0  # refused before any solve


def test_over_the_scenario_limit_is_422(make_client: Build) -> None:
    _, client = make_client(max_scenarios=2)
    many = [{"name": f"s{i}", "changes": [{"peak": False}]} for i in range(3)]
    r = client.post("/v1/what-if", json={"request": _request(), "scenarios": many})
    assert _locs(r) == [["body", "scenarios"]]
    assert "at most 2 scenarios" in r.json()["detail"][0]["msg"]


def test_over_the_total_time_bound_is_422(make_client: Build) -> None:
    _, client = make_client(max_what_if_s=5.0)  # base + two scenarios at 2 s = 6 s
    r = client.post("/v1/what-if", json={"request": _request(), "scenarios": SCENARIOS})
    assert _locs(r) == [["body", "scenarios"]]
    # A wall-clock scenario raising its own limit is clamped first, then counted.
    raised = [{"name": "slow", "changes": [{"policy": {"time_limit_s": 999}}]}]
    wall_clock = _request()
    wall_clock["policy"]["deterministic"] = False
    r = client.post("/v1/what-if", json={"request": wall_clock, "scenarios": raised})
    assert "need 7s" in r.json()["detail"][0]["msg"]  # 2 s + the 5 s clamp
    # A deterministic one is refused instead: clamping would change its plan.
    r = client.post("/v1/what-if", json={"request": _request(), "scenarios": raised})
    assert _locs(r) == [["body", "scenarios", 0, "policy", "time_limit_s"]]
    assert "deterministic solve is not shortened" in r.json()["detail"][0]["msg"]


def test_token_is_required_when_set(make_client: Build) -> None:
    _, client = make_client(api_token="s3cret")
    body = {"request": _request(), "scenarios": SCENARIOS[:1]}
    r = client.post("/v1/what-if", json=body)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    r = client.post("/v1/what-if", json=body, headers={"Authorization": "Bearer s3cret"})
    assert r.status_code == 200, r.text


def test_full_pool_is_503_with_retry_after(make_client: Build) -> None:
    release = threading.Event()
    started = threading.Event()

    def blocked(request: Any, *, log: Any = None, stop: threading.Event | None = None) -> Plan:
        from placement.api import plan

        started.set()
        release.wait(5)
        return plan(request, stop=stop)

    _, client = make_client(planner=blocked, max_concurrent_solves=1, max_queue=0)
    body = {"request": _request(), "scenarios": SCENARIOS[:1]}
    first: list[Any] = []
    thread = threading.Thread(target=lambda: first.append(client.post("/v1/what-if", json=body)))
    thread.start()
    try:
        assert started.wait(5)
        t0 = time.monotonic()
        r = client.post("/v1/what-if", json=body)
        assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1
        assert time.monotonic() - t0 < 1.0  # refused at once, not queued
    finally:
        release.set()
        thread.join(10)
    assert first[0].status_code == 200, first[0].text
