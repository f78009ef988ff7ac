"""``placement bench cycles``: replay a real trace through the scheduler loop under each policy, print the table.

Why this exists: the face of the simulator, kept apart from it so that argument parsing, the table,
the JSON and the matplotlib plot (optional) never leak into what produces the numbers.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from placement.bench.cycles.registry import POLICIES, PolicyOptions, make_policy
from placement.bench.cycles.report import format_table, metrics, plot
from placement.bench.cycles.sim import InvalidDecision, SimConfig, SimResult, simulate
from placement.bench.cycles.state import TraceJob
from placement.bench.cycles.traces import ESTIMATE_MODES, DataNotFound, load, parse_trace, with_estimates
from placement.io import json_safe

DESCRIPTION = ("The scheduler loop over a real trace: arrivals, departures, a decision every cycle; "
               "wait, completion and utilisation per policy.")


def offered_load(jobs: list[TraceJob], gpus: int) -> float:
    """GPU-hours the trace asks for, over what `gpus` GPUs give between its first and last arrival."""
    span = max(j.submit_s for j in jobs) - min(j.submit_s for j in jobs)
    return sum(j.gpus * j.duration_s for j in jobs) / max(1.0, span * gpus)


def nodes_for_load(jobs: list[TraceJob], load: float, gpus_per_node: int) -> int:
    """The fewest nodes whose offered load is at most `load`, and enough for the largest gang."""
    widest = max(j.gpus for j in jobs)
    nodes = math.ceil(offered_load(jobs, gpus_per_node) / load - 1e-9)
    return max(1, nodes, math.ceil(widest / gpus_per_node))


def _names(text: str) -> list[str]:
    return [p.strip().lower() for p in text.split(",") if p.strip()]


def _choices(text: str, known: Iterable[str], option: str, what: str) -> list[str]:
    """The comma-separated names of `option`, each one of `known`, at least one (ValueError naming the option)."""
    names, known = _names(text), list(known)
    for name in names:
        if name not in known:
            raise ValueError(f"unknown {what} {name!r} in {option}; known: {', '.join(known)}")
    if not names:
        raise ValueError(f"{option} names no {what}")
    return names


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="placement bench cycles", description=DESCRIPTION)
    ap.add_argument("--data", type=Path, default=None,
                    help="folder holding itp/ (Microsoft ITP, github.com/microsoft/elasticflow-traces), openb/ "
                    "(Alibaba cluster-trace-gpu-v2023) and helios/<Cluster>/cluster_log.csv (SenseTime Helios, "
                    "github.com/S-Lab-System-Group/HeliosData) (default: $PLACEMENT_DATA)")
    ap.add_argument("--trace", default="itp:cluster04:6000-7999",
                    help="itp:clusterNN[:FIRST-LAST] or helios:CLUSTER[:FIRST-LAST] (rows in submission order, "
                    "inclusive), or openb:VARIANT (default: itp:cluster04:6000-7999)")
    ap.add_argument("--nodes", type=int, default=42, help="identical nodes (default: 42)")
    ap.add_argument("--load", type=float, default=None,
                    help="size the cluster instead of --nodes: the fewest nodes at which the trace's GPU-hours over "
                    "its arrival span make at most this offered load (e.g. 1.5), and never fewer than its "
                    "largest gang needs")
    ap.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default: 8)")
    ap.add_argument("--cycle-s", type=float, default=60.0, help="seconds between scheduling cycles (default: 60)")
    ap.add_argument("--estimates", default="exact",
                    help=f"runtime estimates the policies see, comma-separated to run each: {'|'.join(ESTIMATE_MODES)} "
                    "(default: exact)")
    ap.add_argument("--policies", default=",".join(POLICIES),
                    help=f"comma-separated (default: all: {','.join(POLICIES)})")
    ap.add_argument("--seed", type=int, default=0, help="seed of noisy estimates, spot reclaims and policies")
    ap.add_argument("--checkpoint-h", type=float, default=1.0,
                    help="hours of running between checkpoints of a job; a preemption loses the work since the "
                    "last one (default: 1)")
    ap.add_argument("--spot-nodes", type=int, default=0, help="how many nodes are spot (the last ones; default: 0)")
    ap.add_argument("--reclaim-per-h", type=float, default=0.05,
                    help="reclaims per hour per spot node that is up, Poisson (default: 0.05)")
    ap.add_argument("--reclaim-down-h", type=float, default=1.0, help="hours a reclaimed node stays down (default: 1)")
    ap.add_argument("--time-limit", type=float, default=1.0,
                    help="seconds per plan call for our optimizer (default: 1.0)")
    ap.add_argument("--limit-jobs", type=int, default=None, help="replay only the first N jobs (a quick run)")
    ap.add_argument("--plot", type=Path, default=None,
                    help="write a PNG here: jobs waiting and GPU utilisation over time (needs matplotlib)")
    ap.add_argument("--json", type=Path, default=None, help="also write the metrics as JSON here")
    ap.add_argument("--deep-queue", type=int, default=None, metavar="N",
                    help="instead: time our plan call on the strict-FIFO peer's first loop states with at least N "
                         "jobs queued (placement/bench/cycles/deep.py)")
    return ap


def main(argv: list[str] | None = None) -> int:
    """``placement bench cycles``: simulate each (estimates, policy) pair and print the table.

    Exit 2 on bad input (no data folder, bad --trace, unknown policy); 1 if a policy made an invalid
    decision (its row says which); 0 otherwise."""
    args = _parser().parse_args(argv)
    try:
        spec = parse_trace(args.trace)
        modes = _choices(args.estimates, ESTIMATE_MODES, "--estimates", "mode")
        policies = _choices(args.policies, POLICIES, "--policies", "policy")
        cfg = SimConfig(nodes=args.nodes, gpus_per_node=args.gpus_per_node, cycle_s=args.cycle_s,
                        checkpoint_h=args.checkpoint_h, spot_nodes=args.spot_nodes,
                        reclaim_per_h=args.reclaim_per_h, reclaim_down_h=args.reclaim_down_h, seed=args.seed)
        jobs = load(spec, args.data, limit=args.limit_jobs)
        if args.load is not None:
            if args.load <= 0:
                raise ValueError(f"--load must be positive, got {args.load:g}")
            cfg = replace(cfg, nodes=nodes_for_load(jobs, args.load, args.gpus_per_node))
        if args.deep_queue is not None and args.deep_queue < 1:
            raise ValueError(f"--deep-queue must be at least 1, got {args.deep_queue}")
        options = PolicyOptions(time_limit_s=args.time_limit, seed=args.seed)
        made = {p: make_policy(p, options) for p in policies}  # fail fast on a policy that is not there
    except DataNotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"error: a policy in --policies is not available: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    if args.deep_queue is not None:
        return _deep(args, spec.label, jobs, cfg)
    big = max(j.gpus for j in jobs)
    if big > cfg.total_gpus:
        print(f"warning: a job needs {big} GPUs, more than the {cfg.total_gpus} of the cluster; no run can drain",
              file=sys.stderr)
    rows: list[dict[str, Any]] = []
    results: list[SimResult] = []
    failed = False
    for mode in modes:
        trace = with_estimates(jobs, mode, seed=args.seed)
        for p in policies:
            policy = made.pop(p, None) or make_policy(p, options)
            t0 = time.perf_counter()
            try:
                result = simulate(trace, policy, cfg)
            except InvalidDecision as exc:
                failed = True
                rows.append({"policy": getattr(policy, "name", p), "estimates": mode, "jobs": len(trace),
                             "invalid_decisions": 1, "error": str(exc)})
                print(f"# {p} ({mode}): invalid decision: {exc}", file=sys.stderr, flush=True)
                continue
            result.estimates = mode
            results.append(result)
            row = metrics(result)
            rows.append(row)
            print(f"# {p} ({mode}): {row['done']}/{row['jobs']} done, mean wait {row['wait_mean_h']:.2f} h "
                  f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)

    print(f"cycles: {spec.label}, {len(jobs)} jobs, {cfg.nodes} nodes × {cfg.gpus_per_node} GPUs, "
          f"offered load {offered_load(jobs, cfg.total_gpus):.2f}, cycle {cfg.cycle_s:g} s, "
          f"checkpoint every {cfg.checkpoint_h:g} h"
          + (f", {cfg.spot_nodes} spot nodes ({cfg.reclaim_per_h:g} reclaims/h, down {cfg.reclaim_down_h:g} h)"
             if cfg.spot_nodes else ""))
    print(format_table(rows))
    if args.json is not None:
        payload = {"trace": spec.label, "config": asdict(cfg) | {"total_gpus": cfg.total_gpus}, "rows": rows}
        args.json.write_text(json.dumps(json_safe(payload), indent=1, default=float))
        print(f"metrics written to {args.json}")
    if args.plot is not None:
        try:
            out = plot(results, args.plot, title=f"{spec.label}: {cfg.nodes} × {cfg.gpus_per_node} GPUs")
            print(f"plot written to {out}")
        except ImportError:
            print("plot skipped: matplotlib is not installed (pip install matplotlib)")
    return 1 if failed else 0


def _deep(args: argparse.Namespace, label: str, jobs: list[TraceJob], cfg: SimConfig) -> int:
    """``--deep-queue N``: our plan call timed on deep-queue loop states (the first estimates mode)."""
    from placement.bench.cycles import deep  # the optimizer's import stays out of the peers-only runs

    mode = _choices(args.estimates, ESTIMATE_MODES, "--estimates", "mode")[0]
    states = deep.deep_states(with_estimates(jobs, mode, seed=args.seed), cfg, args.deep_queue)
    print(f"plan call with a deep queue: {label}, {cfg.nodes} nodes × {cfg.gpus_per_node} GPUs, loop states of "
          f"the strict-FIFO peer with at least {args.deep_queue} jobs queued, {args.time_limit:g} s limit, "
          f"estimates {mode}, {deep.CALLS} calls each")
    print(deep.format_rows(deep.time_calls(states, cfg.gpus_per_node, args.time_limit, args.seed)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
