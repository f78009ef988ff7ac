"""Synthetic DCGM metrics with known answers, and small requests, for the usage tests (a helper module,
not a conftest, so its name cannot clash with another folder's).

Every file is generated here from a few arrays, so each expected figure (a mean, an idle share, a
peak) follows from the arrays by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

H100 = "H100-SXM5-80GB"
WEEK_S = 7 * 24 * 3600
STEP_S = 15
T0 = 1_798_761_600  # 2027-01-01T00:00:00Z, a multiple of an hour

CSV_HEADER = "timestamp,Hostname,gpu,sm_util,mem_used_gib,mem_total_gib,power_w,pod,namespace,modelName"


def gpu_rows(node: str, gpu: int, sm: Sequence[float] | np.ndarray, mem: float | Sequence[float] = 1.0,
             pod: str = "", namespace: str = "", total: float = 80.0, step_s: int = STEP_S,
             t0: int = T0, model: str = "") -> list[str]:
    """CSV rows of one GPU: sample k at t0 + k·step_s with SM utilisation sm[k] and memory mem (or mem[k])."""
    sm = np.asarray(sm, dtype=float)
    mems = np.broadcast_to(np.asarray(mem, dtype=float), sm.shape)
    return [f"{t0 + k * step_s},{node},{gpu},{s:g},{m:g},{total:g},300,{pod},{namespace},{model}"
            for k, (s, m) in enumerate(zip(sm.tolist(), mems.tolist(), strict=True))]


def interleave(*series: list[str]) -> list[str]:
    """Rows of several GPUs in time order, as an exporter scrape loop writes them."""
    out: list[str] = []
    for rows in zip(*series, strict=True):
        out.extend(rows)
    return out


def write_csv(path: Path, rows: list[str], header: str = CSV_HEADER) -> Path:
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    return path


def node(name: str, gpus: int = 4, model: str = H100, **extra: Any) -> dict[str, Any]:
    return {"name": name, "gpu_model": model, "gpus": gpus, "cpu": 64, "memory_gib": 512, **extra}


def request(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]], running: list[dict[str, Any]] | None = None,
            **policy: Any) -> dict[str, Any]:
    return {"cluster": {"nodes": nodes, "running": running or []}, "jobs": jobs,
            "policy": {"deterministic": True, "time_limit_s": 5, "workers": 1, **policy}}
