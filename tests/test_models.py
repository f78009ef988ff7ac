"""The wire format: every invalid input is rejected with the path of the offending field and a reason."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from placement_models import Job, PlacementRequest, format_errors
from pydantic import ValidationError

H100 = "H100-SXM5-80GB"

BASE: dict[str, Any] = {
    "cluster": {
        "pools": [{"name": "od"}],
        "nodes": [
            {"name": "n1", "pool": "od", "gpu_model": H100, "gpus": 8, "cpu": 64, "memory_gib": 512},
            {"name": "n2", "pool": "od", "gpu_model": H100, "gpus": 8, "cpu": 64, "memory_gib": 512},
        ],
        "running": [{"job": "r", "pods": [{"task": "w", "node": "n1", "gpus": [0, 1], "cpu": 8,
                                           "memory_gib": 64}]}],
    },
    "jobs": [{"name": "j", "tasks": [{"name": "t", "replicas": 2, "gpus": 1, "cpu": 2, "memory_gib": 8}]}],
}

Mutation = Callable[[dict[str, Any]], Any]


def _node(d: dict[str, Any], i: int = 0) -> dict[str, Any]:
    return d["cluster"]["nodes"][i]


def _task(d: dict[str, Any]) -> dict[str, Any]:
    return d["jobs"][0]["tasks"][0]


def _pod(d: dict[str, Any]) -> dict[str, Any]:
    return d["cluster"]["running"][0]["pods"][0]


def _running(d: dict[str, Any], job: str, **pod: Any) -> None:
    d["cluster"]["running"].append({"job": job, "pods": [{"task": "w", **pod}]})


NAN, INF = float("nan"), float("inf")

# (case id, mutation, expected loc, phrases of which at least one is in the message)
CASES: list[tuple[str, Mutation, tuple[str | int, ...], tuple[str, ...]]] = [
    ("duplicate-node", lambda d: d["cluster"]["nodes"].append(copy.deepcopy(_node(d))),
     ("cluster", "nodes", 2, "name"), ("duplicate node name 'n1'",)),
    ("duplicate-pool", lambda d: d["cluster"]["pools"].append({"name": "od"}),
     ("cluster", "pools", 1, "name"), ("duplicate pool name 'od'",)),
    ("duplicate-job", lambda d: d["jobs"].append(copy.deepcopy(d["jobs"][0])),
     ("jobs", 1, "name"), ("duplicate job name 'j'",)),
    ("pending-job-named-like-running", lambda d: d["jobs"][0].update(name="r"),
     ("jobs", 0, "name"), ("duplicate job name 'r'",)),
    ("duplicate-task", lambda d: d["jobs"][0]["tasks"].append(copy.deepcopy(_task(d))),
     ("jobs", 0, "tasks", 1, "name"), ("duplicate task name 't'",)),
    ("unknown-pool", lambda d: _node(d, 1).update(pool="spotty"),
     ("cluster", "nodes", 1, "pool"), ("unknown pool 'spotty'", "known: od")),
    ("running-unknown-node", lambda d: _pod(d).update(node="n9"),
     ("cluster", "running", 0, "pods", 0, "node"), ("unknown node 'n9'",)),
    ("running-gpu-out-of-range", lambda d: _pod(d).update(gpus=[0, 8]),
     ("cluster", "running", 0, "pods", 0, "gpus", 1), ("GPU index 8 out of range",)),
    ("running-gpu-negative", lambda d: _pod(d).update(gpus=[-1]),
     ("cluster", "running", 0, "pods", 0, "gpus", 0), ("out of range", "greater than or equal to 0")),
    ("unhealthy-gpu-out-of-range", lambda d: _node(d).update(unhealthy_gpus=[3, 8]),
     ("cluster", "nodes", 0, "unhealthy_gpus", 1), ("GPU index 8 out of range 0..7",)),
    ("unhealthy-gpu-duplicate", lambda d: _node(d).update(unhealthy_gpus=[3, 3]),
     ("cluster", "nodes", 0, "unhealthy_gpus"), ("duplicate GPU index",)),
    ("gpu-double-booked", lambda d: _running(d, "r2", node="n1", gpus=[1]),
     ("cluster", "running", 1, "pods", 0, "gpus", 0), ("GPU 1 of node 'n1' is already held by 'r'",)),
    ("gpus-without-model", lambda d: _node(d).pop("gpu_model"),
     ("cluster", "nodes", 0, "gpu_model"), ("required when the node has GPUs",)),
    ("negative-node-cpu", lambda d: _node(d).update(cpu=-1),
     ("cluster", "nodes", 0, "cpu"), ("greater than or equal to 0",)),
    ("negative-task-cpu", lambda d: _task(d).update(cpu=-0.5),
     ("jobs", 0, "tasks", 0, "cpu"), ("greater than or equal to 0",)),
    ("negative-running-cpu", lambda d: _pod(d).update(cpu=-2),
     ("cluster", "running", 0, "pods", 0, "cpu"), ("greater than or equal to 0",)),
    ("negative-gpus", lambda d: _task(d).update(gpus=-1),
     ("jobs", 0, "tasks", 0, "gpus"), ("greater than or equal to 0",)),
    ("nan-node-memory", lambda d: _node(d).update(memory_gib=NAN),
     ("cluster", "nodes", 0, "memory_gib"), ("finite",)),
    ("inf-node-memory", lambda d: _node(d).update(memory_gib=INF),
     ("cluster", "nodes", 0, "memory_gib"), ("finite",)),
    ("nan-task-memory", lambda d: _task(d).update(memory_gib=NAN),
     ("jobs", 0, "tasks", 0, "memory_gib"), ("finite",)),
    ("inf-task-memory", lambda d: _task(d).update(memory_gib=INF),
     ("jobs", 0, "tasks", 0, "memory_gib"), ("finite",)),
    ("inf-task-cpu", lambda d: _task(d).update(cpu=INF),
     ("jobs", 0, "tasks", 0, "cpu"), ("finite",)),
    ("inf-running-memory", lambda d: _pod(d).update(memory_gib=INF),
     ("cluster", "running", 0, "pods", 0, "memory_gib"), ("finite",)),
    ("nan-gpu-memory", lambda d: _task(d).update(gpu_memory_gib=NAN),
     ("jobs", 0, "tasks", 0, "gpu_memory_gib"), ("finite",)),
    ("inf-gpu-memory", lambda d: _task(d).update(gpu_memory_gib=INF),
     ("jobs", 0, "tasks", 0, "gpu_memory_gib"), ("finite",)),
    ("gpu-memory-on-cpu-task", lambda d: _task(d).update(gpus=0, gpu_memory_gib=10),
     ("jobs", 0, "tasks", 0, "gpu_memory_gib"), ("only for tasks that ask for GPUs",)),
    ("nan-weight", lambda d: d.update(policy={"weights": {"fragmentation": NAN}}),
     ("policy", "weights", "fragmentation"), ("finite",)),
    ("inf-weight", lambda d: d.update(policy={"weights": {"priority": INF}}),
     ("policy", "weights", "priority"), ("finite",)),
    ("zero-time-limit", lambda d: d.update(policy={"time_limit_s": 0}),
     ("policy", "time_limit_s"), ("greater than 0",)),
    ("zero-workers", lambda d: d.update(policy={"workers": 0}),
     ("policy", "workers"), ("greater than or equal to 1",)),
    ("min-available-above-pods", lambda d: d["jobs"][0].update(min_available=3),
     ("jobs", 0, "min_available"), ("3 exceeds the job's 2 pods",)),
    ("min-available-below-one", lambda d: d["jobs"][0].update(min_available=0),
     ("jobs", 0, "min_available"), ("greater than or equal to 1",)),
    ("zero-replicas", lambda d: _task(d).update(replicas=0),
     ("jobs", 0, "tasks", 0, "replicas"), ("greater than or equal to 1",)),
    ("job-without-tasks", lambda d: d["jobs"][0].update(tasks=[]),
     ("jobs", 0, "tasks"), ("at least 1 item",)),
    ("cluster-without-nodes", lambda d: d["cluster"].update(nodes=[], running=[]),
     ("cluster", "nodes"), ("at least 1 item",)),
    ("typo-in-task", lambda d: _task(d).update(replica=3),
     ("jobs", 0, "tasks", 0, "replica"), ("Extra inputs are not permitted",)),
    ("typo-at-top", lambda d: d.update(polciy={}),
     ("polciy",), ("Extra inputs are not permitted",)),
    ("typo-in-node", lambda d: _node(d).update(memory_gb=512),
     ("cluster", "nodes", 0, "memory_gb"), ("Extra inputs are not permitted",)),
    ("wrong-api-version", lambda d: d.update(api_version="placement/v2"),
     ("api_version",), ("placement/v1",)),
    ("unknown-taint-effect", lambda d: _node(d).update(taints=[{"key": "k", "effect": "Sometimes"}]),
     ("cluster", "nodes", 0, "taints", 0, "effect"), ("NoSchedule",)),
    ("previous-plan-shape", lambda d: d.update(policy={"previous_plan": {"assignments": [{"job": "j"}]}}),
     ("policy", "previous_plan", "assignments", 0, "task"), ("Field required",)),
    ("running-cpu-over-node", lambda d: _running(d, "r2", node="n1", cpu=60),
     ("cluster", "nodes", 0, "cpu"), ("running pods use 68 CPUs, more than the node's 64",)),
    ("running-memory-over-node", lambda d: _running(d, "r2", node="n1", memory_gib=500),
     ("cluster", "nodes", 0, "memory_gib"), ("running pods use 564 GiB, more than the node's 512",)),
    ("sharing-default-replicas", lambda d: d.update(policy={"allow_sharing_changes": True,
                                                            "sharing_default": {"mode": "mps", "replicas": 0}}),
     ("policy", "sharing_default", "replicas"), ("greater than or equal to 1",)),
    ("sharing-default-mode", lambda d: d.update(policy={"sharing_default": {"mode": "mig", "replicas": 4}}),
     ("policy", "sharing_default", "mode"), ("time-slicing", "mps")),
    ("sharing-default-unknown-field", lambda d: d.update(policy={"sharing_default": {"mode": "mps", "replica": 4}}),
     ("policy", "sharing_default", "replica"), ("Extra inputs are not permitted",)),
    ("max-sharing-changes-negative", lambda d: d.update(policy={"max_sharing_changes": -1}),
     ("policy", "max_sharing_changes"), ("greater than or equal to 0",)),
    ("sharing-change-weight-negative", lambda d: d.update(policy={"weights": {"sharing_change": -0.1}}),
     ("policy", "weights", "sharing_change"), ("greater than or equal to 0",)),
    ("allow-sharing-changes-not-bool", lambda d: d.update(policy={"allow_sharing_changes": "sometimes"}),
     ("policy", "allow_sharing_changes"), ("valid boolean",)),
]


def _errors(mutate: Mutation) -> list[dict[str, Any]]:
    d = copy.deepcopy(BASE)
    mutate(d)
    with pytest.raises(ValidationError) as info:
        PlacementRequest.model_validate(d)
    return info.value.errors()


def test_base_request_is_valid() -> None:
    req = PlacementRequest.model_validate(copy.deepcopy(BASE))
    assert req.jobs[0].needed == 2


@pytest.mark.parametrize(("mutate", "loc", "phrases"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_input_names_its_field(mutate: Mutation, loc: tuple[str | int, ...],
                                       phrases: tuple[str, ...]) -> None:
    errors = _errors(mutate)
    locs = [e["loc"] for e in errors]
    assert loc in locs, f"expected an error at {loc}, got {[(e['loc'], e['msg']) for e in errors]}"
    msg = next(e["msg"] for e in errors if e["loc"] == loc)
    assert any(p in msg for p in phrases), f"{msg!r} does not mention any of {phrases}"


def test_not_supported_fields_accept_their_empty_value() -> None:
    d = copy.deepcopy(BASE)
    d.update(policy={"previous_plan": None})
    PlacementRequest.model_validate(d)


def test_all_problems_reported_at_once() -> None:
    def mutate(d: dict[str, Any]) -> None:
        _node(d, 1).update(pool="nope", name="n1")
        _pod(d).update(gpus=[9])

    locs = {e["loc"] for e in _errors(mutate)}
    assert {("cluster", "nodes", 1, "name"), ("cluster", "nodes", 1, "pool"),
            ("cluster", "running", 0, "pods", 0, "gpus", 0)} <= locs


def test_format_errors_gives_one_path_per_line() -> None:
    d = copy.deepcopy(BASE)
    d["jobs"][0].update(min_available=5)
    with pytest.raises(ValidationError) as info:
        PlacementRequest.model_validate(d)
    assert format_errors(info.value) == ["jobs[0].min_available: 5 exceeds the job's 2 pods"]


def test_defaults() -> None:
    job = Job.model_validate({"name": "j", "tasks": [{"name": "a", "replicas": 3}, {"name": "b"}]})
    assert (job.priority, job.preemptible, job.min_available, job.pods, job.needed) == (0, False, None, 4, 4)
    assert job.tasks[1].gpus == 0 and job.tasks[1].replicas == 1
    elastic = Job.model_validate({"name": "j", "min_available": 2, "tasks": [{"name": "a", "replicas": 3}]})
    assert elastic.needed == 2
    req = PlacementRequest.model_validate(copy.deepcopy(BASE))
    assert req.policy.weights.fragmentation == 0.1 and req.policy.weights.priority == 1.0
    policy = req.policy
    assert not policy.allow_sharing_changes and policy.max_sharing_changes is None
    assert (policy.sharing_default.mode, policy.sharing_default.replicas) == ("time-slicing", 8)
    # below what the smallest openb share (0.05 of a GPU) earns at priority weight 1: sharing a GPU for it pays
    assert 0 < policy.weights.sharing_change < 0.05 * policy.weights.priority


def test_every_list_and_number_has_a_bound_checked_before_the_items() -> None:
    """A million-item list or mapping is one `too_long` error found at once, and numbers that would
    overflow the problem build are refused where they are given."""
    import time

    from placement_models.base import MAX_CPU, MAX_GPUS, MAX_NODES, MAX_WEIGHT

    cases: list[tuple[Mutation, tuple[str | int, ...], str]] = [
        (lambda d: _node(d).update(unhealthy_gpus=["x"] * 1_000_000), ("cluster", "nodes", 0, "unhealthy_gpus"),
         "too_long"),
        (lambda d: _node(d).update(labels={str(i): "x" for i in range(100_000)}), ("cluster", "nodes", 0, "labels"),
         "too_long"),
        (lambda d: d["cluster"].update(nodes=[{}] * (MAX_NODES + 1)), ("cluster", "nodes"), "too_long"),
        (lambda d: _node(d).update(cpu=MAX_CPU * 10), ("cluster", "nodes", 0, "cpu"), "less_than_equal"),
        (lambda d: d.setdefault("policy", {}).update(weights={"cost": MAX_WEIGHT * 2}),
         ("policy", "weights", "cost"), "less_than_equal"),
        (lambda d: _node(d).update(mig={str(g): [] for g in range(MAX_GPUS + 1)}), ("cluster", "nodes", 0, "mig"),
         "too_long"),
    ]
    for mutate, loc, kind in cases:
        started = time.monotonic()
        errors = _errors(mutate)
        assert [(e["loc"], e["type"]) for e in errors] == [(loc, kind)]
        assert time.monotonic() - started < 3


def test_numbers_inside_lists_and_mappings_are_as_strict_as_fields() -> None:
    """A field's JSON type is checked per object (placement_models.base.json_types); a list's or a mapping's
    numbers by their item type, which must carry JSON_INT or JSON_NUMBER, or `[true]` would read as `[1]`."""
    import typing

    import placement_models
    from placement_models.base import JSON_INT, JSON_NUMBER
    from pydantic import BaseModel

    def loose(annotation: Any) -> bool:
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        if origin is typing.Annotated:
            return args[0] in (int, float) and not any(m in (JSON_INT, JSON_NUMBER) for m in args[1:])
        return annotation in (int, float)

    found = []
    for model in vars(placement_models).values():
        if isinstance(model, type) and issubclass(model, BaseModel):
            for name, field in model.model_fields.items():
                for inner in _containers(field.annotation):
                    if loose(inner):
                        found.append(f"{model.__name__}.{name}")
    assert found == []


def _containers(annotation: Any) -> list[Any]:
    """Item (and mapping value) types of the lists and mappings in `annotation`, at any depth."""
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (list, dict):
        item = args[-1]
        return [item, *_containers(item)]
    return [found for arg in args for found in _containers(arg)]
