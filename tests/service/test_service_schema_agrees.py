"""The OpenAPI document is exactly as strict as validation: an object the document calls valid is
accepted, one it calls invalid is refused (a fuzzer holds the server to both).

Each case is one object of one schema component, judged twice: by the served document (jsonschema,
as schemathesis judges) and by the model (pydantic). Cross-field rules of one object, JSON types,
GPU-index keys and the catalog's GPU models are all covered; rules across objects (names unique,
references known, GPU indices below the node's count) cannot be stated and are not listed here.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import settings, small_request
from fastapi.testclient import TestClient
from placement_models import (
    FlavorQuota,
    Job,
    Node,
    NodeTemplate,
    PlacementRequest,
    Plan,
    Policy,
    Pool,
    PreemptionRules,
    RunningPod,
    Task,
    Team,
)
from placement_models.base import GPU_KEY_PATTERN, MAX_GPUS
from placement_service.app import create_app
from pydantic import BaseModel, ValidationError

from placement import catalog

jsonschema = pytest.importorskip("jsonschema")

H100 = "H100-SXM5-80GB"
TEMPLATE = {"cpu": 8, "memory_gib": 64}
NODE = {"name": "n", **TEMPLATE}
SHAPE = {Node: NODE, NodeTemplate: TEMPLATE}
TASK = {"name": "t"}


def _job(**extra: Any) -> dict[str, Any]:
    return {"name": "j", "tasks": [{"name": "t", "gpus": 1}], **extra}


# (model, object): the model's name is its schema component's
CASES: list[tuple[type[BaseModel], dict[str, Any]]] = [
    # a node with GPUs names its model; null and "" are no model
    *((m, {**SHAPE[m], **extra}) for m in (Node, NodeTemplate) for extra in (
        {"gpus": 8}, {"gpus": 8, "gpu_model": None}, {"gpus": 8, "gpu_model": ""}, {"gpus": 8, "gpu_model": H100},
        {"gpus": 0}, {}, {"gpus": 0, "gpu_model": None})),
    (Pool, {"name": "p", "reclaim_rate_per_h": 0.1}),
    (Pool, {"name": "p", "reclaim_rate_per_h": 0.1, "capacity_type": "on-demand"}),
    (Pool, {"name": "p", "reclaim_rate_per_h": 0.1, "capacity_type": "spot"}),
    (Pool, {"name": "p", "reclaim_rate_per_h": None}),
    *((RunningPod, {"task": "t", "node": "n", **extra}) for extra in (
        {"mig": {"gpu": 0, "profile": "1g.10gb", "start": 0}},
        {"mig": {"gpu": 0, "profile": "1g.10gb", "start": 0}, "gpus": [0]},
        {"mig": {"gpu": 0, "profile": "1g.10gb", "start": 0}, "gpu_share": 0.5},
        {"gpu_share": 0.5}, {"gpu_share": 0.5, "gpus": [0]}, {"gpu_share": 0.5, "gpus": [0, 1]},
        {"gpu_memory_gib": 4}, {"gpu_memory_gib": 4, "gpu_share": 0.5, "gpus": [1]}, {"gpus": [0, 1]})),
    *((Task, {**TASK, **extra}) for extra in (
        {"gpu_memory_gib": 10}, {"gpu_memory_gib": 10, "gpus": 1}, {"gpu_memory_gib": 10, "gpu_share": 0.5},
        {"mig_profile": "1g.10gb", "gpu_share": 0.5}, {"mig_profile": "1g.10gb", "gpus": 1},
        {"gpu_share": 0.5, "gpus": 2}, {"gpu_share": 0.5, "gpus": 0}, {"mig_profile": "auto"},
        {"mig_profile": " AuTo\n"}, {"mig_profile": "auto", "gpu_memory_gib": 10}, {"mig_profile": "autox"},
        {"gpus": 3.0}, {"gpus": 3.5}, {"gpus": True}, {"gpus": "3"}, {"cpu": 2}, {"cpu": False})),
    (Job, _job(right_size=True)),
    (Job, {**_job(right_size=True), "tasks": [{"name": "t", "gpus": 2}]}),
    (Job, _job(right_size=True, topology={"preferred": "rack"})),
    (Job, _job(preemptible=1)),
    (Job, _job(preemptible="true")),
    (Job, _job(submitted_at=1_700_000_000)),
    (Job, _job(submitted_at="2025-01-01T00:00:00Z")),
    (FlavorQuota, {"gpus": {"nominal": 1}}),
    (FlavorQuota, {"pool": None, "gpu_model": None, "gpus": {"nominal": 1}}),
    (FlavorQuota, {"pool": "p", "gpus": {"nominal": 1}}),
    (PreemptionRules, {"reclaim_within_cohort": "never", "borrow_within_cohort": {"policy": "lower_priority"}}),
    (PreemptionRules, {"reclaim_within_cohort": "never"}),
    (PreemptionRules, {"borrow_within_cohort": {"policy": "lower_priority"}}),
    (Policy, {"preemption": 1}),
    (Policy, {"preemption": "yes"}),
    (Policy, {"workers": True}),
    (Policy, {"off_peak": {"timezone": "Mars/Olympus", "windows": [{"start": "22:00", "end": "06:00"}]}}),
    (Policy, {"off_peak": {"timezone": "Europe/Berlin", "windows": [{"start": 1320, "end": "06:00"}]}}),
    (Policy, {"off_peak": {"timezone": "Europe/Berlin", "windows": [{"start": "22:00", "end": "06:00"}]}}),
    (Policy, {"reserve": {"p": True}}),
    *((Policy, {"off_peak": {"windows": [{"start": start, "end": "06:00"}]}}) for start in (
        "00:00:00Z", "22:00+01:00", "22:00:00.5", "22:00\n", "7:00", "24:00")),
    (Team, {"name": "a", "usage_half_life_h": 24, "usage_at": "2025-01-01T00:00:00Z"}),
    (Team, {"name": "a", "weight": "2"}),
    (Plan, {"status": "feasible", "overdue": [{"job": "j", "started_at": "2025-01-01T00:00:00Z", "running_h": 2,
                                               "max_runtime_h": False}]}),
    (Plan, {"status": "feasible", "assignments": [{"job": "j", "task": "t", "pod": 0, "node": "n", "gpus": [True]}]}),
    (Plan, {"status": "feasible", "objective": {"total": 1, "terms": {"x": "1"}}}),
]

#: what the request validator checks beyond single models that the document states too
REQUEST_CASES: list[dict[str, Any]] = [
    {"cluster": {"nodes": [NODE]}, "policy": {"peak": True,
                                              "off_peak": {"windows": [{"start": "22:00", "end": "06:00"}]}}},
    {"cluster": {"nodes": [NODE]}, "teams": [{"name": "a"}], "jobs": [_job()]},
    {"cluster": {"nodes": [NODE]}, "teams": [{"name": "a"}], "jobs": [_job(team="a")]},
    {"cluster": {"nodes": [NODE]}, "jobs": [{**_job(), "tasks": [{"name": "t"}],
                                             "topology": {"slice": {"size": 1, "required": "rack"}}}]},
    {"cluster": {"nodes": [NODE]}, "teams": [{"name": "a", "usage_half_life_h": 2}]},
]


@pytest.fixture(scope="module")
def components() -> dict[str, Any]:
    """The document the server serves (the app's own openapi(), without a round trip per case)."""
    return create_app(settings()).openapi()["components"]["schemas"]


def _schema_says(components: dict[str, Any], name: str, value: Any) -> bool:
    root = {"$ref": f"#/components/schemas/{name}", "components": {"schemas": components}}
    return jsonschema.Draft202012Validator(root).is_valid(value)


def _model_says(model: type[BaseModel], value: Any) -> bool:
    try:
        model.model_validate(value)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize(("model", "value"), CASES, ids=lambda v: v.__name__ if isinstance(v, type) else "")
def test_schema_and_model_agree(components: dict[str, Any], model: type[BaseModel], value: Any) -> None:
    assert _schema_says(components, model.__name__, value) == _model_says(model, value), value


@pytest.mark.parametrize("value", REQUEST_CASES)
def test_schema_and_request_validation_agree(components: dict[str, Any], value: dict[str, Any]) -> None:
    assert _schema_says(components, "PlacementRequest", value) == _model_says(PlacementRequest, value), value


def test_node_schema_requires_gpu_model_when_gpus_are_given(components: dict[str, Any]) -> None:
    for model, shape in SHAPE.items():
        assert not _schema_says(components, model.__name__, {**shape, "gpus": 1})
        assert _schema_says(components, model.__name__, {**shape, "gpus": 1, "gpu_model": H100})


KEYS = ["0", "7", "99", "127", "128", "007", "00", "+1", "-0", " 1", "1 ", "1\n", "1_0", "1.0", "0x1", "", "a"]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_gpu_index_keys_read_as_the_schema_says(components: dict[str, Any], key: str) -> None:
    node = {**NODE, "gpu_model": H100, "gpus": MAX_GPUS, "sharing": {key: {"mode": "mps", "replicas": 2}}}
    mig = components["Node"]["properties"]["mig"]
    assert mig["propertyNames"] == {"pattern": GPU_KEY_PATTERN} == components["Node"]["properties"]["sharing"][
        "propertyNames"]
    assert mig["maxProperties"] == MAX_GPUS
    assert _schema_says(components, "Node", node) == _model_says(Node, node)


def test_every_gpu_index_is_a_key_and_nothing_else_is() -> None:
    import re

    pattern = re.compile(GPU_KEY_PATTERN)
    assert [k for k in map(str, range(1000)) if pattern.search(k)] == [str(g) for g in range(MAX_GPUS)]


def test_blank_in_the_schema_is_blank_to_str_strip() -> None:
    """Patterns spell whitespace out (generators read `\\s` by Unicode category): the same set `strip()` removes."""
    import re
    import sys

    from placement_models.base import NOT_BLANK

    blank = re.compile(NOT_BLANK)
    assert [c for c in map(chr, range(sys.maxunicode + 1)) if not blank.search(c)] == [
        c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace()]


def test_gpu_models_in_the_schema_are_the_catalogs(components: dict[str, Any]) -> None:
    import re

    branch = next(b for b in components["Node"]["properties"]["gpu_model"]["anyOf"] if b.get("type") == "string")
    pattern = re.compile(branch["pattern"])
    names = [*catalog.known_models(), "h100-sxm5-80gb", " NVIDIA-H100-80GB-HBM3-MIG-1g.10gb\n", "A100-SXM4-80GB-SHARED",
             "H100", "H100 -SHARED", "x", "", "h200\n", "H200-MIG-a\nb", "A100-SHARED-SHARED", "\x1fh200\x85\u3000",
             "h200\u200b"]
    for name in names:
        assert (pattern.search(name) is not None) == (catalog.lookup(name) is not None), repr(name)


def test_a_unix_time_in_a_string_is_no_date_time() -> None:
    """pydantic would read it as a Unix time; the schema's `format: date-time` says no (jsonschema here has
    no date-time format checker, so this one is asserted on the model alone)."""
    assert not _model_says(Job, _job(submitted_at="1700000000"))


def test_booleans_and_quoted_numbers_are_422_naming_the_field(client: TestClient) -> None:
    for path, value, kind in ((("jobs", 0, "tasks", 0, "gpus"), True, "int_type"),
                              (("jobs", 0, "tasks", 0, "cpu"), "2", "float_type"),
                              (("jobs", 0, "preemptible"), 1, "bool_type"),
                              (("policy", "deterministic"), "true", "bool_type")):
        request = small_request()
        target: Any = request
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        r = client.post("/v1/plans", json=request)
        assert r.status_code == 422, r.text
        assert [(e["loc"], e["type"]) for e in r.json()["detail"]] == [(["body", *path], kind)]


def test_a_plan_read_back_refuses_a_boolean_runtime(client: TestClient) -> None:
    plan = {"status": "feasible", "overdue": [{"job": "j", "started_at": "2025-01-01T00:00:00Z", "running_h": 2,
                                               "max_runtime_h": False}]}
    r = client.post("/v1/verify", json={"request": small_request(), "plan": plan})
    assert r.status_code == 422, r.text
    assert [e["loc"] for e in r.json()["detail"]] == [["body", "plan", "overdue", 0, "max_runtime_h"]]


def test_whole_floats_are_integers_as_in_the_schema(client: TestClient) -> None:
    request = small_request()
    request["jobs"][0]["tasks"][0]["gpus"] = 8.0
    assert client.post("/v1/plans", json=request).status_code == 200


def test_a_window_time_with_an_offset_is_422_not_500(client: TestClient) -> None:
    """An offset made an aware time, compared with the zone's naive wall clock: a TypeError per request."""
    request = small_request()
    request["policy"]["off_peak"] = {"windows": [{"start": "00:00:00Z", "end": "00:00:00Z"}]}
    r = client.post("/v1/plans", json=request)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "policy", "off_peak", "windows", 0, "start"]


def test_deterministic_limits_of_this_server_are_in_its_schema(make_client: Any) -> None:
    app, client = make_client(max_time_limit_s=1, max_solver_workers=1)
    schemas = app.openapi()["components"]["schemas"]
    for policy in ({"deterministic": True}, {"deterministic": True, "time_limit_s": 1},
                   {"deterministic": True, "time_limit_s": 1, "workers": 1}, {"deterministic": True, "time_limit_s": 2,
                                                                               "workers": 1}):
        r = client.post("/v1/plans", json=small_request(**policy))
        assert _schema_says(schemas, "Policy", small_request(**policy)["policy"]) == (r.status_code == 200), policy
