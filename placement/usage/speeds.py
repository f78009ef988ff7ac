"""Speed tables learned from runs: each workload's throughput per GPU model, relative to a reference model.

Speeds need not be guessed: training jobs log their rate (steps, samples or tokens per second), and a team
that has run the same workload on two GPU models has measured its speed ratio. This reads such
observations, one run per row,

    workload,gpu_model,throughput[,gpus]
    resnet50,V100,412.0,4
    resnet50,K80,58.1,4

and gives each workload its per-GPU rate (throughput / gpus; the median over its runs per model, so one slow
run on a crowded node does not set it), divided by its rate on the reference model: the `workloads` entries
of a request (placement_models.speeds), each with a `source` that says how many runs it rests on. The plan
reports that source (`Plan.speed_sources`). Pick as reference the model jobs' `expected_runtime_h` are for
(speed 1.0). A workload never run on the reference model is left out and named: no ratio relates it.
"""

from __future__ import annotations

import csv
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from placement import catalog

#: observation rows read at most (a run log, not a metrics stream)
MAX_ROWS = 1_000_000


@dataclass(frozen=True)
class Learned:
    """The speed tables, the workloads left out (never on the reference model) and the reference itself."""

    workloads: list[dict[str, Any]]
    skipped: list[str]
    reference: str


def read_runs(path: str | Path) -> list[tuple[str, str, float]]:
    """(workload, canonical GPU model, per-GPU throughput) per row; ValueError naming the row and column."""
    rows: list[tuple[str, str, float]] = []
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = {"workload", "gpu_model", "throughput"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: the header needs workload, gpu_model, throughput (missing: "
                             f"{', '.join(sorted(missing))})")
        for line, row in enumerate(reader, start=2):
            if len(rows) >= MAX_ROWS:
                raise ValueError(f"{path}: more than {MAX_ROWS:,} rows")
            rows.append(_row(path, line, row))
    if not rows:
        raise ValueError(f"{path}: no runs")
    return rows


def _row(path: str | Path, line: int, row: dict[str, str]) -> tuple[str, str, float]:
    name = (row.get("workload") or "").strip()
    if not name or len(name) > 253:
        raise ValueError(f"{path}:{line}: workload must be 1-253 characters")
    found = catalog.lookup((row.get("gpu_model") or "").strip())
    if found is None:
        raise ValueError(f"{path}:{line}: gpu_model: unknown GPU model {row.get('gpu_model')!r} "
                         f"(known: {', '.join(catalog.known_models())})")
    try:
        rate = float(row.get("throughput") or "")
        gpus = float(row.get("gpus") or 1)
    except ValueError:
        raise ValueError(f"{path}:{line}: throughput and gpus must be numbers") from None
    if not (0 < rate < 1e15) or not (0 < gpus <= 1e6):
        raise ValueError(f"{path}:{line}: throughput must be positive and finite, gpus positive")
    return name, found.name, rate / gpus


def learn(runs: list[tuple[str, str, float]], reference: str | None = None) -> Learned:
    """Per workload, the median per-GPU rate per model over the reference model's (module docstring). The
    default reference is the model most workloads ran on (ties: the catalog name first in order)."""
    rates: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for name, model, rate in runs:
        rates[name][model].append(rate)
    if reference is None:
        seen = Counter(m for by_model in rates.values() for m in by_model)
        reference = min(seen, key=lambda m: (-seen[m], m))
    else:
        found = catalog.lookup(reference)
        if found is None:
            raise ValueError(f"--reference: unknown GPU model {reference!r}")
        reference = found.name
    workloads, skipped = [], []
    for name in sorted(rates):
        by_model = rates[name]
        if reference not in by_model:
            skipped.append(name)
            continue
        base = statistics.median(by_model[reference])
        speeds = {m: round(statistics.median(v) / base, 4) for m, v in sorted(by_model.items())}
        if any(not (0 < s <= 1000) for s in speeds.values()):
            raise ValueError(f"workload {name}: a speed ratio outside (0, 1000] against {reference}")
        runs_n = sum(len(v) for v in by_model.values())
        workloads.append({"name": name, "speeds": speeds,
                          "source": f"observed: {_count(runs_n, 'run')} on {_count(len(by_model), 'model')}, "
                                    f"median per-GPU rate relative to {reference}"})
    if not workloads:
        raise ValueError(f"no workload ran on the reference model {reference}: no speed relates to it")
    return Learned(workloads, skipped, reference)


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def merged(request: dict[str, Any], learned: Learned) -> dict[str, Any]:
    """The request with the learned workloads, replacing declared ones of the same name."""
    names = {w["name"] for w in learned.workloads}
    kept = [w for w in request.get("workloads") or [] if w.get("name") not in names]
    return {**request, "workloads": kept + learned.workloads}
