"""Preemption by the rules operators know (Kueue's ClusterQueue `preemption`, Volcano's preempt and reclaim).

Each rule with a small hand-made request; the order among the victim sets a rule allows (lowest priority,
then fewest, then least work lost, then newest); the plan's `for_job` and `rule`; the verifier's checks;
and a property: every preemption of a random request passes verify and names a placed job on its nodes.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_models import PlacementRequest, Plan
from pydantic import ValidationError

from placement.api import plan as solve
from placement.verify import verify

H100 = "H100-SXM5-80GB"
NOW = "2026-12-01T12:00:00Z"
EIGHT = list(range(8))


def _node(name: str, gpus: int = 8) -> dict[str, Any]:
    return {"name": name, "gpu_model": H100, "gpus": gpus, "cpu": 64, "memory_gib": 512}


def _job(name: str, gpus: int, priority: int = 0, team: str | None = None, replicas: int = 1,
         submitted_at: str = "2026-12-01T10:30:00Z") -> dict[str, Any]:
    job: dict[str, Any] = {"name": name, "priority": priority, "submitted_at": submitted_at,
                           "tasks": [{"name": "w", "replicas": replicas, "gpus": gpus}]}
    if team:
        job["team"] = team
    return job


def _run(name: str, node: str, gpus: list[int], priority: int = 0, team: str | None = None,
         preemptible: bool = True, started_at: str = "2026-12-01T10:00:00Z", **extra: Any) -> dict[str, Any]:
    job = {"job": name, "priority": priority, "preemptible": preemptible, "started_at": started_at,
           "pods": [{"task": "w", "node": node, "gpus": gpus}], **extra}
    if team:
        job["team"] = team
    return job


def _team(name: str, nominal: int) -> dict[str, Any]:
    return {"name": name, "quota": {"gpus": {"nominal": nominal}}}


def _request(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]], running: list[dict[str, Any]],
             teams: list[dict[str, Any]] | None = None, preemption: Any = True, **policy: Any) -> dict[str, Any]:
    return {"cluster": {"nodes": nodes, "running": running}, "jobs": jobs, "teams": teams or [],
            "policy": {"deterministic": True, "time_limit_s": 5, "now": NOW, "preemption": preemption, **policy}}


def _preempted(plan: Plan) -> list[tuple[str, str, str | None]]:
    return sorted((p.job, p.for_job, p.rule) for p in plan.preemptions)


def _placed(plan: Plan) -> set[str]:
    return {a.job for a in plan.assignments}


# ---------------------------------------------------------------------------------------------
# The policy: false, true (the defaults) or an object; old requests stay valid


def test_policy_accepts_false_true_and_an_object() -> None:
    def rules(value: Any) -> Any:
        req = PlacementRequest.model_validate(_request([_node("n1")], [], [], preemption=value))
        return req.policy.preemption_rules

    assert rules(False) is None
    default = rules(True)
    assert (default.within_team, default.reclaim_within_cohort, default.borrow_within_cohort.policy) == (
        "lower_priority", "any", "never")
    custom = rules({"within_team": "lower_or_newer_equal_priority",
                    "borrow_within_cohort": {"policy": "lower_priority", "max_priority_threshold": 3}})
    assert (custom.within_team, custom.reclaim_within_cohort, custom.borrow_within_cohort.max_priority_threshold) == (
        "lower_or_newer_equal_priority", "any", 3)
    assert rules({}) == default
    with pytest.raises(ValidationError) as err:
        rules({"within_team": "sometimes"})
    assert err.value.errors()[0]["loc"] == ("policy", "preemption", "within_team")
    with pytest.raises(ValidationError, match="borrow_within_cohort needs reclaim_within_cohort"):
        rules({"reclaim_within_cohort": "never", "borrow_within_cohort": {"policy": "lower_priority"}})


# ---------------------------------------------------------------------------------------------
# within_team (Kueue withinClusterQueue, Volcano preempt)


def test_within_team_takes_a_lower_priority_job_of_its_own_team_only() -> None:
    # a and b each hold their nominal 8 (neither borrows). a's priority-5 job may take a's priority-0 job's
    # place, never b's, though b's is as low.
    running = [_run("a-low", "n1", EIGHT, 0, "a"), _run("b-low", "n2", EIGHT, 0, "b")]
    req = _request([_node("n1"), _node("n2")], [_job("a-hi", 8, 5, "a")], running, [_team("a", 8), _team("b", 8)])
    plan = solve(req)
    assert _preempted(plan) == [("a-low", "a-hi", "within_team")]
    assert plan.assignments[0].node == "n1"
    req["policy"]["preemption"] = {"within_team": "never"}
    plan = solve(req)
    assert plan.preemptions == [] and _placed(plan) == set()
    assert "fits if" not in plan.pending[0].reason  # no rule allows a victim: none is named


def test_room_a_preemption_frees_is_free_for_every_job() -> None:
    # a's small jobs may preempt a's priority -1 job, b's priority-1 job may not (another team, no quotas).
    # Once a's jobs evict it, its GPUs are free for the plan: under strict priority b's job takes four of them
    # rather than wait while a's lower class fills all eight.
    running = [_run("a-low", "n1", [0, 1, 2, 3, 4], -1, "a")]
    jobs = [_job(f"a{i}", 1, 0, "a") for i in range(8)] + [_job("b-hi", 4, 1, "b")]
    plan = solve(_request([_node("n1")], jobs, running, [{"name": "a"}, {"name": "b"}]))
    assert "b-hi" in _placed(plan) and len(_placed(plan)) == 5
    assert [(p.job, p.rule) for p in plan.preemptions] == [("a-low", "within_team")]
    assert plan.preemptions[0].for_job.startswith("a")
    assert verify(_request([_node("n1")], jobs, running, [{"name": "a"}, {"name": "b"}]), plan) == []


def test_each_team_preempts_by_its_own_rules() -> None:
    # Kueue sets `preemption` per ClusterQueue: the preemptor's team decides. The policy is off; a's own rules
    # let a-hi take a-low's place, b (no rules of its own) keeps waiting beside b-low.
    running = [_run("a-low", "n1", EIGHT, 0, "a"), _run("b-low", "n2", EIGHT, 0, "b")]
    teams = [{**_team("a", 8), "preemption": True}, _team("b", 8)]
    req = _request([_node("n1"), _node("n2")], [_job("a-hi", 8, 5, "a"), _job("b-hi", 8, 5, "b")], running, teams,
                   preemption=False)
    plan = solve(req)
    assert _preempted(plan) == [("a-low", "a-hi", "within_team")]
    assert _placed(plan) == {"a-hi"}
    waiting = next(p for p in plan.pending if p.job == "b-hi")
    assert waiting.constraint == "preemption" and "preemption is off: policy.preemption" in waiting.reason
    # the other way round: the policy allows, a team's own `false` keeps its jobs from preempting
    req["policy"]["preemption"] = True
    req["teams"] = [{**_team("a", 8), "preemption": False}, _team("b", 8)]
    plan = solve(req)
    assert _preempted(plan) == [("b-low", "b-hi", "within_team")]
    waiting = next(p for p in plan.pending if p.job == "a-hi")
    assert "preemption is off for team a" in waiting.reason
    req["teams"] = [{**_team("a", 8), "preemption": {"within_team": "never"}}, _team("b", 8)]
    assert _preempted(solve(req)) == [("b-low", "b-hi", "within_team")]


def test_a_higher_priority_job_of_another_team_does_not_preempt_a_team_within_its_nominal() -> None:
    running = [_run("b-low", "n1", EIGHT, 0, "b")]
    plan = solve(_request([_node("n1")], [_job("a-hi", 8, 100, "a")], running, [_team("a", 0), _team("b", 8)]))
    assert plan.preemptions == [] and _placed(plan) == set()


def test_equal_priority_only_with_lower_or_newer_equal_priority_and_a_newer_victim() -> None:
    # hi was submitted at 10:30; 'newer' started at 11:00, 'older' at 10:00, both priority 5 like hi. A priority-9
    # job that fits beside them is also pending.
    nodes = [_node("n1"), _node("n2"), _node("n3", 1)]
    jobs = [_job("hi", 8, 5), _job("top", 1, 9)]
    running = [_run("older", "n1", EIGHT, 5), _run("newer", "n2", EIGHT, 5, started_at="2026-12-01T11:00:00Z")]
    plan = solve(_request(nodes, jobs, running))
    assert plan.preemptions == [] and _placed(plan) == {"top"}
    plan = solve(_request(nodes, jobs, running, preemption={"within_team": "lower_or_newer_equal_priority"}))
    assert _preempted(plan) == [("newer", "hi", "within_team")]
    assert plan.preemptions[0].reason == ("priority 5 = 5 (hi), started after it was submitted "
                                          "(lower_or_newer_equal_priority)")
    older_only = [running[0]]
    plan = solve(_request(nodes[:1] + nodes[2:], jobs, older_only,
                          preemption={"within_team": "lower_or_newer_equal_priority"}))
    assert plan.preemptions == [] and _placed(plan) == {"top"}


def test_equal_priority_newer_victim_of_the_top_pending_priority() -> None:
    running = [_run("newer", "n1", EIGHT, 5, started_at="2026-12-01T11:00:00Z")]
    plan = solve(_request([_node("n1")], [_job("hi", 8, 5)], running,
                          preemption={"within_team": "lower_or_newer_equal_priority"}))
    assert _preempted(plan) == [("newer", "hi", "within_team")]


# ---------------------------------------------------------------------------------------------
# reclaim_within_cohort (Kueue reclaimWithinCohort, Volcano reclaim)


def _borrowing(small_priority: int = 0, b_nominal: int = 8, b_priority: int = 0) -> dict[str, Any]:
    # a (nominal 8) holds 12: 8 on n1 ('a-big', not preemptible) and 4 on n2 ('a-small'), borrowing 4. b wants
    # one 8-GPU pod.
    running = [_run("a-big", "n1", EIGHT, 0, "a", preemptible=False),
               _run("a-small", "n2", [0, 1, 2, 3], small_priority, "a")]
    return _request([_node("n1"), _node("n2")], [_job("b1", 8, b_priority, "b")], running,
                    [_team("a", 8), _team("b", b_nominal)])


def test_reclaim_takes_back_from_a_team_over_its_nominal_whatever_the_priority() -> None:
    plan = solve(_borrowing(small_priority=7))
    assert _preempted(plan) == [("a-small", "b1", "reclaim_within_cohort")]
    assert plan.preemptions[0].reason.endswith("reclaimed for b1")


def test_reclaim_lower_priority_keeps_a_higher_priority_borrower() -> None:
    req = _borrowing(small_priority=7)
    req["policy"]["preemption"] = {"reclaim_within_cohort": "lower_priority"}
    plan = solve(req)
    assert plan.preemptions == [] and _placed(plan) == set()
    req = _borrowing(small_priority=0, b_priority=3)
    req["policy"]["preemption"] = {"reclaim_within_cohort": "lower_priority"}
    assert _preempted(solve(req)) == [("a-small", "b1", "reclaim_within_cohort")]


def test_reclaim_only_from_a_team_over_its_nominal() -> None:
    # a's nominal is 12: it borrows nothing, so b (nominal 8, 4 free GPUs in the cluster) cannot take its place.
    req = _borrowing()
    req["teams"] = [_team("a", 12), _team("b", 8)]
    plan = solve(req)
    assert plan.preemptions == [] and _placed(plan) == set()


# ---------------------------------------------------------------------------------------------
# borrow_within_cohort (Kueue borrowWithinCohort)


def test_borrow_within_cohort_lets_a_borrowing_job_preempt_lower_priority_borrowers() -> None:
    # b's nominal is 4: placing b1 (8) makes b borrow (c's idle nominal), so reclaim does not apply;
    # borrow_within_cohort does, for victims of lower priority up to the threshold.
    req = _borrowing(small_priority=1, b_nominal=4, b_priority=5)
    req["teams"].append(_team("c", 8))
    assert solve(req).preemptions == []  # default: borrow_within_cohort never
    req["policy"]["preemption"] = {"borrow_within_cohort": {"policy": "lower_priority"}}
    plan = solve(req)
    assert _preempted(plan) == [("a-small", "b1", "borrow_within_cohort")]
    assert "which borrows (borrow_within_cohort)" in plan.preemptions[0].reason
    req["policy"]["preemption"] = {"borrow_within_cohort": {"policy": "lower_priority", "max_priority_threshold": 0}}
    assert solve(req).preemptions == []  # a-small's priority 1 is above the threshold
    req["policy"]["preemption"] = {"borrow_within_cohort": {"policy": "lower_priority", "max_priority_threshold": 1}}
    assert _preempted(solve(req)) == [("a-small", "b1", "borrow_within_cohort")]


# ---------------------------------------------------------------------------------------------
# Never a job that is not preemptible, never before min_runtime_s


def test_not_preemptible_and_too_young_are_never_victims_nor_named() -> None:
    running = [_run("pinned", "n1", EIGHT, 0, preemptible=False),
               _run("young", "n2", EIGHT, 0, started_at="2026-12-01T11:50:00Z")]
    plan = solve(_request([_node("n1"), _node("n2")], [_job("hi", 8, 100)], running, min_runtime_s=3600))
    assert plan.preemptions == [] and _placed(plan) == set()
    assert "pinned" not in plan.pending[0].reason and "young" not in plan.pending[0].reason


# ---------------------------------------------------------------------------------------------
# Order among allowed victim sets: lowest priority, fewest, least work lost, newest


def test_lower_priority_goes_before_less_lost_work() -> None:
    # p0 ran 40 h without a checkpoint (320 GPU-hours to lose); p1 checkpointed a minute ago.
    running = [_run("p0", "n1", EIGHT, 0, started_at="2026-11-29T20:00:00Z"),
               _run("p1", "n2", EIGHT, 1, checkpointed_at="2026-12-01T11:59:00Z")]
    plan = solve(_request([_node("n1"), _node("n2")], [_job("hi", 8, 5)], running))
    assert _preempted(plan) == [("p0", "hi", "within_team")]


def test_fewer_victims_go_before_less_lost_work() -> None:
    running = [_run("big", "n1", EIGHT), _run("half-a", "n2", [0, 1, 2, 3], checkpointed_at="2026-12-01T11:59:00Z"),
               _run("half-b", "n2", [4, 5, 6, 7], checkpointed_at="2026-12-01T11:59:00Z")]
    plan = solve(_request([_node("n1"), _node("n2")], [_job("hi", 8, 5)], running))
    assert _preempted(plan) == [("big", "hi", "within_team")]


def test_victim_gpus_weighs_victims_by_the_gpus_they_hold() -> None:
    # A 2-GPU job: evict the 8-GPU job (one victim, 6 GPUs freed for nobody) or the two 1-GPU jobs beside
    # six GPUs of a higher class (two victims, 2 GPUs). Fewest victims by default; at 0.5 per GPU the 8-GPU
    # victim weighs 5 and the pair 3.
    running = [_run("whole", "n1", EIGHT, 0), _run("one-a", "n2", [0], 0), _run("one-b", "n2", [1], 0),
               _run("keep", "n2", [2, 3, 4, 5, 6, 7], 9)]
    nodes, jobs = [_node("n1"), _node("n2")], [_job("hi", 2, 5)]
    assert _preempted(solve(_request(nodes, jobs, running))) == [("whole", "hi", "within_team")]
    plan = solve(_request(nodes, jobs, running, weights={"victim_gpus": 0.5}))
    assert _preempted(plan) == [("one-a", "hi", "within_team"), ("one-b", "hi", "within_team")]
    assert verify(PlacementRequest.model_validate(_request(nodes, jobs, running, weights={"victim_gpus": 0.5})),
                  plan) == []


def test_a_wide_gang_is_the_last_victim_of_its_class() -> None:
    # A 1-GPU job beside a 16-GPU gang (a pod on each node) and a 1-GPU job of the same class: one victim
    # either way, and the gang checkpointed just now (less work lost); by its GPUs it is the costlier one.
    gang = _run("gang", "n1", EIGHT, 0, checkpointed_at="2026-12-01T11:59:00Z")
    gang["pods"].append({"task": "w", "node": "n2", "gpus": EIGHT})
    running = [gang, _run("small", "n3", [0], 0), _run("keep", "n3", [1, 2, 3, 4, 5, 6, 7], 9)]
    nodes, jobs = [_node("n1"), _node("n2"), _node("n3")], [_job("hi", 1, 5)]
    assert _preempted(solve(_request(nodes, jobs, running))) == [("gang", "hi", "within_team")]
    plan = solve(_request(nodes, jobs, running, weights={"victim_gpus": 0.5}))
    assert _preempted(plan) == [("small", "hi", "within_team")]


def test_victim_gpus_keeps_lower_priorities_first() -> None:
    # Tier 1 still rules: the big priority-0 job goes before the small priority-1 one, however many GPUs.
    running = [_run("big-low", "n1", EIGHT, 0), _run("small-mid", "n2", [0], 1),
               _run("keep", "n2", [1, 2, 3, 4, 5, 6, 7], 9)]
    plan = solve(_request([_node("n1"), _node("n2")], [_job("hi", 1, 5)], running, weights={"victim_gpus": 100}))
    assert _preempted(plan) == [("big-low", "hi", "within_team")]


def test_less_lost_work_then_the_newest_goes_first() -> None:
    both = {"checkpointed_at": "2026-12-01T11:59:00Z"}  # the same work to lose
    running = [_run("old", "n1", EIGHT, started_at="2026-12-01T08:00:00Z", **both),
               _run("new", "n2", EIGHT, started_at="2026-12-01T11:00:00Z", **both),
               _run("unsaved", "n3", EIGHT, started_at="2026-12-01T11:30:00Z")]
    plan = solve(_request([_node("n1"), _node("n2"), _node("n3")], [_job("hi", 8, 5)], running))
    assert _preempted(plan) == [("new", "hi", "within_team")]


def test_a_priority_100_job_never_waits_behind_unsaved_priority_0_jobs() -> None:
    # Two pending classes (strict priorities); the cluster is full of priority-0 jobs that ran five days without
    # a checkpoint (960 GPU-hours each to lose). The priority-100 gang of two 8-GPU pods evicts both.
    running = [_run(f"r{i}", f"n{i}", EIGHT, 0, started_at="2026-11-26T12:00:00Z") for i in (1, 2)]
    jobs = [_job("big", 8, 100, replicas=2), _job("small", 1, 1)]
    plan = solve(_request([_node("n1"), _node("n2")], jobs, running))
    assert _preempted(plan) == [("r1", "big", "within_team"), ("r2", "big", "within_team")]
    assert "big" in _placed(plan)
    # each node's victims cost at most weights.preemption (0.5) GPUs of the cheapest class that may preempt
    # them ('small', weight 1): a trifle beside one GPU of 'big''s class
    assert plan.objective.terms["preemption"] == -1.0


# ---------------------------------------------------------------------------------------------
# verify: the rules, recomputed from the request


def _verify(running: list[dict[str, Any]], preemptions: list[dict[str, Any]], teams: list[dict[str, Any]] | None = None,
            job_team: str | None = None, **policy: Any) -> list[str]:
    req = PlacementRequest.model_validate(_request([_node("n1"), _node("n2")], [_job("hi", 8, 5, job_team)], running,
                                                   teams, **policy))
    plan = {"status": "feasible", "preemptions": preemptions,
            "assignments": [{"job": "hi", "task": "w", "pod": 0, "node": "n1", "gpus": EIGHT}]}
    return verify(req, Plan.model_validate(plan))


def test_verify_checks_for_job_and_rule() -> None:
    old = _run("old", "n1", EIGHT, 0)
    entry = {"job": "old", "reason": "p", "for_job": "hi", "rule": "within_team"}
    assert _verify([old], [entry]) == []
    assert _verify([old], [{**entry, "for_job": ""}]) == [
        "preemption: job old names no for_job (the placed job it makes room for)"]
    assert _verify([old], [{**entry, "rule": None}]) == [
        "preemption: job old names no rule of policy.preemption (within_team, reclaim_within_cohort, "
        "borrow_within_cohort)"]
    assert _verify([old], [entry], preemption={"within_team": "never"}) == [
        "preemption: job old (priority 0, team None) may not be preempted for hi (priority 5, team None) by "
        "within_team: within_team is never"]
    elsewhere = _run("old", "n2", EIGHT, 0)
    assert _verify([elsewhere, _run("x", "n1", EIGHT, 0)], [entry, {**entry, "job": "x"}]) == [
        "preemption: job old is preempted for hi, which has no pod on its nodes (n2)"]


def test_verify_reads_the_preemptors_team_rules() -> None:
    old = _run("old", "n1", EIGHT, 0, "a")
    entry = {"job": "old", "reason": "p", "for_job": "hi", "rule": "within_team"}
    own = [{**_team("a", 8), "preemption": True}]
    assert _verify([old], [entry], own, "a", preemption=False) == []
    assert _verify([old], [entry], [_team("a", 8)], "a", preemption=False) == [
        "preemption: job old is preempted but policy.preemption is off"]
    off = [{**_team("a", 8), "preemption": False}]
    assert _verify([old], [entry], off, "a") == ["preemption: job old is preempted but team a's preemption is off"]
    never = [{**_team("a", 8), "preemption": {"within_team": "never"}}]
    assert _verify([old], [entry], never, "a")[0].endswith("within_team: within_team is never")


def test_verify_checks_the_cohort_rules() -> None:
    teams = [_team("a", 8), _team("b", 8)]
    within = [_run("a-run", "n1", EIGHT, 0, "a")]  # a holds its nominal: nothing to reclaim
    entry = {"job": "a-run", "reason": "p", "for_job": "hi", "rule": "reclaim_within_cohort"}
    assert _verify(within, [entry], teams, "b") == [
        "preemption: job a-run (priority 0, team a) may not be preempted for hi (priority 5, team b) by "
        "reclaim_within_cohort: team a held no more than its nominal where hi lands on its nodes"]
    over = [*within, _run("a-more", "n2", [0, 1, 2, 3], 0, "a")]  # a holds 12 > 8
    assert _verify(over, [entry], teams, "b") == []
    assert _verify(over, [{**entry, "rule": "within_team"}], teams, "b")[0].endswith(
        "within_team: they are of different teams")
    borrow = {**entry, "rule": "borrow_within_cohort"}
    rules = {"borrow_within_cohort": {"policy": "lower_priority", "max_priority_threshold": -1}}
    assert _verify(over, [borrow], teams, "b", preemption=rules)[0].endswith(
        "borrow_within_cohort: priority above max_priority_threshold -1")
    assert _verify(over, [borrow], teams, "b")[0].endswith("borrow_within_cohort: borrow_within_cohort is never")


# ---------------------------------------------------------------------------------------------
# Property: every preemption of a random request passes verify and names a placed job on its nodes


_TIMES = ["2026-12-01T08:00:00Z", "2026-12-01T10:30:00Z", "2026-12-01T11:50:00Z"]


@st.composite
def _instances(draw: st.DrawFn) -> dict[str, Any]:
    nodes = [_node(f"n{i}", draw(st.sampled_from([4, 8]))) for i in range(draw(st.integers(1, 3)))]
    names = ["a", "b", "c"][: draw(st.integers(0, 3))]
    teams = [{"name": t, "quota": {"gpus": {"nominal": draw(st.sampled_from([0, 2, 4, 8, 12]))}}} for t in names]
    if names and draw(st.booleans()):
        teams.append(_team("idle", 8))  # idle nominal others may borrow
    running = []
    for i, node in enumerate(nodes):
        free = list(range(node["gpus"]))
        for k in range(draw(st.integers(0, 3))):
            size = draw(st.sampled_from([1, 2, 4, 8]))
            if size > len(free):
                break
            gpus, free = free[:size], free[size:]
            job = _run(f"r{i}{k}", node["name"], gpus, draw(st.integers(0, 3)), draw(st.sampled_from(names or [None])),
                       draw(st.sampled_from([True, True, False])), draw(st.sampled_from(_TIMES)))
            if draw(st.booleans()):
                job["checkpointed_at"] = "2026-12-01T11:55:00Z"
            running.append(job)
    jobs = [_job(f"j{k}", draw(st.sampled_from([1, 2, 4, 8])), draw(st.integers(0, 3)),
                 draw(st.sampled_from(names or [None])), draw(st.integers(1, 2)), draw(st.sampled_from(_TIMES)))
            for k in range(draw(st.integers(1, 4)))]
    reclaim = draw(st.sampled_from(["never", "lower_priority", "any"]))
    borrow = {"policy": "never" if reclaim == "never" else draw(st.sampled_from(["lower_priority", "never"])),
              "max_priority_threshold": draw(st.sampled_from([None, 0, 2]))}
    preemption = draw(st.sampled_from([True, {
        "within_team": draw(st.sampled_from(["never", "lower_priority", "lower_or_newer_equal_priority"])),
        "reclaim_within_cohort": reclaim, "borrow_within_cohort": borrow}]))
    return _request(nodes, jobs, running, teams, preemption, time_limit_s=1,
                    min_runtime_s=draw(st.sampled_from([0, 3600])))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_instances())
def test_every_preemption_passes_verify_and_names_a_placed_job_on_its_nodes(data: dict[str, Any]) -> None:
    plan = solve(data)  # plan() itself refuses a plan that verify rejects
    req = PlacementRequest.model_validate(data)
    assert verify(req, plan) == []
    running = {r.job: r for r in req.cluster.running}
    for p in plan.preemptions:
        victim = running[p.job]
        nodes = {pod.node for pod in victim.pods}
        assert victim.preemptible and p.rule is not None
        assert any(a.job == p.for_job and a.node in nodes for a in plan.assignments)
        if p.rule == "within_team":
            assert req.jobs[[j.name for j in req.jobs].index(p.for_job)].team == victim.team
