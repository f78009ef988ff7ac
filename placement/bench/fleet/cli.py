"""``placement bench fleet``: Gavel's job mix on a mixed fleet, heterogeneity-agnostic vs Gavel vs our optimizer.

Why this exists: a face for the fleet bench kept apart from what produces the numbers (the cycles simulator,
the generator, the policies), so argument parsing and printing never leak into them. The same seeded jobs
run under every policy; ``--uniform`` runs them on an all-V100 fleet of the same size, where placement by
model cannot matter, as a control.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from placement.bench.cycles.sim import InvalidDecision, SimConfig, simulate
from placement.bench.cycles.state import SchedulerPolicy
from placement.bench.fleet.mix import Fleet, generate, mean_gpu_hours, mixed_fleet, rate_for_load, uniform_fleet
from placement.bench.fleet.report import add_ratio, format_table, metrics

DESCRIPTION = ("Gavel's job mix (OSDI'20) on a fleet of a third each V100, P100 and K80 nodes: mean/p50/p90 job "
               "completion, utilisation and Jain's fairness for a heterogeneity-agnostic call of our optimizer, a "
               "Gavel-like max-min fairness scheduler, and our optimizer told each job's speeds.")


@dataclass(frozen=True)
class Options:
    """What every policy factory may use."""

    time_limit_s: float = 1.0
    seed: int = 0


def _agnostic(fleet: Fleet, opt: Options) -> SchedulerPolicy:
    from placement.bench.fleet.optimizer import FleetOurs  # the solver's import only when asked for

    return FleetOurs(fleet, speeds=False, name="agnostic", time_limit_s=opt.time_limit_s, seed=opt.seed)


def _ours(fleet: Fleet, opt: Options) -> SchedulerPolicy:
    from placement.bench.fleet.optimizer import FleetOurs

    return FleetOurs(fleet, speeds=True, name="ours", time_limit_s=opt.time_limit_s, seed=opt.seed)


def _agnostic_las(fleet: Fleet, opt: Options) -> SchedulerPolicy:
    from placement.bench.fleet.optimizer import FleetOurs

    return FleetOurs(fleet, speeds=False, name="agnostic-las", time_limit_s=opt.time_limit_s, seed=opt.seed,
                     preset="las")


def _ours_completion(fleet: Fleet, opt: Options) -> SchedulerPolicy:
    from placement.bench.fleet.optimizer import FleetOurs

    return FleetOurs(fleet, speeds=True, name="ours-completion", time_limit_s=opt.time_limit_s, seed=opt.seed,
                     preset="completion")


def _gavel(fleet: Fleet, opt: Options) -> SchedulerPolicy:
    from placement.bench.fleet.gavel import GavelLike

    return GavelLike(fleet)


#: name -> factory(fleet, options), in the table's order.
POLICIES: dict[str, Callable[[Fleet, Options], SchedulerPolicy]] = {
    "agnostic": _agnostic,
    "gavel": _gavel,
    "ours": _ours,
    "ours-completion": _ours_completion,
    "agnostic-las": _agnostic_las,
}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="placement bench fleet", description=DESCRIPTION)
    ap.add_argument("--jobs", type=int, default=100, help="jobs to generate (default: 100)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the jobs and of the solver (default: 0)")
    ap.add_argument("--load", type=float, default=1.0,
                    help="offered load in V100 work: arrivals at the rate that asks for this many V100 GPU-hours "
                         f"per fleet GPU-hour (one job is {mean_gpu_hours():.1f} V100 GPU-hours on average; "
                         "default: 1.0)")
    ap.add_argument("--rate", type=float, default=None, help="arrivals per hour instead of --load")
    ap.add_argument("--nodes", type=int, default=12, help="nodes, a multiple of 3 (default: 12)")
    ap.add_argument("--gpus-per-node", type=int, default=4, help="GPUs per node (default: 4)")
    ap.add_argument("--cycle-s", type=float, default=360.0,
                    help="seconds between scheduling rounds (default: 360, Gavel's round)")
    ap.add_argument("--checkpoint-h", type=float, default=None,
                    help="hours of running between checkpoints (default: one round, as Gavel assumes jobs "
                         "checkpoint at round ends)")
    ap.add_argument("--policies", default=",".join(POLICIES), help=f"comma-separated of {','.join(POLICIES)}")
    ap.add_argument("--time-limit", type=float, default=1.0, help="seconds per plan call of our optimizer")
    ap.add_argument("--uniform", action="store_true", help="all nodes V100 (the control)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    return ap


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    """``placement bench fleet``: exit 2 on bad input, 1 if a policy failed (its row says why), else 0."""
    args = _parser().parse_args(argv)
    try:
        names = [p.strip().lower() for p in args.policies.split(",") if p.strip()]
        unknown = [p for p in names if p not in POLICIES]
        if unknown or not names:
            raise ValueError(f"unknown or no policy in --policies: {', '.join(unknown) or '(none)'}; "
                             f"known: {', '.join(POLICIES)}")
        fleet = (uniform_fleet if args.uniform else mixed_fleet)(args.nodes, args.gpus_per_node)
        if args.rate is not None and args.rate <= 0:
            raise ValueError(f"--rate must be positive, got {args.rate:g}")
        rate = args.rate if args.rate is not None else rate_for_load(args.load, fleet.total_gpus)
        mix = generate(args.jobs, args.seed, rate)
        ckpt = args.checkpoint_h if args.checkpoint_h is not None else args.cycle_s / 3600.0
        cfg = SimConfig(nodes=fleet.nodes, gpus_per_node=fleet.gpus_per_node, cycle_s=args.cycle_s,
                        checkpoint_h=ckpt, seed=args.seed, node_models=fleet.node_models)
        widest, narrowest = max(j.gpus for j in mix.jobs), min(fleet.gpus_of(m) for m in fleet.models)
        if widest > narrowest:  # Gavel runs a job on one GPU type, so it could never start
            raise ValueError(f"a job needs {widest} GPUs but the fleet has only {narrowest} of one model; "
                             "give it more --nodes or --gpus-per-node")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    options = Options(time_limit_s=args.time_limit, seed=args.seed)
    rows: list[dict[str, Any]] = []
    failed = False
    for name in names:
        policy = POLICIES[name](fleet, options)
        t0 = time.perf_counter()
        try:
            result = simulate(mix.jobs, policy, cfg)
        except (InvalidDecision, ValueError) as exc:  # a refused decision, or a request the optimizer rejects
            failed = True
            rows.append({"policy": name, "jobs": len(mix.jobs), "error": f"{type(exc).__name__}: {exc}"[:2000]})
            print(f"# {name}: failed: {exc}"[:2000], file=sys.stderr, flush=True)
            continue
        row = metrics(result)
        rows.append(row)
        print(f"# {name}: {row['done']}/{row['jobs']} done, mean JCT {row['jct_mean_h']:.2f} h "
              f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    add_ratio(rows)
    counts = ", ".join(f"{fleet.node_models.count(m)} × {m}" for m in fleet.models)
    print(f"fleet: {counts} nodes of {fleet.gpus_per_node} GPUs; {len(mix.jobs)} jobs of Gavel's mix (seed "
          f"{args.seed}) at {rate:.2f}/h" + (f" (load {args.load:g} in V100 work)" if args.rate is None else "")
          + f"; rounds of {args.cycle_s:g} s, checkpoint every {ckpt:g} h")
    print(format_table(rows))
    if args.json is not None:
        payload = {"fleet": asdict(fleet), "rate_per_h": rate, "load": None if args.rate is not None else args.load,
                   "config": asdict(cfg), "rows": rows}
        args.json.write_text(json.dumps(_json_safe(payload), indent=1))
        print(f"rows written to {args.json}")
    return 1 if failed else 0
