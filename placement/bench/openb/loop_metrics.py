"""Metrics and the Markdown table of ``placement bench openb --protocol departures``, and the run itself.

Why this exists: every policy's row must be computed the same way, apart from the loop that
produces it (:mod:`placement.bench.openb.loop`), so no row can be flattered by how it is measured.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from placement.bench.openb.loop import HOUR, LoopResult, load_loop_trace, simulate
from placement.bench.openb.loop_load import GAP_CAP_S, compress, demand_profile, offered_load, subset_nodes
from placement.bench.openb.registry import canonical, make_policy, own_legend, policy_kind
from placement.bench.openb.trace import GPU_MILLI, load_nodes
from placement.bench.table import markdown, row_cells


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if values.size else math.nan


def metrics(result: LoopResult) -> dict[str, Any]:
    """One row: allocation in % of GPU milli, waits in hours over the pods that started, decisions in ms."""
    started = ~np.isnan(result.start)
    wait = (result.start[started] - result.arrival[started]) / HOUR
    return {
        "policy": result.policy,
        "seed": result.seed,
        "pods": int(result.arrival.size),
        "alloc_avg_pct": result.alloc_time_avg,
        "alloc_end_pct": result.alloc_end,
        "started": int(started.sum()),
        "wait_mean_h": float(wait.mean()) if wait.size else math.nan,
        "wait_p50_h": _pct(wait, 50),
        "wait_p95_h": _pct(wait, 95),
        "wait_max_h": float(wait.max()) if wait.size else math.nan,
        "waiting_end": result.waiting_end,
        "never_started": result.never_started,
        "unfit": result.unfit,
        "invalid": result.invalid,
        "invalid_notes": result.invalid_notes,
        "cycles": result.cycles,
        "cycle_p50_ms": _pct(result.cycle_ms, 50),
        "cycle_p99_ms": _pct(result.cycle_ms, 99),
        "arrival_p50_ms": _pct(result.arrival_ms, 50),
        "seconds": result.seconds,
    }


#: (header, key, format) of each column, in order.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("policy", "policy", "s"),
    ("kind", "kind", "s"),
    ("seed", "seed", "d"),
    ("alloc avg %", "alloc_avg_pct", ".2f"),
    ("alloc end %", "alloc_end_pct", ".2f"),
    ("started", "started", "d"),
    ("wait mean h", "wait_mean_h", ".3f"),
    ("wait p50 h", "wait_p50_h", ".3f"),
    ("wait p95 h", "wait_p95_h", ".3f"),
    ("wait max h", "wait_max_h", ".2f"),
    ("waiting end", "waiting_end", "d"),
    ("never", "never_started", "d"),
    ("invalid", "invalid", "d"),
    ("cycles", "cycles", "d"),
    ("cycle p50 ms", "cycle_p50_ms", ".2f"),
    ("cycle p99 ms", "cycle_p99_ms", ".2f"),
    ("wall s", "seconds", ".1f"),
)


def format_header(setup: dict[str, Any]) -> str:
    """What was replayed and how contended it is: the lines above the table."""
    s = setup
    return "\n".join(
        [
            f"openb with departures: trace {s['trace']}, {s['pods']} pods, {s['nodes']} nodes / {s['gpus']} GPUs "
            f"(node fraction {s['node_frac']:g}), cycle {s['cycle_s']:g} s",
            f"arrival gaps capped at {s['gap_cap_h']:g} h then × {s['compression']:.6g} (lifetimes kept): "
            f"arrivals span {s['span_h']:.2f} h; offered load {s['offered_load']:.3f} = Σ GPU milli·lifetime / "
            f"(capacity · span), lifetimes clipped at the last arrival ({s['offered_load_unclipped']:.3f} unclipped)",
            f"unconstrained demand (every pod started on arrival), % of GPU capacity over the arrivals: "
            f"mean {s['demand_mean_pct']:.1f}, peak {s['demand_peak_pct']:.1f}; "
            f"{s['unfit']} pods fit no node of the empty cluster and are left out",
        ]
    )


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """A Markdown table, one row per (policy, seed), with a footer saying how each number is defined."""
    head = [h for h, _, _ in COLUMNS]
    out = markdown(head, [row_cells(r, COLUMNS) for r in rows], left=head[:2])
    out += [
        "",
        "alloc avg %: allocated GPU milli / capacity, time-averaged from the first to the last arrival; "
        "alloc end %: right after the last arrival. wait = start − arrival in hours, over the pods that "
        "started (the run goes on after the last arrival until the queue is empty or nothing can change). "
        "waiting end: pods queued right after the last arrival; never: pods that never started. "
        "invalid: decisions the cluster refused plus capacity violations found by the audit after every "
        "pass. cycle ms: wall clock of each tick pass that ran (a tick runs only after a change). "
        "online policies decide an arrival at once; batch policies only at ticks.",
        *own_legend([r["policy"] for r in rows]),
    ]
    for r in rows:
        out += [f"invalid by {r['policy']}: {note}" for note in r.get("invalid_notes", [])[:3]]
    return "\n".join(out)


def run_departures(
    trace: str,
    policies: Sequence[str],
    seeds: Sequence[int],
    data: Path | str | None = None,
    load: float | None = None,
    cycle_s: float = 60.0,
    limit: int | None = None,
    node_frac: float = 1.0,
    progress: Any = None,
) -> dict[str, Any]:
    """Replay every policy for every seed; ``{"setup": {...}, "rows": [...]}``, JSON-friendly."""
    if limit is not None and limit < 1:
        raise ValueError(f"--limit-pods must be ≥ 1, got {limit}")
    nodes = subset_nodes(load_nodes(data), node_frac)
    lt = load_loop_trace(trace, data)
    pods = list(lt.pods[:limit] if limit is not None else lt.pods)
    capacity = GPU_MILLI * nodes.total_gpus
    pods, c = compress(pods, capacity, load)
    mean, peak = demand_profile(pods, capacity)
    setup = {
        "trace": lt.trace.name,
        "pods": len(pods),
        "nodes": nodes.size,
        "gpus": nodes.total_gpus,
        "node_frac": node_frac,
        "cycle_s": cycle_s,
        "load_asked": load,
        "compression": c,
        "gap_cap_h": GAP_CAP_S / HOUR if load is not None else math.inf,
        "offered_load": offered_load(pods, capacity),
        "offered_load_unclipped": offered_load(pods, capacity, clip=False),
        "span_h": (pods[-1].arrival - pods[0].arrival) / HOUR if pods else 0.0,
        "demand_mean_pct": mean,
        "demand_peak_pct": peak,
        "unfit": 0,
    }
    rows = []
    for name in policies:
        for seed in seeds:
            pol = make_policy(name, seed)
            t0 = time.perf_counter()
            res = simulate(nodes, lt.trace, pods, pol, seed=seed, cycle_s=cycle_s)
            row = metrics(res)
            row["policy"], row["kind"], row["seconds"] = canonical(name), policy_kind(pol), time.perf_counter() - t0
            setup["unfit"] = res.unfit
            rows.append(row)
            if progress is not None:
                progress(row)
    return {"setup": setup, "rows": rows}
