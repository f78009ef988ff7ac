"""Shared by the openb tests: CSV-like rows, a tiny data folder on disk, and the real data when present."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from placement.bench.openb.trace import NODE_FILE, DataNotFound, resolve_data_dir

POD_FIELDS = ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec"]


def node_row(sn: str, cpu: int, gpus: int, model: str = "A", mem: int = 262144) -> dict[str, str]:
    return {"sn": sn, "cpu_milli": str(cpu), "memory_mib": str(mem), "gpu": str(gpus), "model": model}


def pod_row(name: str, cpu: int, num: int, milli: int, spec: str = "", mem: int = 1024) -> dict[str, str]:
    return {
        "name": name,
        "cpu_milli": str(cpu),
        "memory_mib": str(mem),
        "num_gpu": str(num),
        "gpu_milli": str(milli),
        "gpu_spec": spec,
    }


def write_data(folder: Path, nodes: list[dict[str, str]], traces: dict[str, list[dict[str, str]]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / NODE_FILE).open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["sn", "cpu_milli", "memory_mib", "gpu", "model"])
        w.writeheader()
        w.writerows(nodes)
    for name, pods in traces.items():
        with (folder / f"openb_pod_list_{name}.csv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=POD_FIELDS)
            w.writeheader()
            w.writerows(pods)
    return folder


def real_data() -> Path:
    """The real openb folder ($PLACEMENT_DATA, else ../shared/data beside the checkout), or skip."""
    base = os.environ.get("PLACEMENT_DATA")
    tried = (
        [Path(base)]
        if base
        else [Path.cwd() / ".." / "shared" / "data", Path(__file__).resolve().parents[3] / ".." / "shared" / "data"]
    )
    for c in tried:
        try:
            return resolve_data_dir(c)
        except DataNotFound:
            continue
    pytest.skip(f"openb data not found at {', '.join(map(str, tried))}: set PLACEMENT_DATA to run this test")
