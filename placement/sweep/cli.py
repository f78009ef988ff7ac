"""``placement sweep REQUEST --grid ...``: the face of the sweep (also ``python -m placement.sweep``).

Why this exists: argument parsing, progress lines, the table, the JSON and the plots stay apart from what
produces the numbers (placement.sweep.run), and ``register`` lets the main command line add ``sweep``
without importing the solver, the simulator or Ray until a sweep actually runs.

Exit codes: 0 every point ran; 1 some points failed after their retry (the table and JSON say which and
why, the others are all there); 2 bad input (an ``error:`` line names the field); 130 interrupted
(Ctrl-C: what has not finished is cancelled, remote Ray tasks included).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from placement.executor import EXECUTOR_HELP

DESCRIPTION = "Sweep a grid of what-if changes: solve every point (or simulate a trace on it), compare, plot."


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("request", help="base request file (.json or .yaml)")
    ap.add_argument("--grid", "-g", action="append", required=True, metavar="FILE|KEY=V1,V2",
                    help="a grid file (axes and/or points) or an axis shortcut such as add_nodes.h100-spot=0,4,8, "
                    "price.h100-spot=0.9,1.3, policy.weights.cost=0,0.1; repeat to multiply axes")
    ap.add_argument("--executor", default="local", help=EXECUTOR_HELP)
    ap.add_argument("--workers", type=int, default=None,
                    help="points at a time: local processes, or the CPUs of a Ray runtime started here "
                    "(default: cores ÷ --solver-workers)")
    ap.add_argument("--solver-workers", type=int, default=None,
                    help="CP-SAT workers per point (sets policy.workers; default: the request's)")
    ap.add_argument("--time-limit", type=float, help="seconds per solve (overrides policy.time_limit_s)")
    ap.add_argument("--deterministic", action="store_true",
                    help="reproducible solves: every point's result is the same on every executor")
    ap.add_argument("--trace", default=None,
                    help="simulate each point over a trace instead of one solve: generated:JOBS[:SEED[:HOURS]], "
                    "a CSV (job_id,submission_time,duration,num_gpu), or itp:clusterNN[:A-B] / openb:VARIANT "
                    "with --data")
    ap.add_argument("--data", type=Path, default=None, help="data folder for itp:/openb: traces (or $PLACEMENT_DATA)")
    ap.add_argument("--limit-jobs", type=int, default=None, help="replay only the trace's first N jobs")
    ap.add_argument("--cycle-s", type=float, default=60.0, help="trace mode: seconds between plans (default 60)")
    ap.add_argument("--estimates", default="exact", choices=("exact", "noisy", "none"),
                    help="trace mode: runtime estimates the optimizer sees (default exact)")
    ap.add_argument("--checkpoint-h", type=float, default=1.0, help="trace mode: hours between checkpoints")
    ap.add_argument("--reclaim-down-h", type=float, default=1.0, help="trace mode: hours a reclaimed spot node is down")
    ap.add_argument("--seed", type=int, default=0, help="trace mode: seed of reclaims and noisy estimates")
    ap.add_argument("--json", type=Path, default=None, metavar="OUT", help="write every point as JSON here")
    ap.add_argument("--plots", type=Path, default=None, metavar="DIR",
                    help="PNG plots here: cost against mean wait (or unplaced GPUs) with the Pareto front, "
                    "utilisation against spot share (needs matplotlib: gpu-placement-planner[report])")
    ap.add_argument("--list", action="store_true", help="print the points and their changes, solve nothing")
    ap.add_argument("--quiet", "-q", action="store_true", help="no progress lines")


def register(subparsers: Any) -> None:
    """Add ``sweep`` to a command line's subparsers; nothing heavy is imported until it runs."""
    ap = subparsers.add_parser("sweep", help="a grid of what-if changes, solved or simulated over a trace, "
                               "locally or on Ray; table, JSON, plots, Pareto front", description=DESCRIPTION)
    add_arguments(ap)
    ap.set_defaults(func=run)


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _base(args: argparse.Namespace) -> dict[str, Any]:
    """The base request as JSON data with the command line's policy overrides, validated (ValidationError)."""
    from placement_models import PlacementRequest

    from placement.io import load_document
    from placement.whatif_cli import with_options

    data = with_options(load_document(args.request), args.time_limit, args.deterministic, args.solver_workers)
    return PlacementRequest.model_validate(data).model_dump(mode="json")


def _progress(quiet: bool) -> Any:
    t0 = time.perf_counter()

    def line(point: dict[str, Any], finished: int, total: int) -> None:
        if quiet:
            return
        width = len(str(total))
        if point["ok"]:
            what = f"ok in {point.get('seconds', 0):.1f} s"
            if point.get("attempts", 1) > 1:
                what += f" (after a retry: {point['attempts']} attempts)"
        else:
            what = f"FAILED after {point['attempts']} attempts: {point['error']}"
        print(f"[{finished:>{width}}/{total}] {point['name']}: {what}  ({time.perf_counter() - t0:.0f} s elapsed)",
              file=sys.stderr, flush=True)

    return line


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from placement.executor import ExecutorError, make_executor
    from placement.io import DocumentError
    from placement.sweep.grid import GridError, load_grid
    from placement.sweep.trace import TraceError, TraceOptions, load_trace, unsimulated

    try:
        base = _base(args)
        points = load_grid(args.grid).points()
        trace = None
        if args.trace is not None:
            for p in points:
                kind = unsimulated(p.changes)
                if kind is not None:
                    raise GridError(f"point {p.name}: trace mode cannot simulate a {kind} change (trace jobs name "
                                    "no team and take whole GPUs); sweep it without --trace")
            trace = load_trace(args.trace, args.data, args.limit_jobs)
        options = TraceOptions(cycle_s=args.cycle_s, estimates=args.estimates, checkpoint_h=args.checkpoint_h,
                               reclaim_down_h=args.reclaim_down_h, seed=args.seed)
        if args.cycle_s <= 0:
            raise GridError(f"--cycle-s must be positive, got {args.cycle_s:g}")
        if args.workers is not None and args.workers < 1:
            raise GridError(f"--workers must be at least 1, got {args.workers}")
    except ValidationError as exc:
        from placement_models import format_errors

        print("error: invalid request:", file=sys.stderr)
        for line in format_errors(exc):
            print(f"  {line}", file=sys.stderr)
        return 2
    except (GridError, TraceError, DocumentError, OSError) as exc:
        return _error(str(exc))

    if args.list:
        for i, p in enumerate(points):
            print(f"{i}\t{p.name}\t{json.dumps(p.changes)}")
        return 0

    solver_workers = int(base.get("policy", {}).get("workers", 1))
    workers = args.workers or max(1, (os.cpu_count() or 1) // solver_workers)
    workers = min(workers, len(points)) if args.executor == "local" else workers
    try:
        executor = make_executor(args.executor, workers, cpus_per_task=solver_workers)
    except ExecutorError as exc:
        return _error(str(exc))

    from placement.sweep.run import render_table, sweep

    print(f"sweep: {len(points)} points, {'trace ' + args.trace if trace is not None else 'one solve each'}, "
          f"on {executor.label} ({executor.workers} at a time, {solver_workers} CP-SAT workers each)",
          file=sys.stderr, flush=True)
    finished = {"n": 0}
    progress = _progress(args.quiet)

    def on_done(point: dict[str, Any], done: int, total: int) -> None:
        finished["n"] = done
        progress(point, done, total)

    try:
        with executor:
            result = sweep(base, points, executor, trace=trace, options=options if trace is not None else None,
                           on_done=on_done)
    except KeyboardInterrupt:
        print(f"interrupted: {finished['n']} of {len(points)} points finished; the rest were cancelled",
              file=sys.stderr, flush=True)
        return 130
    result.meta = {"request": str(args.request), "trace": args.trace, "jobs": None if trace is None else len(trace),
                   "workers": executor.workers, "solver_workers": solver_workers}

    print(render_table(result))
    print(f"{len(result.points) - len(result.failed)} of {len(result.points)} points in {result.wall_s:.1f} s on "
          f"{result.executor}; * = Pareto front over cluster cost/h and "
          f"{'mean wait' if result.mode == 'trace' else 'unplaced GPU demand'}")
    if args.json is not None:
        args.json.write_text(json.dumps(result.to_dict(), indent=1) + "\n")
        print(f"every point written to {args.json}")
    if args.plots is not None:
        try:
            from placement.sweep.plots import write_plots

            for path in write_plots(result, args.plots):
                print(f"plot written to {path}")
        except ImportError:
            print("plots skipped: matplotlib is not installed (pip install 'gpu-placement-planner[report]')")
    return 1 if result.failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="placement sweep", description=DESCRIPTION)
    add_arguments(ap)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
