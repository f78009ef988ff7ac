"""Candidate pairs on big clusters: best fits for every task, and repairs where the greedy plan is weakest."""

from __future__ import annotations

from typing import Any

import pytest

from placement import candidates, plan, pricing, screen
from placement.api import parse
from placement.baseline import greedy
from placement.budget import Budget
from placement.problem import Problem
from placement.solution import Placement

INFERENCE = {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}


def _node(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "gpu_model": "H100-SXM5-80GB", "gpus": 8, "cpu": 96, "memory_gib": 1024, **extra}


#: An 8-GPU task on plain nodes only, and one that also tolerates the tainted ones.
PLAIN = {"name": "main", "gpus": 8, "cpu": 8, "memory_gib": 64}
TOLERANT = {**PLAIN, "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "inference",
                                      "effect": "NoSchedule"}]}
POLICY = {"time_limit_s": 5, "workers": 1, "deterministic": True}


def _request() -> dict[str, Any]:
    """The greedy plan puts the important gang on the one plain node; the other gang only fits there, and
    the important one could have gone to the tainted node it tolerates."""
    return {"cluster": {"nodes": [_node("a"), _node("b", taints=[INFERENCE]), _node("c", taints=[INFERENCE])]},
            "jobs": [{"name": "important", "priority": 100, "tasks": [TOLERANT]},
                     {"name": "waiting", "priority": 10, "tasks": [PLAIN]},
                     {"name": "small", "priority": 0, "tasks": [{**TOLERANT, "gpus": 1}]}],
            "policy": POLICY}


def _greedy(data: dict[str, Any]) -> tuple[Problem, Placement]:
    """The screened problem of a request and the greedy plan the product starts from."""
    req = parse(data)
    problem = screen.build_problem(req)
    return problem, greedy(problem, pricing.held_back(req, problem.nodes, problem.free))


def test_the_greedy_plan_leaves_the_waiting_gang_out() -> None:
    problem, base = _greedy(_request())
    assert base.placed_jobs(problem) == {0, 2}


def test_repairs_offer_the_placed_pod_a_way_out_when_pairs_are_scarce() -> None:
    problem, base = _greedy(_request())
    c = problem.node_index["c"]
    # fewer pairs than tasks: placed tasks keep the greedy plan's nodes (counted apart), the waiting gang its best
    # fit, and repairs what is left
    trimmed = candidates.select(problem, base, max_pairs=1, min_per_task=1)
    assert trimmed[0].tolist() == [problem.node_index["a"]]  # no pair to spare: the greedy plan's node only
    repaired = candidates.select(problem, base, max_pairs=2, min_per_task=1)
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
    problem, base = _greedy(_request())
    kept = candidates.select(problem, base, max_pairs=1, min_per_task=0)
    assert [c.tolist() for c in kept] == [[problem.node_index["a"]], [], [problem.node_index["b"]]]


def _two_blocked_gangs() -> dict[str, Any]:
    """Two important gangs that tolerate the taint take the two plain nodes first (best fit by index); two
    waiting gangs fit only there. Moving the important ones to the tainted nodes places all four."""
    return {"cluster": {"nodes": [_node("a"), _node("b"), _node("c", taints=[INFERENCE]),
                                  _node("d", taints=[INFERENCE])]},
            "jobs": [{"name": "important-1", "priority": 100, "tasks": [TOLERANT]},
                     {"name": "important-2", "priority": 100, "tasks": [TOLERANT]},
                     {"name": "waiting-1", "priority": 10, "tasks": [PLAIN]},
                     {"name": "waiting-2", "priority": 10, "tasks": [PLAIN]}],
            "policy": POLICY}


def test_repairs_offer_waiting_gangs_of_one_shape_different_nodes_and_their_holders_different_exits() -> None:
    problem, base = _greedy(_two_blocked_gangs())
    assert base.placed_jobs(problem) == {0, 1}
    on = {t: n for (t, n), k in base.counts.items() if k}
    chosen = candidates.select(problem, base, max_pairs=4, min_per_task=1)
    waiting = [set(chosen[t].tolist()) for t in (2, 3)]
    assert waiting[0] | waiting[1] == {on[0], on[1]}  # between them, both nodes the important gangs hold
    assert waiting[0] != waiting[1]  # the second is not offered only the node the first one clears
    exits = [set(chosen[t].tolist()) - {on[t]} for t in (0, 1)]
    tainted = {problem.node_index["c"], problem.node_index["d"]}
    assert exits[0] | exits[1] == tainted and exits[0] != exits[1]  # one way out each, not one for both


def test_a_plan_with_scarce_pairs_repairs_both_gangs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Budget, "pairs", lambda self, reserve_s: 4)  # what a short time limit affords
    result = plan(_two_blocked_gangs())
    assert {a.job for a in result.assignments} == {"important-1", "important-2", "waiting-1", "waiting-2"}
