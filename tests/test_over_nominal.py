"""Which running jobs' teams are "over nominal" (the cheap test of reclaim_within_cohort and borrow_within_cohort,
`RunningInfo.over_nominal`): a team borrowing above its nominal GPUs where the job runs. Reclaim is judged on GPU
quotas only (the model, the warm start and the verifier agree on it): a team borrowing only CPU or memory is not
reclaimed."""

from __future__ import annotations

from typing import Any

from placement_models import PlacementRequest

from placement.problem import Problem, build

H100 = "H100-SXM5-80GB"


def _run(name: str, team: str, gpus: list[int], cpu: float = 0, memory_gib: float = 0) -> dict[str, Any]:
    return {"job": name, "team": team, "preemptible": True,
            "pods": [{"task": "w", "node": "n1", "gpus": gpus, "cpu": cpu, "memory_gib": memory_gib}]}


def _problem(teams: list[dict[str, Any]], running: list[dict[str, Any]]) -> Problem:
    node = {"name": "n1", "gpu_model": H100, "gpus": 8, "cpu": 128, "memory_gib": 1024}
    job = {"name": "mine", "team": "lender", "tasks": [{"name": "w", "gpus": 1, "cpu": 4}]}
    return build(PlacementRequest.model_validate({
        "cluster": {"nodes": [node], "running": running}, "jobs": [job], "teams": teams,
        "policy": {"preemption": True}}))


def _over(problem: Problem) -> dict[str, bool]:
    return {r.spec.job: r.over_nominal for r in problem.running}


def test_borrowing_cpu_or_memory_alone_is_not_reclaimable() -> None:
    teams = [{"name": "lender",
              "quota": {"gpus": {"nominal": 8}, "cpu": {"nominal": 96}, "memory_gib": {"nominal": 512}}},
             {"name": "cpu-heavy",
              "quota": {"gpus": {"nominal": 4}, "cpu": {"nominal": 8}, "memory_gib": {"nominal": 64}}}]
    running = [_run("etl", "cpu-heavy", [0], cpu=16, memory_gib=128)]  # 1 of 4 GPUs; CPU and memory borrowed
    problem = _problem(teams, running)
    assert _over(problem) == {"etl": False}
    assert problem.eviction_rules(0, 0) == ()


def test_gpu_scopes_still_decide_on_their_own() -> None:
    teams = [{"name": "lender", "quota": {"gpus": {"nominal": 6}, "cpu": {"nominal": 64}}},
             {"name": "borrower", "quota": {"gpus": {"nominal": 1}, "cpu": {"nominal": 64}}}]
    running = [_run("wide", "borrower", [0, 1], cpu=8)]  # 2 of 1 GPUs, CPU within nominal
    problem = _problem(teams, running)
    assert _over(problem) == {"wide": True}
    within = _problem([teams[0], {"name": "borrower", "quota": {"gpus": {"nominal": 2}, "cpu": {"nominal": 64}}}],
                      running)
    assert _over(within) == {"wide": False}
