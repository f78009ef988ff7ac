"""Preemption: victims chosen in the same model as the placements, whole, justified, and minimal.

Scenarios are small enough to compute the right victims by hand; a hypothesis test throws random
teams, quotas and running jobs at the planner and checks every rule from the request alone.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_models import PlacementRequest, Plan

from placement.api import plan as solve
from placement.verify import verify

H100 = "H100-SXM5-80GB"
NOW = "2026-12-01T12:00:00Z"


def _node(name: str, gpus: int = 8) -> dict[str, Any]:
    return {"name": name, "gpu_model": H100, "gpus": gpus, "cpu": 64, "memory_gib": 512}


def _job(name: str, gpus: int, priority: int = 0, team: str | None = None, replicas: int = 1) -> dict[str, Any]:
    job: dict[str, Any] = {"name": name, "priority": priority,
                           "tasks": [{"name": "w", "replicas": replicas, "gpus": gpus}]}
    if team:
        job["team"] = team
    return job


def _run(name: str, node: str, gpus: list[int], priority: int = 0, preemptible: bool = True,
         started_at: str = "2026-12-01T10:00:00Z", **extra: Any) -> dict[str, Any]:
    return {"job": name, "priority": priority, "preemptible": preemptible, "started_at": started_at,
            "pods": [{"task": "w", "node": node, "gpus": gpus}], **extra}


def _request(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]], running: list[dict[str, Any]],
             **policy: Any) -> dict[str, Any]:
    return {"cluster": {"nodes": nodes, "running": running}, "jobs": jobs,
            "policy": {"deterministic": True, "time_limit_s": 5, "now": NOW, "preemption": True, **policy}}


def _victims(plan: Plan) -> list[str]:
    return sorted(p.job for p in plan.preemptions)


EIGHT = list(range(8))


# ---------------------------------------------------------------------------------------------
# Priority preemption (Kueue withinClusterQueue: LowerPriority)


def test_higher_priority_job_preempts_a_lower_one() -> None:
    plan = solve(_request([_node("n1")], [_job("llm-pretrain", 8, priority=100)], [_run("old", "n1", EIGHT, 10)]))
    assert [(p.job, p.for_job, p.rule, p.reason) for p in plan.preemptions] == [
        ("old", "llm-pretrain", "within_team", "priority 10 < 100 (llm-pretrain)")]
    assert [(a.job, a.node, a.gpus) for a in plan.assignments] == [("llm-pretrain", "n1", EIGHT)]
    # The only victim on its node costs the node's whole budget: weights.preemption (0.5) × one GPU of the
    # cheapest class that may preempt it (the only class here, weight 1).
    assert plan.objective.terms["preemption"] == -0.5


def test_the_preemption_hint_names_victims_in_the_models_order() -> None:
    # Preemption off, a 1-GPU job: the 8-GPU job has less work to lose (checkpointed just now), so it is named
    # by default; weighed by its GPUs (`victim_gpus`), the 1-GPU job is the one the model would evict.
    running = [_run("wide", "n1", EIGHT, 10, checkpointed_at="2026-12-01T11:59:00Z"),
               _run("narrow", "n2", [0], 10), _run("busy", "n2", [1, 2, 3, 4, 5, 6, 7], 100, preemptible=False)]
    nodes, jobs = [_node("n1"), _node("n2")], [_job("hi", 1, 100)]
    by_count = solve(_request(nodes, jobs, running, preemption=False))
    assert by_count.pending[0].reason.endswith("fits if job wide (8 GPUs) were preempted (preemption is off: "
                                               "policy.preemption)")
    by_gpus = solve(_request(nodes, jobs, running, preemption=False, weights={"victim_gpus": 0.5}))
    assert by_gpus.pending[0].reason.endswith("fits if job narrow (1 GPU) were preempted (preemption is off: "
                                              "policy.preemption)")


def test_equal_priority_never_preempts() -> None:
    plan = solve(_request([_node("n1")], [_job("same", 8, priority=10)], [_run("old", "n1", EIGHT, 10)]))
    assert plan.preemptions == [] and plan.assignments == []
    assert "old" not in plan.pending[0].reason  # no rule allows it: the hint never names it


def test_preemption_off_and_not_preemptible_are_respected_and_explained() -> None:
    off = solve(_request([_node("n1")], [_job("hi", 8, 100)], [_run("old", "n1", EIGHT, 10)], preemption=False))
    assert off.preemptions == []
    assert off.pending[0].reason.endswith("; fits if job old (8 GPUs) were preempted (preemption is off: "
                                          "policy.preemption)")
    kept = solve(_request([_node("n1")], [_job("hi", 8, 100)], [_run("old", "n1", EIGHT, 10, preemptible=False)]))
    assert kept.preemptions == [] and "old" not in kept.pending[0].reason
    off = solve(_request([_node("n1")], [_job("hi", 8, 100)], [_run("old", "n1", EIGHT, 10, preemptible=False)],
                         preemption=False))
    assert "fits if" not in off.pending[0].reason  # not even as a hint with preemption off


def test_minimum_runtime_is_honoured() -> None:
    # Started 30 min before now; min runtime 1 h: not yet. At 2 h it may go.
    young = _run("young", "n1", EIGHT, 0, started_at="2026-12-01T11:30:00Z")
    plan = solve(_request([_node("n1")], [_job("hi", 8, 5)], [young], min_runtime_s=3600))
    assert plan.preemptions == []
    assert "young" not in plan.pending[0].reason
    plan = solve(_request([_node("n1")], [_job("hi", 8, 5)], [young], min_runtime_s=1200))
    assert _victims(plan) == ["young"]


def test_one_eight_gpu_victim_beats_eight_small_ones() -> None:
    # n1: one 8-GPU job; n2: eight 1-GPU jobs; same priority and age (2 h): the same GPU-hours
    # would be lost either way, but eight restarts cost more than one (Volcano#5984).
    running = [_run("big", "n1", EIGHT)] + [_run(f"s{g}", "n2", [g]) for g in range(8)]
    plan = solve(_request([_node("n1"), _node("n2")], [_job("hi", 8, 5)], running))
    assert _victims(plan) == ["big"]
    assert plan.assignments[0].node == "n1"


def test_victims_are_where_the_gang_lands() -> None:
    # A greedy victim search by priority would evict 'lowest' first (priority -1), which frees
    # only 2 GPUs on n2 beside a non-preemptible job: useless. The model evicts 'mid' on n1, which
    # with n1's 4 free GPUs makes room for the 8-GPU pod (Kueue#5243, #10815).
    running = [_run("mid", "n1", [0, 1, 2, 3], 0), _run("lowest", "n2", [0, 1], -1),
               _run("pinned", "n2", [2, 3, 4, 5, 6, 7], -1, preemptible=False)]
    plan = solve(_request([_node("n1"), _node("n2")], [_job("hi", 8, 5)], running))
    assert _victims(plan) == ["mid"]
    assert [(a.node, a.gpus) for a in plan.assignments] == [("n1", EIGHT)]


def test_lower_priority_victim_goes_first() -> None:
    running = [_run("p1", "n1", EIGHT, 1), _run("p2", "n2", EIGHT, 2)]
    plan = solve(_request([_node("n1"), _node("n2")], [_job("hi", 8, 5)], running))
    assert _victims(plan) == ["p1"]


def test_checkpointed_victim_loses_less_and_goes_first() -> None:
    # Both ran 2 h; b checkpointed 10 min ago, so evicting it loses 8 × 1/6 GPU-hours, not 16.
    running = [_run("a", "n1", EIGHT), _run("b", "n2", EIGHT, checkpointed_at="2026-12-01T11:50:00Z")]
    plan = solve(_request([_node("n1"), _node("n2")], [_job("hi", 8, 5)], running))
    assert _victims(plan) == ["b"]
    assert -0.5 < plan.objective.terms["preemption"] < -0.3


def test_gang_preempts_whole_victims_and_only_those_it_needs() -> None:
    # A 2×8 gang needs both nodes; the 2-pod victim spans both and goes whole; nothing else.
    victim = {"job": "two", "priority": 0, "preemptible": True, "started_at": "2026-12-01T10:00:00Z",
              "pods": [{"task": "w", "node": "n1", "gpus": [0, 1]}, {"task": "w", "node": "n2", "gpus": [0]}]}
    running = [victim, _run("elsewhere", "n3", EIGHT)]
    plan = solve(_request([_node("n1"), _node("n2"), _node("n3")], [_job("gang", 8, 5, replicas=2)], running))
    assert _victims(plan) == ["two"]
    assert sorted(a.node for a in plan.assignments) == ["n1", "n2"]


def test_lost_work_never_keeps_a_higher_priority_job_waiting() -> None:
    # A 2-GPU job that ran 40 h without a checkpoint (80 GPU-hours lost) still makes room for a 1-GPU job
    # of higher priority: evictions cost at most weights.preemption (< 1) GPUs of the preemptor's class.
    # Only a weight above 1 lets the cost outweigh the job, and the hint then says the plan keeps the victim.
    old = _run("old", "n1", [0, 1], 0, started_at="2026-11-29T20:00:00Z")
    req = _request([_node("n1", 2)], [_job("lo", 0, 0), _job("hi", 1, 5)], [old])
    assert _victims(solve(req)) == ["old"]
    req["policy"]["weights"] = {"preemption": 2.0}
    plan = solve(req)
    assert plan.preemptions == []
    assert "old may be preempted for it (within_team), but the plan keeps it" in plan.pending[0].reason


# ---------------------------------------------------------------------------------------------
# verify: the preemption rule, recomputed from the request


def _verify(running: list[dict[str, Any]], plan: dict[str, Any], **policy: Any) -> list[str]:
    req = PlacementRequest.model_validate(_request([_node("n1")], [_job("hi", 8, 100)], running, **policy))
    return verify(req, Plan.model_validate({"status": "feasible", **plan}))


PLACED = {"assignments": [{"job": "hi", "task": "w", "pod": 0, "node": "n1", "gpus": EIGHT}]}


OLD = {"job": "old", "reason": "p", "for_job": "hi", "rule": "within_team"}


def test_verify_accepts_a_justified_preemption_and_credits_its_gpus() -> None:
    assert _verify([_run("old", "n1", EIGHT, 10)], {**PLACED, "preemptions": [OLD]}) == []


def test_verify_rejects_bad_preemptions() -> None:
    pre = [OLD]
    assert _verify([_run("old", "n1", EIGHT, 10, preemptible=False)], {**PLACED, "preemptions": pre}) == [
        "preemption: job old is preempted but not preemptible"]
    assert _verify([_run("old", "n1", EIGHT, 100)], {**PLACED, "preemptions": pre}) == [
        "preemption: job old (priority 100, team None) may not be preempted for hi (priority 100, team None) by "
        "within_team: within_team lower_priority needs a lower priority"]
    assert _verify([_run("old", "n1", EIGHT, 10)], {**PLACED, "preemptions": pre}, min_runtime_s=3 * 3600) == [
        "preemption: job old has run 7200 s, less than min_runtime_s 10800"]
    assert _verify([_run("old", "n1", EIGHT, 10)], {**PLACED, "preemptions": pre}, preemption=False) == [
        "preemption: job old is preempted but policy.preemption is off"]
    assert _verify([_run("old", "n1", EIGHT, 10)], {**PLACED, "preemptions": [{"job": "hi", "reason": "p"}]})[-1] == (
        "preemption: entry 0 (job hi) names pending job hi, not a running one")
    # Without the preemption the GPUs are still held: the capacity (gpus) rule fires.
    assert _verify([_run("old", "n1", EIGHT, 10)], PLACED)[0].startswith("gpus: pod hi/w/0 takes GPU 0 of node n1, "
                                                                          "held by running job old")


# ---------------------------------------------------------------------------------------------
# Property: random teams, quotas, running jobs and queues never break a rule


@st.composite
def _instances(draw: st.DrawFn) -> dict[str, Any]:
    n_nodes = draw(st.integers(1, 3))
    nodes = [{**_node(f"n{i}", draw(st.sampled_from([4, 8]))), "pool": draw(st.sampled_from(["p0", "p1"]))}
             for i in range(n_nodes)]

    def limits() -> dict[str, Any]:
        return {"nominal": draw(st.integers(0, 12)), "borrowing_limit": draw(st.one_of(st.none(), st.integers(0, 8))),
                "lending_limit": draw(st.one_of(st.none(), st.integers(0, 8)))}

    teams = []
    for name in ("a", "b", "c")[: draw(st.integers(1, 3))]:
        team: dict[str, Any] = {"name": name, "weight": draw(st.sampled_from([1.0, 2.0])),
                                "usage_gpu_h": draw(st.sampled_from([0.0, 100.0]))}
        quota: dict[str, Any] = {}
        if draw(st.booleans()):
            quota["gpus"] = limits()
        if draw(st.booleans()):  # a flavor: the nodes of pool p1 (Kueue ResourceFlavor)
            quota["flavors"] = [{"pool": "p1", "gpus": limits()}]
        if quota:
            team["quota"] = quota
        teams.append(team)
    names = [t["name"] for t in teams]
    running = []
    for i, node in enumerate(nodes):
        free = list(range(node["gpus"]))
        for k in range(draw(st.integers(0, 3))):
            size = draw(st.integers(1, 4))
            if size > len(free):
                break
            gpus, free = free[:size], free[size:]
            started = draw(st.sampled_from(["2026-12-01T11:50:00Z", "2026-12-01T08:00:00Z"]))
            job = {**_run(f"r{i}{k}", node["name"], gpus, draw(st.integers(0, 2)), draw(st.booleans()), started),
                   "team": draw(st.sampled_from(names))}
            if draw(st.booleans()):
                job["checkpointed_at"] = "2026-12-01T11:55:00Z"
            running.append(job)
    jobs = [{**_job(f"j{k}", draw(st.sampled_from([1, 2, 4, 8])), draw(st.integers(0, 3)),
                    draw(st.sampled_from(names)), draw(st.integers(1, 2))),
             "submitted_at": draw(st.sampled_from(["2026-11-30T12:00:00Z", "2026-12-01T11:00:00Z"]))}
            for k in range(draw(st.integers(1, 4)))]
    for job in jobs:
        if job["tasks"][0]["replicas"] == 2 and draw(st.booleans()):
            job["min_available"] = 1  # elastic: one pod is enough
    return {"cluster": {"pools": [{"name": "p0"}, {"name": "p1"}], "nodes": nodes, "running": running},
            "jobs": jobs, "teams": teams,
            "policy": {"deterministic": True, "time_limit_s": 1, "now": NOW, "preemption": draw(st.booleans()),
                       "min_runtime_s": draw(st.sampled_from([0, 3600])),
                       "weights": {"victim_gpus": draw(st.sampled_from([0.0, 0.5, 4.0]))}}}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_instances())
def test_random_teams_never_break_quota_or_preemption_rules(data: dict[str, Any]) -> None:
    plan = solve(data)  # plan() itself refuses a plan that verify rejects
    req = PlacementRequest.model_validate(data)
    assert verify(req, plan) == []
    running = {r.job: r for r in req.cluster.running}
    placed = {a.job for a in plan.assignments}
    for p in plan.preemptions:
        victim = running[p.job]  # a running job, evicted whole: its name leaves the cluster
        assert victim.preemptible and req.policy.preemption and p.job not in placed
        assert p.reason.startswith(("priority ", "team "))
        nodes = {pod.node for pod in victim.pods}
        assert p.rule is not None and any(a.job == p.for_job and a.node in nodes for a in plan.assignments)
    # Each team's report adds up from the request and the plan (whole GPUs only in these instances).
    team_of = {job.name: job.team for job in req.jobs}
    preempted = {p.job for p in plan.preemptions}
    cluster_gpus = sum(node.gpus for node in req.cluster.nodes)
    for report in plan.teams:
        mine = [r for r in req.cluster.running if r.team == report.team]
        kept = sum(len(pod.gpus) for r in mine if r.job not in preempted for pod in r.pods)
        lost = sum(len(pod.gpus) for r in mine if r.job in preempted for pod in r.pods)
        placed = sum(len(a.gpus) for a in plan.assignments if team_of[a.job] == report.team)
        assert (report.gpus_placed, report.gpus_preempted) == (pytest.approx(placed), pytest.approx(lost))
        assert report.gpus_held == pytest.approx(kept + placed)
        assert 0 <= report.entitlement <= cluster_gpus + 1e-6
    assert sum(r.entitlement for r in plan.teams) <= cluster_gpus + 1e-3  # a fair share of what exists


def test_warm_start_extends_the_greedy_with_justified_evictions() -> None:
    # The greedy never preempts: on a full node it places nothing. The warm start (the solver's
    # hint and fallback) evicts the cheaper of two victims and places the job, checked against
    # the whole model.
    from placement import compile as compiler
    from placement.baseline import greedy
    from placement.problem import build
    from placement.search.warm import warm_start

    running = [_run("older", "n1", EIGHT, 0), _run("fresh", "n2", EIGHT, 0, started_at="2026-12-01T11:30:00Z")]
    problem = build(PlacementRequest.model_validate(
        _request([_node("n1"), _node("n2")], [_job("hi", 8, 5)], running)))
    base = greedy(problem)
    assert base.counts == {}
    ctx = compiler.build(problem)
    found = warm_start(ctx, base, budget_s=2.0)
    assert found is not None
    placement, values, score = found
    assert [problem.running[r].spec.job for r in placement.evicted] == ["fresh"]  # 4 GPU-h lost, not 16
    assert placement.counts == {(0, 1): 1}
    # priority 8 − the eviction: S × (1 + δ) with S = 0.5 / 1.5 (the dearest node: 'older', δ = 0.5) and
    # δ = (0.99 × 4/16 + 0.01 × 1800/7200) / 2 = 0.125 for 'fresh' → 0.375
    assert score == pytest.approx(8 - 0.375)
    assert values[ctx.evicted[1].index] == 1 and values[ctx.evicted[0].index] == 0
