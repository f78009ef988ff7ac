"""`topology.bandwidth` recomputed from the GPUs a plan gives each pod, against the best set of its size."""

from __future__ import annotations

from typing import Any

import pytest
from placement_models import PlacementRequest

import placement
from placement.topology import bandwidth_shortfall, gpu_graph
from placement.verify import verify


def _request(nvlink: str = "hybrid-cube-mesh") -> dict[str, Any]:
    return {"cluster": {"nodes": [{"name": "dgx1", "gpu_model": "V100-SXM2-32GB", "gpus": 8, "cpu": 64,
                                   "memory_gib": 512, "topology": {"nvlink": nvlink}}]},
            "jobs": [{"name": "quad", "tasks": [{"name": "w", "gpus": 4}]}],
            "policy": {"deterministic": True, "time_limit_s": 5, "workers": 1}}


def _with_gpus(plan: dict[str, Any], gpus: list[int], term: float) -> dict[str, Any]:
    out = {**plan, "assignments": [{**plan["assignments"][0], "gpus": gpus}]}
    terms = {**plan["objective"]["terms"]}
    old = terms.get("topology.bandwidth", 0.0)
    terms["topology.bandwidth"] = term
    out["objective"] = {**plan["objective"], "terms": terms, "total": plan["objective"]["total"] - old + term}
    return out


def test_the_planners_best_quad_has_no_shortfall() -> None:
    request = _request()
    plan = placement.plan(request).model_dump(mode="json")
    assert plan["objective"]["terms"]["topology.bandwidth"] == 0.0
    assert verify(request, plan) == []


def test_a_worse_quad_must_report_its_shortfall() -> None:
    request = _request()
    plan = placement.plan(request).model_dump(mode="json")
    worse = [0, 1, 6, 7]  # pairs 0-6, 1-6, 0-7, 1-7 meet over the CPU interconnect on a DGX-1
    loss = bandwidth_shortfall(gpu_graph("hybrid-cube-mesh", 8, "V100-SXM2-32GB"), worse)
    assert loss > 0.1
    weight = PlacementRequest.model_validate(request).policy.weights.topology
    found = verify(request, _with_gpus(plan, worse, 0.0))  # claims the ideal set's 0
    assert any("term 'topology.bandwidth'" in line for line in found)
    assert verify(request, _with_gpus(plan, worse, round(-weight * loss, 6))) == []


@pytest.mark.parametrize("nvlink", ["nvswitch", "pcie"])
def test_nodes_whose_pairs_are_alike_carry_no_term(nvlink: str) -> None:
    request = _request(nvlink)
    request["cluster"]["nodes"][0]["gpu_model"] = "H100-SXM5-80GB"
    plan = placement.plan(request).model_dump(mode="json")
    assert "topology.bandwidth" not in plan["objective"]["terms"]
    assert verify(request, plan) == []
    found = verify(request, _with_gpus(plan, [0, 1, 6, 7], -0.5))
    assert any("term 'topology.bandwidth'" in line for line in found)
