"""Candidate pairs on big clusters: best fits for every task, and repairs where the greedy plan is weakest."""

from __future__ import annotations

from typing import Any

import pytest

from placement import candidates, plan, pricing, screen
from placement.api import parse
from placement.baseline import greedy
from placement.budget import Budget

INFERENCE = {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}


def _node(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "gpu_model": "H100-SXM5-80GB", "gpus": 8, "cpu": 96, "memory_gib": 1024, **extra}


def _request() -> dict[str, Any]:
    """The greedy plan puts the important gang on the one plain node; the other gang only fits there, and
    the important one could have gone to the tainted node it tolerates."""
    tolerant = {"name": "main", "gpus": 8, "cpu": 8, "memory_gib": 64,
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "inference",
                                 "effect": "NoSchedule"}]}
    small = {**tolerant, "gpus": 1}
    return {"cluster": {"nodes": [_node("a"), _node("b", taints=[INFERENCE]), _node("c", taints=[INFERENCE])]},
            "jobs": [{"name": "important", "priority": 100, "tasks": [tolerant]},
                     {"name": "waiting", "priority": 10,
                      "tasks": [{"name": "main", "gpus": 8, "cpu": 8, "memory_gib": 64}]},
                     {"name": "small", "priority": 0, "tasks": [small]}],
            "policy": {"time_limit_s": 5, "workers": 1, "deterministic": True}}


def test_the_greedy_plan_leaves_the_waiting_gang_out() -> None:
    req = parse(_request())
    problem = screen.build_problem(req)
    base = greedy(problem, pricing.held_back(req, problem.nodes, problem.free))
    assert base.placed_jobs(problem) == {0, 2}


def test_repairs_offer_the_placed_pod_a_way_out_when_pairs_are_scarce() -> None:
    req = parse(_request())
    problem = screen.build_problem(req)
    base = greedy(problem, pricing.held_back(req, problem.nodes, problem.free))
    c = problem.node_index["c"]
    trimmed = candidates.select(problem, base, max_pairs=4, min_per_task=1)
    assert c not in trimmed[0].tolist()  # no pair to spare: the greedy plan's and best fits only
    repaired = candidates.select(problem, base, max_pairs=5, min_per_task=1)
    assert c in repaired[0].tolist()  # the spare pair is the important gang's exit (b is 1 GPU short)


def test_a_plan_with_scarce_pairs_still_makes_the_swap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Budget, "pairs", lambda self, reserve_s: 5)  # what a short time limit affords
    result = plan(_request())
    assert {a.job for a in result.assignments} == {"important", "waiting", "small"}
    assert result.solver.restricted and result.solver.bound_kind == "relaxation"
    # against the whole-problem bound: only the fragmentation penalty (which the bound drops) is left
    assert result.solver.bound >= result.objective.total
    assert result.solver.gap is not None and result.solver.gap < 0.005


def test_zero_per_task_keeps_only_the_greedy_plans_pairs() -> None:
    req = parse(_request())
    problem = screen.build_problem(req)
    base = greedy(problem, pricing.held_back(req, problem.nodes, problem.free))
    kept = candidates.select(problem, base, max_pairs=1, min_per_task=0)
    assert [c.tolist() for c in kept] == [[problem.node_index["a"]], [], [problem.node_index["b"]]]
