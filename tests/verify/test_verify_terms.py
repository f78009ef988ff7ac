"""Each term's checker on its own, on a tiny hand-made request and plan whose value is worked out by hand."""

from __future__ import annotations

from typing import Any

from placement_models import PlacementRequest, Plan

from placement.verify.context import Context, Expected
from placement.verify.cost import check_provisioning_term, check_reclaim_risk_term
from placement.verify.fairness import check_aging_term, check_fairness_term
from placement.verify.fragmentation import check_fragmentation_term
from placement.verify.mig import check_reconfigure_term
from placement.verify.nominal import check_quota_term
from placement.verify.priority import check_priority_term, tiers
from placement.verify.stability import check_stability_term
from placement.verify.turnaround import check_turnaround_term


def _node(name: str, pool: str | None = None) -> dict[str, Any]:
    return {"name": name, "gpus": 8, "gpu_model": "H100-SXM5-80GB", "cpu": 64, "memory_gib": 512,
            **({"pool": pool} if pool else {})}


def _ctx(jobs: list[dict[str, Any]], assignments: list[dict[str, Any]], *, policy: dict[str, Any] | None = None,
         running: list[dict[str, Any]] | None = None, extra: dict[str, Any] | None = None,
         plan: dict[str, Any] | None = None) -> Context:
    request = PlacementRequest.model_validate({
        "cluster": {"nodes": [_node("n0"), _node("n1")], "running": running or [], **(extra or {})},
        "jobs": jobs, "policy": {"now": "2025-01-10T00:00:00Z", **(policy or {})}})
    return Context.build(request, Plan.model_validate({"status": "feasible", "assignments": assignments,
                                                       **(plan or {})}))


def _pods(job: str, node: str, count: int, gpus_each: int) -> list[dict[str, Any]]:
    return [{"job": job, "task": "w", "pod": i, "node": node, "gpus": list(range(i * gpus_each, (i + 1) * gpus_each))}
            for i in range(count)]


def _one(found: list[Expected] | None) -> float:
    assert found is not None and len(found) == 1 and found[0].low == found[0].high
    return found[0].low


JOBS = [{"name": "hi", "priority": 10, "tasks": [{"name": "w", "gpus": 2, "replicas": 2}]},
        {"name": "lo", "priority": 0, "tasks": [{"name": "w", "gpus": 1, "replicas": 3}]}]


def test_strict_weights_by_hand() -> None:
    # asked: lo 3 GPUs, hi 4; margin = 7 × (1 + 1 + 30 × 0.1 + 0.5) = 38.5; w_hi = (1 × 3 + 38.5) / 2 = 20.75
    ctx = _ctx(JOBS, _pods("hi", "n0", 2, 2) + _pods("lo", "n1", 1, 1))
    [tier] = tiers(ctx) or []
    assert tier.weights == {0: 1.0, 10: 20.75} and not tier.capped
    # placed: hi 4 GPUs × 20.75 + lo 1 GPU × 1
    assert _one(check_priority_term(ctx)) == 84.0


def test_weighted_levels_by_hand() -> None:
    ctx = _ctx(JOBS, _pods("hi", "n0", 2, 2), policy={"priority_mode": "weighted"})
    assert _one(check_priority_term(ctx)) == 40.0  # 4 GPUs × 10


def test_fragmentation_counts_whole_free_nodes_broken() -> None:
    running = [{"job": "r", "pods": [{"task": "w", "node": "n1", "gpus": [0]}]}]
    ctx = _ctx(JOBS, _pods("hi", "n0", 2, 2) + [{"job": "lo", "task": "w", "pod": 0, "node": "n1", "gpus": [1]}],
               running=running)
    assert _one(check_fragmentation_term(ctx)) == -0.1  # n0 was whole and free; n1 already held a GPU


def test_aging_and_turnaround_by_hand() -> None:
    jobs = [{"name": "old", "submitted_at": "2025-01-08T00:00:00Z", "expected_runtime_h": 3,
             "tasks": [{"name": "w", "gpus": 2}]}]
    ctx = _ctx(jobs, _pods("old", "n0", 1, 2), policy={"weights": {"turnaround": 1.0}})
    assert abs(_one(check_aging_term(ctx)) - 0.4) < 1e-12  # 2 GPUs × 2 days × 0.1
    assert _one(check_turnaround_term(ctx)) == 0.25  # 1 / (1 + 3)


def test_stability_keeps_pods_on_their_previous_node() -> None:
    previous = {"status": "feasible", "assignments": _pods("lo", "n0", 2, 1)}
    ctx = _ctx(JOBS, _pods("lo", "n0", 1, 1) + [{"job": "lo", "task": "w", "pod": 1, "node": "n1", "gpus": [0]}],
               policy={"previous_plan": previous})
    assert _one(check_stability_term(ctx)) == 0.2  # one pod of one GPU kept


def test_fairness_fills_quarters_of_the_entitlement() -> None:
    jobs = [{"name": "a", "team": "t", "tasks": [{"name": "w", "gpus": 1, "replicas": 6}]}]
    ctx = _ctx(jobs, _pods("a", "n0", 6, 1), extra={}, plan={"teams": [
        {"team": "t", "weight": 1, "gpus_held": 6, "entitlement": 8, "dominant_share": 0.3}]})
    request = PlacementRequest.model_validate({**ctx.request.model_dump(mode="json"), "teams": [{"name": "t"}]})
    ctx = Context.build(request, ctx.plan)
    # quarters of 8 GPUs: 2 at 1, 2 at ¾, 2 at ½ (6 held) = 4.5
    assert _one(check_fairness_term(ctx)) == 4.5


def test_quota_counts_work_within_nominal() -> None:
    jobs = [{"name": "a", "team": "t", "priority": 0, "tasks": [{"name": "w", "gpus": 2}]},
            {"name": "b", "team": "t", "priority": 0, "tasks": [{"name": "w", "gpus": 2}]}]
    request = PlacementRequest.model_validate({
        "cluster": {"nodes": [_node("n0"), _node("n1")]}, "jobs": jobs,
        "teams": [{"name": "t", "quota": {"gpus": {"nominal": 3}}}], "policy": {"now": "2025-01-10T00:00:00Z"}})
    assignments = _pods("a", "n0", 1, 2) + [{"job": "b", "task": "w", "pod": 0, "node": "n1", "gpus": [0, 1]}]
    ctx = Context.build(request, Plan.model_validate({"status": "feasible", "assignments": assignments}))
    [tier] = tiers(ctx) or []
    # a fits the nominal 3 (2 GPUs); b would take the team to 4: only a counts, at its bonus per GPU
    assert abs(_one(check_quota_term(ctx)) - tier.bonus[0] * 2) < 1e-9


def test_reclaim_risk_and_provisioning_by_hand() -> None:
    pools = [{"name": "s", "capacity_type": "spot", "gpu_hour_price": 2.0, "reclaim_rate_per_h": 0.0},
             {"name": "p", "gpu_hour_price": 1.0, "provisionable": {"max_nodes": 1, "min_billing_h": 2, "node": {
                 "gpus": 8, "gpu_model": "H100-SXM5-80GB", "cpu": 64, "memory_gib": 512}}}]
    jobs = [{"name": "a", "tasks": [{"name": "w", "gpus": 1}], "spot_ok": True}]
    request = PlacementRequest.model_validate({
        "cluster": {"nodes": [_node("n0", "s")], "pools": pools}, "jobs": jobs})
    offered = request.cluster.pools[1].provisionable.node_names("p")[0]  # type: ignore[union-attr]
    p = Plan.model_validate({"status": "feasible", "provisioned": [{"pool": "p", "nodes": [offered]}],
                             "assignments": [{"job": "a", "task": "w", "pod": 0, "node": offered, "gpus": [0]}]})
    ctx = Context.build(request, p)
    assert _one(check_reclaim_risk_term(ctx)) == 0.0  # nothing on spot
    assert abs(_one(check_provisioning_term(ctx)) - (-0.01 * 1.0 * 8 * 2)) < 1e-12


def test_mig_reconfigure_counts_changed_gpus() -> None:
    ctx = _ctx(JOBS, [], plan={"mig_changes": [{"node": "n0", "gpu": 0, "layout": []},
                                                {"node": "n0", "gpu": 1, "layout": []}]})
    assert abs(_one(check_reconfigure_term(ctx)) + 0.2) < 1e-12
