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
        # one-shot: the weight alone, without the alignment a scheduler's call gets with it (test_presets.py)
        "policy": {"now": "2026-01-02T00:00:00Z", "deterministic": True, "time_limit_s": 2, "preset": "one-shot",
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


def _small_or_big(turnaround: float) -> set[str]:
    """One four-GPU node: a ten-hour four-GPU job, or three ten-minute one-GPU jobs (a GPU left idle)."""
    def job(name: str, gpus: int, runtime_h: float) -> dict[str, Any]:
        return {"name": name, "expected_runtime_h": runtime_h, "tasks": [{"name": "w", "gpus": gpus}]}

    request = {"cluster": {"nodes": [{"name": "n0", "gpus": 4, "cpu": 64, "memory_gib": 512,
                                      "gpu_model": "H100-SXM5-80GB"}]},
               "jobs": [job("big", 4, 10.0)] + [job(f"small{i}", 1, 1 / 6) for i in range(3)],
               "policy": {"deterministic": True, "time_limit_s": 2, "weights": {"turnaround": turnaround}}}
    return {a.job for a in plan(request).assignments}


def test_the_weight_trades_gpus_placed_for_more_short_jobs() -> None:
    """Below one GPU-equivalent per job is still a trade: each of three jobs adds up to the weight, so at 0.5 they
    outweigh the GPU they leave idle (3 × 0.5 × 6/7 > 1), at 0.3 they do not."""
    assert _small_or_big(0.3) == {"big"}
    assert _small_or_big(0.5) == {"small0", "small1", "small2"}
