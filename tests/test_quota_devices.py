"""Every GPU counts: MIG and shared pods in quotas, fair share and cost; CPU and memory quotas.

A pod counts its GPU-equivalents: a whole-GPU pod its GPUs, a MIG pod its instance's memory slices
over its GPU's (1g on an H100, an 8-slice GPU: 1/8), a shared pod its gpu_share. Expected values are
hand-computed; every plan also passes `placement.verify` (plan() refuses one that does not).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_models import PlacementRequest, Plan

from placement import plan as solve
from placement.baseline import greedy
from placement.devices import MILLI as DEVICES_MILLI
from placement.holdings import held_in
from placement.problem import build
from placement.teams import MILLI, borrowed
from placement.verify import verify

H100 = "H100-SXM5-80GB"
T0 = "2026-12-01T00:00:00Z"
ALL_1G = [{"profile": "1g.10gb", "start": s} for s in range(7)]


def _node(name: str = "n1", gpus: int = 2, *, mig: bool = False, shared: bool = False, **extra: Any
          ) -> dict[str, Any]:
    node: dict[str, Any] = {"name": name, "gpu_model": H100, "gpus": gpus, "cpu": 128, "memory_gib": 1024, **extra}
    if mig:
        node["mig"] = {g: ALL_1G for g in range(gpus)}
    if shared:
        node["sharing"] = {g: {"mode": "time-slicing", "replicas": 8} for g in range(gpus)}
    return node


def _mig(name: str, team: str, replicas: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "team": team, "submitted_at": T0, **extra,
            "tasks": [{"name": "s", "replicas": replicas, "mig_profile": "1g.10gb"}]}


def _share(name: str, team: str, share: float = 0.25, replicas: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "team": team, "submitted_at": T0, **extra,
            "tasks": [{"name": "s", "replicas": replicas, "gpu_share": share}]}


def _cpu(name: str, team: str, cpu: float = 32, memory: float = 64, gpus: int = 0) -> dict[str, Any]:
    return {"name": name, "team": team, "submitted_at": T0,
            "tasks": [{"name": "w", "gpus": gpus, "cpu": cpu, "memory_gib": memory}]}


def _team(name: str, **quota: Any) -> dict[str, Any]:
    return {"name": name, "quota": quota} if quota else {"name": name}


def _request(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]], teams: list[dict[str, Any]],
             running: list[dict[str, Any]] | None = None, pools: list[dict[str, Any]] | None = None,
             **policy: Any) -> dict[str, Any]:
    return {"cluster": {"nodes": nodes, "running": running or [], "pools": pools or []}, "jobs": jobs,
            "teams": teams,
            "policy": {"deterministic": True, "workers": 1, "time_limit_s": 5, "now": "2026-12-01T12:00:00Z",
                       **policy}}


def _placed(p: Plan) -> set[str]:
    return {a.job for a in p.assignments}


def _reasons(p: Plan) -> dict[str, str]:
    return {x.job: x.reason for x in p.pending}


def _greedy_jobs(req: dict[str, Any]) -> set[str]:
    problem = build(PlacementRequest.model_validate(req))
    done = greedy(problem).placed_jobs(problem)
    return {problem.jobs[j].name for j in done}


def test_the_unit_is_the_devices_milli_gpu() -> None:
    assert MILLI == DEVICES_MILLI == 1000


# --------------------------------------------------------------------------------------------
# Quota 0: no MIG or shared pods


@pytest.mark.parametrize("kind", ["mig", "share"])
def test_a_team_with_quota_zero_gets_no_mig_or_shared_pods(kind: str) -> None:
    # Measured before: 20 such pods placed for a team whose quota is 0 GPUs.
    node = _node(mig=kind == "mig", shared=kind == "share")
    make = _mig if kind == "mig" else _share
    jobs = [make(f"z{i}", "zero") for i in range(10)] + [make(f"o{i}", "other") for i in range(2)]
    req = _request([node], jobs, [_team("zero", gpus={"nominal": 0, "borrowing_limit": 0}),
                                  _team("other", gpus={"nominal": 2})])
    p = solve(req)
    assert _placed(p) == {"o0", "o1"}
    assert _greedy_jobs(req) == {"o0", "o1"}
    reasons = _reasons(p)
    for i in range(10):
        assert reasons[f"z{i}"].startswith("quota: zero at 0/0 GPUs (nominal 0)"), reasons[f"z{i}"]
    held = {r.team: r.gpus_held for r in p.teams}
    assert held == {"zero": 0.0, "other": pytest.approx(0.25 if kind == "mig" else 0.5)}


def test_quota_zero_with_borrowing_takes_only_what_others_lend() -> None:
    # zero may borrow; other (nominal 1, lending 0.5... whole GPUs: lending_limit 0) lends nothing.
    jobs = [_mig(f"z{i}", "zero") for i in range(3)]
    req = _request([_node(mig=True)], jobs, [_team("zero", gpus={"nominal": 0}),
                                             _team("other", gpus={"nominal": 1, "lending_limit": 0})])
    p = solve(req)
    assert _placed(p) == set()
    assert "the cohort's idle nominal is all lent out (0/0 GPUs borrowed)" in _reasons(p)["z0"]
    lent = copy.deepcopy(req)
    lent["teams"][1]["quota"]["gpus"]["lending_limit"] = 1
    assert _placed(solve(lent)) == {"z0", "z1", "z2"}  # 3/8 of the GPU other lends


# --------------------------------------------------------------------------------------------
# MIG fractions and shares


def test_a_quota_of_one_gpu_admits_eight_1g_pods_not_nine() -> None:
    # Two H100s in 7×1g each (14 instances); 1g is 1 memory slice of 8: 1/8 of a GPU.
    jobs = [_mig(f"m{i}", "a") for i in range(9)]
    req = _request([_node(mig=True)], jobs, [_team("a", gpus={"nominal": 1, "borrowing_limit": 0})])
    p = solve(req)
    assert len(_placed(p)) == 8 and len(_greedy_jobs(req)) == 8
    (waiting, reason), = _reasons(p).items()
    assert reason == "quota: a at 1/1 GPUs (nominal 1); needs 0.125 more"
    assert p.teams[0].gpus_held == 1.0 and p.teams[0].gpus_pending == 0.125
    # A gang of nine needs 1.125 GPUs: it waits whole.
    gang = _request([_node(mig=True)], [_mig("g", "a", replicas=9)], copy.deepcopy(req["teams"]))
    assert _placed(solve(gang)) == set()
    assert _reasons(solve(gang))["g"] == "quota: a at 0/1 GPUs (nominal 1); needs 1.125 more"


def test_running_mig_pods_count_against_the_quota() -> None:
    # Five 1g instances already run (5/8); a quota of 1 leaves room for three more, not seven.
    running = [{"job": f"r{s}", "team": "a", "started_at": T0,
                "pods": [{"task": "s", "node": "n1", "mig": {"gpu": 0, "profile": "1g.10gb", "start": s}}]}
               for s in range(5)]
    jobs = [_mig(f"m{i}", "a") for i in range(7)]
    req = _request([_node(mig=True)], jobs, [_team("a", gpus={"nominal": 1, "borrowing_limit": 0})], running)
    p = solve(req)
    assert len(_placed(p)) == 3 and len(_greedy_jobs(req)) == 3
    assert p.teams[0].gpus_held == 1.0 and p.teams[0].gpus_placed == 0.375


def test_shared_pods_count_their_share() -> None:
    # Quota 1 GPU: four 0.25 pods fit, a fifth waits; 0.5 + 0.25 + 0.25 fit, not another 0.25.
    jobs = [_share(f"q{i}", "a") for i in range(5)]
    req = _request([_node(shared=True)], jobs, [_team("a", gpus={"nominal": 1, "borrowing_limit": 0})])
    p = solve(req)
    assert len(_placed(p)) == 4 and len(_greedy_jobs(req)) == 4
    assert next(iter(_reasons(p).values())) == "quota: a at 1/1 GPUs (nominal 1); needs 0.25 more"
    running = [{"job": "half", "team": "a", "started_at": T0,
                "pods": [{"task": "s", "node": "n1", "gpus": [1], "gpu_share": 0.5}]}]
    p = solve(_request([_node(shared=True)], jobs[:3], copy.deepcopy(req["teams"]), running))
    assert len(_placed(p)) == 2


def test_flavor_quota_counts_mig_pods_on_its_nodes_only() -> None:
    pools = [{"name": "x"}, {"name": "y"}]
    nodes = [_node("nx", mig=True, pool="x"), _node("ny", mig=True, pool="y")]
    teams = [{"name": "a", "quota": {"flavors": [{"pool": "x", "gpus": {"nominal": 0, "borrowing_limit": 0}}]}}]
    jobs = [_mig(f"m{i}", "a") for i in range(4)]
    p = solve(_request(nodes, jobs, teams, pools=pools))
    assert len(_placed(p)) == 4 and {a.node for a in p.assignments} == {"ny"}


def test_fair_share_counts_fractions() -> None:
    # No quotas, equal weights, two H100s in 7×1g: a runs 7 instances (7/8 of a GPU) and queues 7 more, b
    # queues 7. Entitlements over 2 GPUs: b 7/8 (its demand), a 9/8. Of the 7 free instances b gets at least
    # 5 (its first five eighths are worth more than a's ninth), a at most 2: counted as 0 GPUs, as MIG pods
    # were, a's running work would not count and the two would look alike.
    running = [{"job": f"r{s}", "team": "a", "started_at": T0,
                "pods": [{"task": "s", "node": "n1", "mig": {"gpu": 0, "profile": "1g.10gb", "start": s}}]}
               for s in range(7)]
    jobs = [_mig(f"a{i}", "a") for i in range(7)] + [_mig(f"b{i}", "b") for i in range(7)]
    p = solve(_request([_node(mig=True)], jobs, [_team("a"), _team("b")], running))
    placed = _placed(p)
    assert len(placed) == 7 and sum(j.startswith("b") for j in placed) >= 5
    reports = {r.team: r for r in p.teams}
    assert reports["a"].entitlement == pytest.approx(1.125) and reports["b"].entitlement == pytest.approx(0.875)
    assert reports["a"].gpus_held + reports["b"].gpus_held == pytest.approx(14 / 8)


# --------------------------------------------------------------------------------------------
# CPU and memory quotas


def test_cpu_quota_binds_and_says_so_with_numbers() -> None:
    jobs = [_cpu(f"c{i}", "a") for i in range(4)]
    req = _request([_node()], jobs, [_team("a", cpu={"nominal": 96, "borrowing_limit": 0})])
    p = solve(req)
    assert len(_placed(p)) == 3 and len(_greedy_jobs(req)) == 3
    (reason,) = _reasons(p).values()
    assert reason == "quota: team a: cpu 96 of 96 used (nominal 96, borrowing limit 0); needs 32 more"


def test_memory_quota_binds() -> None:
    jobs = [_cpu(f"c{i}", "a", cpu=1, memory=100) for i in range(4)]
    req = _request([_node()], jobs, [_team("a", memory_gib={"nominal": 250, "borrowing_limit": 0})])
    p = solve(req)
    assert len(_placed(p)) == 2
    assert next(iter(_reasons(p).values())) == (
        "quota: team a: memory 200 GiB of 250 GiB used (nominal 250 GiB, borrowing limit 0 GiB); needs 100 GiB more")


def test_cpu_is_borrowed_from_idle_nominal_and_running_pods_count() -> None:
    # a: cpu nominal 32, no limit; b lends its idle 64: a may hold 96. a already runs 32 cores.
    running = [{"job": "r", "team": "a", "started_at": T0, "pods": [{"task": "w", "node": "n1", "cpu": 32}]}]
    jobs = [_cpu(f"c{i}", "a") for i in range(4)]
    req = _request([_node()], jobs, [_team("a", cpu={"nominal": 32}), _team("b", cpu={"nominal": 64})], running)
    p = solve(req)
    assert len(_placed(p)) == 2 and len(_greedy_jobs(req)) == 2
    # Both lend all their nominal (no lending_limit): the cohort's pool is 96 cores, a holds them all.
    assert next(iter(_reasons(p).values())) == ("quota: team a: cpu 96 used (nominal 32) needs 32 more, but the "
                                                "cohort's idle cpu nominal is all lent out (96 of 96 borrowed)")


def test_cpu_and_gpu_quotas_together() -> None:
    # 1-GPU jobs with 40 cores each: GPUs allow 4, CPU 80 cores allows 2.
    jobs = [_cpu(f"g{i}", "a", cpu=40, gpus=1) for i in range(4)]
    req = _request([_node(gpus=8)], jobs, [_team("a", gpus={"nominal": 4}, cpu={"nominal": 80, "borrowing_limit": 0})])
    assert len(_placed(solve(req))) == 2


# --------------------------------------------------------------------------------------------
# Cost


POOLS = [{"name": "od", "gpu_hour_price": 4.0},
         {"name": "spot", "capacity_type": "spot", "gpu_hour_price": 1.6, "reclaim_rate_per_h": 0.05}]


@pytest.mark.parametrize("kind", ["mig", "share"])
def test_mig_and_shared_pods_pay_their_fraction_on_spot_and_on_demand(kind: str) -> None:
    make = _mig if kind == "mig" else _share
    nodes = [_node("od1", gpus=1, pool="od", mig=kind == "mig", shared=kind == "share"),
             _node("sp1", gpus=1, pool="spot", mig=kind == "mig", shared=kind == "share")]
    jobs = [make("on", "t", expected_runtime_h=10),
            make("cheap", "t", expected_runtime_h=10, spot_ok=True, checkpoint_interval_h=0.5)]
    p = solve(_request(nodes, jobs, [_team("t")], pools=POOLS))
    where = {a.job: a.node for a in p.assignments}
    assert where == {"on": "od1", "cheap": "sp1"}  # the spot node is cheaper, and "on" is not spot_ok
    g = 0.125 if kind == "mig" else 0.25
    assert p.cost is not None
    rows = {r.job: r for r in p.cost.jobs}
    assert rows["on"].gpus == g and rows["on"].spot_gpus == 0
    assert rows["on"].per_hour == pytest.approx(4.0 * g) and rows["on"].compute == pytest.approx(4.0 * g * 10)
    assert rows["on"].reclaim_risk == 0
    assert rows["cheap"].spot_gpus == g and rows["cheap"].compute == pytest.approx(1.6 * g * 10)
    assert rows["cheap"].reclaim_risk > 0
    assert p.cost.per_hour == pytest.approx(5.6 * g) and p.cost.gpu_hours == pytest.approx(2 * g * 10)
    assert p.cost.total == pytest.approx(p.cost.compute + p.cost.reclaim_risk)


def test_cost_steers_a_mig_pod_to_the_cheaper_pool() -> None:
    pools = [{"name": "dear", "gpu_hour_price": 8.0}, {"name": "cheap", "gpu_hour_price": 1.0}]
    nodes = [_node("a", gpus=1, pool="dear", mig=True), _node("b", gpus=1, pool="cheap", mig=True)]
    p = solve(_request(nodes, [_mig("m", "t", expected_runtime_h=100)], [_team("t")], pools=pools))
    assert [a.node for a in p.assignments] == ["b"]
    assert p.cost is not None and p.cost.compute == pytest.approx(1.0 * 0.125 * 100)


# --------------------------------------------------------------------------------------------
# The verifier catches hand-broken plans


def _mig_plan(pods: int) -> dict[str, Any]:
    slots = [(g, s) for g in range(2) for s in range(7)][:pods]
    return {"status": "feasible", "pending": [],
            "assignments": [{"job": f"m{i}", "task": "s", "pod": 0, "node": "n1",
                             "mig": {"gpu": g, "profile": "1g.10gb", "start": s}} for i, (g, s) in enumerate(slots)]}


def test_verifier_catches_a_plan_over_a_gpu_equivalent_quota() -> None:
    req = _request([_node(mig=True)], [_mig(f"m{i}", "a") for i in range(9)],
                   [_team("a", gpus={"nominal": 1, "borrowing_limit": 0})])
    request = PlacementRequest.model_validate(req)
    eight = Plan.model_validate({**_mig_plan(8), "pending": [{"job": "m8", "reason": "quota"}]})
    assert verify(request, eight) == []
    found = verify(request, Plan.model_validate(_mig_plan(9)))
    assert found == ["quota: team a holds 1.125 GPUs in scope cluster, above nominal + borrowing_limit 1 "
                     "(held 0 before the plan)",
                     "quota: teams in scope cluster draw 1.125 GPUs on the cohort's lendable nominal, more than its 1"]


def test_verifier_catches_a_plan_over_a_cpu_quota() -> None:
    req = _request([_node()], [_cpu(f"c{i}", "a") for i in range(4)],
                   [_team("a", cpu={"nominal": 96, "borrowing_limit": 0}), _team("b", cpu={"nominal": 64})])
    request = PlacementRequest.model_validate(req)
    plan = {"status": "feasible", "pending": [],
            "assignments": [{"job": f"c{i}", "task": "w", "pod": 0, "node": "n1"} for i in range(4)]}
    found = verify(request, Plan.model_validate(plan))
    assert found == ["quota: team a holds cpu 128 in scope cluster, above nominal + borrowing_limit 96 "
                     "(held 0 before the plan)"]
    lenient = copy.deepcopy(req)
    lenient["teams"][0]["quota"]["cpu"].pop("borrowing_limit")
    lenient["teams"][1]["quota"]["cpu"]["lending_limit"] = 16
    found = verify(PlacementRequest.model_validate(lenient), Plan.model_validate(plan))
    # a lends (and so draws on) all its 96; b lends 16: the cohort's pool is 112 cores.
    assert found == ["quota: teams in scope cluster draw cpu 128 on the cohort's lendable nominal, more than its 112"]


def test_verifier_recomputes_the_cost_summary() -> None:
    nodes = [_node("od1", gpus=1, pool="od", mig=True)]
    p = solve(_request(nodes, [_mig("m", "t", expected_runtime_h=10)], [_team("t")], pools=POOLS))
    request = PlacementRequest.model_validate(_request(nodes, [_mig("m", "t", expected_runtime_h=10)],
                                                       [_team("t")], pools=POOLS))
    assert verify(request, p) == []
    assert p.cost is not None
    broken = p.model_copy(deep=True)
    assert broken.cost is not None
    broken.cost.jobs[0].gpus = 0  # the old accounting: a MIG pod as no GPU
    broken.cost.jobs[0].compute = 0.0
    found = [v for v in verify(request, broken) if v.startswith("cost:")]
    assert "cost: job m's gpus is 0, recomputed 0.125" in found
    assert "cost: job m's compute is 0, recomputed 5" in found


# --------------------------------------------------------------------------------------------
# Random requests with teams, MIG and shared pods: every plan verifies


@st.composite
def _cases(draw: st.DrawFn) -> dict[str, Any]:
    nodes = []
    for i in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["mig", "share", "plain"]))
        nodes.append(_node(f"n{i}", gpus=draw(st.integers(1, 2)), mig=kind == "mig", shared=kind == "share",
                           pool=draw(st.sampled_from(["od", "spot"]))))
    names = ["a", "b", "c"][: draw(st.integers(1, 3))]
    teams = []
    for name in names:
        quota: dict[str, Any] = {}
        if draw(st.booleans()):
            gpus = {"nominal": draw(st.integers(0, 2))}
            if draw(st.booleans()):
                gpus["borrowing_limit"] = draw(st.integers(0, 1))
            if draw(st.booleans()):
                gpus["lending_limit"] = draw(st.integers(0, 1))
            quota["gpus"] = gpus
        if draw(st.booleans()):
            quota["cpu"] = {"nominal": draw(st.sampled_from([0, 8, 24, 64]))}
            if draw(st.booleans()):
                quota["cpu"]["borrowing_limit"] = draw(st.sampled_from([0, 8]))
        if draw(st.booleans()):
            quota["memory_gib"] = {"nominal": draw(st.sampled_from([0, 64, 256])), "lending_limit": 32}
        teams.append(_team(name, **quota))
    jobs = []
    for j in range(draw(st.integers(1, 6))):
        team = draw(st.sampled_from(names))
        kind = draw(st.sampled_from(["mig", "share", "whole", "cpu"]))
        replicas = draw(st.integers(1, 3))
        extra = {"spot_ok": draw(st.booleans()), "priority": draw(st.integers(0, 1))}
        if kind == "mig":
            job = _mig(f"j{j}", team, replicas, **extra)
        elif kind == "share":
            job = _share(f"j{j}", team, draw(st.sampled_from([0.1, 0.25, 0.5])), replicas, **extra)
        else:
            job = {**_cpu(f"j{j}", team, cpu=draw(st.sampled_from([1, 8])), memory=32,
                          gpus=1 if kind == "whole" else 0), **extra}
        job["tasks"][0]["cpu"] = job["tasks"][0].get("cpu", draw(st.sampled_from([0, 4])))
        jobs.append(job)
    running = []
    for node in nodes:  # a running pod of a random team on the first MIG instance or shared GPU
        if draw(st.booleans()) and ("mig" in node or "sharing" in node):
            pod: dict[str, Any] = {"task": "s", "node": node["name"], "cpu": 2, "memory_gib": 8}
            if "mig" in node:
                pod["mig"] = {"gpu": 0, "profile": "1g.10gb", "start": 0}
            else:
                pod.update(gpus=[0], gpu_share=0.25)
            running.append({"job": f"r-{node['name']}", "team": draw(st.sampled_from(names)), "started_at": T0,
                            "pods": [pod]})
    req = _request(nodes, jobs, teams, running, pools=POOLS, time_limit_s=1,
                   allow_mig_changes=draw(st.booleans()), allow_sharing_changes=draw(st.booleans()))
    return req


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_random_requests_with_teams_mig_and_shares_give_verified_plans(req: dict[str, Any]) -> None:
    p = solve(req)
    request = PlacementRequest.model_validate(req)
    assert verify(request, p) == []
    problem = build(request)
    floor = greedy(problem)  # the greedy plan, the solver's hint, keeps every quota too
    if problem.teams is not None:
        for scope in problem.teams.all_scopes:
            held = held_in(problem, floor, scope)
            assert (held <= scope.cap).all()
            assert borrowed(held, scope.guaranteed) <= scope.pool
