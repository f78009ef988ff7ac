"""What a replay did, read from Slurm's own records, and the bench's numbers computed from them.

Two records, both Slurm's: the controller's job completion log (`JobCompType=jobcomp/filetxt`, one
line per job end with its submit, start and end times and nodes; it needs no database, unlike
sacct), and what each job itself asked the controller when it started (`scontrol show job -d`,
written into the job's output file): the GPU indices it holds on every node. The completion log has
no GPU indices (those need slurmdbd), and `squeue` forgets them the moment a job ends, so a job as
short as the bench makes some would slip between two polls; the job's own record cannot.

Times are Slurm's, in whole seconds; the numbers come back in trace hours (wall seconds × speedup).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from placement.slurm.commands import parse_keyvalues
from placement.slurm.syntax import expand_hostlist, gres_items

#: Gangs of at least this many GPUs get their own wait column (four whole 8-GPU nodes).
BIG_GANG = 32
HOUR = 3600.0


@dataclass(frozen=True)
class Ask:
    """What one submitted job asked: its trace name, nodes and GPUs per node, and its trace duration."""

    name: str
    nodes: int
    per_node: int
    duration_s: float

    @property
    def gpus(self) -> int:
        return self.nodes * self.per_node


@dataclass(frozen=True)
class Completion:
    """One line of the job completion log (epoch seconds)."""

    job_id: str
    state: str
    submit: float
    start: float
    end: float
    nodes: tuple[str, ...]


def _epoch(text: str) -> float:
    """Slurm's local `2026-12-06T03:57:15` as epoch seconds (NaN for `Unknown`/`None`)."""
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return math.nan


def parse_jobcomp(text: str) -> list[Completion]:
    """The records of a jobcomp/filetxt log, in file order (a job requeued and run again appears again)."""
    out = []
    for line in text.splitlines():
        kv = parse_keyvalues(line)
        if "JobId" not in kv:
            continue
        out.append(Completion(kv["JobId"], kv.get("JobState", ""), _epoch(kv.get("SubmitTime", "")),
                              _epoch(kv.get("StartTime", "")), _epoch(kv.get("EndTime", "")),
                              tuple(expand_hostlist(kv.get("NodeList", "")))))
    return out


def parse_starts(text: str) -> list[dict[str, list[int]]]:
    """Each start a job recorded (`scontrol show job -d` at its start): node -> GPU indices held there."""
    starts: list[dict[str, list[int]]] = []
    for line in text.splitlines():
        if line.startswith("JobId="):
            starts.append({})
            continue
        stripped = line.strip()
        if not stripped.startswith("Nodes=") or not starts:
            continue
        kv = parse_keyvalues(stripped)
        gres = stripped.split("GRES=", 1)[1] if "GRES=" in stripped else ""
        idx = sorted({i for _, _, ix in gres_items(gres) for i in ix or []})
        for node in expand_hostlist(kv.get("Nodes", "")):
            starts[-1][node] = idx
    return starts


@dataclass
class Checks:
    """Whether Slurm ran the replay soundly: each job once, whole, and no GPU index held by two jobs at once."""

    jobs: int = 0
    completed_once: int = 0
    #: job id -> why it is not counted as run once and completed (never ended, ended twice, failed...)
    not_once: dict[str, str] = field(default_factory=dict)
    #: job id -> how its start differs from what it asked
    not_whole: dict[str, str] = field(default_factory=dict)
    #: (node, GPU index, job, other job) held at the same time
    gpu_twice: list[tuple[str, int, str, str]] = field(default_factory=list)
    #: jobs with a RESIZING record: their size was updated while they ran (the node count they ended on is checked)
    resized: list[str] = field(default_factory=list)

    @property
    def invalid_starts(self) -> int:
        return len(self.not_whole) + len({j for _, _, j, _ in self.gpu_twice})

    def as_dict(self) -> dict[str, Any]:
        return {"jobs": self.jobs, "completed_once": self.completed_once, "not_once": self.not_once,
                "not_whole": self.not_whole, "gpu_twice": [list(x) for x in self.gpu_twice],
                "invalid_starts": self.invalid_starts, "resized": self.resized}


def check(asks: Mapping[str, Ask], done: Iterable[Completion], starts: Mapping[str, list[dict[str, list[int]]]]
          ) -> Checks:
    """Every job of `asks` (Slurm id -> ask) completed exactly once, started once on as many nodes as asked
    with as many GPUs on each, and no (node, GPU) was held by two jobs whose runs overlap."""
    out = Checks(jobs=len(asks))
    records: dict[str, list[Completion]] = {}
    for c in done:
        if c.state == "RESIZING":  # an update of a running job's size is logged too; it did not end there
            out.resized.append(c.job_id)
            continue
        records.setdefault(c.job_id, []).append(c)
    held: dict[tuple[str, int], list[tuple[float, float, str]]] = {}
    for jid, ask in asks.items():
        recs, runs = records.get(jid, []), starts.get(jid, [])
        if len(recs) != 1 or recs[0].state != "COMPLETED" or len(runs) != 1:
            out.not_once[jid] = (f"{len(recs)} completion records ({','.join(r.state for r in recs) or 'none'}), "
                                 f"{len(runs)} starts recorded")
        else:
            out.completed_once += 1
        if recs and len(recs[-1].nodes) != ask.nodes:
            out.not_whole[jid] = f"asked {ask.nodes} nodes, ended on {len(recs[-1].nodes)}"
        for run in runs:
            wrong = [f"{n}:{len(g)}" for n, g in sorted(run.items()) if len(g) != ask.per_node]
            if len(run) != ask.nodes or wrong:
                out.not_whole[jid] = f"asked {ask.nodes}x{ask.per_node}, got {len(run)} nodes {' '.join(wrong)}"
        if recs and runs:
            start, end = recs[-1].start, recs[-1].end
            for node, gpus in runs[-1].items():
                for g in gpus:
                    held.setdefault((node, g), []).append((start, end, jid))
    for (node, g), spans in sorted(held.items()):
        spans.sort()
        for (_, end_a, a), (start_b, _, b) in zip(spans, spans[1:], strict=False):
            if start_b < end_a:
                out.gpu_twice.append((node, g, a, b))
    return out


def metrics(asks: Mapping[str, Ask], done: Iterable[Completion], speedup: float, total_gpus: int) -> dict[str, Any]:
    """Waits, completions and utilisation in trace hours from the completion log (the last record of each job).

    wait = start − Slurm's submit time; JCT = end − submit; utilisation = GPU-seconds held / (GPUs × span),
    over the arrival span (first to last submit) and over the whole run (first submit to last end)."""
    last: dict[str, Completion] = {}
    for c in done:
        if c.job_id in asks and c.state != "RESIZING":
            last[c.job_id] = c
    rows = [(last[j], asks[j]) for j in asks if j in last and not math.isnan(last[j].start)]
    if not rows:
        return {"jobs": len(asks), "done": 0}
    submit = np.array([c.submit for c, _ in rows])
    start = np.array([c.start for c, _ in rows])
    end = np.array([c.end for c, _ in rows])
    gpus = np.array([a.gpus for _, a in rows], dtype=float)
    scale = speedup / HOUR
    wait, jct = (start - submit) * scale, (end - submit) * scale
    big = gpus >= BIG_GANG

    def util(lo: float, hi: float) -> float:
        busy = (np.clip(np.minimum(end, hi) - np.maximum(start, lo), 0, None) * gpus).sum()
        return float(100.0 * busy / (total_gpus * (hi - lo))) if hi > lo else math.nan

    first, last_submit, last_end = float(submit.min()), float(submit.max()), float(end.max())
    return {
        "jobs": len(asks), "done": len(rows),
        "wait_mean_h": float(wait.mean()), "wait_p50_h": float(np.percentile(wait, 50)),
        "wait_p95_h": float(np.percentile(wait, 95)), "wait_max_h": float(wait.max()),
        "big_gangs": int(big.sum()), "wait_big_mean_h": float(wait[big].mean()) if big.any() else math.nan,
        "jct_mean_h": float(jct.mean()), "jct_p95_h": float(np.percentile(jct, 95)),
        "util_span_pct": util(first, last_submit), "util_run_pct": util(first, last_end),
        "span_h": (last_submit - first) * scale, "run_h": (last_end - first) * scale,
    }
