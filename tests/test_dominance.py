"""Dominance: interchangeable waiting jobs beyond what could ever fit get no variables, and the optimum stays."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from placement_models import PlacementRequest, presets

from placement import plan, pricing, reservation, screen
from placement.baseline import greedy
from placement.compile import dominance
from placement.problem import Problem
from placement.solution import Placement

NOW = "2026-01-10T00:00:00Z"


def _job(name: str, gpus: int, hour: int, runtime_h: float | None = None, **extra: Any) -> dict[str, Any]:
    return {"name": name, "submitted_at": f"2026-01-0{1 + hour // 24}T{hour % 24:02d}:00:00Z",
            "expected_runtime_h": runtime_h, "tasks": [{"name": "w", "gpus": gpus, "replicas": 1}], **extra}


def _request(jobs: list[dict[str, Any]], nodes: int = 1, busy: int = 4, teams: tuple[str, ...] = (),
             **policy: Any) -> dict[str, Any]:
    running = [{"job": "r", "priority": -1, "preemptible": True, "started_at": "2026-01-01T00:00:00Z",
                "pods": [{"task": "w", "node": "n0", "gpus": list(range(busy))}]}] if busy else []
    if teams:
        jobs = [{"team": teams[0], **job} for job in jobs]
        running = [{"team": teams[0], **run} for run in running]
    return {
        "teams": [{"name": name} for name in teams],
        "cluster": {"nodes": [{"name": f"n{i}", "gpus": 8, "cpu": 64, "memory_gib": 512,
                               "gpu_model": "H100-SXM5-80GB"} for i in range(nodes)], "running": running},
        "jobs": jobs,
        "policy": {"now": NOW, "deterministic": True, "time_limit_s": 5, **policy},
    }


def _problem(request: dict[str, Any]) -> tuple[Problem, Placement]:
    req = presets.resolve(PlacementRequest.model_validate(request))  # as plan() sees it
    problem = reservation.attach(screen.build_problem(req))
    return problem, greedy(problem, pricing.held_back(req, problem.nodes, problem.free))


def _idle_jobs(request: dict[str, Any]) -> set[str]:
    problem, baseline = _problem(request)
    return {problem.jobs[problem.tasks[t].job].name for t in dominance.dominated_tasks(problem, baseline)}


def test_only_as_many_jobs_of_a_shape_as_could_fit_stay() -> None:
    jobs = [_job(f"j{i}", 1, i) for i in range(12)]  # four GPUs free: the four oldest are all that matter
    idle = _idle_jobs(_request(jobs, weights={"turnaround": 0}))
    assert idle == {f"j{i}" for i in range(4, 12)}


def test_preemptible_room_counts() -> None:
    jobs = [_job(f"j{i}", 1, i, priority=5) for i in range(12)]  # may preempt the running job: 8 GPUs of room
    idle = _idle_jobs(_request(jobs, preemption=True, weights={"turnaround": 0}))
    assert idle == {f"j{i}" for i in range(8, 12)}


def test_a_younger_job_worth_more_stays() -> None:
    # Turnaround makes the young short job worth more than the old long ones: it is never dominated.
    jobs = [_job(f"old{i}", 1, i, runtime_h=100.0) for i in range(6)] + [_job("young", 1, 30, runtime_h=0.1)]
    idle = _idle_jobs(_request(jobs, weights={"turnaround": 2.0, "alignment": 0.0}))
    assert "young" not in idle and idle == {"old4", "old5"}
    out = plan(_request(jobs, weights={"turnaround": 2.0, "alignment": 0.0}))
    assert "young" in {a.job for a in out.assignments}


def test_shapes_teams_and_elastic_jobs_are_apart() -> None:
    jobs = [_job(f"a{i}", 1, i) for i in range(6)] + [_job(f"b{i}", 2, i) for i in range(4)]
    jobs += [_job(f"t{i}", 1, i, team="other") for i in range(6)]
    jobs += [{**_job(f"e{i}", 1, i), "tasks": [{"name": "w", "gpus": 1, "replicas": 2, "min_replicas": 1}]}
             for i in range(6)]
    request = _request(jobs, teams=("main", "other"), weights={"turnaround": 0})
    idle = _idle_jobs(request)
    assert idle == {"a4", "a5", "b2", "b3", "t4", "t5"}  # elastic jobs: a partial gang changes the comparison


def test_jobs_the_previous_plan_names_stay() -> None:
    jobs = [_job(f"j{i}", 1, i) for i in range(8)]
    request = _request(jobs, weights={"turnaround": 0},
                       previous_plan={"assignments": [{"job": "j7", "task": "w", "node": "n0"}]})
    assert "j7" not in _idle_jobs(request)


def test_the_greedy_plans_jobs_stay() -> None:
    problem, baseline = _problem(_request([_job(f"j{i}", 1, i) for i in range(10)]))
    idle = dominance.dominated_tasks(problem, baseline)
    assert not idle & {t for j in baseline.placed_jobs(problem) for t in problem.job_tasks[j]}


def test_the_model_is_not_called_restricted() -> None:
    out = plan(_request([_job(f"j{i}", 1, i) for i in range(40)], nodes=2))
    assert out.status == "optimal" and not out.solver.restricted
    assert len({a.job for a in out.assignments}) == 12


_SHAPES = st.tuples(st.sampled_from([1, 2, 4]), st.integers(0, 200), st.sampled_from([None, 0.5, 3.0, 40.0]),
                    st.sampled_from(["a", "b"]), st.sampled_from([0, 1]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_SHAPES, min_size=12, max_size=40), st.integers(1, 2), st.integers(0, 8),
       st.sampled_from([0.0, 0.5, 2.0]), st.booleans(), st.sampled_from([0.0, 0.6]),
       st.sampled_from([None, 200.0, 230.0]))
def test_the_optimum_is_the_whole_models(shapes: list[tuple[int, int, float | None, str, int]], nodes: int,
                                         busy: int, turnaround: float, preemption: bool, alignment: float,
                                         running_h: float | None) -> None:
    """Solved with and without dominance (both to optimality), the plans score the same; also where a job's
    pods cost differs by node and by its runtime (`alignment`, the running job ending in 8 h or 38 h)."""
    jobs = [_job(f"j{i}", gpus, hour, runtime, priority=priority, team=team)
            for i, (gpus, hour, runtime, team, priority) in enumerate(shapes)]
    request = _request(jobs, nodes=nodes, busy=busy, teams=("a", "b"), preemption=preemption, time_limit_s=20,
                       weights={"turnaround": turnaround, "alignment": alignment})
    for run in request["cluster"]["running"]:
        run["expected_runtime_h"] = running_h
    request["teams"][1]["weight"] = 2
    event(f"idle jobs: {'some' if _idle_jobs(request) else 'none'}")
    trimmed = plan(request)
    whole = _without_dominance(request)
    assert trimmed.status == whole.status == "optimal"
    assert trimmed.objective.total == pytest.approx(whole.objective.total, abs=1e-6)


def _without_dominance(request: dict[str, Any]) -> Any:
    keep = dominance.dominated_tasks
    dominance.dominated_tasks = lambda problem, kept: frozenset()  # type: ignore[assignment]
    try:
        return plan(request)
    finally:
        dominance.dominated_tasks = keep  # type: ignore[assignment]


def _seconds_apart(count: int, gpus: int = 1) -> list[dict[str, Any]]:
    return [{"name": f"s{i}", "submitted_at": f"2026-01-09T12:00:{10 + 5 * i:02d}Z", "expected_runtime_h": 1.0,
             "tasks": [{"name": "w", "gpus": gpus}]} for i in range(count)]


@pytest.mark.parametrize("alignment", [0.0, 0.5])
def test_interchangeable_jobs_seconds_apart_start_in_arrival_order(alignment: float) -> None:
    # Aging rounds to the model's units, so jobs five seconds apart tie; the plan still takes the oldest (also
    # where pods pay for where they run: classmates of one runtime pay alike on every node).
    big = {"name": "big", "submitted_at": "2026-01-09T00:00:00Z", "expected_runtime_h": 1.0,
           "tasks": [{"name": "w", "gpus": 4}]}
    out = plan(_request([*_seconds_apart(6), big], nodes=1, busy=0, weights={"aging": 1.0, "alignment": alignment}))
    assert {a.job for a in out.assignments} == {"big", "s0", "s1", "s2", "s3"}


def _spot(request: dict[str, Any]) -> dict[str, Any]:
    """The request's nodes in a priced spot pool, its jobs spot-tolerant."""
    request["cluster"]["pools"] = [{"name": "spot", "capacity_type": "spot", "gpu_hour_price": 2.0,
                                    "reclaim_rate_per_h": 0.05}]
    for node in request["cluster"]["nodes"]:
        node["pool"] = "spot"
    for job in request["jobs"]:
        job["spot_ok"] = True
    return request


def test_priced_pools_make_only_jobs_of_one_runtime_classmates() -> None:
    # Compute cost and reclaim risk grow with a job's runtime: an older, longer job placed in a shorter one's
    # place costs more, so it does not dominate it. Jobs of one runtime still do.
    weights = {"turnaround": 0, "alignment": 0, "aging": 1.0}  # only aging and the cost terms tell jobs apart
    mixed = [{**_job(f"j{i}", 1, i), "expected_runtime_h": 8.0 - i} for i in range(8)]  # the oldest run longest
    assert _idle_jobs(_request(mixed, weights=weights)) == {f"j{i}" for i in range(4, 8)}  # unpriced: aging decides
    assert _idle_jobs(_spot(_request(mixed, weights=weights))) == set()
    alike = [_job(f"j{i}", 1, i) for i in range(8)]  # no runtime: the cost terms price each alike
    assert _idle_jobs(_spot(_request(alike, weights=weights))) == {f"j{i}" for i in range(4, 8)}
    out = plan(_spot(_request(mixed, weights=weights)))  # plan() verifies each term as the model sums it
    assert len(out.assignments) == 4


def test_the_swap_moves_pods_to_the_earlier_job_and_its_terms() -> None:
    request = _request(_seconds_apart(4), busy=6, weights={"aging": 1.0, "turnaround": 1.0})
    problem, _ = _problem(request)
    late = Placement()
    last = problem.job_tasks[3][0]
    late.add(last, 0, 1)
    late.add(problem.job_tasks[2][0], 0, 1)
    terms = {"aging": 1.0, "turnaround": 2.0}
    ordered, changed = dominance.in_arrival_order(problem, late, terms)
    assert ordered.placed_jobs(problem) == {0, 1}
    assert changed["turnaround"] == terms["turnaround"]  # equal runtimes
    assert changed["aging"] >= terms["aging"]  # older: at least as much aging
    longer = _request(_seconds_apart(4), busy=6, weights={"aging": 1.0, "turnaround": 1.0})
    longer["jobs"][0]["expected_runtime_h"] = 50.0
    problem, _ = _problem(longer)
    ordered, _ = dominance.in_arrival_order(problem, late, terms)
    assert ordered.placed_jobs(problem) == {1, 2}  # the oldest, worth less, keeps waiting


def test_the_moves_need_no_terms_and_the_terms_follow_them() -> None:
    """The moves are decided before the plan's terms are known (a call decodes while they are scored); the terms
    then change as the one-step swap changes them."""
    request = _request(_seconds_apart(4), busy=6, weights={"aging": 1.0, "turnaround": 1.0})
    problem, _ = _problem(request)
    late = Placement()
    late.add(problem.job_tasks[3][0], 0, 1)
    late.add(problem.job_tasks[2][0], 0, 1)
    ordered, moves = dominance.arrival_moves(problem, late)
    assert ordered.placed_jobs(problem) == {0, 1} and {j for j, _ in moves.swaps} == {2, 3}
    terms = {"aging": 1.0, "turnaround": 2.0}
    assert dominance.moved_terms(problem, ordered, moves, terms) == dominance.in_arrival_order(problem, late,
                                                                                               terms)[1]
    kept, none = dominance.arrival_moves(problem, ordered)  # already in arrival order: nothing moves
    assert kept is ordered and not none.swaps
    assert dominance.moved_terms(problem, kept, none, terms) is terms


def test_classmates_share_the_reason_each_would_get_alone() -> None:
    from placement.explain import pending_reason, quota_after

    request = _request([_job(f"j{i}", 1, i) for i in range(30)], busy=4, explain_top=2,
                       weights={"turnaround": 0})
    out = plan(request)
    by_job = {p.job: p for p in out.pending}
    problem, _ = _problem(request)
    placed = Placement()
    for a in out.assignments:
        j = next(k for k, job in enumerate(problem.jobs) if job.name == a.job)
        placed.add(problem.job_tasks[j][0], problem.node_index[a.node], 1)
    usage = placed.usage(problem)
    for j in (10, 29):  # past explain_top: no rival named, one reason for the class
        alone = pending_reason(problem, j, placed, usage, quota_after(problem, placed), True, False)
        assert by_job[problem.jobs[j].name].reason == alone.text


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from([1, 2, 4]), st.integers(0, 600), st.sampled_from([None, 1.0, 8.0])),
                min_size=4, max_size=30), st.integers(0, 8), st.sampled_from([0.0, 2.0]))
def test_no_earlier_classmate_worth_as_much_waits_behind_a_placed_one(
        shapes: list[tuple[int, int, float | None]], busy: int, turnaround: float) -> None:
    jobs = [{"name": f"j{i}", "submitted_at": f"2026-01-09T{10 + s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}Z",
             "expected_runtime_h": runtime, "tasks": [{"name": "w", "gpus": gpus}]}
            for i, (gpus, s, runtime) in enumerate(shapes)]
    request = _request(jobs, busy=busy, weights={"aging": 1.0, "turnaround": turnaround})
    placed = {a.job for a in plan(request).assignments}
    problem, _ = _problem(request)
    for members in dominance.classes(problem).values():  # in reservation order
        for i, early in enumerate(members):
            for late in members[i + 1:]:
                if problem.jobs[late].name in placed and problem.jobs[early].name not in placed:
                    late_value = dominance._own_value(problem, late)
                    assert not dominance._worth_as_much(problem, early, late, late_value)


def test_jobs_that_ask_for_nothing_are_never_left_out() -> None:
    # Any number of them fit: no cap (a sum of "unbounded" pods per node must not wrap around either).
    jobs = [{"name": f"z{i}", "submitted_at": "2026-01-09T00:00:00Z", "tasks": [{"name": "w"}]} for i in range(6)]
    assert _idle_jobs(_request(jobs, nodes=3)) == set()
