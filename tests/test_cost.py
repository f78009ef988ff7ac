"""Cost: spot vs on-demand, reclaim risk, peak reserve, off-peak deferral, provisioning.

Costs are hand-computed from the formulas in `placement.pricing`; the plans come from the full
pipeline (`placement.plan`, which verifies every plan) in deterministic mode.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_models import PlacementRequest, Plan
from pydantic import ValidationError

from placement import compile as compiler
from placement import plan, pricing, screen
from placement.verify import verify

H100 = "H100-SXM5-80GB"
POLICY = {"deterministic": True, "time_limit_s": 5, "workers": 1}


def _node(name: str, pool: str, gpus: int = 8, **extra: Any) -> dict[str, Any]:
    return {"name": name, "pool": pool, "gpu_model": H100, "gpus": gpus, "cpu": 192, "memory_gib": 2048, **extra}


def _job(name: str, gpus: int = 8, **extra: Any) -> dict[str, Any]:
    return {"name": name, "tasks": [{"name": "w", "gpus": gpus}], **extra}


OD = {"name": "od", "gpu_hour_price": 4.0}
SPOT = {"name": "spot", "capacity_type": "spot", "gpu_hour_price": 1.3, "reclaim_rate_per_h": 0.05}
TEMPLATE = {"gpu_model": H100, "gpus": 8, "cpu": 192, "memory_gib": 2048}


def _where(p: Plan) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a in p.assignments:
        out.setdefault(a.job, set()).add(a.node)
    return out


def _reasons(p: Plan) -> dict[str, str]:
    return {x.job: x.reason for x in p.pending}


# --------------------------------------------------------------------------------------------
# Spot vs on-demand, hand-computed cost


def test_checkpointing_job_goes_to_spot_and_the_other_to_on_demand_at_hand_computed_cost() -> None:
    req = {"cluster": {"pools": [OD, SPOT], "nodes": [_node("a", "od"), _node("s", "spot")]},
           "jobs": [_job("nockpt", spot_ok=True, expected_runtime_h=48),
                    _job("ckpt", spot_ok=True, checkpoint_interval_h=1.0, expected_runtime_h=48)],
           "policy": POLICY}
    p = plan(req)
    assert _where(p) == {"ckpt": {"s"}, "nockpt": {"a"}}
    # Spot: 1.3 $/GPU-h × 8 GPUs × 48 h; on-demand: 4 × 8 × 48.
    assert p.cost is not None
    jobs = {j.job: j for j in p.cost.jobs}
    assert jobs["ckpt"].compute == pytest.approx(499.2)
    assert jobs["nockpt"].compute == pytest.approx(1536.0)
    assert jobs["nockpt"].reclaim_risk == 0.0
    # Reclaims at λ = 0.05/h, checkpoint every I = 1 h, restart R = 0.1 h: each of the 48 intervals
    # takes e^{λR}(e^{λI} − 1)/λ hours on average.
    lam, interval, restart = 0.05, 1.0, pricing.RESTART_H
    lost = 48 / interval * math.exp(lam * restart) * (math.exp(lam * interval) - 1) / lam - 48
    assert lost == pytest.approx(1.4670, abs=1e-3)
    assert jobs["ckpt"].reclaim_risk == pytest.approx(lost * 1.3 * 8, rel=1e-6)
    # ... which is the familiar first-order λ × T × (I/2 + R) to within 3 %.
    assert lost == pytest.approx(lam * 48 * (interval / 2 + restart), rel=0.03)
    assert p.cost.total == pytest.approx(499.2 + 1536.0 + lost * 1.3 * 8, rel=1e-6)
    assert p.cost.per_hour == pytest.approx(1.3 * 8 + 4.0 * 8)
    assert p.cost.gpu_hours == pytest.approx(2 * 8 * 48)
    # The objective term is the premium over each task's cheapest node (spot here, for both) in
    # dollars × policy.weights.cost (0.01 by default), negated and capped at half the pod's value
    # (8 GPUs → $400): only nockpt pays one, the cap.
    assert p.objective.terms["cost.compute"] == pytest.approx(-min(1536.0 - 499.2, 0.5 * 8 / 0.01) / 100, abs=2e-3)


def test_a_job_without_checkpoints_would_rather_pay_on_demand_than_restart_on_spot() -> None:
    job = PlacementRequest.model_validate(
        {"cluster": {"nodes": [_node("a", None)]}, "jobs": [_job("j", spot_ok=True, expected_runtime_h=48)]}).jobs[0]
    # 48 h with no checkpoint at one reclaim per 20 h: (e^{2.4} − 1)/0.05 ≈ 200 h of running.
    assert pricing.lost_h(job, 0.05) == pytest.approx(math.exp(0.005) * math.expm1(2.4) / 0.05 - 48, rel=1e-9)
    spot = 1.3 * 8 * 48 + float(pricing.reclaim_risk(job, 1.3, 0.05))
    assert spot > 4.0 * 8 * 48


def test_job_without_spot_ok_never_lands_on_spot_even_when_only_spot_is_free() -> None:
    req = {"cluster": {"pools": [OD, SPOT], "nodes": [_node("a", "od"), _node("s", "spot")],
                       "running": [{"job": "r", "pods": [{"task": "w", "node": "a", "gpus": list(range(8))}]}]},
           "jobs": [_job("strict", checkpoint_interval_h=0.5, expected_runtime_h=2)], "policy": POLICY}
    p = plan(req)
    assert not p.assignments
    assert "spot_ok" in _reasons(p)["strict"]


def test_unpriced_request_has_no_cost_block_and_no_cost_terms() -> None:
    p = plan({"cluster": {"pools": [{"name": "od"}], "nodes": [_node("a", "od")]}, "jobs": [_job("j")],
              "policy": POLICY})
    assert p.cost is None
    assert not any(k.startswith("cost.") for k in p.objective.terms)


# --------------------------------------------------------------------------------------------
# Peak: reserve and deferral


def _peak_request(peak: bool) -> dict[str, Any]:
    return {"cluster": {"pools": [OD], "nodes": [_node("a", "od"), _node("b", "od")]},
            "jobs": [_job("train"), _job("offline", deferrable=True)],
            "policy": {**POLICY, "peak": peak, "reserve": {"od": 8}}}


def test_reserve_is_honoured_in_peak_and_released_off_peak() -> None:
    peak = plan(_peak_request(True))
    assert set(_where(peak)) == {"train"}  # 16 free GPUs − 8 reserved leave room for one 8-GPU job
    assert _reasons(peak)["offline"].startswith("deferred to off-peak: pool od holds back 8 GPUs")
    off = plan(_peak_request(False))
    assert set(_where(off)) == {"train", "offline"}
    assert off.objective.terms["deferral"] == pytest.approx(0.05 * 8)  # goes-first bonus, 5 % of 8 GPUs


def test_reserve_blocks_non_deferrable_work_too_with_its_own_reason() -> None:
    req = _peak_request(True)
    req["jobs"] = [_job("a"), _job("b", priority=5)]
    p = plan(req)
    assert set(_where(p)) == {"b"}
    assert _reasons(p)["a"].startswith("pool od holds back 8 GPUs during peak")


def test_off_peak_deferrable_job_goes_first_among_equals_and_waits_behind_them_in_peak() -> None:
    def request(peak: bool) -> dict[str, Any]:
        return {"cluster": {"pools": [OD], "nodes": [_node("a", "od")]},
                "jobs": [_job("online"), _job("offline", deferrable=True)], "policy": {**POLICY, "peak": peak}}

    assert set(_where(plan(request(False)))) == {"offline"}
    peak = plan(request(True))
    assert set(_where(peak)) == {"online"}
    assert _reasons(peak)["offline"].startswith("deferred to off-peak:")


def test_peak_defers_a_deferrable_job_whose_cost_outweighs_half_its_value() -> None:
    # 8 GPUs × $4 × 20 h = $640; at 0.01 per $ that weighs 6.4 GPU-equivalents: more than the
    # 4 a deferrable job is worth in peak (half of 8), less than the 8.4 it is worth off-peak.
    def request(peak: bool) -> dict[str, Any]:
        return {"cluster": {"pools": [OD], "nodes": [_node("a", "od")]},
                "jobs": [_job("offline", deferrable=True, expected_runtime_h=20)],
                "policy": {**POLICY, "peak": peak, "weights": {"cost": 0.01, "fragmentation": 0}}}

    peak = plan(request(True))
    assert not peak.assignments
    assert _reasons(peak)["offline"].startswith("deferred to off-peak: cost: expected 640.00")
    assert set(_where(plan(request(False)))) == {"offline"}


# --------------------------------------------------------------------------------------------
# Provisioning


def _provision_request() -> dict[str, Any]:
    pools = [OD, {"name": "cheap", "gpu_hour_price": 2.0, "provisionable": {"max_nodes": 3, "node": TEMPLATE}},
             {"name": "dear", "gpu_hour_price": 3.0, "provisionable": {"max_nodes": 3, "node": TEMPLATE}}]
    running = [{"job": "r", "pods": [{"task": "w", "node": "a", "gpus": list(range(8))}]}]
    return {"cluster": {"pools": pools, "nodes": [_node("a", "od")], "running": running},
            "jobs": [_job("j1", expected_runtime_h=10), _job("j2", expected_runtime_h=10)], "policy": POLICY}


def test_provisioning_adds_the_cheaper_pool_when_both_fit() -> None:
    p = plan(_provision_request())
    assert set(_where(p)) == {"j1", "j2"}
    assert [(x.pool, len(x.nodes)) for x in p.provisioned] == [("cheap", 2)]
    assert all(n.startswith("cheap/new-") for nodes in _where(p).values() for n in nodes)
    assert p.cost is not None
    # two jobs: 2 $ × 8 × 10 h each; two added nodes billed 1 h minimum: 2 $ × 8 × 1 h each
    assert p.cost.compute == pytest.approx(320.0)
    assert p.cost.provisioning == pytest.approx(32.0)
    assert p.cost.total == pytest.approx(352.0)


def test_provisioning_adds_nothing_when_the_work_is_not_worth_the_price() -> None:
    req = _provision_request()
    req["policy"] = {**POLICY, "weights": {"cost": 0.1}}  # $160 a job now weighs 16 GPU-eq > its 8
    p = plan(req)
    assert not p.assignments and not p.provisioned


# --------------------------------------------------------------------------------------------
# verify: spot, reserve, provisioning rules on hand-written plans


def _verify(req: dict[str, Any], plan_dict: dict[str, Any]) -> list[str]:
    return verify(PlacementRequest.model_validate(req), Plan.model_validate(plan_dict))


def test_verify_spot_rule() -> None:
    req = {"cluster": {"pools": [OD, SPOT], "nodes": [_node("s", "spot")]}, "jobs": [_job("j")]}
    bad = {"status": "feasible", "assignments": [{"job": "j", "task": "w", "pod": 0, "node": "s",
                                                  "gpus": list(range(8))}]}
    assert [v for v in _verify(req, bad) if v.startswith("spot:")] == [
        "spot: pod j/w/0 of job j (not spot_ok) is on spot node s (pool spot)"]
    req["jobs"][0]["spot_ok"] = True
    assert _verify(req, bad) == []


def test_verify_reserve_rule_only_in_peak() -> None:
    req = _peak_request(True)
    both = {"status": "feasible", "assignments": [
        {"job": "train", "task": "w", "pod": 0, "node": "a", "gpus": list(range(8))},
        {"job": "offline", "task": "w", "pod": 0, "node": "b", "gpus": list(range(8))}]}
    assert _verify(req, both) == ["reserve: pool od has 16 free GPUs and must keep 8 during peak; the plan takes 16"]
    req["policy"]["peak"] = False
    assert _verify(req, both) == []


def test_verify_provisioning_rules() -> None:
    req = _provision_request()
    pod = {"job": "j1", "task": "w", "pod": 0, "gpus": list(range(8))}
    ok = {"status": "feasible", "assignments": [{**pod, "node": "cheap/new-2"}],
          "pending": [{"job": "j2", "reason": "r"}], "provisioned": [{"pool": "cheap", "nodes": ["cheap/new-2"]}]}
    assert _verify(req, ok) == []
    unlisted = copy.deepcopy(ok)
    unlisted["provisioned"] = []
    assert _verify(req, unlisted) == ["reference: assignment 0 (pod j1/w/0) names unknown node cheap/new-2",
                                      "gang: job j1 has 0 of 1 required pods"]
    beyond = copy.deepcopy(ok)
    beyond["provisioned"] = [{"pool": "cheap", "nodes": ["cheap/new-2", "cheap/new-3"]}, {"pool": "od", "nodes": []}]
    assert _verify(req, beyond) == ["provisioning: pool cheap offers no node named cheap/new-3",
                                    "provisioning: entry 1 adds nodes to pool od, which is not provisionable"]


# --------------------------------------------------------------------------------------------
# Wire format: new fields validate with paths


@pytest.mark.parametrize(("mutate", "loc", "phrase"), [
    (lambda d: d["cluster"]["pools"][0].update(reclaim_rate_per_h=0.1),
     ("cluster", "pools", 0, "reclaim_rate_per_h"), "only spot pools"),
    (lambda d: d["cluster"]["pools"][1].update(gpu_hour_price=-1),
     ("cluster", "pools", 1, "gpu_hour_price"), "greater than or equal to 0"),
    (lambda d: d["policy"].update(reserve={"nope": 8}), ("policy", "reserve", "nope"), "unknown pool 'nope'"),
    (lambda d: d["jobs"][0].update(checkpoint_interval_h=0), ("jobs", 0, "checkpoint_interval_h"), "greater than 0"),
    (lambda d: d["cluster"]["pools"][0].update(provisionable={"max_nodes": 1, "node": {**TEMPLATE, "gpu_model": None}}),
     ("cluster", "pools", 0, "provisionable", "node", "gpu_model"), "required"),
    (lambda d: d["cluster"]["nodes"].append(_node("od/new-0", "od")) or d["cluster"]["pools"][0].update(
        provisionable={"max_nodes": 1, "node": TEMPLATE}), ("cluster", "pools", 0, "provisionable"), "clash"),
])
def test_new_fields_reject_bad_values_at_their_path(mutate: Any, loc: tuple[Any, ...], phrase: str) -> None:
    d = {"cluster": {"pools": [copy.deepcopy(OD), copy.deepcopy(SPOT)], "nodes": [_node("a", "od")]},
         "jobs": [_job("j")], "policy": {}}
    mutate(d)
    with pytest.raises(ValidationError) as info:
        PlacementRequest.model_validate(d)
    errors = {e["loc"]: e["msg"] for e in info.value.errors()}
    assert loc in errors, errors
    assert phrase in errors[loc]


# --------------------------------------------------------------------------------------------
# Property: whatever the mix, the plan verifies and keeps every hard rule of this concern


@st.composite
def _requests(draw: st.DrawFn) -> dict[str, Any]:
    pools = [dict(OD), dict(SPOT)]
    if draw(st.booleans()):
        pools.append({"name": "cloud", "gpu_hour_price": draw(st.sampled_from([2.0, 5.0])),
                      "provisionable": {"max_nodes": draw(st.integers(1, 2)), "node": TEMPLATE}})
    nodes = [_node(f"n{i}", draw(st.sampled_from(["od", "spot"])), gpus=draw(st.sampled_from([4, 8])))
             for i in range(draw(st.integers(1, 4)))]
    jobs = []
    for i in range(draw(st.integers(1, 6))):
        extra: dict[str, Any] = {"spot_ok": draw(st.booleans()), "deferrable": draw(st.booleans()),
                                 "expected_runtime_h": draw(st.sampled_from([1.0, 8.0, 48.0]))}
        if draw(st.booleans()):
            extra["checkpoint_interval_h"] = draw(st.sampled_from([0.5, 2.0]))
        jobs.append({"name": f"j{i}", "priority": draw(st.integers(0, 2)),
                     "tasks": [{"name": "w", "replicas": draw(st.integers(1, 2)),
                                "gpus": draw(st.sampled_from([1, 2, 4, 8]))}], **extra})
    policy = {"deterministic": True, "time_limit_s": 1, "workers": 1, "peak": draw(st.booleans()),
              "reserve": {"od": draw(st.integers(0, 8)), "spot": draw(st.integers(0, 8))},
              "weights": {"cost": draw(st.sampled_from([0.0, 0.001, 0.05]))}}
    return {"cluster": {"pools": pools, "nodes": nodes}, "jobs": jobs, "policy": policy}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_requests())
def test_any_cost_mix_gives_a_verified_plan_that_keeps_spot_reserve_and_provisioning(req: dict[str, Any]) -> None:
    p = plan(req)  # plan() raises PlanViolation on any broken rule
    request = PlacementRequest.model_validate(req)
    assert verify(request, p) == []
    spot_nodes = {n["name"] for n in req["cluster"]["nodes"] if n["pool"] == "spot"}
    strict = {j["name"] for j in req["jobs"] if not j["spot_ok"]}
    assert not any(a.node in spot_nodes and a.job in strict for a in p.assignments)
    added = {n for x in p.provisioned for n in x.nodes}
    assert {a.node for a in p.assignments} <= {n["name"] for n in req["cluster"]["nodes"]} | added
    if p.cost is not None:
        assert p.cost.total == pytest.approx(p.cost.compute + p.cost.reclaim_risk + p.cost.provisioning, abs=1e-5)


def test_the_premium_is_over_the_cheapest_candidate_whatever_a_trimmed_model_kept() -> None:
    # The cheap node is a candidate the trimmed model dropped: the dear node's premium stays the price gap, so
    # a plan's cost.compute is the same whichever pairs the model kept (and the verifier can derive it).
    data = {"cluster": {"pools": [OD, {"name": "cheap", "gpu_hour_price": 1.0}],
                        "nodes": [_node("dear", "od"), _node("thrifty", "cheap")]},
            "jobs": [_job("j", 8, expected_runtime_h=2.0)], "policy": POLICY}
    problem = screen.build_problem(PlacementRequest.model_validate(data))
    dear = [n.name for n in problem.nodes].index("dear")

    def coefficient(candidates: list[np.ndarray]) -> float:
        ctx = compiler.build(problem, candidates)
        term = ctx.objective.terms["cost.compute"]
        var = ctx.x[0][list(candidates[0]).index(dear)]
        return sum(c for v, c in zip(term.variables, term.coefs, strict=True) if v.index == var.index)

    whole = coefficient([problem.tasks[0].candidates])
    trimmed = coefficient([np.array([dear])])
    assert whole == trimmed == round(-(4.0 - 1.0) * 8 * 2.0 * 0.01 * 1000)  # weights.cost 0.01, SCALE 1000
