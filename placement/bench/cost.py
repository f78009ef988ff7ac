"""Benchmark: cost per placed GPU-hour with 30 % spot capacity, against two cost-blind peers.

Instances: `placement.generate.generate` (ITP gang sizes, half-full HGX cluster) plus spot nodes
worth 30 % of all GPUs, drawn with a fixed seed from the node table of the Alibaba spot-GPU
trace (alibaba-spot-2026: real models, GPUs and CPUs per node; memory is not in the table and is
set to 8 GiB per CPU). Runtimes come from the Microsoft ITP trace's job durations. **Prices,
reclaim rates, spot_ok and checkpoint intervals are assumptions of this benchmark** (no trace
carries them), fixed here:

* on-demand per GPU-hour: H100 $4.00, A100 $2.50;
* spot (about a third of on-demand): H800→H100 $1.30 at 0.06 reclaims/h, A100/A800 $0.85 at 0.04/h,
  A10 $0.35 at 0.02/h;
* 70 % of jobs are spot_ok; 60 % of jobs checkpoint every 0.5, 1 or 2 hours.

Methods, all scored with the same `placement.pricing` formulas (compute + expected reclaim loss):
* **ours** — `placement.plan` (greedy hint + CP-SAT with the cost terms);
* **all on-demand** — the same solver with spot forbidden to every job (what a cluster without a
  cost model that plays safe does);
* **spot-first (bench's own)** — this bench's own policy, written to stand for Kueue's ordered flavors:
  spot_ok jobs go to spot first (cheapest capacity, no notion of reclaim risk), everything else
  best-fit, in the greedy's priority order;
* **greedy** — `placement.api.greedy_plan`: the product's greedy floor alone (the same screen,
  reservations and peak reserve as `placement.plan`), the plan every solve starts from.

Metric: expected cost per placed GPU-hour (lower is better) beside the GPU-hours and jobs placed,
since a plan can look cheap by placing less or other work. The default queues (2 jobs per node)
fit the free capacity, so every method places (nearly) the same jobs and the metric compares
*where* they run; on oversubscribed queues (`--sizes 32x120`) the methods place different jobs
and the metric mostly reflects which jobs, not their cost.

    python -m placement.bench.cost [--sizes 32x64,64x128] [--seeds 1,2] [--time-limit 8] [--data DIR]
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from placement_models import PlacementRequest

from placement import pricing
from placement import problem as problem_mod
from placement.api import greedy_plan, plan
from placement.baseline import greedy
from placement.generate import generate
from placement.solution import Placement

NODE_TABLE = Path("alibaba-spot-2026") / "node_info_df.csv"
ITP_DIR = Path("itp")
SPOT_SHARE = 0.30
ON_DEMAND = {"h100": 4.00, "a100": 2.50}
#: trace model -> (pool, catalog model, price per GPU-hour, reclaims per hour)
SPOT = {
    "H800": ("spot-h800", "H100-SXM5-80GB", 1.30, 0.06),
    "A100-SXM4-80GB": ("spot-a100", "A100-SXM4-80GB", 0.85, 0.04),
    "A800-SXM4-80GB": ("spot-a100", "A100-SXM4-80GB", 0.85, 0.04),
    "A10": ("spot-a10", "A10-24GB", 0.35, 0.02),
}


class DataMissing(SystemExit):
    pass


#: Where the ITP job durations are published.
ITP_SOURCE = "the Microsoft ITP trace (github.com/microsoft/elasticflow-traces, data/raw-traces.tar.gz)"
#: What the data folder must hold, and where each trace is published.
NEEDED = (f"{NODE_TABLE.as_posix()} from the Alibaba spot-GPU trace (github.com/alibaba/clusterdata, folder "
          f"cluster-trace-v2026-spot-gpu) and {ITP_DIR.as_posix()}/cluster*.csv from {ITP_SOURCE}")


def data_root(data: str | None) -> Path:
    """`--data`, else $PLACEMENT_DATA; the data is not shipped, so without either DataMissing says what is needed."""
    options = [Path(data)] if data else []
    if not options and os.environ.get("PLACEMENT_DATA"):
        options = [Path(os.environ["PLACEMENT_DATA"])]
    if not options:
        raise DataMissing(f"error: no data folder given; pass --data DIR or set PLACEMENT_DATA to a folder holding "
                          f"{NEEDED}")
    for root in options:
        if (root / NODE_TABLE).is_file():
            return root
    raise DataMissing(f"error: spot node table not found ({NODE_TABLE} under {', '.join(map(str, options))}); "
                      f"pass --data DIR or set PLACEMENT_DATA to a folder holding {NEEDED}")


def spot_fleet(root: Path) -> list[tuple[str, int, int]]:
    """(trace model, GPUs, CPUs) of every node of a model we can price, in file order."""
    with (root / NODE_TABLE).open() as f:
        return [(r["gpu_model"], int(r["gpu_capacity_num"]), int(r["cpu_num"])) for r in csv.DictReader(f)
                if r["gpu_model"] in SPOT and int(r["gpu_capacity_num"]) > 0]


def runtimes_h(root: Path) -> np.ndarray:
    out: list[float] = []
    for path in sorted((root / ITP_DIR).glob("cluster*.csv")):
        with path.open() as f:
            out.extend(float(r["duration"]) / 3600 for r in csv.DictReader(f))
    if not out:
        raise DataMissing(f"error: no ITP job durations under {root / ITP_DIR}: cluster*.csv from {ITP_SOURCE}")
    return np.clip(np.array(out), 0.1, 168.0)


def instance(nodes: int, jobs: int, seed: int, fleet: list[tuple[str, int, int]], runtimes: np.ndarray
             ) -> dict[str, Any]:
    req = generate(nodes, jobs, seed)
    rng = np.random.default_rng(10_000 + seed)
    for pool in req["cluster"]["pools"]:
        pool["gpu_hour_price"] = ON_DEMAND[pool["name"]]
    gpus = sum(n["gpus"] for n in req["cluster"]["nodes"])
    target = SPOT_SHARE / (1 - SPOT_SHARE) * gpus  # spot = 30 % of all GPUs after adding it
    pools: dict[str, dict[str, Any]] = {}
    added = 0
    k = 0
    while added < target:
        model, g, cpu = fleet[int(rng.integers(len(fleet)))]
        pool, canonical, price, reclaim = SPOT[model]
        pools.setdefault(pool, {"name": pool, "capacity_type": "spot", "gpu_hour_price": price,
                                "reclaim_rate_per_h": reclaim})
        req["cluster"]["nodes"].append({"name": f"s{k:04d}", "pool": pool, "gpu_model": canonical, "gpus": g,
                                        "cpu": cpu, "memory_gib": 8 * cpu,
                                        "topology": {"rack": f"spot-r{k // 16:02d}"}})
        added += g
        k += 1
    req["cluster"]["pools"].extend(pools[p] for p in sorted(pools))
    for job in req["jobs"]:
        job["expected_runtime_h"] = round(float(runtimes[int(rng.integers(len(runtimes)))]), 3)
        job["spot_ok"] = bool(rng.random() < 0.7)
        if rng.random() < 0.6:
            job["checkpoint_interval_h"] = float(rng.choice([0.5, 1.0, 2.0]))
    return req


def spot_first(request: PlacementRequest) -> Placement:
    """Greedy that sends spot_ok jobs to spot nodes first, then best-fit anywhere for what is left."""
    prob = problem_mod.build(request)
    spot = pricing.node_prices(request.cluster.pools, prob.nodes).spot
    first = replace(prob, tasks=tuple(
        replace(t, candidates=t.candidates[spot[t.candidates]], max_per_node=t.max_per_node[spot[t.candidates]])
        if prob.jobs[t.job].spot_ok else replace(t, candidates=t.candidates[:0], max_per_node=t.max_per_node[:0])
        for t in prob.tasks))
    placed = greedy(first)
    done = placed.placed_jobs(prob)
    rest = replace(prob, tasks=tuple(
        replace(t, candidates=t.candidates[:0], max_per_node=t.max_per_node[:0]) if t.job in done else t
        for t in prob.tasks))
    more = greedy(rest, prob.free - placed.usage(prob))
    for (t, n), k in more.counts.items():
        placed.add(t, n, k)
    return placed


@dataclass
class Score:
    cost: float
    gpu_hours: float
    spot_gpus: int
    gpus: int
    jobs: int

    @property
    def per_gpu_hour(self) -> float:
        return self.cost / self.gpu_hours if self.gpu_hours else float("nan")


def score_placement(request: PlacementRequest, placement: Placement) -> Score:
    prob = problem_mod.build(request)
    pods = [(prob.jobs[prob.tasks[t].job], n, int(prob.tasks[t].demand[0]))
            for (t, n), k in placement.counts.items() for _ in range(k)]
    return _score(pricing.summary(request, prob.nodes, pods, []))


def _score(summary: Any) -> Score:
    if summary is None:
        return Score(0.0, 0.0, 0, 0, 0)
    return Score(summary.total, summary.gpu_hours, sum(j.spot_gpus for j in summary.jobs),
                 sum(j.gpus for j in summary.jobs), len(summary.jobs))


def run_one(nodes: int, jobs: int, seed: int, fleet: list[tuple[str, int, int]], runtimes: np.ndarray,
            time_limit: float, cost_weight: float | None = None) -> dict[str, Any]:
    data = instance(nodes, jobs, seed, fleet, runtimes)
    data["policy"].update(time_limit_s=time_limit, workers=2, seed=0)
    if cost_weight is not None:
        data["policy"]["weights"] = {"cost": cost_weight}
    request = PlacementRequest.model_validate(data)
    start = time.perf_counter()
    ours = plan(request)
    ours_s = time.perf_counter() - start
    no_spot = PlacementRequest.model_validate({**data, "jobs": [{**j, "spot_ok": False} for j in data["jobs"]]})
    od = plan(no_spot)
    return {
        "instance": f"{nodes}x{jobs}/s{seed}",
        "ours": _score(ours.cost), "all on-demand": _score(od.cost),
        "spot-first (bench's own)": score_placement(request, spot_first(request)),
        "greedy": _score(greedy_plan(request).cost),
        "model": f"{ours.solver.variables} vars / {ours.solver.constraints} cons, build {ours.solver.build_s:.2f}s, "
                 f"total {ours_s:.1f}s, {ours.solver.winner}",
    }


METHODS = ("ours", "all on-demand", "spot-first (bench's own)", "greedy")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m placement.bench.cost", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="32x64,64x128", help="NODESxJOBS,... (before spot nodes are added)")
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--time-limit", type=float, default=8.0)
    ap.add_argument("--cost-weight", type=float, help="policy.weights.cost (GPU-equivalents per $; default 0.001)")
    ap.add_argument("--data", help="folder holding alibaba-spot-2026/ and itp/ (default $PLACEMENT_DATA)")
    args = ap.parse_args(argv)
    try:
        root = data_root(args.data)
        fleet, runtimes = spot_fleet(root), runtimes_h(root)
    except DataMissing as exc:
        print(exc.code, file=sys.stderr)
        return 2
    print("cost per placed GPU-hour ($) [GPU-hours placed, jobs placed, spot GPUs/GPUs]")
    print(f"{'instance':<14}" + "".join(f"{m:>32}" for m in METHODS) + "  model")
    totals = {m: [0.0, 0.0] for m in METHODS}
    for size in args.sizes.split(","):
        nodes, jobs = (int(x) for x in size.lower().split("x"))
        for seed in (int(s) for s in args.seeds.split(",")):
            row = run_one(nodes, jobs, seed, fleet, runtimes, args.time_limit, args.cost_weight)
            cells = []
            for m in METHODS:
                s: Score = row[m]
                totals[m][0] += s.cost
                totals[m][1] += s.gpu_hours
                cells.append(f"{s.per_gpu_hour:.3f} [{s.gpu_hours:,.0f}, {s.jobs}, {s.spot_gpus}/{s.gpus}]")
            print(f"{row['instance']:<14}" + "".join(f"{c:>32}" for c in cells) + f"  {row['model']}", flush=True)
    pooled = "".join(f"{(c / h if h else float('nan')):>32.3f}" for c, h in totals.values())
    print(f"{'pooled':<14}{pooled}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
