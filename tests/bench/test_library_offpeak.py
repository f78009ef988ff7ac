"""The offpeak family: a plan made in peak hours, with deferrable work, priced pools and a peak reserve."""

from __future__ import annotations

from placement_models import PlacementRequest

from placement.bench import library
from placement.bench.library_offpeak import CLOUD, offpeak_instance


def test_the_request_is_made_in_peak_with_prices_and_deferrable_work() -> None:
    req = PlacementRequest.model_validate(offpeak_instance(16, 1))
    assert req.in_peak and req.policy.off_peak is not None and req.policy.reserve
    pools = {p.name: p for p in req.cluster.pools}
    assert {p.capacity_type for p in pools.values()} >= {"spot", "on-demand"}
    assert pools[CLOUD].provisionable is not None and all(p.gpu_hour_price for p in pools.values())
    assert any(j.deferrable for j in req.jobs) and not all(j.deferrable for j in req.jobs)
    assert all(j.expected_runtime_h for j in req.jobs)


def test_small_instance_defers_in_a_short_solve() -> None:
    from placement.api import plan

    data = library.instance("offpeak", "S")
    data["policy"].update(time_limit_s=1.0, workers=1)
    result = plan(data)
    placed = {a.job for a in result.assignments}
    deferrable = {j["name"] for j in data["jobs"] if j.get("deferrable")}
    assert placed and placed - deferrable  # work that may not wait runs
