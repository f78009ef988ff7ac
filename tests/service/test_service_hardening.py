"""Hostile and edge-case input over HTTP: every bound answers a quick 4xx naming the field, the
deterministic mode gives the library's plan, and the schema states what validation checks."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from conftest import small_request
from fastapi import FastAPI
from fastapi.testclient import TestClient
from placement_models import PlacementRequest, Plan
from placement_models.base import NOT_BLANK

from placement.api import plan as real_plan

Build = Callable[..., tuple[FastAPI, TestClient]]


def _errors(r: Any) -> list[tuple[list[Any], str]]:
    assert r.status_code == 422, r.text
    return [(e["loc"], e["type"]) for e in r.json()["detail"]]


def test_a_million_item_list_is_refused_quickly_at_its_path(make_client: Build) -> None:
    _, client = make_client(max_body_bytes=8 * 1024 * 1024)
    request = small_request()
    request["cluster"]["nodes"][0]["unhealthy_gpus"] = ["x"] * 1_000_000
    started = time.monotonic()
    r = client.post("/v1/plans", content=json.dumps(request), headers={"content-type": "application/json"})
    assert _errors(r) == [(["body", "cluster", "nodes", 0, "unhealthy_gpus"], "too_long")]
    assert time.monotonic() - started < 10  # was minutes and gigabytes


def test_a_huge_mapping_is_refused_before_its_entries_are_validated(make_client: Build) -> None:
    _, client = make_client(max_body_bytes=8 * 1024 * 1024)
    request = small_request()
    request["jobs"][0]["tasks"][0]["node_selector"] = {str(i): i for i in range(200_000)}
    r = client.post("/v1/plans", json=request)
    assert _errors(r) == [(["body", "jobs", 0, "tasks", 0, "node_selector"], "too_long")]


def test_a_body_with_a_hundred_thousand_errors_lists_a_hundred(make_client: Build) -> None:
    _, client = make_client(max_body_bytes=8 * 1024 * 1024, max_jobs=100_000)
    request = small_request()
    request["jobs"] = [{"name": 1}] * 20_000
    r = client.post("/v1/plans", json=request)
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert len(detail) <= 101
    assert detail[-1]["type"] == "too_many_errors"


def test_huge_numbers_are_422_not_500(make_client: Build) -> None:
    _, client = make_client()
    for path, value in ((("cluster", "nodes", 0, "cpu"), 1e16), (("cluster", "nodes", 0, "memory_gib"), 1e16),
                        (("jobs", 0, "tasks", 0, "cpu"), 1e300), (("policy", "weights", "cost"), 1e308),
                        (("cluster", "pools"), None)):
        request = small_request()
        if value is None:  # a price of 1e308 on a pool
            request["cluster"]["pools"] = [{"name": "p", "gpu_hour_price": 1e308}]
            path = ("cluster", "pools", 0, "gpu_hour_price")
        else:
            target: Any = request
            for key in path[:-1]:
                target = target.setdefault(key, {}) if isinstance(key, str) else target[key]
            target[path[-1]] = value
        r = client.post("/v1/plans", json=request)
        assert _errors(r) == [(["body", *path], "less_than_equal")], path


def test_hostile_documents_are_422_at_body(make_client: Build) -> None:
    _, client = make_client()
    deep = b'{"cluster": ' + b"[" * 1000 + b"]" * 1000 + b"}"
    for body, kind, message in (
        (deep, "application/json", "nested too deeply"),
        (b"a: &x [1]\nb: *x\n", "application/yaml", "aliases are not accepted"),
        ('{"a": "é"}'.encode("latin-1"), "application/json", "not UTF-8"),
    ):
        r = client.post("/v1/plans", content=body, headers={"content-type": kind})
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["loc"] == ["body"] and message in r.json()["detail"][0]["msg"]
    utf16 = json.dumps(small_request()).encode("utf-16")  # with its byte-order mark: decoded
    r = client.post("/v1/plans", content=utf16, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text


def test_schema_states_the_checks_topology_levels(make_client: Build) -> None:
    _, client = make_client()
    schema = client.get("/openapi.json").json()["components"]["schemas"]
    levels = schema["Cluster"]["properties"]["topology_levels"]
    assert levels["uniqueItems"] is True and levels["items"]["pattern"] == NOT_BLANK
    assert levels["items"]["not"] == {"enum": ["node", "cluster"]}
    for bad in ([""], ["  "], ["node"], ["rack", "rack"]):
        request = small_request()
        request["cluster"]["topology_levels"] = bad
        r = client.post("/v1/plans", json=request)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"][:3] == ["body", "cluster", "topology_levels"]


def _unbounded(schema: dict[str, Any], name: str, defs: dict[str, Any], seen: set[str]) -> list[str]:
    """Paths of request-side arrays, mappings and numbers without an upper bound."""
    out: list[str] = []
    if "$ref" in schema:
        ref = schema["$ref"].rsplit("/", 1)[1]
        if ref not in seen:
            seen.add(ref)
            out += _unbounded(defs[ref], ref, defs, seen)
        return out
    kind = schema.get("type")
    if kind == "array" and "maxItems" not in schema:
        out.append(name)
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict) and "maxProperties" not in schema:
        out.append(name)
    if kind in ("number", "integer") and "maximum" not in schema and "exclusiveMaximum" not in schema:
        out.append(name)
    for key, sub in schema.get("properties", {}).items():
        out += _unbounded(sub, f"{name}.{key}", defs, seen)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            out += _unbounded(schema[key], f"{name}[]", defs, seen)
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key, []):
            out += _unbounded(sub, name, defs, seen)
    return out


def test_every_list_mapping_and_number_of_a_request_is_bounded_in_the_schema(make_client: Build) -> None:
    _, client = make_client()
    defs = client.get("/openapi.json").json()["components"]["schemas"]
    loose = _unbounded({"$ref": "#/components/schemas/PlacementRequest"}, "PlacementRequest", defs, set())
    # whatif's change shapes belong to the library's what-if module; the request's own are all bounded
    assert loose == [], loose


def test_deterministic_plan_over_http_equals_the_library_plan(make_client: Build) -> None:
    _, client = make_client(max_time_limit_s=5)
    request = small_request(deterministic=True, time_limit_s=1, workers=1, seed=7)
    r = client.post("/v1/plans", json=request)
    assert r.status_code == 200, r.text
    over_http = Plan.model_validate(r.json())
    direct = real_plan(PlacementRequest.model_validate(request))
    assert over_http.assignments == direct.assignments
    assert over_http.objective.total == direct.objective.total
    assert over_http.solver.mode == "deterministic"


def test_deterministic_over_the_server_maximum_is_refused_not_clamped(make_client: Build) -> None:
    _, client = make_client(max_time_limit_s=1, max_solver_workers=1)
    r = client.post("/v1/plans", json=small_request(deterministic=True, time_limit_s=3))
    assert _errors(r) == [(["body", "policy", "time_limit_s"], "less_than_equal")]
    r = client.post("/v1/plans", json=small_request(deterministic=True, time_limit_s=1, workers=2))
    assert _errors(r) == [(["body", "policy", "workers"], "less_than_equal")]
