"""Strict priority classes: an optimal plan that leaves a higher-class job waiting, where placing it instead of
lower-class jobs passes every rule and scores more, is rejected under `priority`; real plans pass."""

from __future__ import annotations

from typing import Any

import pytest
from placement_models import PlacementRequest, Plan
from verify_cases import recomputed

import placement
from placement.verify import verify

H100 = "H100-SXM5-80GB"


def _case(hi_gpus: int, *, status: str = "optimal", mode: str = "strict", lo_gpus: int = 4,
          gpus: int = 8) -> tuple[PlacementRequest, Plan]:
    """One node; `lo` (priority 0) placed, `hi` (priority 10) waiting; the plan's objective as the verifier
    derives it, so only the priority rule can object."""
    request = PlacementRequest.model_validate({
        "cluster": {"nodes": [{"name": "n0", "gpu_model": H100, "gpus": gpus, "cpu": 64, "memory_gib": 512}]},
        "jobs": [{"name": "lo", "priority": 0, "tasks": [{"name": "w", "gpus": lo_gpus}]},
                 {"name": "hi", "priority": 10, "tasks": [{"name": "w", "gpus": hi_gpus}]}],
        "policy": {"priority_mode": mode, "now": "2025-01-10T00:00:00Z"}})
    plan = Plan.model_validate({
        "status": status,
        "assignments": [{"job": "lo", "task": "w", "pod": 0, "node": "n0", "gpus": list(range(lo_gpus))}],
        "pending": [{"job": "hi", "reason": "waits"}]})
    return request, plan.model_copy(update={"objective": recomputed(request, plan)})


def _priority(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("priority: ")]


def test_a_higher_class_waiting_for_room_a_lower_class_took_is_rejected() -> None:
    found = verify(*_case(hi_gpus=8))
    assert len(_priority(found)) == 1 and found == _priority(found)
    assert found[0].startswith("priority: job hi (priority 10) waits, yet the plan says optimal and placing it "
                               "instead of lo (lower classes) scores")


def test_a_higher_class_waiting_beside_free_room_is_rejected() -> None:
    assert _priority(verify(*_case(hi_gpus=2)))  # fits in the 4 free GPUs; lo goes too, still better


def test_a_job_that_fits_nowhere_even_without_the_lower_class_is_no_violation() -> None:
    request, plan = _case(hi_gpus=8)
    bigger = request.model_copy(update={"jobs": [request.jobs[0], request.jobs[1].model_copy(
        update={"tasks": [request.jobs[1].tasks[0].model_copy(update={"gpus": 9})]})]})  # 9 GPUs on an 8-GPU node
    assert verify(bigger, plan) == []


@pytest.mark.parametrize(("status", "mode"), [("feasible", "strict"), ("optimal", "weighted")])
def test_only_optimal_strict_plans_are_held_to_it(status: str, mode: str) -> None:
    # A feasible plan promises only to be no worse than the greedy floor; weighted levels trade classes by design.
    assert not _priority(verify(*_case(hi_gpus=8, status=status, mode=mode)))


def _request(jobs: list[dict[str, Any]], nodes: int) -> dict[str, Any]:
    return {"cluster": {"nodes": [{"name": f"n{i}", "gpu_model": H100, "gpus": 8, "cpu": 192, "memory_gib": 2048}
                                  for i in range(nodes)]},
            "jobs": jobs, "policy": {"deterministic": True, "time_limit_s": 5, "workers": 1}}


def test_real_strict_plans_pass() -> None:
    gang = {"name": "gang", "priority": 0, "tasks": [{"name": "w", "replicas": 12, "gpus": 8}]}
    high = {"name": "hi", "priority": 1000, "tasks": [{"name": "w", "replicas": 1, "gpus": 8}]}
    mixed = [{"name": f"j{i}", "priority": i % 3, "tasks": [{"name": "w", "gpus": 1 + i % 4}]} for i in range(9)]
    for req in (_request([gang, high], 12), _request(mixed, 2)):
        plan = placement.plan(req)  # plan() verifies too: a violation would raise here
        assert plan.status == "optimal" and verify(req, plan) == []
