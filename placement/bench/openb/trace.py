"""The openb trace on disk: the node and pod CSVs of Alibaba's cluster-trace-gpu-v2023, read into records.

Why this exists: every other part of the replay (the cluster state, the policies, the protocol)
works on these records and never touches a file, so this is the one place that knows the file
names, the columns, and where the data folder is looked for (``--data`` or ``$PLACEMENT_DATA``).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: Milli of one whole GPU: every GPU in the trace is 1000 milli.
GPU_MILLI = 1000
#: File of the GPU nodes the paper replays on (the CPU-only nodes are not part of the protocol).
NODE_FILE = "openb_node_list_gpu_node.csv"
POD_FILE_PREFIX = "openb_pod_list_"


class DataNotFound(FileNotFoundError):
    """The openb data is not on this machine; the message names every place that was looked at."""


@dataclass(frozen=True, eq=False)
class Pod:
    """One pod of a trace. Immutable, so the copies the 130 % inflation appends can share the object."""

    name: str
    cpu: int  #: milli-CPU
    mem: int  #: MiB
    num_gpu: int
    gpu_milli: int  #: per GPU; < 1000 with num_gpu == 1 is a shared fraction of one GPU
    spec: tuple[str, ...] = ()  #: allowed GPU models; empty means any model

    @property
    def demand(self) -> int:
        """GPU milli this pod asks for in total (what "arrived" and "used" count)."""
        return self.num_gpu * self.gpu_milli

    @property
    def is_share(self) -> bool:
        """A fraction of one GPU: the GPU it lands on matters, which is FGD's whole point."""
        return self.num_gpu == 1 and 0 < self.gpu_milli < GPU_MILLI


@dataclass(frozen=True, eq=False)
class NodeTable:
    """The GPU nodes, sorted by name (the order the tie-break ranks are a permutation of)."""

    names: tuple[str, ...]
    cpu: np.ndarray  #: (N,) milli-CPU
    mem: np.ndarray  #: (N,) MiB
    gpus: np.ndarray  #: (N,) GPUs per node
    model: np.ndarray  #: (N,) index into ``models``
    models: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.names)

    @property
    def total_gpus(self) -> int:
        """G of the paper: the metric divides by it."""
        return int(self.gpus.sum())

    @property
    def max_gpus(self) -> int:
        return int(self.gpus.max()) if self.size else 0


@dataclass(frozen=True, eq=False)
class Trace:
    """A pod list, sorted by name as the protocol requires before shuffling."""

    name: str
    pods: tuple[Pod, ...]

    @property
    def demand(self) -> int:
        return sum(p.demand for p in self.pods)


def _candidate_dirs(data: Path | str | None) -> list[Path]:
    if data is not None:
        return [Path(data)]
    env = os.environ.get("PLACEMENT_DATA")
    return [Path(env)] if env else []


def resolve_data_dir(data: Path | str | None = None) -> Path:
    """The folder holding the openb CSVs: ``data``, else ``$PLACEMENT_DATA``.

    Either the ``openb`` folder itself or its parent is accepted, so ``--data DATA`` and
    ``--data DATA/openb`` both work.
    """
    tried: list[Path] = []
    for base in _candidate_dirs(data):
        for d in (base, base / "openb"):
            tried.append(d / NODE_FILE)
            if (d / NODE_FILE).is_file():
                return d
    where = f"no {NODE_FILE} at {', '.join(str(p) for p in tried)}" if tried else "no folder given"
    raise DataNotFound(
        f"openb data not found: {where}. Pass --data DIR or set PLACEMENT_DATA to the folder holding the "
        "openb CSVs (the openb traces from github.com/alibaba/clusterdata, folder cluster-trace-gpu-v2023)."
    )


def list_traces(data: Path | str | None = None) -> list[str]:
    """Trace names available in the data folder (``default``, ``cpu050``, ``gpushare100``, ...)."""
    d = resolve_data_dir(data)
    return sorted(p.name[len(POD_FILE_PREFIX) : -4] for p in d.glob(f"{POD_FILE_PREFIX}*.csv"))


def trace_file(trace: str, data: Path | str | None = None) -> Path:
    """Path of a trace's pod CSV; ``trace`` is a name such as ``default`` or a path to a CSV."""
    if trace.endswith(".csv") and Path(trace).is_file():
        return Path(trace)
    d = resolve_data_dir(data)
    path = d / f"{POD_FILE_PREFIX}{trace}.csv"
    if not path.is_file():
        known = ", ".join(list_traces(d)) or "none"
        raise DataNotFound(f"trace {trace!r} not found: no {path}. Traces in {d}: {known}")
    return path


def _parse_spec(raw: str | None) -> tuple[str, ...]:
    if not raw:
        return ()
    return tuple(sorted({m.strip() for m in raw.split("|") if m.strip()}))


def load_nodes(data: Path | str | None = None) -> NodeTable:
    """Read the 1,213 GPU nodes (``sn,cpu_milli,memory_mib,gpu,model``), sorted by name."""
    path = resolve_data_dir(data) / NODE_FILE
    with path.open(newline="") as fh:
        rows = sorted(csv.DictReader(fh), key=lambda r: r["sn"])
    return nodes_from_rows(rows)


def nodes_from_rows(rows: Sequence[dict[str, str]]) -> NodeTable:
    """Build a node table from CSV-like rows (also how the tests make small synthetic clusters)."""
    rows = sorted(rows, key=lambda r: r["sn"])
    models = tuple(sorted({r["model"] for r in rows}))
    index = {m: i for i, m in enumerate(models)}
    return NodeTable(
        names=tuple(r["sn"] for r in rows),
        cpu=np.array([int(r["cpu_milli"]) for r in rows], dtype=np.int64),
        mem=np.array([int(r["memory_mib"]) for r in rows], dtype=np.int64),
        gpus=np.array([int(r["gpu"]) for r in rows], dtype=np.int64),
        model=np.array([index[r["model"]] for r in rows], dtype=np.int64),
        models=models,
    )


def load_trace(trace: str = "default", data: Path | str | None = None) -> Trace:
    """Read ``openb_pod_list_<trace>.csv`` sorted by name; timestamps and phases are ignored (pods never end)."""
    path = trace_file(trace, data)
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    name = trace if not trace.endswith(".csv") else path.stem.removeprefix(POD_FILE_PREFIX)
    return trace_from_rows(name, rows)


def trace_from_rows(name: str, rows: Sequence[dict[str, str]]) -> Trace:
    """Build a trace from CSV-like rows; ``gpu_spec`` is optional (the multigpu files lack it)."""
    pods = [
        Pod(
            name=r["name"],
            cpu=int(r["cpu_milli"]),
            mem=int(r["memory_mib"]),
            num_gpu=int(r["num_gpu"]),
            gpu_milli=int(r["gpu_milli"]) if int(r["num_gpu"]) > 0 else 0,
            spec=_parse_spec(r.get("gpu_spec")),
        )
        for r in rows
    ]
    pods.sort(key=lambda p: p.name)
    return Trace(name=name, pods=tuple(pods))
