"""The streaming half of metrics reading: files in bounded batches of lines, rows as columnar chunks.

Both formats (placement.usage.dcgm_csv, placement.usage.prometheus) read through `Reader`: a file
(plain or .gz) is taken `chunk_rows` lines at a time, each batch becomes one columnar `Chunk`,
and each GPU (`Device`) and pod (`Workload`) is registered once as a dense id, so memory follows
the chunk and the number of GPUs and pods, never the number of rows.
"""

from __future__ import annotations

import gzip
import io
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import IO

import numpy as np

#: Lines per chunk unless told otherwise: ~20 MB at the peak for 75-byte DCGM-like lines (Python strings);
#: measured faster than bigger chunks too (they fall out of the CPU caches).
CHUNK_ROWS = 10_000
MIB_PER_GIB = 1024.0
#: SM utilisation histogram bins: 0..100 %.
BINS = 101


class MetricsError(ValueError):
    """Input that cannot be read: the message names the file, the line and the column."""


@dataclass(frozen=True)
class Device:
    """One GPU (or one MIG instance of it, when the exporter reports per instance)."""

    node: str | None
    gpu: int | None
    uuid: str | None
    instance: str | None = None  # MIG GPU instance id (GPU_I_ID)
    profile: str | None = None  # MIG profile (GPU_I_PROFILE)
    model: str | None = None  # GPU model as the exporter names it (modelName)

    @property
    def name(self) -> str:
        base = f"{self.node}/gpu{self.gpu}" if self.node is not None and self.gpu is not None else (
            self.uuid or f"{self.node}/gpu?")
        return base + (f"/mig{self.instance}" if self.instance else "")


@dataclass(frozen=True)
class Workload:
    """Who ran on a GPU, as the exporter's labels (or explicit CSV columns) say; all None: nobody known."""

    pod: str | None = None
    namespace: str | None = None
    container: str | None = None
    job: str | None = None
    team: str | None = None


class Keys:
    """Distinct keys -> dense ids, kept for the whole read (bounded by GPUs and pods, not rows)."""

    def __init__(self) -> None:
        self.ids: dict[tuple[object, ...], int] = {}
        self.items: list[tuple[object, ...]] = []

    def codes(self, keys: Iterable[tuple[object, ...]]) -> np.ndarray:
        """Ids of `keys`, registering new ones in order of first appearance (lookups stay in C)."""
        keys = list(keys)
        try:
            return np.fromiter(map(self.ids.__getitem__, keys), dtype=np.int64, count=len(keys))
        except KeyError:
            for k in dict.fromkeys(keys):
                if k not in self.ids:
                    self.ids[k] = len(self.items)
                    self.items.append(k)
            return np.fromiter(map(self.ids.__getitem__, keys), dtype=np.int64, count=len(keys))

    def __len__(self) -> int:
        return len(self.items)


@dataclass
class Chunk:
    """At most `chunk_rows` samples, columnar; NaN where a sample does not carry a metric."""

    device: np.ndarray  # int64 ids into the reader's devices
    workload: np.ndarray  # int64 ids into the reader's workloads
    ts: np.ndarray  # epoch seconds
    sm: np.ndarray  # percent
    mem_used: np.ndarray  # GiB
    mem_total: np.ndarray  # GiB
    mem_free: np.ndarray  # GiB
    power: np.ndarray  # W
    lines: int  # input lines this chunk consumed (comments and blanks included)

    def __len__(self) -> int:
        return int(self.ts.size)


def batches(f: IO[str], rows: int, after: int) -> Iterator[tuple[int, list[str]]]:
    """The file's remaining lines `rows` at a time, each with its first line's number (lines read
    before: `after`), so memory stays bounded by the chunk and errors can name the line. The generator
    keeps no reference to a yielded batch, so a caller can free the raw lines once parsed."""
    line_no = after
    batch = [list(islice(f, rows))]
    while batch[0]:
        first, line_no = line_no + 1, line_no + len(batch[0])
        yield first, batch.pop()
        batch.append(list(islice(f, rows)))


def open_text(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")  # noqa: SIM115 - the reader closes it


def detect_format(path: str | Path) -> str:
    """'prom' when the first meaningful line is a Prometheus comment or sample, else 'csv'."""
    with open_text(Path(path)) as f:
        for line in f:
            s = line.strip()
            if not s:
                continue
            if s.startswith("#") or re.match(r"^[A-Za-z_:][A-Za-z0-9_:]*(\{|\s+[-+0-9.eEnNaIif]+)", s):
                return "prom"
            return "csv"
    return "csv"


class Reader:
    """Base of both readers: the file, the chunk budget, and the key registries a `Usage` reads back."""

    def __init__(self, path: str | Path, chunk_rows: int = CHUNK_ROWS) -> None:
        if chunk_rows < 1:
            raise MetricsError(f"chunk_rows must be at least 1, got {chunk_rows}")
        self.path = Path(path)
        if not self.path.is_file():
            raise MetricsError(f"metrics file not found: {self.path}")
        self.chunk_rows = chunk_rows
        self.devices = Keys()
        self.workloads = Keys()
        self.chunks_read = 0
        self.rows_read = 0

    def chunks(self) -> Iterator[Chunk]:
        raise NotImplementedError

    def device(self, i: int) -> Device:
        """Keys hold raw text ('' = absent) so a chunk maps rows to ids without per-field work; here they
        become a Device, the GPU index checked."""
        node, gpu, uuid, instance, profile, model = (_text(v) for v in self.devices.items[i])
        if gpu is not None and not gpu.isdigit():
            raise MetricsError(f"{self.path}: GPU index {gpu!r} (node {node}, uuid {uuid}) is not a number")
        return Device(node, int(gpu) if gpu is not None else None, uuid, instance, profile, model)

    def workload(self, i: int) -> Workload:
        return Workload(*(_text(v) for v in self.workloads.items[i]))


def _text(value: object) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None
