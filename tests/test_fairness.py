"""Fair share and aging: under-served teams first, weights and past usage honoured, nothing starves.

Entitlements and the concave utility are computed by hand in each test's comment.
"""

from __future__ import annotations

from typing import Any

import pytest
from placement_models import Plan

from placement.api import plan as solve
from placement.compile.fairness import fill, segments

H100 = "H100-SXM5-80GB"
NOW = "2026-12-01T12:00:00Z"


def _node(name: str, gpus: int = 8) -> dict[str, Any]:
    return {"name": name, "gpu_model": H100, "gpus": gpus, "cpu": 64, "memory_gib": 512}


def _job(name: str, team: str | None, gpus: int, submitted_at: str = "2026-12-01T11:00:00Z",
         **extra: Any) -> dict[str, Any]:
    job = {"name": name, "tasks": [{"name": "w", "gpus": gpus}], "submitted_at": submitted_at, **extra}
    if team:
        job["team"] = team
    return job


def _request(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]], teams: list[dict[str, Any]],
             running: list[dict[str, Any]] | None = None, **policy: Any) -> dict[str, Any]:
    return {"cluster": {"nodes": nodes, "running": running or []}, "jobs": jobs, "teams": teams,
            "policy": {"deterministic": True, "time_limit_s": 5, "now": NOW, **policy}}


def _held(plan: Plan) -> dict[str, int]:
    return {r.team: r.gpus_held for r in plan.teams}


def test_segments_and_fill() -> None:
    assert segments(8.0) == [2, 2, 2, 2]
    assert segments(9.6) == [2, 3, 2, 3]  # breakpoints round(2.4)=2, round(4.8)=5, round(7.2)=7, 10
    assert segments(2.4) == [1, 0, 1, 0]  # 0.6→1, 1.2→1, 1.8→2, 2.4→2
    assert fill(5, [2, 2, 2, 2]) == [2, 2, 1, 0]
    assert fill(20, [2, 3]) == [2, 3]


def test_team_under_its_share_gets_the_next_free_gpus() -> None:
    # 8 GPUs in two 4-GPU nodes. a runs 4 and asks 4 more (submitted first); b asks 4.
    # Entitlements (demand 8 and 4, equal weights): 4 and 4, segments [1,1,1,1]. a's running 4
    # already fill its segments (2.5); b's 4 GPUs would add 1 + .75 + .5 + .25 = 2.5, a's nothing:
    # b goes, and the term is 2.5 + 2.5. Greedy priority-then-FIFO would have given them to a.
    running = [{"job": "a-run", "team": "a", "pods": [{"task": "w", "node": "n1", "gpus": [0, 1, 2, 3]}]}]
    plan = solve(_request([_node("n1", 4), _node("n2", 4)],
                          [_job("a2", "a", 4, "2026-12-01T09:00:00Z"), _job("b1", "b", 4)],
                          [{"name": "a"}, {"name": "b"}], running))
    assert {a.job for a in plan.assignments} == {"b1"}
    assert _held(plan) == {"a": 4, "b": 4} and plan.fairness_index == 1.0
    assert plan.objective.terms["fairness"] == pytest.approx(2 * (1 + 0.75 + 0.5 + 0.25))


def test_weights_split_the_cluster() -> None:
    # 12 GPUs (three 4-GPU nodes); a (weight 2) and b (weight 1) each queue three 4-GPU jobs.
    # Entitlements 8 and 4: two of a's jobs and one of b's.
    jobs = [_job(f"a{i}", "a", 4) for i in range(3)] + [_job(f"b{i}", "b", 4) for i in range(3)]
    plan = solve(_request([_node(f"n{i}", 4) for i in range(3)], jobs, [{"name": "a", "weight": 2}, {"name": "b"}]))
    assert _held(plan) == {"a": 8, "b": 4}
    assert {r.team: r.entitlement for r in plan.teams} == {"a": 8.0, "b": 4.0}


def test_past_usage_lowers_the_entitlement() -> None:
    # Equal weights; a did all the past work: fair-share factors 1/4 and 1, so 12 GPUs split
    # 2.4 / 9.6. Segments: a [1,0,1,0], b [2,3,2,3]. After b's first two jobs (8 GPUs), a's
    # 4-GPU job is worth 1·1 + 1·0.5 = 1.5 fairness, b's third only 2·0.25 = 0.5: a gets one.
    jobs = [_job(f"a{i}", "a", 4) for i in range(3)] + [_job(f"b{i}", "b", 4) for i in range(3)]
    teams = [{"name": "a", "usage_gpu_h": 5000}, {"name": "b"}]
    plan = solve(_request([_node(f"n{i}", 4) for i in range(3)], jobs, teams))
    assert _held(plan) == {"a": 4, "b": 8}
    assert [r.entitlement for r in plan.teams] == [2.4, 9.6]
    # Shares of entitlement 4/2.4 and 8/9.6: Jain's index (5/3 + 5/6)² / (2 (25/9 + 25/36)) = 0.9.
    assert plan.fairness_index == pytest.approx(0.9)


def test_priority_still_comes_before_fairness() -> None:
    # b is under-served, but a's job has the higher priority (10 per GPU vs 1): a goes.
    plan = solve(_request([_node("n1", 4)], [_job("a1", "a", 4, priority=5), _job("b1", "b", 4)],
                          [{"name": "a"}, {"name": "b"}]))
    assert {a.job for a in plan.assignments} == {"a1"}


def test_a_long_wait_goes_first() -> None:
    # One 4-GPU slot, two identical jobs of one team; 'old' waited 10 days: 0.1 × 4 × 10 = 4 more.
    plan = solve(_request([_node("n1", 4)], [_job("new", "a", 4), _job("old", "a", 4, "2026-11-21T12:00:00Z")],
                          [{"name": "a"}]))
    assert {a.job for a in plan.assignments} == {"old"}
    assert plan.objective.terms["aging"] == pytest.approx(4.0)


def test_aging_eventually_outweighs_priority_when_priority_is_weighted() -> None:
    # Weighted priority: levels weigh 1 and 10 per GPU. With aging 1 per GPU per day, a low-priority
    # job that waited 30 days (+30) beats a fresh high-priority one (+0): nothing starves.
    jobs = [_job("fresh-hi", None, 4, NOW, priority=5), _job("old-lo", None, 4, "2026-10-01T12:00:00Z")]
    req = _request([_node("n1", 4)], jobs, [])
    req["policy"]["priority_mode"] = "weighted"
    assert {a.job for a in solve(req).assignments} == {"fresh-hi"}
    req["policy"]["weights"] = {"aging": 1.0}
    assert {a.job for a in solve(req).assignments} == {"old-lo"}


def test_aging_never_outweighs_a_strict_priority_class() -> None:
    # Strict classes (the default), as Kubernetes PriorityClasses: waiting orders jobs within a class only.
    jobs = [_job("fresh-hi", None, 4, NOW, priority=5), _job("old-lo", None, 4, "2026-10-01T12:00:00Z"),
            _job("old-hi", None, 4, "2026-11-01T12:00:00Z", priority=5)]
    req = _request([_node("n1", 4)], jobs, [])
    req["policy"]["weights"] = {"aging": 1.0}
    assert {a.job for a in solve(req).assignments} == {"old-hi"}
