"""End alignment: with runtimes known, a job's pods go where the work beside them ends no sooner."""

from __future__ import annotations

from typing import Any

import pytest
from placement_models import PlacementRequest

from placement import plan, reservation, screen
from placement.compile import alignment

NOW = "2026-01-02T00:00:00Z"


def _node(name: str) -> dict[str, Any]:
    return {"name": name, "gpus": 8, "cpu": 64, "memory_gib": 512, "gpu_model": "H100-SXM5-80GB"}


def _running(name: str, node: str, gpus: int, runtime_h: float | None) -> dict[str, Any]:
    # started at midnight the day before: runtime_h 25 ends an hour from now
    return {"job": name, "started_at": "2026-01-01T00:00:00Z", "expected_runtime_h": runtime_h,
            "pods": [{"task": "w", "node": node, "gpus": list(range(gpus))}]}


def _request(weight: float, runtime_h: float | None = 6.0, ends: tuple[float | None, float | None] = (24.5, 44.0),
             gpus: int = 2) -> dict[str, Any]:
    """Two half-busy nodes: n0's job ends half an hour from now, n1's in twenty hours (by default)."""
    return {
        "cluster": {"nodes": [_node("n0"), _node("n1")],
                    "running": [_running("r0", "n0", 4, ends[0]), _running("r1", "n1", 4, ends[1])]},
        "jobs": [{"name": "j", "expected_runtime_h": runtime_h, "tasks": [{"name": "w", "gpus": gpus}]}],
        "policy": {"now": NOW, "deterministic": True, "time_limit_s": 5, "weights": {"alignment": weight}},
    }


def _node_of(request: dict[str, Any]) -> str:
    (a,) = plan(request).assignments
    return a.node


def test_a_job_goes_beside_work_that_outlasts_it() -> None:
    assert _node_of(_request(0.5)) == "n1"  # n0 frees whole in half an hour unless the job lands there


def test_without_the_weight_there_is_no_term() -> None:
    assert alignment.NAME not in plan(_request(0.0)).objective.terms


def test_a_job_longer_than_both_goes_where_it_delays_least() -> None:
    assert _node_of(_request(0.5, runtime_h=30.0)) == "n1"


def test_a_node_whose_work_has_no_known_end_delays_nothing() -> None:
    # n1's job has no runtime: nothing placed there delays a node that never frees as far as the plan knows
    assert _node_of(_request(0.5, ends=(44.0, None))) == "n1"


def test_a_job_without_a_runtime_pays_nothing() -> None:
    out = plan(_request(0.5, runtime_h=None))
    assert len(out.assignments) == 1
    assert out.objective.terms.get(alignment.NAME, 0.0) == 0.0


def _problem(request: dict[str, Any]) -> Any:
    return reservation.attach(screen.build_problem(PlacementRequest.model_validate(request)))


def test_the_cost_is_per_gpu_day_past_the_node_and_capped_at_a_day() -> None:
    problem = _problem(_request(0.5))
    ends = alignment.node_ends_h(problem, problem.request.planning_time(), None)
    assert ends.tolist() == pytest.approx([0.5, 20.0])
    assert alignment.delay_cost(problem, 0, ends, None).tolist() == pytest.approx([5.5 / 24, 0.0])
    long = _problem(_request(0.5, runtime_h=100.0))
    assert alignment.delay_cost(long, 0, ends, None).tolist() == pytest.approx([1.0, 1.0])
    assert alignment.max_cost(long, 0) == pytest.approx(0.5 * 2 * 1.0)
    assert alignment.max_cost(problem, 0) == pytest.approx(0.5 * 2 * 6 / 24)


def test_the_reported_term_is_what_the_plan_pays() -> None:
    out = plan(_request(0.5, runtime_h=30.0))  # on n1: 10 h past its end, 2 GPUs, weight 0.5
    assert out.objective.terms[alignment.NAME] == pytest.approx(-0.5 * 2 * 10 / 24, abs=1e-3)


def test_the_cost_never_keeps_a_job_from_a_free_gpu() -> None:
    request = _request(50.0, runtime_h=500.0, gpus=4)  # pays half of what it earns, whatever the weight
    out = plan(request)
    assert len(out.assignments) == 1
    assert out.objective.terms[alignment.NAME] == pytest.approx(-0.5 * 4, abs=1e-3)
