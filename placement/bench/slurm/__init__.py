"""`placement bench slurm`: a trace slice replayed into a real Slurm, Slurm's backfill against placement.

    placement bench slurm --trace itp:CLUSTER:A-B [--nodes N] [--speedup K] [--data DIR] [--kills K]
                          [--runs backfill,placement] [--estimates limit|exact] [--json FILE]

Why: every other loop figure comes from our own simulators; here the scheduler is the real slurmctld
(placement.slurm.lab: N simulated 8-GPU nodes on this host), the peer is Slurm's own `sched/backfill`
rather than our emulation of it, and the numbers come from Slurm's own records (records.py). Each run
starts a fresh lab with the same slurm.conf and SchedulerParameters; the only difference is who
decides: `backfill` submits without job_submit.lua's hold and lets Slurm start jobs itself;
`placement` holds every job and runs the placer (placer.py) every `--interval` seconds as a
subprocess, SIGKILLed and started again at `--kills` random moments of the arrival span when asked.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from placement.bench.slurm.records import BIG_GANG, check, metrics, parse_jobcomp, parse_starts
from placement.bench.slurm.replay import ESTIMATES, BenchLab, Placer, Replayed, Submission, replay, submissions

#: The same for both runs. bf_interval=1 and sched_interval=1: Slurm looks every second, as the placer does;
#: bf_resolution=1: backfill's time slots in seconds, not its default minute (10 trace hours at speedup 600).
SCHEDULER_PARAMETERS = "bf_interval=1,bf_resolution=1,sched_interval=1"
RUNS = ("backfill", "placement")


def _placer(lab: BenchLab, speedup: float, interval_s: float, solve: tuple[float, bool] | None,
            pin: bool, poll_s: float = 0.0) -> Placer:
    env = {**lab.env, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    argv = [sys.executable, "-m", "placement.bench.slurm.placer", "--speedup", f"{speedup:g}",
            "--interval", f"{interval_s:g}", "--poll", f"{poll_s:g}"]
    if solve is not None:
        argv += ["--time-limit", f"{solve[0]:g}", *(["--wall-clock"] if solve[1] else [])]
    if not pin:
        argv.append("--no-pin")
    return Placer(argv, env, lab.root / "log" / "placer.log")


def _cycle_seconds(log: Path) -> tuple[list[float], list[float]]:
    """How long each placer cycle took, and its plan call (its `end` lines)."""
    if not log.exists():
        return [], []
    whole, plans = [], []
    for line in log.read_text(errors="replace").splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[0] == "end" and parts[2].endswith("s"):
            whole.append(float(parts[2][:-1]))
            plans += [float(p[5:]) for p in parts[3:6] if p.startswith("plan=")]
    return whole, plans


def kill_moments(count: int, span_s: float, seed: int) -> list[float]:
    """`count` moments spread at random over the arrivals (wall seconds from the start), when the queue is
    busiest and a kill is likeliest to land between a job's update and its release."""
    rng = random.Random(seed)
    return sorted(rng.uniform(1.0, max(2.0, span_s)) for _ in range(count))


def run_one(run: str, subs: list[Submission], *, root: Path, nodes: int, speedup: float, kills: int, seed: int,
            interval_s: float, timeout_s: float, solve: tuple[float, bool] | None = None,
            pin: bool = False, poll_s: float = 0.0) -> dict[str, Any]:
    """One replay in a fresh lab; its row of numbers, checks and settings."""
    lab = BenchLab(root, nodes=nodes, scheduler_parameters=SCHEDULER_PARAMETERS, hold=run == "placement")
    placer = _placer(lab, speedup, interval_s, solve, pin, poll_s) if run == "placement" else None
    arrivals = subs[-1].at_s if subs else 0.0
    kill_at = kill_moments(kills, arrivals, seed) if placer else []
    load_before = os.getloadavg()
    lab.start()
    try:
        print(f"# {run}: {len(subs)} jobs into {nodes} nodes at speedup {speedup:g} ({root})", file=sys.stderr)
        done: Replayed = replay(lab, subs, placer=placer, kill_at=kill_at, timeout_s=timeout_s)
    finally:
        if placer is not None:
            placer.stop()
        lab.stop()
    (root / "submitted.json").write_text(json.dumps({jid: asdict(s) for jid, s in done.ids.items()}))
    records = parse_jobcomp(lab.jobcomp.read_text() if lab.jobcomp.exists() else "")
    asks = {jid: s.ask(speedup) for jid, s in done.ids.items()}
    starts = {}
    for jid in asks:
        out = lab.root / "jobs" / f"{jid}.out"
        starts[jid] = parse_starts(out.read_text(errors="replace")) if out.exists() else []
    checks = check(asks, records, starts)
    row: dict[str, Any] = {"run": run, **metrics(asks, records, speedup, nodes * 8), **checks.as_dict()}
    cycles, plans = _cycle_seconds(lab.root / "log" / "placer.log")
    row.update({
        "finished": done.finished, "wall_s": done.wall_s, "submit_lag_max_s": max(done.lag_s, default=0.0),
        "kills": len(placer.kills) if placer else 0, "kills_mid_cycle": placer.mid_cycle if placer else 0,
        "placer_crashes": placer.crashes if placer else 0, "placer_cycles": len(cycles),
        "cycle_mean_s": sum(cycles) / len(cycles) if cycles else math.nan,
        "cycle_p95_s": sorted(cycles)[int(0.95 * (len(cycles) - 1))] if cycles else math.nan,
        "plan_mean_s": sum(plans) / len(plans) if plans else math.nan,
        "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()],
    })
    return row


COLUMNS = (("run", "run", "s"), ("jobs", "jobs", "d"), ("done once", "completed_once", "d"),
           ("wait mean h", "wait_mean_h", ".2f"), ("wait p50 h", "wait_p50_h", ".2f"),
           ("wait p95 h", "wait_p95_h", ".2f"), ("wait max h", "wait_max_h", ".1f"),
           (f"wait ≥{BIG_GANG} GPUs h", "wait_big_mean_h", ".2f"), ("JCT mean h", "jct_mean_h", ".2f"),
           ("util %", "util_span_pct", ".1f"), ("util run %", "util_run_pct", ".1f"),
           ("invalid starts", "invalid_starts", "d"), ("GPU twice", "gpu_twice", "len"),
           ("kills (mid-cycle)", "kills", "kills"), ("cycle s mean/p95", "cycle_mean_s", "cycle"),
           ("wall min", "wall_s", "min"))


def _cell(row: dict[str, Any], key: str, fmt: str) -> str:
    value = row.get(key)
    if fmt == "len":
        return str(len(value or []))
    if fmt == "kills":
        return f"{row['kills']} ({row['kills_mid_cycle']})" if row.get("placer_cycles") else "—"
    if fmt == "cycle":
        return "—" if math.isnan(row["cycle_mean_s"]) else f"{row['cycle_mean_s']:.2f}/{row['cycle_p95_s']:.2f}"
    if fmt == "min":
        return f"{value / 60:.1f}"
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return format(value, fmt)


def table(rows: list[dict[str, Any]]) -> str:
    """The runs as a markdown table."""
    head = "| " + " | ".join(h for h, _, _ in COLUMNS) + " |"
    rule = "|" + "|".join("---" if f == "s" else "---:" for _, _, f in COLUMNS) + "|"
    body = ["| " + " | ".join(_cell(r, k, f) for _, k, f in COLUMNS) + " |" for r in rows]
    return "\n".join([head, rule, *body])


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="placement bench slurm", description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", required=True, help="itp:CLUSTER:FIRST-LAST (e.g. itp:cluster04:6000-6499)")
    ap.add_argument("--data", default=None, help="folder holding itp/ (default: $PLACEMENT_DATA)")
    ap.add_argument("--nodes", type=int, default=16, help="simulated 8-GPU nodes (default 16)")
    ap.add_argument("--speedup", type=float, default=600.0, help="trace seconds per wall second (default 600)")
    ap.add_argument("--runs", default="backfill,placement", help="comma-separated: backfill, placement")
    ap.add_argument("--kills", type=int, default=0, help="SIGKILL the placer at this many random moments")
    ap.add_argument("--estimates", choices=ESTIMATES, default="limit",
                    help="limit: both see only the time limit (default); exact: placement also gets the runtime")
    ap.add_argument("--interval", type=float, default=1.0, help="most seconds between placer cycles (default 1)")
    ap.add_argument("--poll", type=float, default=0.1,
                    help="seconds between the placer's looks at the queue; a job ending, starting or arriving "
                         "starts its next cycle at once (default 0.1; 0: every --interval only)")
    ap.add_argument("--placer-time-limit", type=float, default=1.0,
                    help="seconds each plan may take (default 1; 0: the reader's own, 5 deterministic units)")
    ap.add_argument("--placer-deterministic", action="store_true",
                    help="the time limit in CP-SAT's deterministic units, as the reader sets it "
                         "(default: wall seconds)")
    ap.add_argument("--pin", action="store_true",
                    help="pin the GPU indices placement chose (default: ask Slurm for the count on the chosen "
                         "nodes; re-typing a job's GPUs on Slurm 22.05 delays its start, see docs/slurm.md)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the kill moments")
    ap.add_argument("--timeout", type=float, default=None, help="wall seconds a run may take (default: from the trace)")
    ap.add_argument("--workdir", default=None, help="keep each run's lab (logs, completion log) here")
    ap.add_argument("--json", default=None, help="write every run's numbers, checks and settings here")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)  # --help and bad options exit here, as every bench's parser does
    from placement.bench.cycles.traces import DataNotFound, load
    from placement.slurm.lab import missing

    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    if not runs or any(r not in RUNS for r in runs) or args.speedup <= 0 or args.nodes < 1 or args.kills < 0 \
            or not 0 <= args.poll < math.inf:
        print(f"error: --runs from {', '.join(RUNS)}; --speedup, --nodes positive; --kills ≥ 0", file=sys.stderr)
        return 2
    if not args.trace.startswith("itp:"):
        print("error: --trace must be an ITP slice, itp:CLUSTER:FIRST-LAST", file=sys.stderr)
        return 2
    reason = missing()
    if reason:
        print(f"error: {reason}", file=sys.stderr)
        return 2
    try:
        jobs = load(args.trace, args.data)
    except (DataNotFound, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    subs = submissions(jobs, args.speedup, args.estimates)
    too_big = [s.name for s in subs if s.nodes > args.nodes]
    if too_big:
        print(f"error: {len(too_big)} jobs need more than {args.nodes} nodes (e.g. {too_big[0]})", file=sys.stderr)
        return 2
    work = sum(j.gpus * j.duration_s for j in jobs) / (8 * args.nodes)
    timeout = args.timeout or 3 * (max(j.submit_s for j in jobs) + work + max(j.duration_s for j in jobs)) \
        / args.speedup + 120
    solve = None if args.placer_time_limit <= 0 else (args.placer_time_limit, not args.placer_deterministic)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the lab and the placer on the way out
    base = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="bench-slurm-"))
    rows = []
    for run in runs:
        rows.append(run_one(run, subs, root=base / run, nodes=args.nodes, speedup=args.speedup, kills=args.kills,
                            seed=args.seed, interval_s=args.interval, timeout_s=timeout, solve=solve,
                            pin=args.pin, poll_s=args.poll))
        print(table(rows[-1:]), file=sys.stderr)
    settings = {"trace": args.trace, "jobs": len(jobs), "nodes": args.nodes, "gpus_per_node": 8,
                "speedup": args.speedup, "estimates": args.estimates, "scheduler_parameters": SCHEDULER_PARAMETERS,
                "placer_interval_s": args.interval, "placer_poll_s": args.poll,
                "placer_solve": "reader default (5 deterministic units)" if solve is None else
                f"{solve[0]:g} {'wall' if solve[1] else 'deterministic'} s",
                "placer_pins_gpus": args.pin, "kills": args.kills, "seed": args.seed, "workdir": str(base),
                "cpus": os.cpu_count()}
    print(f"slurm bench: {args.trace}, {len(jobs)} jobs, {args.nodes} nodes x 8 GPUs, speedup {args.speedup:g}, "
          f"estimates {args.estimates}, SchedulerParameters={SCHEDULER_PARAMETERS}, placer every {args.interval:g} s, "
          f"sooner on a change seen every {args.poll:g} s")
    print(table(rows))
    print("hours are trace hours (wall seconds x speedup); wait = start - submit, JCT = end - submit, from slurmctld's "
          "job completion log; util % over the arrival span, util run % to the last end; invalid starts: a job "
          "started on other than its nodes x GPUs, or holding a GPU index another job held at the same time "
          "(each job's own scontrol show job -d at its start)")
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": settings, "runs": rows}, indent=1, default=str))
    sound = all(r["finished"] and r["completed_once"] == r["jobs"] and r["invalid_starts"] == 0 for r in rows)
    return 0 if sound else 1


if __name__ == "__main__":
    sys.exit(main())
