"""The traces the cycle simulator replays, read from the data folder into :class:`TraceJob` lists.

Why this exists: the simulator and the policies work on job records only, so this is the one place
that knows file names, columns, how a slice of a trace is cut and how runtime estimates are made.
The data is not shipped: ``--data DIR`` or ``$PLACEMENT_DATA`` names the folder holding ``itp/``
(Microsoft ITP training jobs, github.com/microsoft/elasticflow-traces), ``openb/`` (Alibaba
cluster-trace-gpu-v2023, github.com/alibaba/clusterdata) and ``helios/<Cluster>/cluster_log.csv``
(SenseTime Helios, github.com/S-Lab-System-Group/HeliosData: Venus, Earth, Saturn, Uranus).
"""

from __future__ import annotations

import csv
import math
import os
import re
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from placement.bench.cycles.state import TraceJob

#: How the policies learn a job's runtime: the truth, the truth × a seeded factor in [0.5, 2], or nothing.
ESTIMATE_MODES = ("exact", "noisy", "none")
#: Bounds of the log-uniform factor of ``noisy`` estimates: off by up to 2× either way, as users' guesses are.
NOISE_LOW, NOISE_HIGH = 0.5, 2.0
OPENB_POD_PREFIX = "openb_pod_list_"


class DataNotFound(FileNotFoundError):
    """The data folder or a trace file is missing; the message names where it was looked for."""


@dataclass(frozen=True)
class TraceSpec:
    """A trace named on the command line: ``itp:cluster04``, ``itp:cluster04:6000-7999``, ``openb:default``.

    ``first``/``last`` are inclusive job positions after sorting by submission time (None: all)."""

    source: str  #: ``itp``, ``openb`` or ``helios``
    name: str  #: ``cluster04``, ``default``, ...
    first: int | None = None
    last: int | None = None

    @property
    def label(self) -> str:
        rows = "" if self.first is None else f":{self.first}-{self.last}"
        return f"{self.source}:{self.name}{rows}"


_SPEC = re.compile(r"^(itp|openb|helios):([A-Za-z0-9_.-]+)(?::(\d+)-(\d+))?$")


def parse_trace(text: str) -> TraceSpec:
    """``itp:cluster04[:6000-7999]`` or ``openb:default[:0-999]`` → a :class:`TraceSpec`; ValueError otherwise."""
    m = _SPEC.match(text.strip())
    if m is None:
        raise ValueError(
            f"bad --trace {text!r}: expected itp:clusterNN[:FIRST-LAST] (e.g. itp:cluster04:6000-7999), "
            "openb:VARIANT (e.g. openb:default) or helios:CLUSTER[:FIRST-LAST] (e.g. helios:venus:0-1999)"
        )
    source, name, lo, hi = m.groups()
    if lo is None:
        return TraceSpec(source, name)
    first, last = int(lo), int(hi)
    if last < first:
        raise ValueError(f"bad --trace {text!r}: the row range {first}-{last} is empty")
    return TraceSpec(source, name, first, last)


def resolve_data_dir(data: Path | str | None = None) -> Path:
    """The data folder: ``data``, else ``$PLACEMENT_DATA``; DataNotFound naming ``--data`` when neither is a folder."""
    if data is None:
        env = os.environ.get("PLACEMENT_DATA")
        if not env:
            raise DataNotFound("no data folder: pass --data DIR or set PLACEMENT_DATA to the folder holding itp/ "
                               "and openb/")
        data = env
    path = Path(data)
    if not path.is_dir():
        raise DataNotFound(f"data folder {path} does not exist: pass --data DIR or set PLACEMENT_DATA to the folder "
                           "holding itp/, openb/ or helios/")
    return path


def _cut(jobs: list[TraceJob], first: int | None, last: int | None, shift: bool) -> list[TraceJob]:
    """Sort by submission (stable: file order breaks ties), keep rows first..last, start the clock at 0."""
    jobs = sorted(jobs, key=lambda j: j.submit_s)
    if first is not None:
        if first >= len(jobs):
            raise ValueError(f"row range starts at {first} but the trace has {len(jobs)} jobs")
        jobs = jobs[first : (last if last is not None else len(jobs) - 1) + 1]
    if shift and jobs:
        t0 = jobs[0].submit_s
        jobs = [replace(j, submit_s=j.submit_s - t0) for j in jobs]
    return jobs


def load_itp(data: Path | str | None, cluster: str, first: int | None = None, last: int | None = None,
             shift: bool = True) -> list[TraceJob]:
    """The jobs of ``itp/<cluster>.csv`` (``job_id,submission_time,duration,num_gpu``, seconds), by submission.

    ``first``..``last`` (inclusive) keep a slice in submission order, so ``6000-7999`` is 2,000 jobs
    taken from the middle of a trace, where the cluster is already busy; with ``shift`` the first
    arrival of what is kept is t = 0. Estimates are left None (see :func:`with_estimates`)."""
    path = resolve_data_dir(data) / "itp" / f"{cluster}.csv"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in path.parent.glob("*.csv"))) or "none"
        raise DataNotFound(f"ITP trace {cluster!r} not found: no {path}. Clusters there: {known}")
    with path.open(newline="") as fh:
        jobs = [
            TraceJob(name=r["job_id"], submit_s=float(r["submission_time"]), duration_s=float(r["duration"]),
                     gpus=int(r["num_gpu"]))
            for r in csv.DictReader(fh)
        ]
    return _cut([j for j in jobs if j.gpus > 0], first, last, shift)


def load_openb(data: Path | str | None, variant: str = "default", first: int | None = None, last: int | None = None,
               shift: bool = True) -> list[TraceJob]:
    """A job per pod of ``openb/openb_pod_list_<variant>.csv`` that asks for whole GPUs.

    gpus = num_gpu, duration = deletion_time − creation_time, submitted at creation_time. Skipped,
    because the simulator's cluster counts whole GPUs only: CPU-only pods (num_gpu 0), pods with a
    fraction of a GPU (gpu_milli < 1000), and rows without both times or ending before they start.
    The pod phase is ignored (a pod that failed still held its GPUs until deleted)."""
    base = resolve_data_dir(data)
    path = next((d / f"{OPENB_POD_PREFIX}{variant}.csv" for d in (base / "openb", base)
                 if (d / f"{OPENB_POD_PREFIX}{variant}.csv").is_file()), None)
    if path is None:
        raise DataNotFound(f"openb trace {variant!r} not found: no {base / 'openb' / (OPENB_POD_PREFIX + variant)}.csv")
    jobs: list[TraceJob] = []
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            created, deleted = r.get("creation_time") or "", r.get("deletion_time") or ""
            gpus = int(r["num_gpu"] or 0)
            if not created or not deleted or gpus <= 0 or int(r["gpu_milli"] or 0) != 1000:
                continue
            duration = float(deleted) - float(created)
            if duration < 0:
                continue
            jobs.append(TraceJob(name=r["name"], submit_s=float(created), duration_s=duration, gpus=gpus))
    return _cut(jobs, first, last, shift)


def load_helios(data: Path | str | None, cluster: str, first: int | None = None, last: int | None = None,
                shift: bool = True) -> list[TraceJob]:
    """The GPU jobs of ``helios/<Cluster>/cluster_log.csv`` (HeliosData's Slurm log: ``job_id, user, vc,
    gpu_num, cpu_num, node_num, state, submit_time, start_time, end_time, duration, queue``), by submission.

    gpus = gpu_num, duration = ``duration`` (seconds run), submitted at ``submit_time``, team = ``vc``.
    Every end state is kept: a job that failed or was cancelled still held its GPUs while it ran. Jobs
    without GPUs or that never ran (duration 0 or empty) are skipped. The folder name's case is free."""
    base = resolve_data_dir(data) / "helios"
    folder = next((d for d in sorted(base.iterdir()) if d.is_dir() and d.name.lower() == cluster.lower()), None) \
        if base.is_dir() else None
    path = None if folder is None else folder / "cluster_log.csv"
    if path is None or not path.is_file():
        known = ", ".join(sorted(d.name for d in base.iterdir() if (d / "cluster_log.csv").is_file())) \
            if base.is_dir() else "none"
        raise DataNotFound(f"Helios trace {cluster!r} not found: no {base / cluster / 'cluster_log.csv'}. "
                           f"Clusters there: {known or 'none'}")
    jobs: list[TraceJob] = []
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            gpus, ran = int(r.get("gpu_num") or 0), float(r.get("duration") or 0)
            submitted = r.get("submit_time") or ""
            if gpus <= 0 or ran <= 0 or not submitted:
                continue
            at = datetime.fromisoformat(submitted).replace(tzinfo=timezone.utc).timestamp()
            jobs.append(TraceJob(name=r["job_id"], submit_s=at, duration_s=ran, gpus=gpus, team=r.get("vc") or None))
    return _cut(jobs, first, last, shift)


def with_estimates(jobs: list[TraceJob], mode: str, seed: int = 0) -> list[TraceJob]:
    """Copies of ``jobs`` with ``estimate_s`` set: ``exact`` (the duration), ``noisy`` (the duration × a
    factor log-uniform in [0.5, 2], one draw per job in list order from ``seed``) or ``none`` (None)."""
    if mode not in ESTIMATE_MODES:
        raise ValueError(f"unknown estimates {mode!r}; known: {', '.join(ESTIMATE_MODES)}")
    if mode == "exact":
        return [replace(j, estimate_s=j.duration_s) for j in jobs]
    if mode == "none":
        return [replace(j, estimate_s=None) for j in jobs]
    rng = np.random.default_rng(seed)
    factors = np.exp(rng.uniform(math.log(NOISE_LOW), math.log(NOISE_HIGH), size=len(jobs)))
    return [replace(j, estimate_s=j.duration_s * float(f)) for j, f in zip(jobs, factors, strict=True)]


def load(spec: TraceSpec | str, data: Path | str | None = None, limit: int | None = None) -> list[TraceJob]:
    """The jobs of a trace spec (estimates None), optionally only the first ``limit`` of them."""
    if isinstance(spec, str):
        spec = parse_trace(spec)
    if spec.source == "itp":
        jobs = load_itp(data, spec.name, spec.first, spec.last)
    elif spec.source == "helios":
        jobs = load_helios(data, spec.name, spec.first, spec.last)
    else:
        jobs = load_openb(data, spec.name, spec.first, spec.last)
    if limit is not None:
        jobs = jobs[: max(0, limit)]
    if not jobs:
        raise ValueError(f"trace {spec.label} has no jobs to replay")
    return jobs
