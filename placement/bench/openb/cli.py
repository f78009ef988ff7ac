"""``placement bench openb``: replay policies on openb traces, print the table, optionally plot and save JSON.

Why this exists: the face of the replay, kept apart from the protocol so that the table, the
leftover summary and the matplotlib plot (optional) never leak into what produces the numbers.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from placement.bench.openb.loop_metrics import format_header, run_departures
from placement.bench.openb.loop_metrics import format_table as format_loop_table
from placement.bench.openb.registry import POLICIES, canonical, own_legend
from placement.bench.openb.replay import run
from placement.bench.openb.trace import DataNotFound, list_traces, resolve_data_dir

#: The first line of ``--help``.
DESCRIPTION = "Replay of the FGD paper's evaluation on the Alibaba openb GPU trace."


def parse_seeds(text: str) -> list[int]:
    """``42-51`` → 42..51 inclusive; ``1,5,7`` and mixtures such as ``42-44,50`` also work."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, _, hi = part.partition("-")
            seeds.extend(range(int(lo), int(hi) + 1))
        else:
            seeds.append(int(part))
    if not seeds:
        raise ValueError(f"no seeds in {text!r}")
    return seeds


def _fmt(v: float | None, spec: str = ".2f") -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def format_table(results: Sequence[dict[str, Any]]) -> str:
    """A plain-text table: one row per (trace, policy), the paper's value beside ours.

    ``declined`` counts pods that failed although some node could take them: always 0 for the
    peers and the online policy (they place whatever fits); a batch may leave a pod out.
    """
    head = (
        "trace",
        "policy",
        "kind",
        "alloc@100",
        "paper@100",
        "alloc@130",
        "paper@130",
        "Δ130",
        "unalloc GPUs",
        "failed",
        "declined",
        "p50 ms",
        "p99 ms",
        "s/seed",
    )
    rows = [head]
    # Batch policies see a window of queued pods: list them after the online ones of each trace.
    traces = list(dict.fromkeys(r["trace"] for r in results))
    ordered = sorted(results, key=lambda r: (traces.index(r["trace"]), r.get("kind", "online") != "online"))
    for r in ordered:
        m, pub = r["mean"], r["published"]
        p130 = pub.get(130)
        diff = None if p130 is None or math.isnan(m["alloc_130"]) else m["alloc_130"] - p130
        rows.append(
            (
                r["trace"],
                r["policy"],
                r.get("kind", "online"),
                _fmt(m["alloc_100"]),
                _fmt(pub.get(100)),
                _fmt(m["alloc_130"]),
                _fmt(p130),
                _fmt(diff, "+.2f"),
                _fmt(m["unallocated_gpus"], ".1f"),
                _fmt(m["failed"], ".0f"),
                _fmt(m.get("failed_while_feasible"), ".0f"),
                _fmt(m["latency_p50_ms"], ".3f"),
                _fmt(m["latency_p99_ms"], ".3f"),
                _fmt(m["seconds"], ".1f"),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = [
        "  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines + own_legend([r["policy"] for r in results]))


def format_leftover(results: Sequence[dict[str, Any]], top: int = 4) -> str:
    """Per policy, where the unallocated GPUs sit at the end (mean over seeds), biggest first."""
    lines = ["unallocated at the end, by where it sits (GPUs, mean over seeds; see unallocated_by):"]
    for r in results:
        left = sorted(r.get("leftover", {}).items(), key=lambda kv: -kv[1])
        if not left:
            continue
        shown = ", ".join(f"{k} {v:.1f}" for k, v in left[:top])
        rest = sum(v for _, v in left[top:])
        more = f", elsewhere {rest:.1f}" if left[top:] else ""
        lines.append(f"  {r['trace']} {r['policy']}: {shown}{more}")
    return "\n".join(lines)


def plot(results: Sequence[dict[str, Any]], path: Path) -> list[Path]:
    """Allocation % against arrived % per policy, one PNG per trace (as the paper's Fig. 9a).

    matplotlib is optional: raises ImportError when it is absent, which :func:`main` reports.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    traces = list(dict.fromkeys(r["trace"] for r in results))
    written: list[Path] = []
    for tr in traces:
        out = path if len(traces) == 1 else path.with_name(f"{path.stem}-{tr}{path.suffix or '.png'}")
        fig, ax = plt.subplots(figsize=(6, 4.2))
        top = 100
        for r in results:
            if r["trace"] != tr or not r["curve"]:
                continue
            xs, ys = zip(*r["curve"], strict=True)
            top = max(top, max(xs))
            ax.plot(xs, ys, label=f"{r['policy']} ({_fmt(r['mean']['alloc_130'])} % at 130)")
        ax.plot([0, 100, top], [0, 100, 100], color="grey", linestyle=":", linewidth=1, label="all allocated")
        ax.set_xlabel("arrived workload (% of GPU capacity)")
        ax.set_ylabel("GPU allocation ratio (%)")
        ax.set_title(f"openb {tr}: allocation vs arrived load")
        ax.set_xlim(60, top)
        ax.set_ylim(60, 101)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        fig.savefig(out, dpi=120)
        plt.close(fig)
        written.append(out)
    return written


def main(argv: list[str] | None = None) -> int:
    """``placement bench openb``: replay policies on openb traces and print the table."""
    ap = argparse.ArgumentParser(prog="placement bench openb", description=DESCRIPTION)
    ap.add_argument("--trace", default="default", help="trace name(s), comma-separated, or 'all' (default: default)")
    ap.add_argument("--policies", default="random,bestfit,fgd", help=f"comma-separated; known: {','.join(POLICIES)}")
    ap.add_argument(
        "--seeds", default=None, help="e.g. 42-51 or 42,43 (default: 42-51, the paper's; 42 with departures)"
    )
    ap.add_argument(
        "--data",
        type=Path,
        default=None,
        help="folder with the openb CSVs, from github.com/alibaba/clusterdata, folder cluster-trace-gpu-v2023 "
        "(default: $PLACEMENT_DATA)",
    )
    ap.add_argument("--plot", type=Path, default=None, help="write allocation-vs-load PNG here (needs matplotlib)")
    ap.add_argument("--limit-pods", type=int, default=None, help="replay only the first N arrivals (a quick slice)")
    ap.add_argument("--json", type=Path, default=None, help="also write all results as JSON here")
    ap.add_argument(
        "--protocol",
        choices=("arrival", "departures"),
        default="arrival",
        help="arrival: the paper's, pods never leave (default); departures: pods run their lifetime and "
        "leave, waiting pods are retried every cycle (placement.bench.openb.loop)",
    )
    ap.add_argument(
        "--load",
        type=float,
        default=None,
        help="departures: scale arrival gaps (lifetimes kept) so the offered load is this (default: real time)",
    )
    ap.add_argument("--cycle-s", type=float, default=None, help="departures: scheduling cycle, simulated s (60)")
    ap.add_argument(
        "--node-frac",
        type=float,
        default=None,
        help="departures: keep this share of the nodes of every (model, GPUs) group, in (0, 1] (default: 1)",
    )
    args = ap.parse_args(argv)

    if args.protocol == "departures":
        return _main_departures(args)
    for opt, value in (("--load", args.load), ("--cycle-s", args.cycle_s), ("--node-frac", args.node_frac)):
        if value is not None:
            print(f"error: {opt} only applies to --protocol departures", file=sys.stderr)
            return 2
    try:
        seeds = parse_seeds(args.seeds or "42-51")
        data = resolve_data_dir(args.data)
        traces = list_traces(data) if args.trace == "all" else [t.strip() for t in args.trace.split(",") if t.strip()]
        policies = [canonical(p.strip().lower()) for p in args.policies.split(",") if p.strip()]
        for p in policies:
            if p not in POLICIES:
                raise ValueError(f"unknown policy {p!r}; known: {', '.join(sorted(POLICIES))}")
        results = []
        for tr in traces:
            for p in policies:
                r = run(tr, p, seeds, data, limit=args.limit_pods)
                results.append(r)
                print(
                    f"# {tr} {p}: {_fmt(r['mean']['alloc_130'])} % at 130 ({_fmt(r['mean']['seconds'], '.1f')} s/seed)",
                    file=sys.stderr,
                    flush=True,
                )
    except (DataNotFound, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    print(f"openb replay, seeds {args.seeds} ({len(seeds)}), % of GPU milli allocated (paper: FGD, ATC'23)")
    print(format_table(results))
    print(format_leftover(results))
    if args.json is not None:
        import json

        args.json.write_text(json.dumps(results, indent=1, default=float))
        print(f"results written to {args.json}")
    if args.plot is not None:
        try:
            for out in plot(results, args.plot):
                print(f"plot written to {out}")
        except ImportError:
            print("plot skipped: matplotlib is not installed (pip install matplotlib)")
    return 0


def _main_departures(args: argparse.Namespace) -> int:
    """``--protocol departures``: the event-driven replay with departures, one Markdown table."""
    load, cycle_s = args.load, 60.0 if args.cycle_s is None else args.cycle_s
    node_frac = 1.0 if args.node_frac is None else args.node_frac
    problem = None
    if args.plot is not None:
        problem = "--plot only applies to --protocol arrival"
    elif args.trace == "all" or "," in args.trace:
        problem = f"--trace: one trace at a time with --protocol departures, got {args.trace!r}"
    elif load is not None and not (math.isfinite(load) and load > 0):
        problem = f"--load must be a positive number, got {load}"
    elif not (math.isfinite(cycle_s) and cycle_s > 0):
        problem = f"--cycle-s must be a positive number of seconds, got {cycle_s}"
    elif not (math.isfinite(node_frac) and 0 < node_frac <= 1):
        problem = f"--node-frac must be in (0, 1], got {node_frac}"
    elif args.limit_pods is not None and args.limit_pods < 1:
        problem = f"--limit-pods must be ≥ 1, got {args.limit_pods}"
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2

    def progress(row: dict[str, Any]) -> None:
        print(f"# {row['policy']} seed {row['seed']}: {_fmt(row['alloc_avg_pct'])} % avg, wait mean "
              f"{_fmt(row['wait_mean_h'], '.3f')} h ({row['seconds']:.1f} s)", file=sys.stderr, flush=True)

    try:
        seeds = parse_seeds(args.seeds or "42")
        data = resolve_data_dir(args.data)
        policies = [canonical(p.strip().lower()) for p in args.policies.split(",") if p.strip()]
        for p in policies:
            if p not in POLICIES:
                raise ValueError(f"--policies: unknown policy {p!r}; known: {', '.join(sorted(POLICIES))}")
        out = run_departures(args.trace, policies, seeds, data, load=load, cycle_s=cycle_s,
                             limit=args.limit_pods, node_frac=node_frac, progress=progress)
    except (DataNotFound, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_header(out["setup"]))
    print()
    print(format_loop_table(out["rows"]))
    if args.json is not None:
        import json

        args.json.write_text(json.dumps(out, indent=1, default=float))
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
