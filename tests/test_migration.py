"""Migration: a running job with a speed table moves to faster GPUs, evicted and placed again in one plan."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_models import Plan

from placement.api import plan as solve
from placement.verify import verify

NOW = "2026-01-10T00:00:00Z"


def _node(name: str, model: str, pool: str | None = None) -> dict[str, Any]:
    node = {"name": name, "gpus": 4, "cpu": 64, "memory_gib": 256, "gpu_model": model}
    return {**node, "pool": pool} if pool else node


def _request(jobs: list[dict[str, Any]] | None = None, **policy: Any) -> dict[str, Any]:
    running = [{"job": "lm", "preemptible": True, "started_at": "2026-01-09T00:00:00Z",
                "checkpointed_at": "2026-01-09T23:54:00Z", "expected_runtime_h": 50.0,
                "speeds": {"V100": 1.0, "K80": 0.25}, "pods": [{"task": "w", "node": "k0", "gpus": [0, 1, 2, 3]}]}]
    return {"cluster": {"nodes": [_node("v0", "V100"), _node("k0", "K80")], "running": running},
            "jobs": jobs or [],
            "policy": {"now": NOW, "deterministic": True, "time_limit_s": 5, "migration": True,
                       "weights": {"throughput": 2.0}, **policy}}


def _moves(plan: Plan) -> list[tuple[str, str | None, str]]:
    return [(p.job, p.rule, p.for_job) for p in plan.preemptions]


def test_a_job_on_slow_gpus_moves_to_free_faster_ones() -> None:
    req = _request()
    plan = solve(req)
    assert _moves(plan) == [("lm", "migrate", "lm")]
    assert {(a.job, a.node) for a in plan.assignments} == {("lm", "v0")}
    assert plan.pending == []
    # 2 × 4 GPUs × 0.75 of its best speed gained − 0.1 × (4 GPUs + 0.4 GPU-hours since its checkpoint)
    assert abs(plan.objective.terms["migration"] - (6.0 - 0.1 * 4.4)) < 1e-3
    assert "0.25 -> 1" in plan.preemptions[0].reason
    assert verify(req, plan) == []


def test_nothing_moves_when_off_not_preemptible_or_not_worth_it() -> None:
    assert solve(_request(migration=False)).preemptions == []
    req = _request()
    req["cluster"]["running"][0]["preemptible"] = False
    assert solve(req).preemptions == []
    # 0.75 of its best speed × throughput 2 is worth 1.5 per GPU: a move costing 2 per GPU stays put
    assert solve(_request(weights={"throughput": 2.0, "migration": 2.0})).preemptions == []


def test_a_pending_job_outranks_a_move() -> None:
    # as slow on the K80 as the running job: at weights.throughput 1 the V100s go to the job not running yet
    job = {"name": "new", "submitted_at": "2026-01-09T23:00:00Z", "speeds": {"V100": 1.0, "K80": 0.25},
           "tasks": [{"name": "w", "gpus": 4}]}
    plan = solve(_request([job], weights={"throughput": 1.0}))
    assert plan.preemptions == [] and {(a.job, a.node) for a in plan.assignments} == {("new", "v0")}
    # a job without a speed table runs as fast on the K80: the running job moves and it takes the K80s freed
    del job["speeds"]
    plan = solve(_request([job], weights={"throughput": 1.0}))
    assert _moves(plan) == [("lm", "migrate", "lm")]
    assert {(a.job, a.node) for a in plan.assignments} == {("lm", "v0"), ("new", "k0")}


def test_the_las_preset_moves_jobs_back_to_faster_gpus() -> None:
    req = _request(preset="las")
    del req["policy"]["migration"], req["policy"]["weights"]
    plan = solve(req)
    assert _moves(plan) == [("lm", "migrate", "lm")] and verify(req, plan) == []
    req["policy"]["migration"] = False  # a request's own field wins over the preset's
    assert solve(req).preemptions == []


def test_a_uniform_fleet_has_nothing_to_move() -> None:
    req = _request()
    req["cluster"]["nodes"] = [_node("v0", "V100"), _node("k0", "V100")]
    req["cluster"]["running"][0]["pods"][0]["node"] = "k0"
    plan = solve(req)
    assert plan.preemptions == [] and plan.assignments == []


def test_the_verifier_checks_a_move() -> None:
    req = _request()
    plan = solve(req)
    off = {**req, "policy": {**req["policy"], "migration": False}}
    assert any(v.startswith("migration: job lm moves but policy.migration is off") for v in verify(off, plan))
    on_v100 = _request()
    on_v100["cluster"]["running"][0]["pods"][0]["node"] = "v0"
    slow = plan.model_copy(update={"assignments": [a.model_copy(update={"node": "k0"}) for a in plan.assignments]})
    assert any("moves from speed 1 to 0.25, less than 0.75 of it" in v for v in verify(on_v100, slow))
    gone = plan.model_copy(update={"assignments": []})
    assert any("is not placed again" in v for v in verify(req, gone))
    wrong = plan.model_copy(update={"objective": plan.objective.model_copy(
        update={"terms": {**plan.objective.terms, "migration": 5.0},
                "total": plan.objective.total + 5.0 - plan.objective.terms["migration"]})})
    assert any(v.startswith("objective: term 'migration'") for v in verify(req, wrong))


def test_no_move_onto_spot() -> None:
    req = _request()
    req["cluster"]["pools"] = [{"name": "spot", "capacity_type": "spot", "gpu_hour_price": 1.0}]
    req["cluster"]["nodes"][0]["pool"] = "spot"
    assert solve(req).preemptions == []


_MODELS = ("V100", "P100", "K80")


@st.composite
def _fleets(draw: st.DrawFn) -> dict[str, Any]:
    """A small mixed fleet, running jobs with speed tables on it (some checkpointed, some not preemptible, some
    too young to move), a queue of jobs with and without tables, teams or none."""
    nodes = [_node(f"n{i}", draw(st.sampled_from(_MODELS))) for i in range(draw(st.integers(2, 5)))]
    free = {n["name"]: list(range(4)) for n in nodes}
    running = []
    for i in range(draw(st.integers(0, 5))):
        node = draw(st.sampled_from(nodes))["name"]
        want = draw(st.integers(1, 4))
        if len(free[node]) < want:
            continue
        gpus, free[node] = free[node][:want], free[node][want:]
        table = {m: draw(st.sampled_from([0.1, 0.3, 0.6, 1.0])) for m in _MODELS}
        running.append({"job": f"r{i}", "preemptible": draw(st.sampled_from([True, True, False])),
                        "started_at": "2026-01-09T12:00:00Z", "speeds": table,
                        "checkpointed_at": draw(st.sampled_from([None, "2026-01-09T23:00:00Z"])),
                        "pods": [{"task": "w", "node": node, "gpus": gpus}]})
    jobs = [{"name": f"j{i}", "submitted_at": "2026-01-09T20:00:00Z", "priority": draw(st.integers(0, 1)),
             "tasks": [{"name": "w", "gpus": draw(st.integers(1, 4)), "replicas": draw(st.integers(1, 2))}],
             **({"speeds": {m: draw(st.sampled_from([0.2, 0.5, 1.0])) for m in _MODELS}} if draw(st.booleans())
                else {})}
            for i in range(draw(st.integers(0, 4)))]
    teams = [{"name": t, "weight": w} for t, w in (("a", 1.0), ("b", 2.0))] if draw(st.booleans()) else []
    for job in [*running, *jobs]:
        if teams:
            job["team"] = draw(st.sampled_from(["a", "b"]))
    return {"cluster": {"nodes": nodes, "running": running}, "jobs": jobs, "teams": teams,
            "policy": {"now": NOW, "deterministic": True, "time_limit_s": 5, "migration": True,
                       "fair_share": draw(st.sampled_from(["gpus", "work"])), "preemption": draw(st.booleans()),
                       "min_runtime_s": draw(st.sampled_from([0, 3600, 86400])),
                       "preset": draw(st.sampled_from(["auto", "one-shot", "las"])),
                       "weights": {"throughput": draw(st.sampled_from([1.0, 2.0])),
                                   "migration": draw(st.sampled_from([0.0, 0.1, 0.5]))}}}


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_fleets())
def test_every_move_is_verified_whole_and_keeps_three_quarters_of_its_speed(data: dict[str, Any]) -> None:
    plan = solve(data)  # the library runs the verifier on every plan it returns
    assert verify(data, plan) == []
    running = {r["job"]: r for r in data["cluster"]["running"]}
    models = {n["name"]: n["gpu_model"] for n in data["cluster"]["nodes"]}
    for move in (p for p in plan.preemptions if p.rule == "migrate"):
        old = running[move.job]
        pods = [a for a in plan.assignments if a.job == move.job]
        assert sorted(len(a.gpus) for a in pods) == sorted(len(p["gpus"]) for p in old["pods"])
        before = min(old["speeds"][models[p["node"]]] for p in old["pods"])
        assert min(old["speeds"][models[a.node]] for a in pods) >= 0.75 * before - 1e-9
    assert not {a.job for a in plan.assignments} & {p.job for p in plan.preemptions if p.rule != "migrate"}
