"""CPU and memory quotas per flavor (Kueue sets `cpu`, `memory` and `nvidia.com/gpu` per ResourceFlavor).

A flavor's CPU or memory quota counts only the pods on its nodes, with the same nominal, borrowing and lending
rules as a GPU quota; a flavor that sets no GPUs is no GPU scope. Expected values are hand-computed; every plan
also passes `placement.verify` (plan() refuses one that does not), and the verifier itself is checked on
hand-made plans and on random requests against quotas this file recomputes.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_models import FlavorQuota, PlacementRequest, Plan
from pydantic import ValidationError

from placement import plan as solve
from placement.baseline import greedy
from placement.problem import build
from placement.verify import verify

T0 = "2026-12-01T00:00:00Z"
POOLS = [{"name": "cpu"}, {"name": "gen"}]
RESOURCE = {"cpu": "cpu", "memory_gib": "memory"}


def _node(name: str, pool: str, cpu: float = 64, memory: float = 512) -> dict[str, Any]:
    return {"name": name, "pool": pool, "gpus": 0, "cpu": cpu, "memory_gib": memory}


def _job(name: str, team: str, cpu: float = 8, memory: float = 16, pods: int = 1, pool: str | None = None
         ) -> dict[str, Any]:
    task: dict[str, Any] = {"name": "w", "replicas": pods, "gpus": 0, "cpu": cpu, "memory_gib": memory}
    if pool is not None:
        task["node_selector"] = {"placement/pool": pool}
    return {"name": name, "team": team, "submitted_at": T0, "tasks": [task]}


def _team(name: str, *flavors: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "quota": {"flavors": list(flavors)}}


def _request(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]], teams: list[dict[str, Any]],
             running: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"cluster": {"nodes": nodes, "pools": POOLS, "running": running or []}, "jobs": jobs, "teams": teams,
            "policy": {"deterministic": True, "workers": 1, "time_limit_s": 5, "now": "2026-12-01T12:00:00Z"}}


def _placed(p: Plan) -> set[str]:
    return {a.job for a in p.assignments}


def _greedy_jobs(req: dict[str, Any]) -> set[str]:
    problem = build(PlacementRequest.model_validate(req))
    return {problem.jobs[j].name for j in greedy(problem).placed_jobs(problem)}


# --------------------------------------------------------------------------------------------
# The wire format


def test_a_flavor_sets_at_least_one_quota() -> None:
    with pytest.raises(ValidationError) as err:
        FlavorQuota.model_validate({"pool": "cpu"})
    assert err.value.errors()[0]["loc"] == ("gpus",)
    assert "at least one of gpus, cpu and memory_gib" in str(err.value)
    assert FlavorQuota.model_validate({"pool": "cpu", "cpu": {"nominal": 4}}).gpus is None


def test_a_cpu_only_flavor_is_no_gpu_scope() -> None:
    # b declares nothing; were the flavor a GPU scope too, b would hold 0 GPUs there and could only borrow.
    req = _request([_node("c1", "cpu"), _node("c2", "gen")], [],
                   [_team("a", {"pool": "cpu", "cpu": {"nominal": 8}}), {"name": "b"}])
    problem = build(PlacementRequest.model_validate(req))
    index = problem.teams
    assert index is not None and index.scopes == ()
    (scope,) = index.resource_scopes
    assert (scope.resource, scope.label, scope.mask.tolist()) == (1, " on pool cpu", [True, False])
    assert scope.nominal.tolist() == [8000, 0]  # milli-CPU


# --------------------------------------------------------------------------------------------
# At the quota: not on the flavor's nodes, but elsewhere


@pytest.mark.parametrize(("field", "expected"), [
    ("cpu", "quota: team a: cpu 32 of 32 used on pool cpu (nominal 32, borrowing limit 0); needs 8 more"),
    ("memory_gib", "quota: team a: memory 256 GiB of 256 GiB used on pool cpu (nominal 256 GiB, borrowing limit "
                   "0 GiB); needs 16 GiB more"),
])
def test_team_at_its_flavor_quota_places_elsewhere_only(field: str, expected: str) -> None:
    # a already runs 32 cores and 256 GiB on the flavor's node c1, its nominal there with no borrowing.
    running = [{"job": "r", "team": "a", "started_at": T0,
                "pods": [{"task": "w", "node": "c1", "cpu": 32, "memory_gib": 256}]}]
    quota = {"nominal": 32 if field == "cpu" else 256, "borrowing_limit": 0}
    jobs = [_job("pinned", "a", pool="cpu"), _job("free", "a")]
    req = _request([_node("c1", "cpu"), _node("c2", "gen")], jobs, [_team("a", {"pool": "cpu", field: quota})],
                   running)
    p = solve(req)
    assert {a.job: a.node for a in p.assignments} == {"free": "c2"}
    assert {x.job: x.reason for x in p.pending} == {"pinned": expected}
    assert "pinned" not in _greedy_jobs(req)  # the greedy keeps the quota too (it need not find c2)


@pytest.mark.parametrize(("on_flavor", "placed"), [(8, 5), (32, 6)])
def test_cluster_wide_and_flavor_quotas_both_count(on_flavor: int, placed: int) -> None:
    # 8-core pods; c2 takes 4. 48 cores cluster-wide allow 6 pods; 8 on pool cpu let c1 take only 1 (5 in all),
    # 32 there would let it take 4, but the cluster-wide quota stops at 6.
    jobs = [_job(f"j{i}", "a") for i in range(10)]
    team = {"name": "a", "quota": {"cpu": {"nominal": 48, "borrowing_limit": 0},
                                   "flavors": [{"pool": "cpu", "cpu": {"nominal": on_flavor, "borrowing_limit": 0}}]}}
    p = solve(_request([_node("c1", "cpu"), _node("c2", "gen", cpu=32)], jobs, [team]))
    nodes = [a.node for a in p.assignments]
    assert len(nodes) == placed and nodes.count("c1") == placed - 4


# --------------------------------------------------------------------------------------------
# Borrowing within the cohort, as for GPUs


@pytest.mark.parametrize("field", ["cpu", "memory_gib"])
@pytest.mark.parametrize(("borrowing", "lending", "placed"), [
    (None, None, 4),  # b's idle 16 lent whole: a holds 32
    (8, None, 3),  # a's borrowing limit: 16 + 8
    (None, 4, 2),  # b lends at most 4 of its 16: a may hold 20, so a third 8 does not fit
])
def test_flavor_quota_borrows_like_gpus(field: str, borrowing: int | None, lending: int | None,
                                        placed: int) -> None:
    scale = 1 if field == "cpu" else 4  # memory: 4 GiB per core, so the same counts
    a: dict[str, Any] = {"nominal": 16 * scale}
    b: dict[str, Any] = {"nominal": 16 * scale}
    if borrowing is not None:
        a["borrowing_limit"] = borrowing * scale
    if lending is not None:
        b["lending_limit"] = lending * scale
    jobs = [_job(f"j{i}", "a", cpu=8, memory=32, pool="cpu") for i in range(5)]
    req = _request([_node("c1", "cpu"), _node("c2", "gen")], jobs,
                   [_team("a", {"pool": "cpu", field: a}), _team("b", {"pool": "cpu", field: b})])
    p = solve(req)
    assert len(_placed(p)) == placed and len(_greedy_jobs(req)) == placed
    what = RESOURCE[field]
    assert all(what in x.reason and "on pool cpu" in x.reason for x in p.pending)


def test_flavor_quota_guaranteed_part_is_never_lent() -> None:
    # b keeps 12 of its 16 cores on pool cpu (lending_limit 4); a nominal 0 there borrows only those 4.
    jobs = [_job(f"j{i}", "a", cpu=4, pool="cpu") for i in range(3)]
    b = {"pool": "cpu", "cpu": {"nominal": 16, "lending_limit": 4}}
    req = _request([_node("c1", "cpu")], jobs, [_team("a", {"pool": "cpu", "cpu": {"nominal": 0}}), _team("b", b)])
    p = solve(req)
    assert len(_placed(p)) == 1
    (reason,) = {x.reason for x in p.pending}
    assert reason == ("quota: team a: cpu 4 used on pool cpu (nominal 0) needs 4 more, but the cohort's idle cpu "
                      "nominal on pool cpu is all lent out (4 of 4 borrowed)")


# --------------------------------------------------------------------------------------------
# The verifier, on hand-made plans


@pytest.mark.parametrize(("field", "words"), [("cpu", "cpu 16"), ("memory_gib", "memory 64 GiB")])
def test_verifier_rejects_a_plan_over_a_flavor_quota(field: str, words: str) -> None:
    quota = {"nominal": 8 if field == "cpu" else 32, "borrowing_limit": 0}
    req = _request([_node("c1", "cpu"), _node("c2", "gen")], [_job("j", "a", cpu=8, memory=32, pods=2)],
                   [_team("a", {"pool": "cpu", field: quota})])
    both_on_flavor = {"status": "feasible", "assignments": [
        {"job": "j", "task": "w", "pod": 0, "node": "c1"}, {"job": "j", "task": "w", "pod": 1, "node": "c1"}]}
    over_cap, over_pool = verify(req, both_on_flavor)  # above its limit, and borrowing what nobody lends
    assert over_cap.startswith("quota: team a holds ") and words in over_cap
    assert "scope pool=cpu gpu_model=None" in over_cap and "scope pool=cpu gpu_model=None" in over_pool
    one_elsewhere = {"status": "feasible", "assignments": [
        {"job": "j", "task": "w", "pod": 0, "node": "c1"}, {"job": "j", "task": "w", "pod": 1, "node": "c2"}]}
    assert verify(req, one_elsewhere) == []


def test_verifier_rejects_borrowing_beyond_a_flavors_lendable() -> None:
    req = _request([_node("c1", "cpu")], [_job("j", "a", cpu=8, pods=2)],
                   [_team("a", {"pool": "cpu", "cpu": {"nominal": 0}}),
                    _team("b", {"pool": "cpu", "cpu": {"nominal": 16, "lending_limit": 8}})])
    plan = {"status": "feasible", "assignments": [
        {"job": "j", "task": "w", "pod": 0, "node": "c1"}, {"job": "j", "task": "w", "pod": 1, "node": "c1"}]}
    (violation,) = verify(req, plan)
    assert violation == ("quota: teams in scope pool=cpu gpu_model=None draw cpu 16 on the cohort's lendable "
                         "nominal, more than its 8")


# --------------------------------------------------------------------------------------------
# Property: random small requests; every plan verifies and keeps the quotas this test recomputes


def _within(req: dict[str, Any], p: Plan) -> None:
    """Per flavor, resource and team: held ≤ nominal + borrowing_limit, and Σ over guaranteed ≤ Σ lendable."""
    pool_of = {n["name"]: n["pool"] for n in req["cluster"]["nodes"]}
    task = {j["name"]: j["tasks"][0] for j in req["jobs"]}
    team_of = {j["name"]: j["team"] for j in req["jobs"]}
    for pool in ("cpu", "gen"):
        for field in ("cpu", "memory_gib"):
            quotas = {t["name"]: next((f[field] for f in t["quota"]["flavors"] if f["pool"] == pool
                                       and field in f), None) for t in req["teams"]}
            if all(q is None for q in quotas.values()):
                continue
            held = dict.fromkeys(quotas, 0.0)
            for a in p.assignments:
                if pool_of[a.node] == pool:
                    held[team_of[a.job]] += task[a.job][field]
            over, lendable = 0.0, 0.0
            for team, q in quotas.items():
                nominal = q["nominal"] if q else 0.0
                lend = min(q.get("lending_limit", nominal), nominal) if q else 0.0
                if q and q.get("borrowing_limit") is not None:
                    assert held[team] <= nominal + q["borrowing_limit"] + 1e-6, (pool, field, team)
                over += max(0.0, held[team] - (nominal - lend))
                lendable += lend
            assert over <= lendable + 1e-6, (pool, field)


_quota = st.fixed_dictionaries({"nominal": st.integers(0, 24)},
                               optional={"borrowing_limit": st.integers(0, 16), "lending_limit": st.integers(0, 16)})
_flavor = st.fixed_dictionaries({"pool": st.sampled_from(["cpu", "gen"])},
                                optional={"cpu": _quota, "memory_gib": _quota}).filter(
    lambda f: "cpu" in f or "memory_gib" in f)
_jobs = st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(1, 12), st.integers(1, 24), st.integers(1, 2),
                           st.sampled_from([None, "cpu", "gen"])), min_size=1, max_size=6)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(flavors_a=st.lists(_flavor, max_size=2, unique_by=lambda f: f["pool"]),
       flavors_b=st.lists(_flavor, max_size=2, unique_by=lambda f: f["pool"]), jobs=_jobs)
def test_random_flavor_quotas_hold(flavors_a: list[dict[str, Any]], flavors_b: list[dict[str, Any]],
                                   jobs: list[tuple[str, int, int, int, str | None]]) -> None:
    req = _request([_node("c1", "cpu", cpu=32, memory=64), _node("c2", "gen", cpu=32, memory=64)],
                   [_job(f"j{i}", team, cpu=cpu, memory=memory, pods=pods, pool=pool)
                    for i, (team, cpu, memory, pods, pool) in enumerate(jobs)],
                   [_team("a", *flavors_a), _team("b", *flavors_b)])
    req["policy"]["time_limit_s"] = 2
    p = solve(req)
    assert verify(req, p) == []
    _within(req, p)
