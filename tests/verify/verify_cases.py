"""A hand-written request and a valid plan for it, and helpers to break the plan one rule at a time.

Written out by hand (not produced by the solver) so the verifier's tests pin the rules themselves,
independently of any compiler bug.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from placement_models import Objective, PlacementRequest, Plan

from placement.verify.context import Context
from placement.verify.objective import TERMS

H100 = "H100-SXM5-80GB"


def node_spec(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "pool": "od", "gpu_model": H100, "gpus": 8, "cpu": 192, "memory_gib": 2048, **extra}


REQUEST: dict[str, Any] = {
    "cluster": {
        "pools": [{"name": "od"}],
        "nodes": [
            node_spec("n001", labels={"zone": "a"}, unhealthy_gpus=[7]),
            node_spec("n002", taints=[{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]),
            node_spec("n003", taints=[{"key": "noisy", "effect": "PreferNoSchedule"}]),
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


def build(
    mutate: Callable[[dict[str, Any], dict[str, Any]], None] | None = None,
) -> tuple[PlacementRequest, Plan]:
    req, plan = copy.deepcopy(REQUEST), copy.deepcopy(PLAN)
    if mutate is not None:
        mutate(req, plan)
    request, out = PlacementRequest.model_validate(req), Plan.model_validate(plan)
    if plan["objective"] == PLAN["objective"]:
        out = out.model_copy(update={"objective": recomputed(request, out)})
    return request, out


def recomputed(request: PlacementRequest, plan: Plan) -> Objective:
    """The objective the verifier derives for a hand-written plan: these tests pin the other rules, and a plan
    whose assignments they change must carry its own terms (tests/verify/test_verify_objective.py pins those)."""
    ctx = Context.build(request, plan)
    terms = {}
    for name, checker in TERMS.items():
        found = checker(ctx)
        if found and (found[0].low or name in plan.objective.terms):
            terms[name] = round(found[0].low, 6)
    return Objective(total=round(sum(terms.values()), 6), terms=terms)


def asg(plan: dict[str, Any], job: str, task: str, pod: int = 0) -> dict[str, Any]:
    return next(a for a in plan["assignments"] if (a["job"], a["task"], a["pod"]) == (job, task, pod))


def task(req: dict[str, Any], job: str, task: str) -> dict[str, Any]:
    j = next(j for j in req["jobs"] if j["name"] == job)
    return next(t for t in j["tasks"] if t["name"] == task)


def set_(d: dict[str, Any], **kw: Any) -> None:
    d.update(kw)
