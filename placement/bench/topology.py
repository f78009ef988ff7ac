"""`placement bench topology`: NVL72 domains and HGX racks, the solver against the topology-aware greedy.

Why: every peer scheduler (Volcano, Kueue, KAI) places topology greedily, one gang at a time, and their users
report gangs split across domains and small jobs scattered over NVL72 racks until no empty rack
is left. This bench measures exactly that on seeded synthetic clusters, for the plan
`placement.plan` returns and for the greedy alone (`placement.api.greedy_plan`, Kueue's BestFit: the
fullest domain that fits, the hint and fallback of every solve):

* placed GPUs, and GPUs of topology gangs placed;
* gangs inside one domain: multi-node gangs inside one NVLink domain / one rack;
* empty domains left: NVL72 domains and racks whose GPUs are all still free after the plan;
* verify's statistics (`placement.verify.topology_report`): share of ≤8-GPU gangs inside one
  NVLink domain, mean domains per multi-node gang.

Cluster: `nvl72` GB200 NVL72 racks (18 trays × 4 GPUs, one NVLink domain per rack) and `racks`
HGX H100 racks (16 nodes × 8 GPUs), four racks to a block. Running work fills about 40 % of the
GPUs but leaves a quarter of the racks untouched. The queue: many 1-4 GPU jobs without topology
(where scattering hurts), 2-tray jobs (half with `preferred: nvlink_domain`), NVL72 gangs of
8-18 trays with `required: nvlink_domain`, tensor-parallel jobs sliced into 2-tray groups per
NVLink domain (preferring few domains), and HGX gangs with `required: rack` or `preferred: rack`.
Numbers only; nothing here asserts timings.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from placement_models import PlacementRequest

from placement.api import greedy_plan, plan
from placement.verify import topology_report, verify

TRAYS = 18  # compute trays per NVL72 rack
TRAY_GPUS = 4
HGX_NODES = 16  # nodes per HGX rack
HGX_GPUS = 8
RACKS_PER_BLOCK = 4
GB200 = {"gpu_model": "GB200-186GB", "gpus": TRAY_GPUS, "cpu": 144, "memory_gib": 960}
H100 = {"gpu_model": "H100-SXM5-80GB", "gpus": HGX_GPUS, "cpu": 192, "memory_gib": 2048}


def generate(nvl72: int, racks: int, jobs: int, seed: int) -> dict[str, Any]:
    """A seeded request: `nvl72` NVL72 racks, `racks` HGX racks, `jobs` pending jobs."""
    rng = np.random.default_rng(seed)
    nodes: list[dict[str, Any]] = []
    for d in range(nvl72):
        for t in range(TRAYS):
            nodes.append({"name": f"gb{d:02d}-{t:02d}", **GB200, "topology": {
                "nvlink": "nvswitch", "nvlink_domain": f"clique.{d:02d}", "rack": f"nvl{d:02d}",
                "block": f"gb-b{d // RACKS_PER_BLOCK}"}})
    for r in range(racks):
        for i in range(HGX_NODES):
            nodes.append({"name": f"hx{r:02d}-{i:02d}", **H100, "topology": {
                "nvlink": "nvswitch", "rack": f"hx{r:02d}", "block": f"hx-b{r // RACKS_PER_BLOCK}"}})
    return {
        "api_version": "placement/v1",
        "cluster": {"nodes": nodes, "running": _running(rng, nvl72, racks)},
        "jobs": [_job(rng, i) for i in range(jobs)],
        "policy": {"time_limit_s": 10, "workers": 2, "seed": 0},
    }


def _running(rng: np.random.Generator, nvl72: int, racks: int) -> list[dict[str, Any]]:
    """About 40 % of GPUs busy; a quarter of the racks of each kind (at least one) left untouched."""
    out: list[dict[str, Any]] = []
    for prefix, count, per, gpus in (("gb", nvl72, TRAYS, TRAY_GPUS), ("hx", racks, HGX_NODES, HGX_GPUS)):
        idle = set(rng.choice(count, size=max(1, count // 4), replace=False).tolist()) if count > 1 else set()
        for r in range(count):
            if r in idle:
                continue
            for i in range(per):
                used = int(rng.choice([0, 0, 1, 2, gpus // 2, gpus], p=[0.25, 0.15, 0.2, 0.15, 0.1, 0.15]))
                if used:
                    out.append({"job": f"run-{prefix}{r:02d}-{i:02d}", "priority": 0, "pods": [
                        {"task": "w", "node": f"{prefix}{r:02d}-{i:02d}", "gpus": list(range(used))}]})
    return out


def _job(rng: np.random.Generator, i: int) -> dict[str, Any]:
    kind = rng.choice(["small", "pair", "nvl", "slice", "rack", "prefer"], p=[0.5, 0.1, 0.1, 0.1, 0.1, 0.1])
    priority = int(rng.choice([0, 10, 50], p=[0.6, 0.3, 0.1]))
    job: dict[str, Any] = {"name": f"{kind}-{i:04d}", "priority": priority}
    if kind == "small":
        gpus = int(rng.choice([1, 2, 4], p=[0.6, 0.25, 0.15]))
        job["tasks"] = [{"name": "main", "gpus": gpus, "cpu": 8 * gpus, "memory_gib": 64 * gpus}]
        return job
    if kind == "pair":  # 8 GPUs on two trays; half of them say nothing about topology
        job["tasks"] = [{"name": "worker", "replicas": 2, "gpus": TRAY_GPUS, "cpu": 64, "memory_gib": 512,
                         "node_selector": {"placement/gpu-model": GB200["gpu_model"]}}]
        if rng.random() < 0.5:
            job["topology"] = {"preferred": "nvlink_domain"}
        return job
    if kind in ("nvl", "slice"):
        trays = int(rng.choice([8, 12, 16, 18])) if kind == "nvl" else 2 * int(rng.integers(2, 7))
        job["tasks"] = [{"name": "worker", "replicas": trays, "gpus": TRAY_GPUS, "cpu": 64, "memory_gib": 512,
                         "node_selector": {"placement/gpu-model": GB200["gpu_model"]}}]
        job["topology"] = ({"required": "nvlink_domain"} if kind == "nvl" else
                           {"slice": {"size": 2, "required": "nvlink_domain"}, "preferred": "nvlink_domain"})
        return job
    nodes = int(rng.choice([2, 4, 8]))
    job["tasks"] = [{"name": "worker", "replicas": nodes, "gpus": HGX_GPUS, "cpu": 96, "memory_gib": 1024,
                     "node_selector": {"placement/gpu-model": H100["gpu_model"]}}]
    job["topology"] = {"required": "rack"} if kind == "rack" else {"preferred": "rack"}
    return job


def measure(request: PlacementRequest, result: Any) -> dict[str, Any]:
    """Placed GPUs, topology gangs, gangs in one domain and empty domains of one plan."""
    report = topology_report(request, result)
    jobs = {j.name: j for j in request.jobs}
    placed = {a.job for a in result.assignments}
    gangs = [jobs[name] for name in placed if jobs[name].topology is not None]
    return {
        "gpus": sum(len(a.gpus) for a in result.assignments),
        "gang_gpus": sum(len(a.gpus) for a in result.assignments if jobs[a.job].topology is not None),
        "gangs": len(gangs),
        "multi_node": report["multi_node_gangs"],
        "in_one_nvlink": report["multi_node_in_one"].get("nvlink_domain"),
        "in_one_rack": report["multi_node_in_one"].get("rack"),
        "empty_nvl72": report["empty_domains"].get("nvlink_domain"),
        "empty_racks": report["empty_domains"].get("rack"),
        "small_in_nvlink": report["small_in_one_nvlink_share"],
        "racks_per_gang": report["domains_per_multi_node_gang"].get("rack"),
        "violations": len(verify(request, result)),
    }


def run_one(name: str, data: dict[str, Any], time_limit: float, workers: int, deterministic: bool) -> dict[str, Any]:
    data = dict(data)
    data["policy"] = {**data.get("policy", {}), "time_limit_s": time_limit, "workers": workers,
                      "deterministic": deterministic}
    request = PlacementRequest.model_validate(data)
    solved = plan(request)
    s = solved.solver
    return {
        "instance": name, "nodes": len(request.cluster.nodes), "jobs": len(request.jobs),
        "variables": s.variables, "constraints": s.constraints, "build_s": s.build_s, "wall_s": s.wall_s,
        "status": solved.status, "gap_pct": None if s.gap is None else round(100 * s.gap, 3),
        "winner": s.winner, "objective": solved.objective.total,
        "greedy_objective": s.baseline_objective,
        "solver": measure(request, solved), "greedy": measure(request, greedy_plan(request)),
    }


ROWS = ("gpus", "gang_gpus", "gangs", "multi_node", "in_one_nvlink", "in_one_rack", "empty_nvl72",
        "empty_racks", "small_in_nvlink", "racks_per_gang", "violations")


def table(rows: list[dict[str, Any]]) -> str:
    lines = []
    for r in rows:
        lines.append(f"{r['instance']}: {r['nodes']} nodes, {r['jobs']} jobs, {r['variables']} vars, "
                     f"{r['constraints']} cons, build {r['build_s']} s, wall {r['wall_s']} s, {r['status']} "
                     f"(gap {r['gap_pct']} %), "
                     f"winner {r['winner']}, objective {r['objective']} vs greedy {r['greedy_objective']}")
        lines.append(f"  {'metric':<16}{'solver':>10}{'greedy':>10}")
        lines += [f"  {k:<16}{r['solver'][k]!s:>10}{r['greedy'][k]!s:>10}" for k in ROWS]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="placement bench topology", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="4x4,8x8", help="NVL72 racks x HGX racks, comma-separated (default 4x4,8x8)")
    ap.add_argument("--jobs-per-rack", type=float, default=12.0, help="pending jobs per rack of either kind")
    ap.add_argument("--seeds", default="1,2", help="comma-separated seeds")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--json", help="also write the rows as JSON here")
    args = ap.parse_args(argv)
    rows = []
    for size in args.sizes.split(","):
        nvl, hgx = (int(x) for x in size.split("x"))
        for seed in (int(s) for s in args.seeds.split(",")):
            jobs = max(1, round(args.jobs_per_rack * (nvl + hgx)))
            name = f"topo-{nvl}nvl-{hgx}hgx-{jobs}j-s{seed}"
            rows.append(run_one(name, generate(nvl, hgx, jobs, seed), args.time_limit, args.workers,
                                args.deterministic))
            print(table(rows[-1:]), file=sys.stderr)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
