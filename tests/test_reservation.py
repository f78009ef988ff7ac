"""Starved jobs (policy.max_wait_h): they start when they fit, else hold nodes that only short work may use."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_models import PlacementRequest

from placement import plan
from placement.verify import verify

NOW = "2026-01-02T00:00:00Z"


def _node(i: int) -> dict[str, Any]:
    return {"name": f"n{i}", "gpus": 8, "cpu": 64, "memory_gib": 512, "gpu_model": "H100-SXM5-80GB"}


def _running(name: str, node: str, gpus: int, runtime_h: float | None, **extra: Any) -> dict[str, Any]:
    return {"job": name, "started_at": "2026-01-01T23:00:00Z", "expected_runtime_h": runtime_h,
            "pods": [{"task": "w", "node": node, "gpus": list(range(gpus))}], **extra}


def _job(name: str, submitted: str, gpus: int, replicas: int = 1, runtime_h: float | None = None,
         **extra: Any) -> dict[str, Any]:
    return {"name": name, "submitted_at": submitted, "expected_runtime_h": runtime_h,
            "tasks": [{"name": "w", "replicas": replicas, "gpus": gpus}], **extra}


def _request(max_wait_h: float | None = 24.0, b_runtime: float | None = 11.0) -> dict[str, Any]:
    """Two 8-GPU nodes: A fills n0 until 01:00, B half of n1 until 10:00. G (2 × 8 GPUs) has waited 24 h;
    L (4 GPUs, 12 h) would run past 10:00, S (4 GPUs, 0.5 h) would not."""
    return {
        "cluster": {"nodes": [_node(0), _node(1)],
                    "running": [_running("A", "n0", 8, 2.0), _running("B", "n1", 4, b_runtime)]},
        "jobs": [_job("G", "2026-01-01T00:00:00Z", 8, replicas=2),
                 _job("L", "2026-01-01T23:30:00Z", 4, runtime_h=12.0),
                 _job("S", "2026-01-01T23:50:00Z", 4, runtime_h=0.5)],
        "policy": {"now": NOW, "max_wait_h": max_wait_h, "time_limit_s": 2, "deterministic": True},
    }


def test_a_starved_gang_holds_nodes_that_only_work_ending_before_it_may_use() -> None:
    out = plan(_request())
    assert [(a.job, a.node) for a in out.assignments] == [("S", "n1")]
    [res] = out.reservations
    assert res.job == "G" and res.earliest_start.isoformat() == "2026-01-02T10:00:00+00:00"
    assert [(n.node, n.gpus) for n in res.nodes] == [("n0", 8), ("n1", 8)]
    pending = {p.job: p for p in out.pending}
    assert pending["G"].estimated_start == res.earliest_start
    assert pending["L"].constraint == "reservation" and "reservation of G" in pending["L"].reason


def test_without_max_wait_nothing_is_held_and_the_long_job_may_take_the_room() -> None:
    out = plan(_request(max_wait_h=None))
    assert out.reservations == []
    assert len(out.assignments) == 1  # L or S: the objective's choice, no longer bound
    assert all(p.constraint != "reservation" for p in out.pending)


def test_a_starved_job_that_fits_starts_before_more_valuable_work() -> None:
    request = {
        "cluster": {"nodes": [_node(0), _node(1)]},
        "jobs": [_job("G", "2026-01-01T00:00:00Z", 8, replicas=2, priority=0),
                 *[_job(f"s{i}", "2026-01-01T23:00:00Z", 4, priority=5) for i in range(4)]],
        "policy": {"now": NOW, "max_wait_h": 12, "time_limit_s": 2, "deterministic": True},
    }
    # A higher class is waiting: strict priority classes win over starvation of a lower class.
    assert {a.job for a in plan(request).assignments} == {f"s{i}" for i in range(4)}
    for job in request["jobs"]:
        job["priority"] = 0
    request["jobs"][0]["tasks"][0].update(replicas=1, gpus=6)  # G + two small jobs: 14 GPUs; four small: 16
    request["policy"]["max_wait_h"] = None
    assert "G" not in {a.job for a in plan(request).assignments}
    request["policy"]["max_wait_h"] = 12
    out = plan(request)
    assert "G" in {a.job for a in out.assignments} and out.reservations == []


def test_where_no_running_job_is_known_to_end_its_nodes_drain() -> None:
    out = plan(_request(b_runtime=None))
    [res] = out.reservations
    assert res.earliest_start is None and "drain" in res.reason
    assert [(n.node, n.gpus) for n in res.nodes] == [("n0", 8), ("n1", 8)]
    assert out.assignments == []  # S would end in time, but no time is known: nothing new takes the held GPUs
    g = next(p for p in out.pending if p.job == "G")
    assert g.estimated_start is None and "once its nodes drain" in g.reason


def test_a_starved_gang_of_two_tasks_without_known_ends_holds_nothing_and_says_why() -> None:
    request = _request(b_runtime=None)
    request["jobs"][0]["tasks"] = [{"name": "a", "gpus": 8}, {"name": "b", "gpus": 8}]
    out = plan(request)
    assert out.reservations == []
    assert "holds nothing" in next(p for p in out.pending if p.job == "G").reason


def test_the_verifier_rejects_work_that_outlasts_a_reservation_on_its_nodes() -> None:
    request = _request()
    out = plan(request)
    moved = out.model_copy(update={"assignments": [a.model_copy(update={"job": "L"}) for a in out.assignments],
                                   "pending": [p for p in out.pending if p.job != "L"] +
                                              [p.model_copy(update={"job": "S"}) for p in out.pending
                                               if p.job == "L"]})

    violations = verify(PlacementRequest.model_validate(request), moved)
    assert any(v.startswith("reservation: node n1") for v in violations), violations


def test_running_jobs_past_their_max_runtime_are_listed_overdue() -> None:
    request = _request(max_wait_h=None)
    request["cluster"]["running"][0]["max_runtime_h"] = 0.5  # A started at 23:00: 1 h ago
    request["cluster"]["running"][1]["team"] = "t"
    request["teams"] = [{"name": "t", "max_runtime_h": 0.75}]
    request["cluster"]["running"][0]["team"] = "t"
    for job in request["jobs"]:
        job["team"] = "t"
    out = plan(request)
    assert [(o.job, o.running_h, o.max_runtime_h) for o in out.overdue] == [("A", 1.0, 0.5), ("B", 1.0, 0.75)]


def test_pending_jobs_get_an_estimated_start_from_the_expected_ends() -> None:
    request = _request(max_wait_h=None)
    request["policy"]["preset"] = "one-shot"  # where the small job goes is the weights' choice, not alignment's
    out = plan(request)
    starts = {p.job: p.estimated_start for p in out.pending}
    # G (16 GPUs) fits when B ends at 10:00 and the small job placed beside it (L: 12:00, S: 00:30) has ended;
    # the small job left out fits when A ends at 01:00
    [placed] = {a.job for a in out.assignments}
    assert starts["G"] is not None
    assert starts["G"].isoformat() == ("2026-01-02T12:00:00+00:00" if placed == "L" else "2026-01-02T10:00:00+00:00")
    other = next(name for name in starts if name != "G")
    assert starts[other] is not None and starts[other].isoformat() == "2026-01-02T01:00:00+00:00"
    request = _request(max_wait_h=None)
    request["policy"]["estimate_starts"] = 0
    assert all(p.estimated_start is None for p in plan(request).pending)


def test_a_job_reserved_last_cycle_starts_when_it_fits() -> None:
    request = {
        "cluster": {"nodes": [_node(0), _node(1)]},
        "jobs": [_job("G", "2026-01-01T00:00:00Z", 6), *[_job(f"s{i}", "2026-01-01T23:00:00Z", 4) for i in range(4)]],
        "policy": {"now": NOW, "max_wait_h": 48, "reserve_after_h": 12, "time_limit_s": 2, "deterministic": True},
    }
    # G (6 GPUs, waited 24 h) fits, but four small jobs fill both nodes: not yet past max_wait_h, it waits
    assert "G" not in {a.job for a in plan(request).assignments}
    request["policy"]["previous_plan"] = {"reservations": [{"job": "G", "earliest_start": NOW, "nodes": []}]}
    assert "G" in {a.job for a in plan(request).assignments}


def test_overdue_jobs_are_evicted_when_the_policy_says_so_and_their_gpus_are_used() -> None:
    request = _request(max_wait_h=None)
    request["cluster"]["running"][0]["max_runtime_h"] = 0.5  # A holds n0 and has run 1 h
    request["policy"]["overdue"] = "evict"
    out = plan(request)
    assert [(p.job, p.rule) for p in out.preemptions] == [("A", "max_runtime")]
    assert [o.job for o in out.overdue] == ["A"]
    assert any(a.node == "n0" for a in out.assignments)  # A's GPUs were free for this plan

    checked = PlacementRequest.model_validate(request)
    assert verify(checked, out) == []
    report_only = PlacementRequest.model_validate({**request, "policy": {**request["policy"], "overdue": "report"}})
    assert any("policy.overdue is not 'evict'" in v for v in verify(report_only, out))


def test_reserve_after_alone_holds_nodes_for_a_blocked_job() -> None:
    request = _request(max_wait_h=None)
    request["policy"]["reserve_after_h"] = 12
    out = plan(request)
    [res] = out.reservations
    assert res.job == "G" and "policy.reserve_after_h (12 h)" in res.reason


def test_a_starved_job_ahead_of_the_reserved_one_is_not_bound_by_its_reservation() -> None:
    request = _request()
    # L (4 GPUs) has waited 5 days, past max_wait_h like G: it starts as soon as it fits, ahead of G
    request["jobs"][1]["submitted_at"] = "2025-12-28T00:00:00Z"
    out = plan(request)
    assert all(p.constraint != "reservation" for p in out.pending)

    assert _beside_objective(verify(PlacementRequest.model_validate(request), _l_instead_of_s(out))) == []


def _l_instead_of_s(out: Any) -> Any:
    """`out` with L where it placed S, and S pending where L was."""
    return out.model_copy(update={
        "assignments": [a.model_copy(update={"job": "L"}) for a in out.assignments],
        "pending": [p for p in out.pending if p.job != "L"] + [p.model_copy(update={"job": "S"})
                                                                for p in out.pending if p.job == "L"]})


def _beside_objective(violations: list[str]) -> list[str]:
    return [v for v in violations if not v.startswith("objective: ")]


def test_an_older_job_that_is_not_starved_may_not_take_the_held_gpus_past_the_start() -> None:
    request = _request(max_wait_h=None)
    request["policy"]["reserve_after_h"] = 12
    request["jobs"][1]["submitted_at"] = "2025-12-31T00:00:00Z"  # L came before G, but fits now: not blocked
    out = plan(request)
    [res] = out.reservations
    assert res.job == "G"
    # L (12 h) would end after G's start at 10:00 on n1: it waits, S (0.5 h) backfills
    assert [(a.job, a.node) for a in out.assignments] == [("S", "n1")]
    pending = {p.job: p for p in out.pending}
    assert pending["L"].constraint == "reservation" and "reservation of G" in pending["L"].reason
    # (the swapped plan keeps S's terms, which the objective rule reports too)
    [violation] = _beside_objective(verify(PlacementRequest.model_validate(request), _l_instead_of_s(out)))
    assert "holds 8 GPUs for job G" in violation and "4 GPUs of work running past then" in violation
    # a job of a higher class is never bound by a lower class's hold (it is not blocked behind it)
    request["jobs"][1]["priority"] = 1
    assert _beside_objective(verify(PlacementRequest.model_validate(request), _l_instead_of_s(out))) == []


def test_reservation_order_is_class_then_exact_arrival() -> None:
    from placement_models import Job

    from placement.timeline import reservation_key

    def job(name: str, submitted: str | None, gpus: int, priority: int = 0) -> Job:
        return Job.model_validate({"name": name, "priority": priority, "submitted_at": submitted,
                                   "tasks": [{"name": "w", "gpus": gpus}]})

    jobs = [job("unknown", None, 1), job("new-big", "2026-01-01T20:00:00Z", 64),
            job("high", "2026-01-01T23:00:00Z", 1, priority=5),
            job("b-twin", "2026-01-01T12:00:00.000002Z", 2), job("a-twin", "2026-01-01T12:00:00.000001Z", 2),
            job("same-b", "2026-01-01T13:00:00Z", 1), job("same-a", "2026-01-01T13:00:00Z", 1)]
    ordered = sorted(jobs, key=lambda j: reservation_key(j))
    # a microsecond apart is apart; equal times go by name; no submission time comes last
    assert [j.name for j in ordered] == ["high", "a-twin", "b-twin", "same-a", "same-b", "new-big", "unknown"]


def test_an_enforced_max_runtime_bounds_ends_where_no_estimate_is_given() -> None:
    request = _request(b_runtime=None)
    # B gives no estimate but its team's 10 h limit is enforced: it is gone by 09:00 (started 23:00)
    for job in request["cluster"]["running"] + request["jobs"]:
        job["team"] = "t"
    request["teams"] = [{"name": "t", "max_runtime_h": 10}]
    # S gives no estimate either, only its own limit of half an hour
    request["jobs"][2].update(expected_runtime_h=None, max_runtime_h=0.5)
    request["policy"]["overdue"] = "evict"
    out = plan(request)
    [res] = out.reservations
    assert res.earliest_start.isoformat() == "2026-01-02T09:00:00+00:00"  # a start, not a drain
    assert next(p for p in out.pending if p.job == "G").estimated_start == res.earliest_start
    assert [(a.job, a.node) for a in out.assignments] == [("S", "n1")]  # ends by its limit: it backfills
    assert verify(PlacementRequest.model_validate(request), out) == []
    # the verifier counts on the limits only while they are enforced: reported, S outlasts a drain
    request["policy"]["overdue"] = "report"
    assert any("holds 8 GPUs for job G" in v for v in verify(PlacementRequest.model_validate(request), out))
    out = plan(request)
    [res] = out.reservations
    assert res.earliest_start is None and out.assignments == []


@st.composite
def _timed(draw: st.DrawFn) -> dict[str, Any]:
    """A small cluster where time matters: running jobs with or without estimates and limits, pending jobs old
    and new, reservations on or off, limits reported or enforced, a reservation carried from last cycle."""
    hours = st.one_of(st.none(), st.sampled_from([0.5, 2.0, 6.0, 30.0]))
    teams = [{"name": t, "max_runtime_h": draw(hours)} for t in ("a", "b")]
    nodes = [_node(i) for i in range(draw(st.integers(1, 3)))]
    running = []
    for i, node in enumerate(nodes):
        free = list(range(8))
        for k in range(draw(st.integers(0, 3))):
            size = draw(st.sampled_from([1, 2, 4, 8]))
            if size > len(free):
                break
            gpus, free = free[:size], free[size:]
            running.append({"job": f"r{i}{k}", "team": draw(st.sampled_from("ab")),
                            "started_at": draw(st.sampled_from(["2026-01-01T23:00:00Z", "2026-01-01T12:00:00Z"])),
                            "expected_runtime_h": draw(hours), "max_runtime_h": draw(hours),
                            "pods": [{"task": "w", "node": node["name"], "gpus": gpus}]})
    jobs = [_job(f"j{k}", draw(st.sampled_from(["2025-12-31T00:00:00Z", "2026-01-01T20:00:00Z",
                                                  "2026-01-01T23:59:00Z"])),
                 draw(st.sampled_from([1, 2, 4, 8])), replicas=draw(st.integers(1, 2)), runtime_h=draw(hours),
                 max_runtime_h=draw(hours), team=draw(st.sampled_from("ab")), priority=draw(st.integers(0, 1)))
            for k in range(draw(st.integers(2, 7)))]
    policy: dict[str, Any] = {"now": NOW, "time_limit_s": 1, "deterministic": True,
                              "reserve_after_h": draw(st.sampled_from([None, 0.0, 0.0, 3.0])),
                              "max_wait_h": draw(st.one_of(st.none(), st.sampled_from([1.0, 36.0]))),
                              "max_reservations": draw(st.sampled_from([0, 1, 1, 2])),
                              "overdue": draw(st.sampled_from(["report", "evict"]))}
    if draw(st.booleans()):
        policy["previous_plan"] = {"reservations": [{"job": draw(st.sampled_from([j["name"] for j in jobs])),
                                                     "earliest_start": NOW, "nodes": []}]}
    return {"cluster": {"nodes": nodes, "running": running}, "jobs": jobs, "teams": teams, "policy": policy}


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_timed())
def test_random_timed_requests_give_verified_plans_and_sound_reservations(data: dict[str, Any]) -> None:
    out = plan(data)  # plan() itself refuses a plan the verifier rejects; check again from the request alone
    request = PlacementRequest.model_validate(data)
    assert verify(request, out) == []
    placed = {a.job for a in out.assignments}
    assert len(out.reservations) <= request.policy.max_reservations
    for res in out.reservations:
        assert res.job not in placed and sum(n.gpus for n in res.nodes) > 0
    assert plan(data).assignments == out.assignments  # deterministic mode: the same plan again
