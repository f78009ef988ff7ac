"""Every route and every error code of the HTTP face, through FastAPI's TestClient."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from conftest import H100, node, slow_planner, small_request
from fastapi import FastAPI
from fastapi.testclient import TestClient
from placement_models import Plan
from placement_service.settings import Settings

from placement import parse, verify

Build = Callable[..., tuple[FastAPI, TestClient]]


def _assert_verified(request: dict[str, Any], body: dict[str, Any]) -> Plan:
    plan = Plan.model_validate(body)
    assert verify(parse(request), plan) == []
    return plan


def _locs(response: Any) -> list[list[Any]]:
    assert response.status_code == 422, response.text
    return [item["loc"] for item in response.json()["detail"]]


# ------------------------------------------------------------------------------------------------
# 200s


def test_plan_json_is_verified_and_tagged(client: TestClient) -> None:
    request = small_request()
    r = client.post("/v1/plans", json=request)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    assert r.headers["x-request-id"]
    assert r.headers["x-placement-time-limit"] == "2"
    plan = _assert_verified(request, r.json())
    assert plan.status in ("optimal", "feasible")
    assert {a.job for a in plan.assignments} == {"train", "infer"}


@pytest.mark.parametrize("kind", ["application/yaml", "application/x-yaml", "application/yaml; charset=utf-8"])
def test_plan_accepts_yaml(client: TestClient, kind: str) -> None:
    request = small_request()
    r = client.post("/v1/plans", content=yaml.safe_dump(request), headers={"content-type": kind})
    assert r.status_code == 200, r.text
    _assert_verified(request, r.json())


def test_plan_answers_yaml_when_asked(client: TestClient) -> None:
    request = small_request()
    r = client.post("/v1/plans", json=request, headers={"accept": "application/yaml"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/yaml")
    _assert_verified(request, yaml.safe_load(r.text))


def test_verify_valid_and_broken_plans(client: TestClient) -> None:
    request = small_request()
    plan = client.post("/v1/plans", json=request).json()
    r = client.post("/v1/verify", json={"request": request, "plan": plan})
    assert r.status_code == 200
    assert r.json() == {"valid": True, "violations": []}

    broken = json.loads(json.dumps(plan))
    first = next(a for a in broken["assignments"] if a["job"] == "train")
    first["gpus"] = [0, 1, 2, 3, 4, 5, 6, 99]
    r = client.post("/v1/verify", content=yaml.safe_dump({"request": request, "plan": broken}),
                    headers={"content-type": "application/x-yaml"})
    assert r.status_code == 200
    body = r.json()
    assert body["valid"] is False
    assert any(v.startswith("gpus:") and "99" in v for v in body["violations"])


def test_health_and_readiness(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    r = client.get("/readyz")
    assert r.status_code == 200
    assert r.json() == {"status": "ready", "in_flight": 0, "capacity": 4}


def test_metrics_count_routes_codes_plans_and_model_size(client: TestClient) -> None:
    assert client.post("/v1/plans", json=small_request()).status_code == 200
    assert client.post("/v1/plans", content=b"{", headers={"content-type": "application/json"}).status_code == 422
    r = client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert 'placement_http_requests_total{code="200",method="POST",route="/v1/plans"} 1.0' in text
    assert 'placement_http_requests_total{code="422",method="POST",route="/v1/plans"} 1.0' in text
    assert "placement_solve_seconds_count 1.0" in text
    assert 'placement_plans_total{status="optimal"} 1.0' in text
    assert "placement_model_variables_per_solve_count 1.0" in text
    variables = next(line for line in text.splitlines() if line.startswith("placement_model_variables "))
    assert float(variables.split()[1]) > 0


def test_each_app_has_its_own_registry(make_client: Build) -> None:
    _, a = make_client()
    _, b = make_client()
    assert a.post("/v1/plans", json=small_request()).status_code == 200
    assert "placement_solve_seconds_count 0.0" in b.get("/metrics").text


def test_openapi_and_docs(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    assert {"/v1/plans", "/v1/verify", "/healthz", "/readyz", "/metrics"} <= set(schema["paths"])
    body = schema["paths"]["/v1/plans"]["post"]["requestBody"]["content"]
    assert set(body) == {"application/json", "application/yaml", "application/x-yaml"}
    components = schema["components"]["schemas"]
    assert {"PlacementRequest", "Plan", "VerifyBody", "VerifyResult", "Node"} <= set(components)
    responses = schema["paths"]["/v1/plans"]["post"]
    assert {"413", "415", "422", "503"} <= set(responses["responses"])
    # no token set: the document asks for none (a client that follows it is never refused)
    assert "401" not in responses["responses"] and "security" not in responses
    assert "securitySchemes" not in schema["components"]
    docs = client.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_openapi_asks_for_the_token_only_when_one_is_set(make_client: Build) -> None:
    _, client = make_client(api_token="s3cret")
    operation = client.get("/openapi.json").json()["paths"]["/v1/plans"]["post"]
    assert "401" in operation["responses"] and operation["security"]


# ------------------------------------------------------------------------------------------------
# Request ids and unknown routes


def test_request_id_is_echoed_when_safe_and_replaced_otherwise(client: TestClient) -> None:
    r = client.get("/healthz", headers={"x-request-id": "sched-cycle-42"})
    assert r.headers["x-request-id"] == "sched-cycle-42"
    r = client.get("/healthz", headers={"x-request-id": "bad id\twith spaces"})
    assert r.headers["x-request-id"] != "bad id\twith spaces"
    assert len(r.headers["x-request-id"]) == 32


@pytest.mark.parametrize(("method", "path", "code"), [("GET", "/nope", 404), ("GET", "/v1/plans", 405)])
def test_unknown_routes_are_json_with_request_id(client: TestClient, method: str, path: str, code: int) -> None:
    r = client.request(method, path)
    assert r.status_code == code
    assert r.json()["request_id"] == r.headers["x-request-id"]


# ------------------------------------------------------------------------------------------------
# 401


def test_bearer_token_guards_solver_routes_only(make_client: Build) -> None:
    _, client = make_client(api_token="s3cret")
    request = small_request()
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "Basic s3cret"},
                    {"authorization": "Bearer s3cret-and-more"}):
        r = client.post("/v1/plans", json=request, headers=headers)
        assert r.status_code == 401, headers
        assert r.headers["www-authenticate"] == "Bearer"
        assert r.json()["request_id"] == r.headers["x-request-id"]
    assert client.post("/v1/verify", json={}).status_code == 401
    assert client.get("/metrics").status_code == 401
    ok = {"authorization": "Bearer s3cret"}
    assert client.post("/v1/plans", json=request, headers=ok).status_code == 200
    assert client.get("/metrics", headers=ok).status_code == 200
    for path in ("/healthz", "/readyz", "/openapi.json", "/docs"):
        assert client.get(path).status_code == 200, path


def test_token_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLACEMENT_API_TOKEN", "from-env")
    monkeypatch.setenv("PLACEMENT_CORS_ORIGINS", "https://a.example, https://b.example")
    monkeypatch.setenv("PLACEMENT_MAX_TIME_LIMIT_S", "3")
    s = Settings()
    assert s.api_token is not None and s.api_token.get_secret_value() == "from-env"
    assert s.cors_origins == ["https://a.example", "https://b.example"]
    assert s.max_time_limit_s == 3.0
    assert s.host == "127.0.0.1" and s.port == 8000
    monkeypatch.setenv("PLACEMENT_API_TOKEN", "")
    monkeypatch.setenv("PLACEMENT_CORS_ORIGINS", '["https://c.example"]')
    s = Settings()
    assert s.api_token is None and s.cors_origins == ["https://c.example"]
    assert "from-env" not in repr(Settings(api_token="from-env"))


# ------------------------------------------------------------------------------------------------
# 413, 415


def test_body_over_limit_is_413(make_client: Build) -> None:
    _, client = make_client(max_body_bytes=2048)
    big = small_request()
    big["cluster"]["nodes"][0]["labels"] = {f"k{i}": "v" * 50 for i in range(60)}
    r = client.post("/v1/plans", json=big)
    assert r.status_code == 413
    assert "2048" in r.json()["detail"]


def test_streamed_body_over_limit_is_413_without_content_length(make_client: Build) -> None:
    _, client = make_client(max_body_bytes=2048)

    def chunks() -> Iterator[bytes]:
        yield b'{"cluster": {"nodes": ['
        for _ in range(100):
            yield b'{"name": "x", "cpu": 1, "memory_gib": 1},'
        yield b"]}}"

    r = client.post("/v1/plans", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


@pytest.mark.parametrize("kind", ["text/plain", "application/x-www-form-urlencoded", "application/xml", None])
def test_other_content_types_are_415(client: TestClient, kind: str | None) -> None:
    headers = {"content-type": kind} if kind else {}
    r = client.post("/v1/plans", content=json.dumps(small_request()), headers=headers)
    assert r.status_code == 415
    assert "application/yaml" in r.json()["detail"]
    r = client.post("/v1/verify", content=b"{}", headers=headers)
    assert r.status_code == 415


# ------------------------------------------------------------------------------------------------
# 422


def test_unknown_gpu_model_from_the_solver_is_422_with_path(client: TestClient) -> None:
    request = small_request()
    request["cluster"]["nodes"][0]["gpu_model"] = "Z100"
    r = client.post("/v1/plans", json=request)
    assert _locs(r) == [["body", "cluster", "nodes", 0, "gpu_model"]]
    assert "Z100" in r.json()["detail"][0]["msg"]


@pytest.mark.parametrize(
    ("mutate", "loc"),
    [
        (lambda r: r["cluster"]["nodes"][1].update(cpu=-1), ["body", "cluster", "nodes", 1, "cpu"]),
        (lambda r: r["cluster"]["nodes"][2].pop("gpu_model"), ["body", "cluster", "nodes", 2, "gpu_model"]),
        (lambda r: r["cluster"]["nodes"][0].update(pool="ghost"), ["body", "cluster", "nodes", 0, "pool"]),
        (lambda r: r["jobs"][1]["tasks"][0].update(replicas=0), ["body", "jobs", 1, "tasks", 0, "replicas"]),
        (lambda r: r["jobs"][0].update(min_available=99), ["body", "jobs", 0, "min_available"]),
        (lambda r: r["jobs"][1].update(name="train"), ["body", "jobs", 1, "name"]),
        (lambda r: r["policy"].update(time_limit_s=0), ["body", "policy", "time_limit_s"]),
        (lambda r: r.update(colour="blue"), ["body", "colour"]),
    ],
    ids=["field", "missing", "cross-field-pool", "task", "min-available", "duplicate-job", "policy", "extra"],
)
def test_invalid_requests_are_422_with_paths(client: TestClient, mutate: Callable[[dict], Any],
                                             loc: list[Any]) -> None:
    request = small_request()
    mutate(request)
    r = client.post("/v1/plans", json=request)
    assert loc in _locs(r)
    assert r.json()["request_id"] == r.headers["x-request-id"]


@pytest.mark.parametrize(
    ("body", "kind", "type_"),
    [
        (b'{"cluster": ', "application/json", "json_invalid"),
        (b"\xff\xfe\x00garbage", "application/json", "json_invalid"),
        (b"[" * 100_000, "application/json", "json_invalid"),
        (b"cluster: [unclosed", "application/yaml", "yaml_invalid"),
        (b"a: &x [1]\nb: *x\n", "application/yaml", "yaml_invalid"),
        (b"[1, 2, 3]", "application/json", "model_type"),
        (b"", "application/yaml", "yaml_invalid"),  # empty: one message, JSON or YAML
    ],
    ids=["truncated", "not-utf8", "deep", "yaml-syntax", "yaml-alias", "not-object", "empty-yaml"],
)
def test_unparseable_bodies_are_422_at_body(make_client: Build, body: bytes, kind: str, type_: str) -> None:
    _, client = make_client(max_body_bytes=200_000)
    r = client.post("/v1/plans", content=body, headers={"content-type": kind})
    assert _locs(r) == [["body"]]
    assert r.json()["detail"][0]["type"] == type_


def test_node_and_job_limits_are_422_naming_the_field(make_client: Build) -> None:
    _, client = make_client(max_nodes=3, max_jobs=1)
    r = client.post("/v1/plans", json=small_request(nodes=4))
    assert ["body", "cluster", "nodes"] in _locs(r)
    assert "at most 3 nodes" in r.json()["detail"][0]["msg"]
    r = client.post("/v1/plans", json=small_request(nodes=3))
    assert _locs(r) == [["body", "jobs"]]
    request = small_request(nodes=4)
    r = client.post("/v1/verify", json={"request": request, "plan": {"status": "optimal"}})
    assert _locs(r) == [["body", "request", "cluster", "nodes"]]


def test_verify_reports_paths_inside_request_and_plan(client: TestClient) -> None:
    request = small_request()
    request["cluster"]["nodes"][0]["gpus"] = -1
    r = client.post("/v1/verify", json={"request": request, "plan": {"status": "great", "assignments": []}})
    locs = _locs(r)
    assert ["body", "request", "cluster", "nodes", 0, "gpus"] in locs
    assert ["body", "plan", "status"] in locs
    assert ["body", "plan"] in _locs(client.post("/v1/verify", json={"request": small_request()}))


# ------------------------------------------------------------------------------------------------
# 500, 503


def test_unexpected_error_is_json_500_naming_the_logged_request_id(
    make_client: Build, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*_: Any, **__: Any) -> Plan:
        raise RuntimeError("boom in the solver")

    _, client = make_client(planner=broken)
    with caplog.at_level(logging.ERROR, logger="placement.service"):
        r = client.post("/v1/plans", json=small_request())
    assert r.status_code == 500
    body = r.json()
    rid = r.headers["x-request-id"]
    assert body["request_id"] == rid and rid in body["detail"]
    assert "boom" not in r.text and "Traceback" not in r.text
    record = next(rec for rec in caplog.records if rid in rec.getMessage())
    assert record.exc_info is not None
    assert client.get("/readyz").json()["in_flight"] == 0  # the slot came back


def test_full_pool_and_queue_is_503_with_retry_after(make_client: Build) -> None:
    release = threading.Event()

    def blocked(request: Any, *, log: Any = None, stop: threading.Event | None = None) -> Plan:
        release.wait(5)
        return slow_planner(0)(request, stop=stop)

    app, client = make_client(planner=blocked, max_concurrent_solves=1, max_queue=1)
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(client.post("/v1/plans", json=small_request())))
               for _ in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 5
    while app.state.runtime.pool.in_flight < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    r = client.post("/v1/plans", json=small_request())
    assert time.monotonic() - started < 1.0  # at once, not after the queue drains
    assert r.status_code == 503
    assert int(r.headers["retry-after"]) >= 1
    assert r.json()["request_id"] == r.headers["x-request-id"]
    ready = client.get("/readyz")
    assert ready.status_code == 503 and ready.json()["status"] == "saturated"
    assert client.get("/healthz").status_code == 200
    release.set()
    for t in threads:
        t.join(10)
    assert sorted(x.status_code for x in results) == [200, 200]
    assert client.get("/readyz").status_code == 200
    assert "placement_solves_rejected_total 1.0" in client.get("/metrics").text


# ------------------------------------------------------------------------------------------------
# CORS


def test_no_cors_unless_configured(make_client: Build) -> None:
    _, plain = make_client()
    origin = {"origin": "https://ui.example"}
    assert "access-control-allow-origin" not in plain.get("/healthz", headers=origin).headers
    _, cors = make_client(cors_origins=["https://ui.example"])
    assert cors.get("/healthz", headers=origin).headers["access-control-allow-origin"] == "https://ui.example"
    pre = cors.options("/v1/plans", headers={**origin, "access-control-request-method": "POST",
                                             "access-control-request-headers": "authorization,content-type"})
    assert pre.status_code == 200
    assert pre.headers["x-request-id"]
    other = cors.get("/healthz", headers={"origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers


def test_gpu_models_by_alias_still_plan(client: TestClient) -> None:
    request = small_request()
    request["cluster"]["nodes"].append(node("alias", gpu_model=H100.lower()))
    r = client.post("/v1/plans", json=request)
    assert r.status_code == 200
    _assert_verified(request, r.json())
