"""Measured throughputs of Gavel's job types on K80, P100 and V100 GPUs, shipped as a small JSON table.

Why this exists: a mixed-fleet benchmark is only as honest as its speeds, and how much a job gains from a
faster GPU differs by job (a language model runs up to 25× faster on a V100 than on a K80, a recommendation
model runs *slower*). Gavel (Narayanan et al., "Heterogeneity-Aware Cluster Scheduling Policies for Deep
Learning Workloads", OSDI 2020) published the throughputs its simulator uses: ``scheduler/simulation_throughputs.json``
in github.com/stanford-futuredata/gavel (MIT licence), steps per second per GPU type per (job type, scale
factor), with the key ``"null"`` for the job running alone (unshared). ``gavel_throughputs.json`` beside this
module keeps only those isolated numbers for scale factors 1, 2, 4 and 8, with a ``_source`` field saying
where and when they were read; :func:`extract` rebuilds it from Gavel's file, so anyone can check or
refresh it::

    git -C gavel show HEAD:scheduler/simulation_throughputs.json > simulation_throughputs.json
    python -m placement.bench.fleet.data simulation_throughputs.json --commit "$(git -C gavel rev-parse HEAD)"

A throughput of 0 in Gavel's file means the pair was not measured or does not run (ResNet-50 with batch
size 128 on 2-8 K80s); it stays 0 here and the benchmark treats it as "cannot run on that model".
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Any

#: The table shipped with the package.
TABLE_PATH = Path(__file__).with_name("gavel_throughputs.json")
#: Gavel's GPU types, fastest first (the order Gavel's round mechanism walks them), and our catalog's names.
GAVEL_TYPES: tuple[str, ...] = ("v100", "p100", "k80")
CATALOG_MODEL: dict[str, str] = {"v100": "V100-SXM2-16GB", "p100": "P100-SXM2-16GB", "k80": "K80-12GB"}
#: The type Gavel's generator states durations on (``reference_worker_type='v100'``): speed 1.0.
REFERENCE = "v100"
SCALE_FACTORS: tuple[int, ...] = (1, 2, 4, 8)
GAVEL_REPOSITORY = "github.com/stanford-futuredata/gavel"
GAVEL_PATH = "scheduler/simulation_throughputs.json"


@dataclass(frozen=True)
class Throughputs:
    """Isolated throughputs (steps/s) per (job type, scale factor) per Gavel GPU type; 0.0: cannot run."""

    table: dict[tuple[str, int], dict[str, float]]
    source: dict[str, Any]

    @property
    def job_types(self) -> list[str]:
        """Every job type, in the table's (sorted) order."""
        return sorted({job for job, _ in self.table})

    def scale_factors(self, job_type: str) -> list[int]:
        """The scale factors measured for ``job_type``: Gavel's distributed types have 1, 2, 4, 8; the rest only 1."""
        return sorted(sf for job, sf in self.table if job == job_type)

    def speeds(self, job_type: str, scale_factor: int) -> dict[str, float]:
        """Catalog GPU model -> throughput relative to the V100's at the same scale factor (0.0: cannot run)."""
        row = self.table[(job_type, scale_factor)]
        ref = row[REFERENCE]
        if ref <= 0:
            raise ValueError(f"{job_type} × {scale_factor} has no {REFERENCE} throughput to be relative to")
        return {CATALOG_MODEL[t]: row[t] / ref for t in GAVEL_TYPES}


def _parse_key(key: str) -> tuple[str, int]:
    """Gavel's keys are Python tuple reprs, e.g. ``"('ResNet-18 (batch size 16)', 1)"``; read them as literals."""
    value = ast.literal_eval(key)
    if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], int)):
        raise ValueError(f"not a (job type, scale factor) key: {key!r}")
    return value[0], value[1]


def extract(raw: dict[str, Any], commit: str, read_on: str | None = None) -> dict[str, Any]:
    """Our table from Gavel's ``simulation_throughputs.json`` (parsed): the ``"null"`` (isolated) throughput
    of every (job type, scale factor in 1/2/4/8) on each of k80, p100, v100, with where it came from.

    Only the consolidated GPU types are read (Gavel also lists ``*_unconsolidated`` variants, jobs spread over
    servers). A (job type, scale factor) must be listed for all three types."""
    rows: dict[str, dict[str, dict[str, float]]] = {}
    keys = {t: {_parse_key(k): k for k in raw[t]} for t in GAVEL_TYPES}
    common = set(keys[GAVEL_TYPES[0]]).intersection(*(set(keys[t]) for t in GAVEL_TYPES[1:]))
    for job, sf in sorted(common):
        if sf not in SCALE_FACTORS:
            continue
        rows.setdefault(job, {})[str(sf)] = {t: float(raw[t][keys[t][(job, sf)]]["null"]) for t in GAVEL_TYPES}
    return {
        "_source": {
            "repository": GAVEL_REPOSITORY,
            "path": GAVEL_PATH,
            "commit": commit,
            "licence": "MIT (Copyright (c) 2020 Stanford Future Data Systems)",
            "read_on": read_on or date.today().isoformat(),
            "paper": "Narayanan et al., Heterogeneity-Aware Cluster Scheduling Policies for Deep Learning "
                     "Workloads, OSDI 2020",
            "what": "isolated ('null') throughput, steps/s, per job type, scale factor and GPU type; "
                    "0 = not measured / does not run",
        },
        "reference": REFERENCE,
        "gpu_models": {t: CATALOG_MODEL[t] for t in GAVEL_TYPES},
        "throughputs": rows,
    }


def parse(doc: dict[str, Any]) -> Throughputs:
    """Our JSON table as :class:`Throughputs`."""
    table = {(job, int(sf)): {t: float(v) for t, v in row.items()}
             for job, per_sf in doc["throughputs"].items() for sf, row in per_sf.items()}
    for key, row in table.items():
        if set(row) != set(GAVEL_TYPES) or any(v < 0 for v in row.values()):
            raise ValueError(f"{key}: expected throughputs ≥ 0 for {', '.join(GAVEL_TYPES)}, got {row}")
    return Throughputs(table=table, source=dict(doc.get("_source", {})))


@lru_cache(maxsize=1)
def load() -> Throughputs:
    """The table shipped with the package (read once)."""
    return parse(json.loads(TABLE_PATH.read_text()))


def main(argv: list[str] | None = None) -> int:
    """``python -m placement.bench.fleet.data GAVEL_JSON --commit HASH [-o OUT]``: rebuild the shipped table."""
    ap = argparse.ArgumentParser(prog="python -m placement.bench.fleet.data", description=main.__doc__)
    ap.add_argument("gavel_json", type=Path, help=f"Gavel's {GAVEL_PATH}")
    ap.add_argument("--commit", required=True, help="the Gavel commit the file was read at")
    ap.add_argument("-o", "--output", type=Path, default=TABLE_PATH, help=f"default: {TABLE_PATH}")
    args = ap.parse_args(argv)
    doc = extract(json.loads(args.gavel_json.read_text()), args.commit)
    args.output.write_text(json.dumps(doc, indent=1) + "\n")
    n = sum(len(v) for v in doc["throughputs"].values())
    print(f"{n} (job type, scale factor) rows of {len(doc['throughputs'])} job types written to {args.output}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
