"""The ``offpeak`` family of the instance library: peak hours, deferrable batch work and priced capacity.

Why this exists: cost enters the other families only as spot against on-demand for work that runs now.
A plan made in peak hours also decides what waits: deferrable jobs are worth half their value until the
off-peak window opens (``placement/compile/cost.py``: deferral), each pool holds GPUs back for
inference (``policy.reserve``, a hard row per pool), on-demand, spot and cloud capacity carry prices, and
a cloud pool may add nodes billed for a minimum time (provisioning). Every job has an expected runtime,
so the compute cost is GPU-hours × price, and spot work without checkpoints risks its run.

The request is made at :data:`placement.generate.REFERENCE_TIME` (Tuesday 16:00 in Los Angeles): peak,
with off-peak from 22:00 to 06:00 on weeknights and all weekend.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from placement.generate import REFERENCE_TIME, generate

OFF_PEAK: dict[str, Any] = {
    "timezone": "America/Los_Angeles",
    "windows": [
        {"start": "22:00", "end": "06:00", "days": ["mon", "tue", "wed", "thu", "fri"]},
        {"start": "00:00", "end": "00:00", "days": ["sat", "sun"]},
    ],
}
#: Pools: generate's H100 racks split into on-demand and spot, its A100 nodes on-demand, and a cloud pool.
POOLS: dict[str, dict[str, Any]] = {
    "h100": {"capacity_type": "on-demand", "gpu_hour_price": 4.0},
    "h100-spot": {"capacity_type": "spot", "gpu_hour_price": 1.3, "reclaim_rate_per_h": 0.05},
    "a100": {"capacity_type": "on-demand", "gpu_hour_price": 2.2},
}
CLOUD = "h100-cloud"
#: The cloud pool: dearer on-demand H100 nodes the plan may add, billed at least MIN_BILLING_H hours each.
CLOUD_PRICE = 6.0
MIN_BILLING_H = 4.0
#: Share of the pending jobs that may wait for off-peak hours (batch work).
DEFERRABLE = 0.5


def offpeak_instance(n: int, seed: int) -> dict[str, Any]:
    """The request on ``n`` nodes (2n pending jobs) for one seed; deterministic."""
    req = generate(n, 2 * n, seed)
    rng = np.random.default_rng(seed + 1)
    nodes = req["cluster"]["nodes"]
    racks = sorted({nd["topology"]["rack"] for nd in nodes if nd["pool"] == "h100"})
    spot_racks = set(racks[1::3]) if len(racks) > 1 else set()
    for nd in nodes:
        if nd["pool"] == "h100" and (nd["topology"]["rack"] in spot_racks or (not spot_racks and rng.random() < 0.35)):
            nd["pool"] = "h100-spot"
    present = {nd["pool"] for nd in nodes}
    pools = [{"name": p, **POOLS[p]} for p in POOLS if p in present]
    template = {"gpu_model": "H100-SXM5-80GB", "gpus": 8, "cpu": 192, "memory_gib": 2048}
    pools.append({"name": CLOUD, "capacity_type": "on-demand", "gpu_hour_price": CLOUD_PRICE,
                  "provisionable": {"max_nodes": max(1, n // 8), "node": template, "min_billing_h": MIN_BILLING_H}})
    req["cluster"]["pools"] = pools
    models = {"h100": "H100-SXM5-80GB", "a100": "A100-SXM4-80GB"}
    for job in req["jobs"]:
        for task in job["tasks"]:
            pool = task.get("node_selector", {}).pop("placement/pool", None)
            if pool is not None:
                task["node_selector"]["placement/gpu-model"] = models[pool]
        if rng.random() < DEFERRABLE:
            job["deferrable"] = True
        if rng.random() < 0.5:
            job["spot_ok"] = True
            if rng.random() < 0.7:
                job["checkpoint_interval_h"] = float(rng.choice([0.5, 1.0, 2.0]))
        job["expected_runtime_h"] = round(float(np.clip(rng.lognormal(math.log(6), 1.0), 0.5, 96)), 2)
    # GPUs each pool keeps free in peak hours for inference: a node's worth per 16 nodes of the pool
    reserve = {}
    for p in ("h100", "a100"):
        count = sum(1 for nd in nodes if nd["pool"] == p)
        if count:
            reserve[p] = 8 * max(1, count // 16)
    req["policy"] = {"now": REFERENCE_TIME.strftime("%Y-%m-%dT%H:%M:%SZ"), "off_peak": OFF_PEAK, "reserve": reserve}
    return req
