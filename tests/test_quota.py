"""Quotas: Kueue-style borrowing, lending limits, reclaim and flavors, with hand-computed plans.

Every plan also passes `placement.verify` (plan() refuses to return one that does not), whose
`quota` rule recomputes the limits from the request alone.
"""

from __future__ import annotations

from typing import Any

from placement_models import PlacementRequest, Plan

from placement.api import plan as solve
from placement.baseline import greedy
from placement.problem import build
from placement.verify import verify

H100 = "H100-SXM5-80GB"
A100 = "A100-SXM4-80GB"
T0 = "2026-12-01T00:00:00Z"


def _node(name: str, gpus: int = 8, model: str = H100) -> dict[str, Any]:
    return {"name": name, "gpu_model": model, "gpus": gpus, "cpu": 64, "memory_gib": 512}


def _job(name: str, team: str, gpus: int, **extra: Any) -> dict[str, Any]:
    return {"name": name, "team": team, "tasks": [{"name": "w", "gpus": gpus}], "submitted_at": T0, **extra}


def _run(name: str, team: str, node: str, gpus: list[int], **extra: Any) -> dict[str, Any]:
    return {"job": name, "team": team, "started_at": T0, "pods": [{"task": "w", "node": node, "gpus": gpus}],
            **extra}


def _team(name: str, nominal: int, borrowing: int | None = None, lending: int | None = None) -> dict[str, Any]:
    gpus: dict[str, Any] = {"nominal": nominal}
    if borrowing is not None:
        gpus["borrowing_limit"] = borrowing
    if lending is not None:
        gpus["lending_limit"] = lending
    return {"name": name, "quota": {"gpus": gpus}}


def _request(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]], teams: list[dict[str, Any]],
             running: list[dict[str, Any]] | None = None, **policy: Any) -> dict[str, Any]:
    return {"cluster": {"nodes": nodes, "running": running or []}, "jobs": jobs, "teams": teams,
            "policy": {"deterministic": True, "time_limit_s": 5, "now": "2026-12-01T12:00:00Z", **policy}}


def _placed(plan: Plan) -> set[str]:
    return {a.job for a in plan.assignments}


def _reasons(plan: Plan) -> dict[str, str]:
    return {p.job: p.reason for p in plan.pending}


# ---------------------------------------------------------------------------------------------
# Borrowing (Kueue "borrowingLimit"): a team may take what others' nominal leaves idle, up to its limit


def test_team_borrows_idle_nominal_of_the_cohort() -> None:
    # 16 GPUs; a and b have nominal 8 each; b is idle. a's three 4-GPU jobs (12 GPUs) all run:
    # a borrows 4 of b's idle nominal (no borrowing limit).
    req = _request([_node("n1"), _node("n2")], [_job(f"a{i}", "a", 4) for i in range(3)],
                   [_team("a", 8), _team("b", 8)])
    assert _placed(solve(req)) == {"a0", "a1", "a2"}


def test_borrowing_limit_caps_the_team() -> None:
    # Same, with borrowing_limit 2: a may hold 10, so two 4-GPU jobs (8) run and the third waits.
    req = _request([_node("n1"), _node("n2")], [_job(f"a{i}", "a", 4) for i in range(3)],
                   [_team("a", 8, borrowing=2), _team("b", 8)])
    plan = solve(req)
    assert len(_placed(plan)) == 2
    (waiting, reason), = _reasons(plan).items()
    assert reason == "quota: a at 8/10 GPUs (nominal 8 + borrowing limit 2); needs 4 more"


def test_lending_limit_keeps_nominal_for_its_owner() -> None:
    # b lends at most 2 of its 8: a can hold 8 + 2 = 10 → two of its 4-GPU jobs plus nothing else.
    req = _request([_node("n1"), _node("n2")], [_job(f"a{i}", "a", 4) for i in range(3)] + [_job("a-small", "a", 2)],
                   [_team("a", 8), _team("b", 8, lending=2)])
    plan = solve(req)
    assert sum(len(a.gpus) for a in plan.assignments) == 10
    assert "a-small" in _placed(plan)


def test_team_without_quota_only_borrows() -> None:
    # c declares no quota: nominal 0. a and b lend 4 + 4 idle; c takes 8, never more.
    req = _request([_node("n1"), _node("n2")], [_job("c1", "c", 8), _job("c2", "c", 4)],
                   [_team("a", 4), _team("b", 4), {"name": "c"}])
    plan = solve(req)
    assert _placed(plan) == {"c1"}
    assert "idle nominal is all lent out (8/8 GPUs borrowed)" in _reasons(plan)["c2"]


def test_a_team_under_nominal_gets_in_before_a_borrower() -> None:
    # 8 GPUs; a (nominal 4) and b (nominal 4) each want 8. Quota splits the cluster 4/4, whatever
    # the priorities: b's higher-priority 8-GPU job cannot borrow a's nominal while a uses it.
    req = _request([_node("n1")], [_job("a1", "a", 4), _job("a2", "a", 4), _job("b1", "b", 4, priority=5),
                                   _job("b2", "b", 4, priority=5)],
                   [_team("a", 4), _team("b", 4)])
    plan = solve(req)
    per_team = {r.team: r.gpus_held for r in plan.teams}
    assert per_team == {"a": 4, "b": 4}
    assert {r.team: r.entitlement for r in plan.teams} == {"a": 4.0, "b": 4.0}


# ---------------------------------------------------------------------------------------------
# Reclaim (Kueue "reclaimWithinCohort"): a team below nominal takes back what a borrower holds


def _reclaim_request(preemption: bool) -> dict[str, Any]:
    # a (nominal 8) holds 12: an 8-GPU job on n1 and a 4-GPU job on n2 — it borrows 4 of b's
    # nominal. b (nominal 8) now wants one 8-GPU pod. Quota: 12 + 8 > 16, so a must give back 4.
    # Only evicting a-small frees a whole node (n2) and is enough: a → 8, b → 8.
    running = [_run("a-big", "a", "n1", list(range(8)), preemptible=True),
               _run("a-small", "a", "n2", [0, 1, 2, 3], preemptible=True)]
    return _request([_node("n1"), _node("n2")], [_job("b1", "b", 8)], [_team("a", 8), _team("b", 8)], running,
                    preemption=preemption)


def test_reclaim_preempts_the_borrowers_job() -> None:
    plan = solve(_reclaim_request(True))
    assert _placed(plan) == {"b1"}
    assert [(p.job, p.reason) for p in plan.preemptions] == [
        ("a-small", "team a borrowing above nominal (12/8 GPUs) while b below (8/8 after this plan): "
                    "reclaimed for b1")]
    assert plan.assignments[0].node == "n2" and plan.assignments[0].gpus == list(range(8))
    assert {r.team: (r.gpus_held, r.gpus_preempted) for r in plan.teams} == {"a": (8, 4), "b": (8, 0)}


def test_without_preemption_the_reclaimer_waits_with_a_quota_reason() -> None:
    plan = solve(_reclaim_request(False))
    assert plan.preemptions == [] and _placed(plan) == set()
    reason = _reasons(plan)["b1"]
    # Running work holds the room: preemption (off) binds, and the quota says why reclaim would be allowed.
    assert plan.pending[0].constraint == "preemption"
    assert reason == ("no matching node has room for one pod of task 'w' (8 GPUs) beside running work; the most "
                      "free on one matching node: 4 GPUs; fits if 4 GPUs of team a were preempted (preemption is "
                      "off: policy.preemption); quota: b at 0/8 GPUs is within its nominal, but other teams hold 4 "
                      "GPUs above theirs; taking 8 more needs them preempted (reclaim)")


def test_reclaim_never_lets_the_reclaimer_end_above_nominal() -> None:
    # As above, but b wants 12 (8 + 4): after reclaiming it would hold 12 > nominal 8, which is
    # borrowing, not reclaiming; both a's jobs stay and b gets nothing more than the quota allows.
    req = _reclaim_request(True)
    req["jobs"] = [{"name": "b1", "team": "b", "submitted_at": T0,
                    "tasks": [{"name": "w", "replicas": 1, "gpus": 8}, {"name": "x", "replicas": 1, "gpus": 4}]}]
    plan = solve(req)
    assert plan.preemptions == [] and _placed(plan) == set()


def test_running_work_above_a_shrunken_quota_is_kept_but_not_grown() -> None:
    # a holds 8 with a borrowing limit that now allows only 4 (quotas were lowered). Nothing is
    # evicted to enforce it (not preemptible), and a's new 1-GPU job must wait.
    running = [_run("a-run", "a", "n1", list(range(8)))]
    req = _request([_node("n1"), _node("n2")], [_job("a-new", "a", 1)], [_team("a", 2, borrowing=2), _team("b", 8)],
                   running)
    plan = solve(req)
    assert _placed(plan) == set()
    assert _reasons(plan)["a-new"] == "quota: a at 8/8 GPUs (nominal 2 + borrowing limit 2); needs 1 more"


# ---------------------------------------------------------------------------------------------
# Flavors (Kueue ResourceFlavors): quota per GPU model


def test_flavor_quota_keeps_a_team_off_a_gpu_model() -> None:
    # a may use no A100 (flavor nominal 0, borrowing 0); its 8-GPU job goes to the H100 node even
    # though best fit would not care. b owns the A100 flavor.
    teams = [{"name": "a", "quota": {"flavors": [{"gpu_model": A100, "gpus": {"nominal": 0, "borrowing_limit": 0}}]}},
             {"name": "b", "quota": {"flavors": [{"gpu_model": A100, "gpus": {"nominal": 8}}]}}]
    req = _request([_node("h", model=H100), _node("a", model=A100)], [_job("a1", "a", 8), _job("a2", "a", 8)], teams)
    plan = solve(req)
    assert [(a.job, a.node) for a in plan.assignments] in ([("a1", "h")], [("a2", "h")])
    assert "quota: a at 0/0 GPUs on A100-SXM4-80GB" in plan.pending[0].reason


def test_greedy_respects_quotas_too() -> None:
    # The greedy plan is CP-SAT's hint and fallback: it must never break a quota itself.
    req = PlacementRequest.model_validate(_request(
        [_node("n1"), _node("n2")], [_job(f"a{i}", "a", 4, priority=9) for i in range(4)] + [_job("b1", "b", 4)],
        [_team("a", 8, borrowing=0), _team("b", 8)]))
    problem = build(req)
    chosen = greedy(problem)
    names = {problem.jobs[j].name for j in chosen.placed_jobs(problem)}
    assert names == {"a0", "a1", "b1"}


def test_verify_flags_a_plan_over_quota() -> None:
    req = PlacementRequest.model_validate(_request(
        [_node("n1")], [_job("a1", "a", 4), _job("a2", "a", 4)], [_team("a", 2, borrowing=2), _team("b", 4)]))
    over = Plan.model_validate({
        "status": "feasible",
        "assignments": [{"job": "a1", "task": "w", "pod": 0, "node": "n1", "gpus": [0, 1, 2, 3]},
                        {"job": "a2", "task": "w", "pod": 0, "node": "n1", "gpus": [4, 5, 6, 7]}],
    })
    assert verify(req, over) == [
        "quota: team a holds 8 GPUs in scope cluster, above nominal + borrowing_limit 4 (held 0 before the plan)",
        "quota: teams in scope cluster draw 8 GPUs on the cohort's lendable nominal, more than its 6",
    ]
    ok = over.model_dump()
    ok["assignments"].pop()
    ok["pending"].append({"job": "a2", "reason": "quota"})
    assert verify(req, Plan.model_validate(ok)) == []
