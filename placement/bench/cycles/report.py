"""Metrics of a cycle-simulator run, the Markdown table of ``placement bench cycles``, and its optional plot.

Why this exists: the numbers that decide whether a scheduler is better — how long jobs wait, big
gangs above all, how long they take to finish, how busy the GPUs are, how much work preemptions
throw away — must be computed the same way for every policy, apart from the loop that produces
them, so that no policy's row can be flattered by how it is measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from placement.bench.cycles.sim import HOUR, SimResult
from placement.bench.table import markdown, row_cells

#: Gangs above this many GPUs get their own wait column: they are the ones a FIFO-with-backfill starves.
BIG_GANG = 32


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if values.size else math.nan


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if values.size else math.nan


def busy_gpu_s(result: SimResult, lo: float, hi: float) -> float:
    """GPU-seconds held by running jobs between ``lo`` and ``hi``: each run from its start to its true
    end or its preemption (the GPUs a finished job frees only at the next boundary are not counted)."""
    if not result.runs or hi <= lo:
        return 0.0
    runs = np.asarray(result.runs, dtype=float)
    overlap = np.clip(np.minimum(runs[:, 1], hi) - np.maximum(runs[:, 0], lo), 0.0, None)
    return float((overlap * runs[:, 2]).sum())


def metrics(result: SimResult) -> dict[str, Any]:
    """One row of the table: waits and completions in hours, utilisation in %, plan calls in ms.

    Waits (first start − submit) are over the jobs that started, completions (finish − submit) over
    those that finished; a run that did not drain says so in ``drained``."""
    submit = np.array([j.submit_s for j in result.jobs], dtype=float)
    gpus = np.array([j.gpus for j in result.jobs], dtype=np.int64)
    started = ~np.isnan(result.first_start_s)
    finished = ~np.isnan(result.finish_s)
    wait = (result.first_start_s[started] - submit[started]) / HOUR
    big = (result.first_start_s[started & (gpus > BIG_GANG)] - submit[started & (gpus > BIG_GANG)]) / HOUR
    jct = (result.finish_s[finished] - submit[finished]) / HOUR
    duration = np.array([j.duration_s for j in result.jobs], dtype=float)
    done_big = finished & (gpus > BIG_GANG)
    # completion − run time: the time a gang did not run, so a preempting policy's gangs compare with a waiting one's
    delay_big = (result.finish_s[done_big] - submit[done_big] - duration[done_big]) / HOUR
    total = result.config.total_gpus
    first, last = (float(submit.min()), float(submit.max())) if submit.size else (0.0, 0.0)
    span = last - first
    run_span = result.end_s - first
    return {
        "policy": result.policy,
        "estimates": result.estimates,
        "jobs": len(result.jobs),
        "started": int(started.sum()),
        "done": int(finished.sum()),
        "drained": result.drained,
        "wait_mean_h": _mean(wait),
        "wait_p50_h": _pct(wait, 50),
        "wait_p95_h": _pct(wait, 95),
        "wait_max_h": float(wait.max()) if wait.size else math.nan,
        "big_gangs": int((gpus > BIG_GANG).sum()),
        "wait_big_mean_h": _mean(big),
        "delay_big_mean_h": _mean(delay_big),
        "jct_mean_h": _mean(jct),
        "jct_p95_h": _pct(jct, 95),
        "util_span_pct": 100.0 * busy_gpu_s(result, first, last) / (total * span) if span > 0 else math.nan,
        "util_run_pct": 100.0 * busy_gpu_s(result, first, result.end_s) / (total * run_span)
        if run_span > 0 else math.nan,
        "span_h": span / HOUR,
        "run_h": run_span / HOUR,
        "preemptions": result.preemptions,
        "lost_gpu_h": result.lost_gpu_s / HOUR,
        "reclaims": result.reclaims,
        "invalid_decisions": result.invalid_decisions,
        "plan_calls": int(result.plan_ms.size),
        "plan_p50_ms": _pct(result.plan_ms, 50),
        "plan_p99_ms": _pct(result.plan_ms, 99),
    }


#: (header, key, format) of each column of the table, in order.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("policy", "policy", "s"),
    ("estimates", "estimates", "s"),
    ("jobs", "jobs", "d"),
    ("done", "done", "d"),
    ("wait mean h", "wait_mean_h", ".2f"),
    ("wait p50 h", "wait_p50_h", ".2f"),
    ("wait p95 h", "wait_p95_h", ".2f"),
    ("wait max h", "wait_max_h", ".1f"),
    (f"wait >{BIG_GANG} GPUs h", "wait_big_mean_h", ".2f"),
    (f"delay >{BIG_GANG} GPUs h", "delay_big_mean_h", ".2f"),
    ("JCT mean h", "jct_mean_h", ".2f"),
    ("JCT p95 h", "jct_p95_h", ".2f"),
    ("util %", "util_span_pct", ".1f"),
    ("util run %", "util_run_pct", ".1f"),
    ("preemptions", "preemptions", "d"),
    ("lost GPU-h", "lost_gpu_h", ".1f"),
    ("invalid", "invalid_decisions", "d"),
    ("plan p50 ms", "plan_p50_ms", ".2f"),
    ("plan p99 ms", "plan_p99_ms", ".2f"),
    ("drained", "drained", "s"),
)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """A Markdown table, one row per (policy, estimates), with a footer saying how each number is defined.

    A row with an ``error`` (the policy made an invalid decision) shows only that: its other numbers
    would describe a run that stopped half way."""
    head = [h for h, _, _ in COLUMNS]
    out = markdown(head, [row_cells(r, COLUMNS) for r in rows], left=head[:2])
    span = next((r["span_h"] for r in rows if "span_h" in r), None)
    span_text = f" ({span:.1f} h here)" if span is not None else ""
    out += [
        "",
        f"util %: busy GPU-seconds / (GPUs × span), span = first arrival to last arrival{span_text}; "
        "util run %: the same from the first arrival to the last finish. Busy = held by a running job, from "
        "its start to its true end or its preemption; reclaimed spot nodes still count in GPUs.",
        "wait = first start − submit, over the jobs that started; JCT = finish − submit, over the jobs that "
        f"finished; wait >{BIG_GANG} GPUs: mean over the gangs of more than {BIG_GANG} GPUs; delay: their JCT "
        "minus their run time, the time they did not run (a preempting policy starts gangs at once and delays "
        "them later). "
        "lost GPU-h: work since the last checkpoint thrown away by preemptions. plan ms: wall clock of each "
        "policy call (called only when something changed, or every cycle if the policy asks).",
    ]
    errors = [r for r in rows if r.get("error")]
    out += [f"invalid decision by {r['policy']} ({r.get('estimates', '')}): {r['error']}" for r in errors]
    return "\n".join(out)


def plot(results: Sequence[SimResult], path: Path, title: str = "") -> Path:
    """Two panels against time (days): jobs waiting, and GPU utilisation, one line per run.

    matplotlib is optional: raises ImportError when it is absent, which the command line reports."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_q, ax_u) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    for r in results:
        if not r.times_s.size:
            continue
        label = f"{r.policy} ({r.estimates})" if r.estimates else r.policy
        t0 = min(j.submit_s for j in r.jobs) if r.jobs else 0.0
        days = (r.times_s - t0) / 86400.0
        ax_q.step(days, r.queue_len, where="post", label=label, linewidth=1)
        ax_u.step(days, 100.0 * r.busy_gpus / r.config.total_gpus, where="post", label=label, linewidth=1)
    ax_q.set_ylabel("jobs waiting")
    ax_u.set_ylabel("GPUs busy (%)")
    ax_u.set_xlabel("days since the first arrival")
    ax_u.set_ylim(0, 101)
    for ax in (ax_q, ax_u):
        ax.grid(alpha=0.3)
    ax_q.legend(loc="upper right", fontsize=8)
    if title:
        ax_q.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
