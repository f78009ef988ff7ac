"""Stability: pending pods keep last cycle's nodes when nothing better is at stake."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from placement import plan
from placement.api import parse
from placement.verify import verify


def _node(name: str) -> dict[str, Any]:
    return {"name": name, "gpus": 8, "gpu_model": "H100-SXM5-80GB", "cpu": 64, "memory_gib": 512}


def _request(previous: dict[str, Any] | None = None, jobs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"cluster": {"nodes": [_node("n0"), _node("n1")]},
            "jobs": jobs or [{"name": "small", "tasks": [{"name": "w", "gpus": 4}]}],
            "policy": {"deterministic": True, "time_limit_s": 5, "workers": 1, "previous_plan": previous}}


def _nodes(p: Any, job: str) -> set[str]:
    return {a.node for a in p.assignments if a.job == job}


def test_a_pod_keeps_its_previous_node_among_equals() -> None:
    [fresh] = _nodes(plan(_request()), "small")  # without history: either of two equal nodes
    other = "n1" if fresh == "n0" else "n0"
    p = plan(_request({"assignments": [{"job": "small", "task": "w", "node": other}]}))
    assert _nodes(p, "small") == {other}
    assert p.objective.terms["stability"] == pytest.approx(0.2 * 4)


def test_a_whole_previous_plan_is_accepted_as_it_came() -> None:
    first = plan(_request())
    again = plan(_request(first.model_dump(mode="json")))
    assert again.assignments == first.assignments
    assert verify(parse(_request(first.model_dump(mode="json"))), again) == []


def test_stale_entries_are_harmless() -> None:
    previous = {"assignments": [{"job": "gone", "task": "w", "node": "n1"},
                                {"job": "small", "task": "w", "node": "n9"}]}
    p = plan(_request(previous))
    assert len(_nodes(p, "small")) == 1 and "stability" not in p.objective.terms


def test_stability_never_blocks_a_better_plan() -> None:
    # last cycle both small jobs were headed for n0 and n1; now an 8-GPU gang of priority 10 arrives:
    # keeping both would leave it pending, so one small job moves beside the other
    jobs = [{"name": "a", "tasks": [{"name": "w", "gpus": 4}]},
            {"name": "b", "tasks": [{"name": "w", "gpus": 4}]},
            {"name": "big", "priority": 10, "tasks": [{"name": "w", "gpus": 8}]}]
    previous = {"assignments": [{"job": "a", "task": "w", "node": "n0"}, {"job": "b", "task": "w", "node": "n1"}]}
    p = plan(_request(previous, jobs))
    assert {a.job for a in p.assignments} == {"a", "b", "big"}
    assert len(_nodes(p, "a") | _nodes(p, "b")) == 1
    assert p.objective.terms["stability"] == pytest.approx(0.2 * 4)  # one of the two kept its node


def test_previous_plan_must_be_a_plan_shape() -> None:
    with pytest.raises(ValidationError) as info:
        parse(_request({"assignments": [{"job": "small", "node": "n1"}]}))
    assert info.value.errors()[0]["loc"][:4] == ("policy", "previous_plan", "assignments", 0)
