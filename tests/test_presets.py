"""Presets: one word of policy spelled out as the fields it stands for, and what each does to a plan."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_models import PlacementRequest, presets
from pydantic import ValidationError

from placement import plan, verify

NOW = "2026-01-02T00:00:00Z"


def _node(name: str) -> dict[str, Any]:
    return {"name": name, "gpus": 8, "cpu": 64, "memory_gib": 512, "gpu_model": "H100-SXM5-80GB"}


def _job(name: str, gpus: int, *, submitted: str | None = "2026-01-01T12:00:00Z", **extra: Any) -> dict[str, Any]:
    job = {"name": name, "tasks": [{"name": "w", "gpus": gpus}], **extra}
    if submitted is not None:
        job["submitted_at"] = submitted
    return job


def _request(jobs: list[dict[str, Any]], *, nodes: int = 1, now: str | None = NOW, running: list | None = None,
             **policy: Any) -> dict[str, Any]:
    pol = {"deterministic": True, "time_limit_s": 5, **policy}
    if now is not None:
        pol["now"] = now
    return {"cluster": {"nodes": [_node(f"n{i}") for i in range(nodes)], "running": running or []},
            "jobs": jobs, "policy": pol}


def _resolved(request: dict[str, Any]) -> PlacementRequest:
    return presets.resolve(PlacementRequest.model_validate(request))


def test_auto_is_completion_when_the_call_carries_time() -> None:
    assert presets.effective_preset(PlacementRequest.model_validate(_request([_job("a", 1)]))) == "completion"
    weights = _resolved(_request([_job("a", 1)])).policy.weights
    assert (weights.turnaround, weights.alignment) == (2.0, 0.5)


def test_auto_is_las_with_moves_where_jobs_declare_speeds() -> None:
    request = _request([_job("a", 1, speeds={"H100": 1.0, "A100": 0.5})], nodes=2)
    assert presets.effective_preset(PlacementRequest.model_validate(request)) == "completion"  # one model
    request["cluster"]["nodes"][1]["gpu_model"] = "A100-SXM4-80GB"
    assert presets.effective_preset(PlacementRequest.model_validate(request)) == "las"
    policy = _resolved(request).policy
    assert (policy.migration, policy.preemption, policy.weights.throughput) == (True, True, 1.0)
    running = [{"job": "r", "started_at": "2026-01-01T00:00:00Z", "workload": "w",
                "pods": [{"task": "w", "node": "n0", "gpus": [0]}]}]
    # a loop's call with nothing queued still carries time: its running jobs' starts
    empty = {**_request([], nodes=2, running=running), "workloads": [{"name": "w", "speeds": {"H100": 1.0}}]}
    empty["cluster"]["nodes"][1]["gpu_model"] = "A100-SXM4-80GB"
    assert presets.effective_preset(PlacementRequest.model_validate(empty)) == "las"
    del running[0]["workload"]
    assert presets.effective_preset(PlacementRequest.model_validate(_request([], running=running))) == "completion"


@pytest.mark.parametrize("now, submitted", [(None, "2026-01-01T12:00:00Z"), (NOW, None)])
def test_auto_is_one_shot_without_time(now: str | None, submitted: str | None) -> None:
    request = PlacementRequest.model_validate(_request([_job("a", 1, submitted=submitted)], now=now))
    assert presets.effective_preset(request) == "one-shot"
    assert presets.resolve(request) is request


def test_fields_the_request_sets_win_over_the_preset() -> None:
    weights = _resolved(_request([_job("a", 1)], weights={"turnaround": 0.0})).policy.weights
    assert (weights.turnaround, weights.alignment) == (0.0, 0.5)
    policy = _resolved(_request([_job("a", 1)], preset="las", preemption=False, min_runtime_s=5)).policy
    assert (policy.preemption, policy.min_runtime_s, policy.weights.victim_gpus) == (False, 5, 0.5)


def test_resolving_twice_changes_nothing() -> None:
    for preset in ("completion", "las", "bounded-wait"):
        once = _resolved(_request([_job("a", 1, attained_gpu_h=3.0)], preset=preset))
        twice = presets.resolve(once)
        assert twice.model_dump() == once.model_dump()


def test_bounded_wait_reserves_after_six_hours_unless_set() -> None:
    assert _resolved(_request([_job("a", 1)], preset="bounded-wait")).policy.reserve_after_h == 6.0
    assert _resolved(_request([_job("a", 1)], preset="bounded-wait", reserve_after_h=2)).policy.reserve_after_h == 2


def test_completion_starts_more_and_shorter_jobs_at_equal_gpus() -> None:
    # one node, 8 GPUs: a long 8-GPU job or eight short 1-GPU jobs; FIFO by value ties, completion takes the short
    jobs = [_job("long", 8, submitted="2026-01-01T00:00:00Z", expected_runtime_h=48.0)]
    jobs += [_job(f"s{i}", 1, expected_runtime_h=1.0) for i in range(8)]
    placed = {a.job for a in plan(_request(jobs)).assignments}
    assert placed == {f"s{i}" for i in range(8)}
    one_shot = {a.job for a in plan(_request(jobs, preset="one-shot")).assignments}
    assert one_shot == {"long"}  # aging alone: the older job's GPUs are worth more


def _running(name: str, gpus: int, started: str, **extra: Any) -> dict[str, Any]:
    return {"job": name, "started_at": started, "pods": [{"task": "w", "node": "n0", "gpus": list(range(gpus))}],
            **extra}


def test_las_ranks_by_attained_service() -> None:
    request = _request([_job("fresh", 1), _job("old", 1, attained_gpu_h=5.0)],
                       running=[_running("r", 8, "2026-01-01T23:00:00Z")], preset="las",
                       las={"thresholds_gpu_h": [1, 10]})
    resolved = _resolved(request)
    classes = {j.name: j.priority for j in resolved.jobs}
    assert classes == {"fresh": 2, "old": 1}  # queue 0 of priority 0 is class 2; 5 GPU-h is the middle queue
    (run,) = resolved.cluster.running
    assert run.priority == 1 and run.preemptible  # 8 GPUs × 1 h: the middle queue
    assert resolved.policy.preemption is True and resolved.policy.min_runtime_s == 600


def test_las_keeps_priorities_above_service() -> None:
    request = _request([_job("low", 1, priority=0), _job("high", 1, priority=100, attained_gpu_h=50.0)],
                       preset="las")
    classes = {j.name: j.priority for j in _resolved(request).jobs}
    assert classes["high"] > classes["low"]


def test_las_preempts_work_that_has_run_long_for_fresh_work() -> None:
    # n0 is full with a job that has run 10 GPU-hours; a fresh 8-GPU job starts in its place
    running = [_running("long", 8, "2026-01-01T22:45:00Z")]
    request = _request([_job("fresh", 8)], running=running, preset="las")
    out = plan(request)
    assert {a.job for a in out.assignments} == {"fresh"}
    assert [p.job for p in out.preemptions] == ["long"]
    assert verify(request, out) == []


def test_las_lease_protects_fresh_running_work() -> None:
    running = [_running("young", 8, "2026-01-01T23:55:00Z", attained_gpu_h=20.0)]  # 5 minutes in
    out = plan(_request([_job("fresh", 8)], running=running, preset="las"))
    assert out.preemptions == [] and out.assignments == []


def test_an_unsorted_threshold_list_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="thresholds_gpu_h"):
        PlacementRequest.model_validate(_request([_job("a", 1)], las={"thresholds_gpu_h": [5, 1]}))


def test_a_plan_for_a_las_request_verifies_against_the_request_as_sent() -> None:
    request = _request([_job(f"j{i}", 2, attained_gpu_h=float(i)) for i in range(6)], nodes=1,
                       running=[_running("r", 8, "2026-01-01T20:00:00Z")], preset="las")
    out = plan(request)
    assert verify(request, out) == []
    assert [p.job for p in out.preemptions] == ["r"]  # j0 has run nothing, r 32 GPU-hours
    # the same plan against the request without its preset breaks the rules LAS relaxed (r is not preemptible)
    bare = {**request, "policy": {**request["policy"], "preset": "one-shot"}}
    assert any(v.startswith("preemption") for v in verify(bare, out))


_JOB = st.tuples(st.sampled_from([1, 2, 4, 8, 16]), st.integers(0, 40), st.sampled_from([None, 0.5, 3.0, 30.0]),
                 st.sampled_from([None, 0.0, 0.5, 5.0, 50.0]), st.integers(0, 2))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_JOB, min_size=1, max_size=12), st.lists(_JOB, max_size=4),
       st.sampled_from(["auto", "one-shot", "completion", "las", "bounded-wait"]))
def test_random_requests_plan_and_verify_under_every_preset(jobs: list, running: list, preset: str) -> None:
    """Solve, then verify against the request as sent (the verifier resolves the preset itself); the same
    request, seed and workers give the same plan (deterministic mode)."""
    pending = [_job(f"j{i}", gpus, submitted=f"2026-01-01T{hour % 24:02d}:00:00Z", expected_runtime_h=runtime,
                    attained_gpu_h=attained, priority=priority)
               for i, (gpus, hour, runtime, attained, priority) in enumerate(jobs)]
    runs = [{"job": f"r{i}", "priority": priority, "started_at": f"2026-01-01T{hour % 24:02d}:30:00Z",
             "expected_runtime_h": runtime, "attained_gpu_h": attained,
             "pods": [{"task": "w", "node": f"n{i}", "gpus": list(range(min(gpus, 8)))}]}
            for i, (gpus, hour, runtime, attained, priority) in enumerate(running)]
    request = _request(pending, nodes=max(2, len(running)), running=runs, preset=preset, time_limit_s=2)
    out = plan(request)
    assert verify(request, out) == []
    again = plan(request)
    assert [a.model_dump() for a in again.assignments] == [a.model_dump() for a in out.assignments]
