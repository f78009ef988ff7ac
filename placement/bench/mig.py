"""GPUs used for a MIG inference mix: exact packing with re-partitioning vs first-fit templates.

The mix: fractional pods of the Alibaba openb trace (num_gpu 1, 0 < gpu_milli < 1000), a seeded
sample, each rounded up to the smallest H100-80GB MIG profile with at least its share of the
compute slices (g = ceil(milli × 7 / 1000): 1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb, else 7g.80gb).
The trace carries no MIG layouts: the cluster starts with every GPU whole and idle (an
assumption, stated in the output). Peers:

* **first-fit templates** (what a mig-parted config per node and the device plugin's exact
  resource names give, Volcano-style): every GPU opened is partitioned with one template
  (`all-balanced` = 2×1g + 2g + 3g, `all-1g` = 7×1g); a pod takes the first free instance of its
  exact profile, else opens a new GPU; a pod whose profile the template lacks gets a whole GPU.
* **ours, greedy**: placement.baseline with re-partitioning (the hint), and **ours, CP-SAT**: the
  full pipeline (`placement.plan`, deterministic), which also minimises changed GPUs.

GPUs used = GPUs holding at least one pod. The lower bound is ceil(memory slices / 8).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from placement import catalog

MODEL = "H100-SXM5-80GB"
#: compute slices -> H100 profile holding them (5 and 6 slices exist only as the whole 7g)
BY_SLICES = {1: "1g.10gb", 2: "2g.20gb", 3: "3g.40gb", 4: "4g.40gb", 5: "7g.80gb", 6: "7g.80gb", 7: "7g.80gb"}
GPUS_PER_NODE = 8


def profile_for_milli(milli: int) -> str:
    """Round a GPU fraction (thousandths) up to the H100 profile with at least that share of compute."""
    return BY_SLICES[max(1, math.ceil(milli * 7 / 1000 - 1e-9))]


def load_mix(n: int, seed: int, trace: str = "default", data: str | None = None,
             max_milli: int = 999) -> list[str]:
    """A seeded sample of `n` fractional openb pods (gpu_milli ≤ max_milli), as H100 MIG profiles."""
    from placement.bench.openb import load_trace

    pods = [p for p in load_trace(trace, data).pods if p.num_gpu == 1 and 0 < p.gpu_milli <= max_milli]
    rng = random.Random(seed)
    rng.shuffle(pods)
    return [profile_for_milli(p.gpu_milli) for p in pods[:n]]


def first_fit(profiles: list[str], template: str) -> dict[str, int]:
    """GPUs a first-fit-into-template policy opens, pods in arrival order."""
    geo = catalog.mig_geometry(MODEL)
    assert geo is not None
    counts = geo.templates[template]
    gpus: list[Counter[str]] = []  # free instances per opened GPU
    whole = 0
    for p in profiles:
        if p not in counts:
            whole += 1
            continue
        for free in gpus:
            if free[p] > 0:
                free[p] -= 1
                break
        else:
            gpus.append(Counter(counts))
            gpus[-1][p] -= 1
    return {"gpus": len(gpus) + whole, "partitioned": len(gpus), "whole": whole}


def lower_bound(profiles: list[str]) -> int:
    geo = catalog.mig_geometry(MODEL)
    assert geo is not None
    slices = {p.name: p.memory_slices for p in geo.profiles}
    return math.ceil(sum(slices[p] for p in profiles) / geo.memory_slices)


def request(profiles: list[str], time_limit_s: float, nodes: int | None = None) -> dict[str, Any]:
    """One job per profile (min_available 1: the solver may place any number of its pods), on idle H100 nodes."""
    mix = Counter(profiles)
    n_nodes = nodes or max(1, math.ceil(lower_bound(profiles) * 1.5 / GPUS_PER_NODE))
    return {
        "cluster": {"nodes": [{"name": f"h{i:03d}", "gpu_model": MODEL, "gpus": GPUS_PER_NODE, "cpu": 224,
                               "memory_gib": 2048} for i in range(n_nodes)]},
        "jobs": [{"name": f"serve-{p}", "min_available": 1,
                  "tasks": [{"name": "server", "replicas": k, "mig_profile": p}]} for p, k in sorted(mix.items())],
        "policy": {"allow_mig_changes": True, "deterministic": True, "time_limit_s": time_limit_s, "workers": 2},
    }


def ours(profiles: list[str], time_limit_s: float) -> dict[str, Any]:
    from placement_models import PlacementRequest

    from placement import plan
    from placement import problem as problem_mod
    from placement.baseline import greedy

    req = request(profiles, time_limit_s)
    start = time.perf_counter()
    greedy_plan = greedy(problem_mod.build(PlacementRequest.model_validate(req)))
    greedy_s = time.perf_counter() - start
    start = time.perf_counter()
    p = plan(req)
    used = {(a.node, a.mig.gpu) for a in p.assignments if a.mig is not None}
    return {
        "gpus": len(used), "placed": len(p.assignments), "greedy_gpus": len(greedy_plan.mig_layouts),
        "greedy_placed": sum(greedy_plan.counts.values()), "greedy_s": round(greedy_s, 3),
        "wall_s": round(time.perf_counter() - start, 3), "build_s": p.solver.build_s, "status": p.status,
        "winner": p.solver.winner, "variables": p.solver.variables, "constraints": p.solver.constraints,
        "nodes": len(req["cluster"]["nodes"]),
    }


def run(n: int, seed: int, trace: str, data: str | None, max_milli: int, time_limit_s: float) -> dict[str, Any]:
    profiles = load_mix(n, seed, trace, data, max_milli)
    out: dict[str, Any] = {
        "trace": trace, "seed": seed, "pods": len(profiles), "max_milli": max_milli,
        "mix": dict(sorted(Counter(profiles).items())), "lower_bound": lower_bound(profiles),
        "all-balanced": first_fit(profiles, "all-balanced"), "all-1g": first_fit(profiles, "all-1g"),
        "ours": ours(profiles, time_limit_s),
    }
    best = out["ours"]["gpus"]
    for peer in ("all-balanced", "all-1g"):
        out[peer]["ours_saves_pct"] = round(100 * (1 - best / out[peer]["gpus"]), 1) if out[peer]["gpus"] else 0.0
    return out


def render(r: dict[str, Any]) -> str:
    o = r["ours"]
    lines = [
        f"openb '{r['trace']}', {r['pods']} fractional pods (gpu_milli ≤ {r['max_milli']}), seed {r['seed']}, "
        f"as {MODEL} MIG profiles: {', '.join(f'{k}×{v}' for k, v in r['mix'].items())}",
        "assumption: every GPU starts whole and idle (the trace has no MIG layouts)",
        f"{'policy':<28}{'GPUs used':>10}  notes",
        f"{'lower bound (slices / 8)':<28}{r['lower_bound']:>10}",
        f"{'ours, CP-SAT':<28}{o['gpus']:>10}  {o['placed']} pods placed, {o['status']}, winner {o['winner']}, "
        f"{o['variables']} vars / {o['constraints']} constraints, build {o['build_s']} s, wall {o['wall_s']} s, "
        f"{o['nodes']} nodes offered",
        f"{'ours, greedy (the hint)':<28}{o['greedy_gpus']:>10}  {o['greedy_placed']} pods placed, {o['greedy_s']} s",
    ]
    for peer in ("all-balanced", "all-1g"):
        x = r[peer]
        lines.append(f"{'first-fit ' + peer:<28}{x['gpus']:>10}  {x['partitioned']} partitioned + {x['whole']} whole "
                     f"(profiles the template lacks); ours uses {x['ours_saves_pct']} % fewer")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="placement bench mig", description=__doc__.split("\n")[0])
    ap.add_argument("--data", help="folder holding the openb CSVs (default: $PLACEMENT_DATA)")
    ap.add_argument("--trace", default="default", help="openb pod list (default, gpushare100, ...)")
    ap.add_argument("--pods", type=int, default=300)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--max-milli", type=int, default=999, help="keep pods with gpu_milli ≤ this (e.g. 500)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="CP-SAT deterministic time budget")
    ap.add_argument("--json", help="also write the numbers here")
    args = ap.parse_args(argv)
    from placement.bench.openb.trace import NODE_FILE, POD_FILE_PREFIX, DataNotFound

    try:
        result = run(args.pods, args.seed, args.trace, args.data, args.max_milli, args.time_limit)
    except DataNotFound as exc:
        pods = args.trace if args.trace.endswith(".csv") else f"{POD_FILE_PREFIX}{args.trace}.csv"
        print(f"error: {exc} (this bench reads {NODE_FILE} and {pods})", file=sys.stderr)
        return 2
    print(render(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
