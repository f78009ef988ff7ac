"""Turnaround: at equal GPUs placed, shorter jobs start first (weights.turnaround)."""

from __future__ import annotations

from typing import Any

from placement import plan


def _request(turnaround: float) -> dict[str, Any]:
    def job(name: str, submitted: str, runtime_h: float | None, gpus: int = 4) -> dict[str, Any]:
        return {"name": name, "submitted_at": submitted, "expected_runtime_h": runtime_h,
                "tasks": [{"name": "w", "gpus": gpus}]}

    return {
        "cluster": {"nodes": [{"name": "n0", "gpus": 8, "cpu": 64, "memory_gib": 512,
                               "gpu_model": "H100-SXM5-80GB"}]},
        "jobs": [job("long", "2026-01-01T20:00:00Z", 10.0), job("short", "2026-01-01T23:00:00Z", 0.5),
                 job("mid", "2026-01-01T22:00:00Z", 5.0)],
        "policy": {"now": "2026-01-02T00:00:00Z", "deterministic": True, "time_limit_s": 2,
                   "weights": {"turnaround": turnaround}},
    }


def test_the_shortest_jobs_start_when_turnaround_counts() -> None:
    assert {a.job for a in plan(_request(0.5)).assignments} == {"short", "mid"}


def test_without_it_the_oldest_start() -> None:
    assert {a.job for a in plan(_request(0.0)).assignments} == {"long", "mid"}


def test_one_more_gpu_placed_outweighs_one_more_short_job() -> None:
    request = _request(1.0)
    request["jobs"][0]["tasks"][0]["gpus"] = 8  # one long 8-GPU job, or two short 4-GPU ones: 8 GPUs either way
    request["jobs"][2]["tasks"][0]["gpus"] = 3  # mid + short: 7 GPUs, more jobs but a GPU idle
    request["jobs"] = request["jobs"][:3]
    out = plan(request)
    assert sum(len(a.gpus) for a in out.assignments) == 8
