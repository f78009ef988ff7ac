"""Teams in numbers: water-filling, fair-share factor, entitlements, Jain's index, scopes, the ledger,
the wire format of teams and quotas, and the per-team plan report. Expected values are hand-computed."""

from __future__ import annotations

import copy
import math
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from placement_models import PlacementRequest
from pydantic import ValidationError

import placement
from placement.problem import build
from placement.teams import (
    UNLIMITED,
    QuotaLedger,
    decayed_usage,
    entitlements,
    fairshare_factor,
    jain,
    water_fill,
)

H100 = "H100-SXM5-80GB"
A100 = "A100-SXM4-80GB"


def _node(name: str, gpus: int = 8, model: str = H100, **extra: Any) -> dict[str, Any]:
    return {"name": name, "gpu_model": model, "gpus": gpus, "cpu": 64, "memory_gib": 512, **extra}


def _job(name: str, team: str, gpus: int, replicas: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "team": team, "tasks": [{"name": "w", "replicas": replicas, "gpus": gpus}], **extra}


def _run(name: str, team: str, node: str, gpus: list[int], **extra: Any) -> dict[str, Any]:
    return {"job": name, "team": team, "pods": [{"task": "w", "node": node, "gpus": gpus}], **extra}


# ---------------------------------------------------------------------------------------------
# Pure numbers


def test_water_fill_caps_then_shares_the_rest_equally() -> None:
    # 10 GPUs, caps 2/10/10: the small team stops at 2, the others split 8.
    assert water_fill(10, np.array([2, 10, 10]), np.ones(3)).tolist() == [2, 4, 4]


def test_water_fill_follows_weights() -> None:
    assert water_fill(8, np.array([10, 10, 10]), np.array([1, 1, 2])).tolist() == [2, 2, 4]
    # A weighted team that saturates gives its rest to the others, in their ratio.
    assert water_fill(9, np.array([1, 10, 10]), np.array([4, 1, 2])).tolist() == [1, 8 / 3, 16 / 3]


def test_water_fill_gives_every_cap_when_capacity_suffices() -> None:
    assert water_fill(100, np.array([3, 5]), np.array([1, 9])).tolist() == [3, 5]
    assert water_fill(0, np.array([3, 5]), np.ones(2)).tolist() == [0, 0]


def test_fairshare_factor_is_slurms_classic_formula() -> None:
    assert fairshare_factor(np.zeros(2), np.ones(2)).tolist() == [1, 1]
    # Team 0 used everything with half the shares: 2^(-1/0.5) = 1/4; team 1 used nothing: 1.
    assert fairshare_factor(np.array([10.0, 0.0]), np.ones(2)).tolist() == [0.25, 1.0]
    # Usage exactly proportional to shares: both 1/2.
    assert fairshare_factor(np.array([30.0, 10.0]), np.array([3.0, 1.0])).tolist() == [0.5, 0.5]


def test_entitlement_is_nominal_first_then_water_filled() -> None:
    # 16 GPUs, both want 16, team 0 has nominal 4: 4 first, the 12 left split 6/6 -> 10 and 6.
    got = entitlements(16, np.array([16, 16]), np.array([4, 0]), np.full(2, UNLIMITED), np.ones(2), np.zeros(2))
    assert got.tolist() == [10, 6]


def test_entitlement_respects_borrowing_limit_and_demand() -> None:
    # Team 0 may hold at most 5 (nominal 4 + borrowing 1); team 1 wants only 3.
    got = entitlements(16, np.array([16, 3]), np.array([4, 0]), np.array([5, UNLIMITED]), np.ones(2), np.zeros(2))
    assert got.tolist() == [5, 3]


def test_entitlement_is_lowered_by_past_usage() -> None:
    # Equal weights, team 0 did all the past work: factors 1/4 and 1, so 12 GPUs split 2.4 / 9.6.
    got = entitlements(12, np.array([12, 12]), np.zeros(2), np.full(2, UNLIMITED), np.ones(2), np.array([100.0, 0]))
    assert np.allclose(got, [2.4, 9.6])


def test_jain_index() -> None:
    assert jain([1, 1, 1]) == 1.0
    assert jain([1, 0, 0]) == pytest.approx(1 / 3)
    assert jain([1, 2]) == pytest.approx(9 / 10)
    assert jain([]) is None and jain([0, 0]) is None


def test_usage_decays_with_half_life() -> None:
    req = PlacementRequest.model_validate({
        "cluster": {"nodes": [_node("n1")]},
        "teams": [{"name": "a", "usage_gpu_h": 100, "usage_at": "2026-12-01T00:00:00Z", "usage_half_life_h": 24},
                  {"name": "b", "usage_gpu_h": 100}],
        "policy": {"now": "2026-12-03T00:00:00Z"},
    })
    now = req.planning_time()
    assert decayed_usage(req.teams[0], now) == pytest.approx(25.0)  # two half-lives
    assert decayed_usage(req.teams[1], now) == 100.0  # already decayed by the caller


# ---------------------------------------------------------------------------------------------
# Wire format

BASE: dict[str, Any] = {
    "cluster": {"pools": [{"name": "od"}], "nodes": [_node("n1", pool="od"), _node("n2", model=A100)],
                "running": [_run("r1", "vision", "n1", [0, 1])]},
    "jobs": [_job("j1", "research", 4, submitted_at="2026-12-01T08:00:00")],
    "teams": [{"name": "research", "weight": 2.0, "quota": {"gpus": {"nominal": 8, "borrowing_limit": 4}}},
              {"name": "vision", "quota": {"flavors": [{"gpu_model": A100, "gpus": {"nominal": 8}}]}}],
}


def _errors(mutate: Any) -> list[tuple[tuple[Any, ...], str]]:
    d = copy.deepcopy(BASE)
    mutate(d)
    with pytest.raises(ValidationError) as info:
        PlacementRequest.model_validate(d)
    return [(tuple(e["loc"]), e["msg"]) for e in info.value.errors()]


def test_base_request_with_teams_is_valid_and_times_are_utc() -> None:
    req = PlacementRequest.model_validate(copy.deepcopy(BASE))
    assert req.teams[0].quota is not None and req.teams[0].quota.gpus is not None
    assert req.teams[0].quota.gpus.borrowing_limit == 4
    assert req.jobs[0].submitted_at == datetime(2026, 12, 1, 8, tzinfo=timezone.utc)
    # No policy.now: the latest time the request mentions.
    assert req.planning_time() == datetime(2026, 12, 1, 8, tzinfo=timezone.utc)


@pytest.mark.parametrize(("mutate", "loc", "words"), [
    (lambda d: d["jobs"][0].update(team="ghost"), ("jobs", 0, "team"), "unknown team 'ghost' (declared: research"),
    (lambda d: d["jobs"][0].pop("team"), ("jobs", 0, "team"), "teams are declared, so every job names one"),
    (lambda d: d["cluster"]["running"][0].update(team="nobody"), ("cluster", "running", 0, "team"), "unknown team"),
    (lambda d: d["teams"][0]["quota"]["gpus"].update(nominal=-1), ("teams", 0, "quota", "gpus", "nominal"),
     "greater than or equal to 0"),
    (lambda d: d["teams"][0]["quota"]["gpus"].update(nominal=2.5), ("teams", 0, "quota", "gpus", "nominal"),
     "fractional part"),
    (lambda d: d["teams"][0]["quota"]["gpus"].update(borrowing_limit=float("inf")),
     ("teams", 0, "quota", "gpus", "borrowing_limit"), "finite"),
    (lambda d: d["teams"][0]["quota"].update(cpu={"nominal": -4}), ("teams", 0, "quota", "cpu", "nominal"),
     "greater than or equal to 0"),
    (lambda d: d["teams"][0]["quota"].update(cpu={"nominal": 4, "burst": 2}), ("teams", 0, "quota", "cpu", "burst"),
     "Extra inputs"),
    (lambda d: d["teams"][0]["quota"].update(memory_gib={"nominal": 1e12}),
     ("teams", 0, "quota", "memory_gib", "nominal"), "less than or equal"),
    (lambda d: d["teams"][0]["quota"].update(memory_gib={"nominal": 64, "lending_limit": float("nan")}),
     ("teams", 0, "quota", "memory_gib", "lending_limit"), "finite"),
    (lambda d: d["teams"][1]["quota"]["flavors"].append({"gpu_model": H100}),
     ("teams", 1, "quota", "flavors", 1, "gpus"), "at least one of gpus, cpu and memory_gib"),
    (lambda d: d["teams"][1]["quota"]["flavors"].append({"gpu_model": H100, "cpu": {"nominal": -1}}),
     ("teams", 1, "quota", "flavors", 1, "cpu", "nominal"), "greater than or equal to 0"),
    (lambda d: d["teams"][1]["quota"]["flavors"].append({"gpus": {"nominal": 1}}),
     ("teams", 1, "quota", "flavors", 1, "pool"), "names a pool, a gpu_model or both"),
    (lambda d: d["teams"][1]["quota"]["flavors"].append({"gpu_model": A100, "gpus": {"nominal": 1}}),
     ("teams", 1, "quota", "flavors", 1), "duplicate flavor"),
    (lambda d: d["teams"][1]["quota"]["flavors"].append({"pool": "spot", "gpus": {"nominal": 1}}),
     ("teams", 1, "quota", "flavors", 1, "pool"), "unknown pool 'spot' (known: od)"),
    (lambda d: d["teams"][0].update(usage_half_life_h=24), ("teams", 0, "usage_half_life_h"), "needs usage_at"),
    (lambda d: (d["teams"][0].update(usage_at="2026-12-02T00:00:00Z"),
                d.update(policy={"now": "2026-12-01T00:00:00Z"})),
     ("teams", 0, "usage_at"), "after policy.now"),
    (lambda d: d.update(policy={"min_runtime_s": -1}), ("policy", "min_runtime_s"), "greater than or equal to 0"),
    (lambda d: d.update(policy={"weights": {"fairness": -1}}), ("policy", "weights", "fairness"), "greater than"),
])
def test_bad_team_input_names_the_field(mutate: Any, loc: tuple[Any, ...], words: str) -> None:
    errors = _errors(mutate)
    assert any(e_loc == loc and words in msg for e_loc, msg in errors), errors


# ---------------------------------------------------------------------------------------------
# Scopes and the ledger


def _problem(d: dict[str, Any]) -> Any:
    return build(PlacementRequest.model_validate(d))


def test_scopes_cluster_wide_and_per_flavor() -> None:
    problem = _problem(copy.deepcopy(BASE))
    index = problem.teams
    assert index is not None and index.names == ("research", "vision")
    cluster, a100 = index.scopes
    assert cluster.label == "" and cluster.mask.tolist() == [True, True]
    # Vision declared no cluster-wide quota: nominal 0, unlimited borrowing, lends nothing (milli-GPU).
    assert cluster.nominal.tolist() == [8000, 0] and cluster.limit.tolist() == [12000, UNLIMITED]
    assert cluster.lendable.tolist() == [8000, 0] and cluster.before.tolist() == [0, 2000]
    assert a100.label == f" on {A100}" and a100.mask.tolist() == [False, True]
    assert a100.nominal.tolist() == [0, 8000] and a100.before.tolist() == [0, 0]
    assert index.resource_scopes == () and index.all_scopes == (cluster, a100)


def test_ledger_names_the_limit_that_blocks() -> None:
    problem = _problem(copy.deepcopy(BASE))
    ledger = QuotaLedger(problem.teams)
    g = 1000  # the ledger counts milli-GPU
    assert ledger.blocker(0, np.array([13 * g, 0])) == (
        "quota: research at 0/12 GPUs (nominal 8 + borrowing limit 4); needs 13 more")
    # Vision (nominal 0) already borrows 2 of research's nominal 8, the cohort's only lendable GPUs.
    assert ledger.blocker(0, np.array([6 * g, 0])) is None
    assert ledger.blocker(0, np.array([7 * g, 0])) == (
        "quota: research at 0/8 GPUs is within its nominal, but other teams hold 2 GPUs above theirs; "
        "taking 7 more needs them preempted (reclaim)")
    ledger.take(0, np.array([6 * g, 0]))
    reason = ledger.blocker(1, np.array([1 * g, 0]))
    assert reason == ("quota: vision at 2 GPUs (nominal 0) needs 1 more, but the cohort's idle nominal is all "
                      "lent out (8/8 GPUs borrowed)")
    # GPUs on A100 nodes count in both scopes: vision's own A100 nominal does not lift the
    # cluster-wide scope, where it declared nothing (nominal 0: it may only borrow there).
    assert ledger.blocker(1, np.array([8 * g, 8 * g])) == reason.replace("1 more", "8 more")
    assert ledger.blocker(0, np.array([0, 0])) is None
    # A fraction of a GPU (a 1g MIG instance: 1/8) reads as one.
    assert ledger.blocker(1, np.array([125, 0])) == reason.replace("1 more", "0.125 more")


def test_lending_limit_keeps_part_of_nominal_private() -> None:
    d = copy.deepcopy(BASE)
    d["teams"][0]["quota"]["gpus"]["lending_limit"] = 3
    problem = _problem(d)
    cluster = problem.teams.scopes[0]
    assert cluster.lendable.tolist() == [3000, 0] and cluster.guaranteed.tolist() == [5000, 0]
    ledger = QuotaLedger(problem.teams)
    # Vision holds 2 (borrowed); 1 more is the last research lends.
    assert ledger.blocker(1, np.array([1000, 0])) is None
    assert ledger.blocker(1, np.array([1001, 0])) is not None


# ---------------------------------------------------------------------------------------------
# The plan report


def test_plan_reports_teams_and_jains_index() -> None:
    # 16 GPUs, equal weights, no quotas. A runs 8 (non-preemptible) and wants 8 more; B wants 8.
    # Entitlements: 8 and 8. The plan gives B its 8: both at 1.0 of entitlement, Jain 1.
    req = {
        "cluster": {"nodes": [_node("n1"), _node("n2")], "running": [_run("a-run", "a", "n1", list(range(8)))]},
        "jobs": [_job("a2", "a", 8, submitted_at="2026-12-01T00:00:00Z"),
                 _job("b1", "b", 8, submitted_at="2026-12-01T01:00:00Z")],
        "teams": [{"name": "a"}, {"name": "b"}],
        "policy": {"deterministic": True, "time_limit_s": 5},
    }
    plan = placement.plan(req)
    assert {a.job for a in plan.assignments} == {"b1"}
    reports = {r.team: r for r in plan.teams}
    assert (reports["a"].gpus_held, reports["a"].gpus_pending, reports["a"].entitlement) == (8, 8, 8.0)
    assert (reports["b"].gpus_held, reports["b"].gpus_placed, reports["b"].entitlement) == (8, 8, 8.0)
    assert reports["a"].dominant_share == 0.5  # 8 of 16 GPUs; CPU and memory unused
    assert reports["a"].nominal is None and reports["b"].share_of_entitlement == 1.0
    assert plan.fairness_index == 1.0


def test_plan_without_teams_has_no_team_report() -> None:
    plan = placement.plan({"cluster": {"nodes": [_node("n1")]}, "jobs": [_job("j", "x", 1)]})
    assert plan.teams == [] and plan.fairness_index is None
    assert math.isclose(plan.objective.terms["priority"], 1.0)


# ---------------------------------------------------------------------------------------------
# The helios benchmark's inputs (the run itself takes minutes: `placement bench teams`)


def test_bench_data_missing_is_a_clear_error(tmp_path: Any) -> None:
    from placement.bench.teams import DataNotFound, main, resolve_data_dir

    with pytest.raises(DataNotFound, match="helios data not found .*Pass --data DIR or set PLACEMENT_DATA"):
        resolve_data_dir(tmp_path)
    assert main(["--data", str(tmp_path)]) == 2


def test_bench_scenario_has_real_quotas_and_validates(monkeypatch: pytest.MonkeyPatch) -> None:
    from placement.bench.teams import DataNotFound, fifo_order, load_helios, resolve_data_dir, scenario

    # The bench reads only --data or $PLACEMENT_DATA; the tests also look beside the checkout.
    beside = Path(__file__).resolve().parents[2] / "shared" / "data"
    if not os.environ.get("PLACEMENT_DATA") and beside.is_dir():
        monkeypatch.setenv("PLACEMENT_DATA", str(beside))
    try:
        root = resolve_data_dir()
    except DataNotFound:
        pytest.skip("helios data not found: set PLACEMENT_DATA to the folder holding helios/ to run this test")
    dates, names, gpus = load_helios(root)
    assert (len(dates), len(names)) == (181, 25) and gpus[0].sum() == 968  # the file's 'total' on 2020-04-01
    data = scenario(names, gpus[0], np.array([1, 2, 4, 8, 16]), seed=1)
    request = PlacementRequest.model_validate(data)
    assert {t.name: t.quota.gpus.nominal for t in request.teams} == {
        n: int(g) for n, g in zip(names, gpus[0], strict=True) if g > 0}
    assert len(request.cluster.nodes) * 8 == 968
    problem = build(request)
    order = fifo_order(problem)
    assert [problem.jobs[j].priority for j in order] == sorted((j.priority for j in problem.jobs), reverse=True)
