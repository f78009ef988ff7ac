"""Metrics of a fleet run and the Markdown table of ``placement bench fleet``.

Why this exists: on a mixed fleet the numbers that matter are how long jobs take to finish (a job on a slow
GPU runs longer, not only waits longer) and whether that is shared fairly, computed the same way for every
policy from the simulator's record alone, so no policy's row can be flattered by how it is measured.

* JCT = finish − submit (hours), over the jobs that finished: mean, p50, p90.
* util % = GPU-seconds held by running jobs / (fleet GPUs × makespan); makespan = last finish − first submit.
* speed = V100-seconds of work done per GPU-second held (GPU-weighted): 1.0 if every job ran on GPUs as fast
  as a V100 for it; K80s pull it down, jobs faster on P100/K80 than on V100 (recommendation) push it up.
* Jain = Jain's fairness index (Σρ)² / (n Σρ²) over the finished jobs' normalised throughput ρ = the job's
  average rate while in the system (work / JCT) over its rate running alone on the GPU model fastest for it
  (work / max speed): ρ = isolated best-model run time / JCT, in (0, 1]. We use the isolated best rather than
  Gavel's equal-share rate because the latter depends on how many jobs were in the system at each moment,
  which differs between policies; 1.0 means every job was slowed by the same factor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from placement.bench.cycles.report import busy_gpu_s
from placement.bench.cycles.sim import HOUR, SimResult


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if values.size else math.nan


def jain(values: np.ndarray) -> float:
    """Jain's index (Σx)² / (n Σx²): 1 when all equal, 1/n when one takes all; NaN for no values."""
    values = np.asarray(values, dtype=float)
    if not values.size or not (values**2).sum() > 0:
        return math.nan
    return float(values.sum() ** 2 / (values.size * (values**2).sum()))


def best_speed(speeds: dict[str, float] | None, models: Sequence[str]) -> float:
    """The job's speed on the fleet's model fastest for it (1.0 without a table)."""
    if speeds is None:
        return 1.0
    return max(speeds.get(m, 1.0) for m in models)


def metrics(result: SimResult) -> dict[str, Any]:
    """One row of the table (see the module docstring for every definition)."""
    jobs = result.jobs
    submit = np.array([j.submit_s for j in jobs], dtype=float)
    work = np.array([j.duration_s for j in jobs], dtype=float)
    gpus = np.array([j.gpus for j in jobs], dtype=float)
    models = sorted(set(result.config.node_models or ()))
    best = np.array([best_speed(j.speeds, models) if models else 1.0 for j in jobs], dtype=float)
    done = ~np.isnan(result.finish_s)
    jct = (result.finish_s[done] - submit[done]) / HOUR
    rho = (work[done] / best[done]) / (jct * HOUR) if done.any() else np.array([])
    first = float(submit.min()) if submit.size else 0.0
    makespan = result.end_s - first
    busy = busy_gpu_s(result, first, result.end_s)
    return {
        "policy": result.policy,
        "jobs": len(jobs),
        "done": int(done.sum()),
        "drained": result.drained,
        "jct_mean_h": float(jct.mean()) if jct.size else math.nan,
        "jct_p50_h": _pct(jct, 50),
        "jct_p90_h": _pct(jct, 90),
        "util_pct": 100.0 * busy / (result.config.total_gpus * makespan) if makespan > 0 else math.nan,
        "speed": float((gpus[done] * work[done]).sum() / busy) if busy > 0 and result.drained else math.nan,
        "makespan_h": makespan / HOUR,
        "jain": jain(rho),
        "preemptions": result.preemptions,
        "lost_gpu_h": result.lost_gpu_s / HOUR,
        "plan_calls": int(result.plan_ms.size),
        "plan_p50_ms": _pct(result.plan_ms, 50),
    }


def add_ratio(rows: list[dict[str, Any]], base: str = "agnostic") -> None:
    """Each row's mean JCT over the ``base`` row's (``jct_vs_base``); NaN when there is no such row."""
    ref = next((r.get("jct_mean_h") for r in rows if r.get("policy") == base), None)
    for r in rows:
        mean = r.get("jct_mean_h")
        r["jct_vs_agnostic"] = mean / ref if ref and mean is not None and not math.isnan(mean) else math.nan


#: (header, key, format) of each column.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("policy", "policy", "s"),
    ("jobs", "jobs", "d"),
    ("done", "done", "d"),
    ("mean JCT h", "jct_mean_h", ".2f"),
    ("p50 JCT h", "jct_p50_h", ".2f"),
    ("p90 JCT h", "jct_p90_h", ".2f"),
    ("util %", "util_pct", ".1f"),
    ("speed", "speed", ".2f"),
    ("makespan h", "makespan_h", ".1f"),
    ("Jain", "jain", ".3f"),
    ("JCT vs agnostic", "jct_vs_agnostic", ".2f"),
    ("preemptions", "preemptions", "d"),
    ("plan calls", "plan_calls", "d"),
    ("plan p50 ms", "plan_p50_ms", ".1f"),
)


def _cell(value: Any, spec: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return format(value, spec) if spec != "s" else str(value)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """The Markdown table, one row per policy, then what each column means; a failed run shows its error."""
    head = [h for h, _, _ in COLUMNS]
    body = [[_cell(r.get(key), spec) for _, key, spec in COLUMNS] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |",
             "|" + "|".join("-" * (w + 2) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(widths)) + "|"]
    lines += ["| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                                enumerate(zip(b, widths, strict=True))) + " |" for b in body]
    lines += [
        "",
        "JCT = finish − submit over the finished jobs; util % = GPU-seconds held / (GPUs × makespan); speed = "
        "V100-seconds of work per GPU-second held; Jain = Jain's index of each job's isolated run time on its "
        "fastest model / its JCT; JCT vs agnostic = mean JCT / the agnostic row's.",
    ]
    lines += [f"{r['policy']}: {r['error']}" for r in rows if r.get("error")]
    return "\n".join(lines)
