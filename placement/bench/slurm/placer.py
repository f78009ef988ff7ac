"""The placer the bench runs: `placement slurm run`'s cycle, seeing time as the trace does.

Why not the command as it is: the bench runs the trace `speedup` times faster, and placement's loop
objective counts time in hours (shortest work first by 1 / (1 + expected hours), alignment in days,
waits as aging). A 3-hour job replayed 600 times faster runs 18 s, and every job would look equally
short. Slurm's backfill only compares ends with ends, so it is the same at any speed; to give
placement the same footing, each cycle's request is stretched back to trace time around `now`
(waits, elapsed runs and estimates × speedup) before it is planned, and the estimated starts the plan
gives are shrunk back before they are written into Comments. Reading, planning (the default preset:
a call carrying time is `completion`; no weights set) and applying are the product's own
(placement.slurm.read, placement.plan, placement.slurm.apply); what a cycle does in wall time
(reading, the solve, the scontrol calls) is not scaled: that latency is part of what is measured.

The reader's policy solves deterministically for 5 units of CP-SAT's deterministic time, so that a
quiet cycle repeats its plan and issues no command. On a loaded 2-core host that took 7-15 s of wall
clock per plan of 200 jobs (1-2.5 trace hours at speedup 600, with freed GPUs idle meanwhile), so the
bench can ask for a wall-clock budget instead (`--time-limit 1 --wall-clock`); what it used is in
its report.

    python -m placement.bench.slurm.placer --speedup K [--interval S] [--poll S] [--time-limit S] [--wall-clock]

Each cycle writes `begin` when it starts and its summary when it ends, so the bench can tell a kill
that landed mid-cycle.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from datetime import datetime
from typing import Any

from placement_models import Plan

from placement.slurm.apply import Outcome, plan_steps, run_steps
from placement.slurm.commands import Slurm, SlurmError
from placement.slurm.loop import Cycle, queue_state, wait
from placement.slurm.read import Options, read


def _stretch(stamp: str | None, now: datetime, k: float) -> str | None:
    if not stamp:
        return stamp
    return (now - (now - datetime.fromisoformat(stamp)) * k).isoformat()


def dilate(request: dict[str, Any], k: float) -> dict[str, Any]:
    """The request as it would read at trace speed: every span back from `now` and every runtime × k."""
    out = copy.deepcopy(request)
    now = datetime.fromisoformat(out["policy"]["now"])
    for entry in [*out["jobs"], *out["cluster"]["running"]]:
        for key in ("submitted_at", "started_at"):
            if key in entry:
                entry[key] = _stretch(entry[key], now, k)
        for key in ("expected_runtime_h", "max_runtime_h"):
            if entry.get(key):
                entry[key] = entry[key] * k
    return out


def shrink_starts(plan: Plan, now: datetime, k: float) -> Plan:
    """The plan's estimated starts back in wall time (what a user of the sped-up cluster would see)."""
    for pend in plan.pending:
        if pend.estimated_start is not None:
            pend.estimated_start = now + (pend.estimated_start - now) / k
    return plan


def cycle(slurm: Slurm, speedup: float, options: Options | None = None,
          took: dict[str, float] | None = None) -> Cycle:
    """One read, plan, apply with the request in trace time; SlurmError as placement.slurm.loop.cycle.
    `took` gets the seconds of each phase (read, plan, apply)."""
    from placement_models import format_errors
    from pydantic import ValidationError

    import placement

    took = {} if took is None else took
    t0 = time.monotonic()
    snap = read(slurm, options)
    took["read"] = time.monotonic() - t0
    if not snap.request["cluster"]["nodes"]:
        if snap.request["jobs"]:
            raise SlurmError("no usable node in the partitions read (all down, drained or none listed)")
        return Cycle(snap, None, Outcome())
    t1 = time.monotonic()
    try:
        plan = placement.plan(dilate(snap.request, speedup))
    except ValidationError as exc:
        raise SlurmError("the cluster as read is not a valid request: " + "; ".join(format_errors(exc))) from None
    now = datetime.fromisoformat(snap.request["policy"]["now"])
    plan = shrink_starts(plan, now, speedup)
    t2 = time.monotonic()
    took["plan"] = t2 - t1
    outcome = run_steps(slurm, plan_steps(snap, plan))
    took["apply"] = time.monotonic() - t2
    return Cycle(snap, plan, outcome)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m placement.bench.slurm.placer",
                                 description="placement slurm run's cycle with the request in trace time")
    ap.add_argument("--speedup", type=float, required=True, help="how much faster than the trace the replay runs")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds from one cycle's start to the next")
    ap.add_argument("--poll", type=float, default=0.0,
                    help="seconds between looks at the queue between cycles; a change starts the next cycle at "
                         "once (default 0: off)")
    ap.add_argument("--cycles", type=int, default=None, help="stop after this many cycles (default: never)")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="policy.time_limit_s of each plan (default: the reader's, 5)")
    ap.add_argument("--wall-clock", action="store_true",
                    help="policy.deterministic false: the time limit in wall seconds (default: the reader's, "
                         "deterministic)")
    ap.add_argument("--no-pin", action="store_true",
                    help="ask Slurm for a GPU count on the chosen nodes instead of pinning the chosen indices")
    args = ap.parse_args(argv)
    policy: dict[str, Any] = {}
    if args.time_limit is not None:
        policy["time_limit_s"] = args.time_limit
    if args.wall_clock:
        policy["deterministic"] = False
    options = Options(policy=policy, pin_gpus=not args.no_pin)
    slurm = Slurm()
    done = 0
    while args.cycles is None or done < args.cycles:
        began = time.monotonic()
        seen = queue_state(slurm) if args.poll > 0 else None
        print(f"begin {time.time():.3f}", file=sys.stderr, flush=True)
        phases: dict[str, float] = {}
        try:
            result = cycle(slurm, args.speedup, options, phases)
            line = result.summary() if result.plan is not None or result.outcome.commands else "idle"
        except SlurmError as exc:
            line = f"error: {exc}"
        took = time.monotonic() - began
        split = " ".join(f"{k}={v:.2f}" for k, v in phases.items())
        print(f"end {time.time():.3f} {took:.2f}s {split} {line}", file=sys.stderr, flush=True)
        done += 1
        wait(slurm, seen, until=began + args.interval, poll_s=args.poll or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
