"""``placement bench changes``: what a loop's change costs against sending the whole cluster (placement.states).

Why this exists: at ten thousand nodes a scheduler cannot re-send and re-read its cluster every few seconds; it
sends a change against a state the planner keeps. This measures, on a seeded generated cluster
(:func:`placement.generate.generate`), for changes of a given share of the jobs and nodes (that share of
pending jobs withdrawn and as many arriving, that share of nodes relabelled): the bytes sent, the seconds to
read the change and check the request it makes (`States.request`) against the seconds to read and check the
whole request, and the whole call (`States.plan_change`: apply, then `plan()` at the time limit) against the
full call on the same request. One process; numbers only, never asserted.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Any

from placement_models import PlacementRequest

from placement.api import plan
from placement.bench.table import markdown
from placement.generate import generate
from placement.states import States

DESCRIPTION = "Bytes and seconds of a change against a kept state (placement.states) vs the whole request."


def change_of(data: dict[str, Any], share: float, base: str, seed: int) -> dict[str, Any]:
    """`share` of the pending jobs withdrawn and as many new ones (copies, renamed), `share` of the nodes put
    back relabelled: a cycle's worth of arrivals, departures and node updates."""
    rng = random.Random(seed)
    jobs, nodes = data["jobs"], data["cluster"]["nodes"]
    k = max(1, round(share * len(jobs)))
    m = max(1, round(share * len(nodes)))
    return {"base": base, "jobs_removed": [j["name"] for j in rng.sample(jobs, k)],
            "jobs_put": [{**j, "name": f"{j['name']}-next"} for j in rng.sample(jobs, k)],
            "nodes_put": [{**n, "labels": {**n.get("labels", {}), "bench/cycle": "1"}} for n in rng.sample(nodes, m)]}


def measure(nodes: int, jobs_per_node: float, seed: int, shares: list[float], time_limit_s: float,
            solve: bool) -> list[dict[str, Any]]:
    data = generate(nodes, round(nodes * jobs_per_node), seed)
    data["policy"] = {**data.get("policy", {}), "time_limit_s": time_limit_s}
    text = json.dumps(data)
    t0 = time.perf_counter()
    request = PlacementRequest.model_validate(json.loads(text))
    full_read = time.perf_counter() - t0
    full_call = None
    if solve:
        t0 = time.perf_counter()
        plan(PlacementRequest.model_validate(json.loads(text)))
        full_call = time.perf_counter() - t0
    store = States()
    base = store.put(request)
    rows = []
    for share in shares:
        body = json.dumps(change_of(data, share, base, seed))
        t0 = time.perf_counter()
        store.request(json.loads(body))
        read = time.perf_counter() - t0
        call = None
        if solve:
            t0 = time.perf_counter()
            store.plan_change(json.loads(body))
            call = time.perf_counter() - t0
        rows.append({"nodes": nodes, "jobs": len(data["jobs"]), "share": share, "request_mb": len(text) / 1e6,
                     "change_mb": len(body) / 1e6, "full_read_s": full_read, "change_read_s": read,
                     "full_call_s": full_call, "change_call_s": call, "time_limit_s": time_limit_s})
    return rows


def _f(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def format_table(rows: list[dict[str, Any]]) -> str:
    header = ["nodes, jobs", "change", "sent MB (full)", "read + check s (full)", "whole call s (full)"]
    body = [[f"{r['nodes']:,}, {r['jobs']:,}", f"{100 * r['share']:g} %",
             f"{r['change_mb']:.2f} ({r['request_mb']:.1f})", f"{_f(r['change_read_s'])} ({_f(r['full_read_s'])})",
             f"{_f(r['change_call_s'])} ({_f(r['full_call_s'])})"] for r in rows]
    return "\n".join(markdown(header, body, left={"nodes, jobs", "change"}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="placement bench changes", description=DESCRIPTION)
    ap.add_argument("--nodes", type=int, default=12_500, help="nodes of the generated cluster (default 12,500)")
    ap.add_argument("--jobs-per-node", type=float, default=1.5, help="pending jobs per node (default 1.5)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shares", default="0.001,0.01,0.1", help="change sizes as shares of jobs and nodes")
    ap.add_argument("--time-limit", type=float, default=3.0, help="policy.time_limit_s of the calls (default 3)")
    ap.add_argument("--no-solve", action="store_true", help="only bytes and read-and-check times, no plan() calls")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args(argv)
    try:
        shares = [float(s) for s in args.shares.split(",") if s.strip()]
        if not shares or any(not 0 < s <= 1 for s in shares) or args.nodes < 1 or args.jobs_per_node <= 0:
            raise ValueError
    except ValueError:
        print("error: --shares takes shares in (0, 1], --nodes at least 1, --jobs-per-node above 0", file=sys.stderr)
        return 2
    rows = measure(args.nodes, args.jobs_per_node, args.seed, shares, args.time_limit, not args.no_solve)
    print(format_table(rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return 0
