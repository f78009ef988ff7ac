"""The independent checker: a hand-written valid plan passes, and each broken variant names its rule.

Requests and plans are written out by hand (not produced by the solver) so these tests pin the
rules themselves, independently of any compiler bug.
"""

from __future__ import annotations

import ast
import copy
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from placement_models import Node, PlacementRequest, Plan

from placement.verify import RULES, PlanViolation, check, effective_labels, verify

H100 = "H100-SXM5-80GB"


def _node(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "pool": "od", "gpu_model": H100, "gpus": 8, "cpu": 192, "memory_gib": 2048, **extra}


REQUEST: dict[str, Any] = {
    "cluster": {
        "pools": [{"name": "od"}],
        "nodes": [
            _node("n001", labels={"zone": "a"}, unhealthy_gpus=[7]),
            _node("n002", taints=[{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]),
            _node("n003", taints=[{"key": "noisy", "effect": "PreferNoSchedule"}]),
        ],
        "running": [{
            "job": "old-train",
            "pods": [{"task": "worker", "node": "n001", "gpus": [0, 1, 2, 3], "cpu": 32, "memory_gib": 256}],
        }],
    },
    "jobs": [
        {   # a 2-task gang: 2 workers of 8 GPUs, 1 CPU-only launcher
            "name": "llm",
            "tasks": [
                {"name": "worker", "replicas": 2, "gpus": 8, "gpu_memory_gib": 80, "cpu": 96, "memory_gib": 1024,
                 "node_selector": {"placement/gpu-model": H100},
                 "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infer"}]},
                {"name": "launcher", "replicas": 1, "cpu": 8, "memory_gib": 64},
            ],
        },
        {"name": "small", "tasks": [{"name": "a", "gpus": 2, "cpu": 16, "memory_gib": 128,
                                     "node_selector": {"zone": "a"}}]},
        {"name": "waiting", "tasks": [{"name": "b", "gpus": 8}]},
    ],
}

PLAN: dict[str, Any] = {
    "status": "optimal",
    "assignments": [
        {"job": "llm", "task": "worker", "pod": 0, "node": "n003", "gpus": [0, 1, 2, 3, 4, 5, 6, 7]},
        {"job": "llm", "task": "worker", "pod": 1, "node": "n002", "gpus": [7, 6, 5, 4, 3, 2, 1, 0]},
        {"job": "llm", "task": "launcher", "pod": 0, "node": "n001"},
        {"job": "small", "task": "a", "pod": 0, "node": "n001", "gpus": [4, 5]},
    ],
    "preemptions": [],
    "pending": [{"job": "waiting", "reason": "no node with 8 free GPUs"}],
    "objective": {"total": 3.5, "terms": {"priority": 4.0, "fragmentation": -0.5}},
}


def _build(
    mutate: Callable[[dict[str, Any], dict[str, Any]], None] | None = None,
) -> tuple[PlacementRequest, Plan]:
    req, plan = copy.deepcopy(REQUEST), copy.deepcopy(PLAN)
    if mutate is not None:
        mutate(req, plan)
    return PlacementRequest.model_validate(req), Plan.model_validate(plan)


def _asg(plan: dict[str, Any], job: str, task: str, pod: int = 0) -> dict[str, Any]:
    return next(a for a in plan["assignments"] if (a["job"], a["task"], a["pod"]) == (job, task, pod))


def _task(req: dict[str, Any], job: str, task: str) -> dict[str, Any]:
    j = next(j for j in req["jobs"] if j["name"] == job)
    return next(t for t in j["tasks"] if t["name"] == task)


def _set(d: dict[str, Any], **kw: Any) -> None:
    d.update(kw)


# (case id, mutation of (request, plan), rule expected, a fragment the message must contain)
BROKEN: list[tuple[str, Callable[[dict[str, Any], dict[str, Any]], None], str, str]] = [
    ("unknown-job", lambda r, p: _set(_asg(p, "small", "a"), job="ghost"), "reference", "unknown job ghost"),
    ("running-job", lambda r, p: p["assignments"].append(
        {"job": "old-train", "task": "worker", "pod": 0, "node": "n003"}), "reference", "running job old-train"),
    ("unknown-task", lambda r, p: _set(_asg(p, "small", "a"), task="zz"), "reference", "unknown task zz"),
    ("unknown-node", lambda r, p: _set(_asg(p, "small", "a"), node="n999"), "reference", "unknown node n999"),
    ("pod-out-of-range", lambda r, p: _set(_asg(p, "llm", "launcher"), pod=1), "reference", "out of range"),
    ("duplicate-pod", lambda r, p: p["assignments"].append(
        {"job": "llm", "task": "launcher", "pod": 0, "node": "n003"}), "reference", "duplicates assignment 2"),
    ("gpu-held-by-running-pod", lambda r, p: _set(_asg(p, "small", "a"), gpus=[3, 4]), "gpus",
     "GPU 3 of node n001, held by running job old-train"),
    ("unhealthy-gpu", lambda r, p: _set(_asg(p, "small", "a"), gpus=[6, 7]), "gpus", "unhealthy GPU 7"),
    ("gpu-given-twice", lambda r, p: _set(_asg(p, "small", "a"), node="n003", gpus=[0, 1]),
     "gpus", "given to both pod llm/worker/0 and pod small/a/0"),
    ("gpu-count", lambda r, p: _set(_asg(p, "small", "a"), gpus=[4]), "gpus", "has 1 GPUs, task asks for 2"),
    ("gpu-repeated", lambda r, p: _set(_asg(p, "small", "a"), gpus=[4, 4]), "gpus", "more than once"),
    ("gpu-out-of-range", lambda r, p: _set(_asg(p, "small", "a"), gpus=[4, 8]), "gpus", "out of range 0..7"),
    ("cpu-overflow", lambda r, p: _set(_task(r, "small", "a"), cpu=160), "capacity.cpu",
     "node n001 uses 200 CPUs of 192"),
    ("memory-overflow", lambda r, p: _set(_task(r, "small", "a"), memory_gib=1800), "capacity.memory",
     "node n001 uses 2120 GiB of 2048"),
    ("gpu-memory-too-large", lambda r, p: _set(_task(r, "llm", "worker"), gpu_memory_gib=94), "gpu_memory",
     "needs 94 GiB per GPU; node n003 has H100-SXM5-80GB with 80 GiB"),
    ("unknown-gpu-model", lambda r, p: _set(r["cluster"]["nodes"][2], gpu_model="Mystery-9000"), "gpu_memory",
     "unknown GPU model Mystery-9000"),
    ("selector-mismatch", lambda r, p: _set(_task(r, "small", "a"), node_selector={"zone": "b"}), "selector",
     "requires zone='b'; node n001 has 'a'"),
    ("selector-missing-label", lambda r, p: _set(_asg(p, "small", "a"), node="n003", gpus=[]), "selector",
     "node n003 has missing"),
    ("untolerated-taint", lambda r, p: _set(_task(r, "llm", "worker"), tolerations=[]), "taints",
     "pod llm/worker/1 does not tolerate taint dedicated=infer:NoSchedule of node n002"),
    ("wrong-toleration-value", lambda r, p: _set(_task(r, "llm", "worker"), tolerations=[
        {"key": "dedicated", "value": "train"}]), "taints", "dedicated=infer"),
    ("half-placed-gang", lambda r, p: p["assignments"].pop(1), "gang", "gang: job llm has 2 of 3 required pods"),
    ("placed-and-pending", lambda r, p: p["pending"].append({"job": "llm", "reason": "x"}), "pending",
     "job llm is both placed and listed as pending"),
    ("neither-placed-nor-pending", lambda r, p: p["pending"].clear(), "pending",
     "job waiting is neither placed nor listed as pending"),
    ("pending-unknown-job", lambda r, p: p["pending"].append({"job": "ghost", "reason": "x"}), "pending",
     "unknown job ghost"),
    ("pending-running-job", lambda r, p: p["pending"].append({"job": "old-train", "reason": "x"}), "pending",
     "running job old-train"),
    ("pending-duplicate", lambda r, p: p["pending"].append({"job": "waiting", "reason": "x"}), "pending",
     "duplicates entry 0"),
    ("pending-empty-reason", lambda r, p: _set(p["pending"][0], reason="  "), "pending", "empty reason"),
    ("objective-mismatch", lambda r, p: _set(p["objective"], total=4.0), "objective",
     "total 4.0 differs from the sum of its terms 3.5"),
    ("objective-nan", lambda r, p: _set(p["objective"], total=float("nan")), "objective", "differs"),
    ("preemption-present", lambda r, p: p["preemptions"].append({"job": "old-train", "reason": "priority"}),
     "preemption", "job old-train is preempted but policy.preemption is off"),
    ("mig-change-present", lambda r, p: p.__setitem__("mig_changes", [{"node": "n001", "gpu": 1, "layout": []}]),
     "mig", "changes 1 GPU layout(s) but policy.allow_mig_changes is off"),
    ("sharing-change-present", lambda r, p: p.__setitem__("sharing_changes", [
        {"node": "n003", "gpu": 1, "mode": "time-slicing", "replicas": 8}]),
     "sharing", "shares 1 idle GPU(s) but policy.allow_sharing_changes is off"),
    ("whole-pod-on-a-gpu-the-plan-shares", lambda r, p: (
        r.update(policy={"allow_sharing_changes": True}),
        p.__setitem__("sharing_changes", [{"node": "n001", "gpu": 4, "mode": "time-slicing", "replicas": 8}])),
     "sharing", "pod small/a/0 takes shared GPU 4 of node n001 whole (the plan shares it)"),
]


def test_valid_plan_passes() -> None:
    req, plan = _build()
    assert verify(req, plan) == []
    check(req, plan)  # does not raise


@pytest.mark.parametrize(("mutate", "rule", "fragment"), [c[1:] for c in BROKEN], ids=[c[0] for c in BROKEN])
def test_broken_plan_names_rule(
    mutate: Callable[[dict[str, Any], dict[str, Any]], None], rule: str, fragment: str
) -> None:
    req, plan = _build(mutate)
    violations = verify(req, plan)
    hits = [v for v in violations if v.startswith(f"{rule}: ")]
    assert hits, violations
    assert any(fragment in v for v in hits), hits
    with pytest.raises(PlanViolation) as err:
        check(req, plan)
    assert err.value.violations == violations


def test_api_version_checked_even_when_validation_was_bypassed() -> None:
    req, plan = _build()
    bad = plan.model_copy(update={"api_version": "placement/v0"})
    assert verify(req, bad) == ["api_version: plan has 'placement/v0', expected 'placement/v1'"]


def test_min_available_allows_a_partial_gang() -> None:
    def mutate(r: dict[str, Any], p: dict[str, Any]) -> None:
        r["jobs"][0]["min_available"] = 2
        p["assignments"].pop(1)

    assert verify(*_build(mutate)) == []


def test_gang_counts_distinct_pods_and_caps_task_replicas() -> None:
    def mutate(r: dict[str, Any], p: dict[str, Any]) -> None:
        # Worker 1 replaced by a second copy of worker 0: three assignments, only two distinct pods.
        _set(_asg(p, "llm", "worker", 1), pod=0, gpus=[0, 1, 2, 3, 4, 5, 6, 7])
        p["assignments"].append({"job": "llm", "task": "worker", "pod": 1, "node": "n002", "gpus": []})

    violations = verify(*_build(mutate))
    assert "gang: task llm/worker has 3 pods assigned, more than its 2" in violations
    assert not any(v.startswith("gang: job llm") for v in violations)  # 3 distinct pods: enough


def test_prefer_no_schedule_never_blocks() -> None:
    req, plan = _build()
    n003 = next(n for n in req.cluster.nodes if n.name == "n003")
    assert n003.taints[0].effect == "PreferNoSchedule"
    assert not any(v.startswith("taints:") for v in verify(req, plan))


def test_effective_labels_derive_then_let_explicit_labels_win() -> None:
    node = Node.model_validate(_node("n9", gpu_model="nvidia-h100-80gb-hbm3", labels={"placement/pool": "custom"}))
    assert effective_labels(node) == {
        "kubernetes.io/hostname": "n9",
        "placement/pool": "custom",
        "placement/gpu-model": H100,  # canonical name, from an alias in any case
    }
    bare = Node.model_validate({"name": "cpu1", "cpu": 8, "memory_gib": 32})
    assert effective_labels(bare) == {"kubernetes.io/hostname": "cpu1"}


def test_messages_are_deterministic_and_grouped_by_rule() -> None:
    def mutate(r: dict[str, Any], p: dict[str, Any]) -> None:
        _set(_task(r, "small", "a"), cpu=200, node_selector={"zone": "b"})
        _set(_asg(p, "small", "a"), gpus=[3, 7])
        p["pending"].clear()
        p["objective"]["total"] = 0.0
        p["preemptions"].append({"job": "old-train", "reason": "r"})

    req, plan = _build(mutate)
    first = verify(req, plan)
    assert first == verify(req, plan)
    rules = [v.split(":", 1)[0] for v in first]
    assert all(r in RULES for r in rules)
    assert rules == sorted(rules, key=RULES.index)  # all of one rule together, in RULES order
    assert {"gpus", "capacity.cpu", "selector", "pending", "objective", "preemption"} <= set(rules)


def test_plan_violation_carries_every_violation() -> None:
    exc = PlanViolation(["gang: a", "pending: b"])
    assert exc.violations == ["gang: a", "pending: b"]
    assert "gang: a" in str(exc) and "pending: b" in str(exc)


def test_verify_imports_only_the_wire_format_and_catalog() -> None:
    """The second opinion must not share code with the pipeline it checks."""
    # `placement.verify` the attribute is the function (the package exports it); take the module itself
    verify_module = importlib.import_module("placement.verify")
    tree = ast.parse(Path(verify_module.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    ours = {m for m in imported if m.split(".")[0] in ("placement", "placement_models", "ortools")}
    assert ours == {"placement_models", "placement.catalog"}
