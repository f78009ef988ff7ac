"""The independent checker as a whole: a hand-written valid plan passes, each broken variant names its
rule, messages come out in `RULES` order, and no module of the package shares code with the planner.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from verify_cases import asg, build, set_, task

from placement.verify import RULES, PlanViolation, check, verify

# (case id, mutation of (request, plan), rule expected, a fragment the message must contain)
BROKEN: list[tuple[str, Callable[[dict[str, Any], dict[str, Any]], None], str, str]] = [
    ("unknown-job", lambda r, p: set_(asg(p, "small", "a"), job="ghost"), "reference", "unknown job ghost"),
    ("running-job", lambda r, p: p["assignments"].append(
        {"job": "old-train", "task": "worker", "pod": 0, "node": "n003"}), "reference", "running job old-train"),
    ("unknown-task", lambda r, p: set_(asg(p, "small", "a"), task="zz"), "reference", "unknown task zz"),
    ("unknown-node", lambda r, p: set_(asg(p, "small", "a"), node="n999"), "reference", "unknown node n999"),
    ("pod-out-of-range", lambda r, p: set_(asg(p, "llm", "launcher"), pod=1), "reference", "out of range"),
    ("duplicate-pod", lambda r, p: p["assignments"].append(
        {"job": "llm", "task": "launcher", "pod": 0, "node": "n003"}), "reference", "duplicates assignment 2"),
    ("gpu-held-by-running-pod", lambda r, p: set_(asg(p, "small", "a"), gpus=[3, 4]), "gpus",
     "GPU 3 of node n001, held by running job old-train"),
    ("unhealthy-gpu", lambda r, p: set_(asg(p, "small", "a"), gpus=[6, 7]), "gpus", "unhealthy GPU 7"),
    ("gpu-given-twice", lambda r, p: set_(asg(p, "small", "a"), node="n003", gpus=[0, 1]),
     "gpus", "given to both pod llm/worker/0 and pod small/a/0"),
    ("gpu-count", lambda r, p: set_(asg(p, "small", "a"), gpus=[4]), "gpus", "has 1 GPUs, task asks for 2"),
    ("gpu-repeated", lambda r, p: set_(asg(p, "small", "a"), gpus=[4, 4]), "gpus", "more than once"),
    ("gpu-out-of-range", lambda r, p: set_(asg(p, "small", "a"), gpus=[4, 8]), "gpus", "out of range 0..7"),
    ("cpu-overflow", lambda r, p: set_(task(r, "small", "a"), cpu=160), "capacity.cpu",
     "node n001 uses 200 CPUs of 192"),
    ("memory-overflow", lambda r, p: set_(task(r, "small", "a"), memory_gib=1800), "capacity.memory",
     "node n001 uses 2120 GiB of 2048"),
    ("gpu-memory-too-large", lambda r, p: set_(task(r, "llm", "worker"), gpu_memory_gib=94), "gpu_memory",
     "needs 94 GiB per GPU; node n003 has H100-SXM5-80GB with 80 GiB"),
    ("unknown-gpu-model", lambda r, p: set_(r["cluster"]["nodes"][2], gpu_model="Mystery-9000"), "gpu_memory",
     "unknown GPU model Mystery-9000"),
    ("selector-mismatch", lambda r, p: set_(task(r, "small", "a"), node_selector={"zone": "b"}), "selector",
     "requires zone='b'; node n001 has 'a'"),
    ("selector-missing-label", lambda r, p: set_(asg(p, "small", "a"), node="n003", gpus=[]), "selector",
     "node n003 has missing"),
    ("untolerated-taint", lambda r, p: set_(task(r, "llm", "worker"), tolerations=[]), "taints",
     "pod llm/worker/1 does not tolerate taint dedicated=infer:NoSchedule of node n002"),
    ("wrong-toleration-value", lambda r, p: set_(task(r, "llm", "worker"), tolerations=[
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
    ("pending-empty-reason", lambda r, p: set_(p["pending"][0], reason="  "), "pending", "empty reason"),
    ("objective-mismatch", lambda r, p: set_(p["objective"], total=4.0), "objective",
     "total 4.0 differs from the sum of its terms 3.5"),
    ("objective-nan", lambda r, p: set_(p["objective"], total=float("nan")), "objective", "differs"),
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
    req, plan = build()
    assert verify(req, plan) == []
    check(req, plan)  # does not raise


@pytest.mark.parametrize(("mutate", "rule", "fragment"), [c[1:] for c in BROKEN], ids=[c[0] for c in BROKEN])
def test_broken_plan_names_rule(
    mutate: Callable[[dict[str, Any], dict[str, Any]], None], rule: str, fragment: str
) -> None:
    req, plan = build(mutate)
    violations = verify(req, plan)
    hits = [v for v in violations if v.startswith(f"{rule}: ")]
    assert hits, violations
    assert any(fragment in v for v in hits), hits
    with pytest.raises(PlanViolation) as err:
        check(req, plan)
    assert err.value.violations == violations


def test_api_version_checked_even_when_validation_was_bypassed() -> None:
    req, plan = build()
    bad = plan.model_copy(update={"api_version": "placement/v0"})
    assert verify(req, bad) == ["api_version: plan has 'placement/v0', expected 'placement/v1'"]


def test_messages_are_deterministic_and_grouped_by_rule() -> None:
    def mutate(r: dict[str, Any], p: dict[str, Any]) -> None:
        set_(task(r, "small", "a"), cpu=200, node_selector={"zone": "b"})
        set_(asg(p, "small", "a"), gpus=[3, 7])
        p["pending"].clear()
        p["objective"]["total"] = 0.0
        p["preemptions"].append({"job": "old-train", "reason": "r"})

    req, plan = build(mutate)
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
    """The second opinion must not share code with the pipeline it checks: every module of the package
    imports only the standard library, the wire format, the catalog (hardware facts: models, MIG profiles,
    in-node links), `placement.cores` (runs a function on another core; knows no rule) and the package's own
    modules."""
    # `placement.verify` the attribute is the function (the package exports it); take the package itself
    package = importlib.import_module("placement.verify")
    modules = sorted(Path(package.__file__).parent.glob("*.py"))
    own = {"placement.verify"} | {f"placement.verify.{p.stem}" for p in modules}
    assert {"placement.verify.context", "placement.verify.capacity", "placement.verify.topology"} <= own
    used: set[str] = set()
    for path in modules:
        tree = ast.parse(path.read_text())
        assert not any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(tree)), path.name
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        outside = {m for m in imported - own if m.split(".")[0] not in sys.stdlib_module_names}
        allowed = {"placement_models", "placement.catalog", "placement.catalog.links", "placement.cores"}
        assert outside <= allowed, path.name
        used |= outside
    assert used == allowed
