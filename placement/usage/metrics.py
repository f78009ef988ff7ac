"""Streaming readers for GPU metrics, and the bounded per-series statistics built from them.

A week of 15 s samples for 1,000 GPUs is ~40M rows: far more than a report needs to hold. The
readers yield columnar `Chunk`s of at most `chunk_rows` input lines; `Usage.add` folds each into
per-series accumulators and drops it. What stays is proportional to the number of series
(GPU × pod pairs), never to the number of rows:

* per series: sample counts, sums and maxima of SM utilisation, memory used, memory total and
  power, first and last sample time, and a 101-bin histogram of SM utilisation (DCGM reports
  whole percent, so means, idle shares under any whole-percent threshold and nearest-rank
  percentiles come out exact, and merge exactly into per-GPU, node, team and job figures);
* per GPU: a utilisation timeline in time buckets (for the heat map) whose bucket doubles
  whenever the window would need more than `max_buckets` of them.

Two input formats:

* **CSV** with a header: `timestamp` (ISO 8601 or epoch s/ms), the GPU as `gpu_uuid` and/or
  `node` (`Hostname`) + `gpu` index, `sm_util` (%), memory used (`mem_used_gib`, or MiB as DCGM
  exports `DCGM_FI_DEV_FB_USED`), optionally total or free memory and `power_w`, and the pod on
  the GPU when known (`pod`, `namespace`, `container`; or an explicit `job`/`team`). Column names
  are matched case-insensitively against the aliases in `COLUMNS`.
* **Prometheus text exposition** of `DCGM_FI_DEV_GPU_UTIL`, `DCGM_FI_DEV_FB_USED`,
  `DCGM_FI_DEV_FB_FREE` and `DCGM_FI_DEV_POWER_USAGE` with DCGM Exporter's labels (`Hostname`,
  `gpu`, `UUID`, `pod`, `namespace`, `container`, `modelName`, `GPU_I_ID`, `GPU_I_PROFILE`).
  Samples carry a timestamp in ms; without one the file is taken as consecutive scrapes
  `scrape_interval_s` apart, a new scrape starting when a series repeats. Metrics of one GPU are
  not joined row by row (a dump may list each metric for the whole week in turn): every metric is
  accumulated on its own, and the framebuffer total is mean(used) + mean(free), exact because the
  total of a GPU does not change.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
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


# --------------------------------------------------------------------------------------------
# Opening files


def _batches(f: IO[str], rows: int, after: int) -> Iterator[tuple[int, list[str]]]:
    """The file's remaining lines `rows` at a time, each with its first line's number (lines read
    before: `after`), so memory stays bounded by the chunk and errors can name the line. The generator
    keeps no reference to a yielded batch, so a caller can free the raw lines once parsed."""
    line_no = after
    batch = [list(islice(f, rows))]
    while batch[0]:
        first, line_no = line_no + 1, line_no + len(batch[0])
        yield first, batch.pop()
        batch.append(list(islice(f, rows)))


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")  # noqa: SIM115 - the reader closes it


def detect_format(path: str | Path) -> str:
    """'prom' when the first meaningful line is a Prometheus comment or sample, else 'csv'."""
    with _open(Path(path)) as f:
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


def open_metrics(path: str | Path, fmt: str = "auto", chunk_rows: int = CHUNK_ROWS,
                 scrape_interval_s: float = 15.0) -> Reader:
    """A reader for `path`: fmt 'csv', 'prom' or 'auto' (by the first meaningful line)."""
    if fmt == "auto":
        if not Path(path).is_file():
            raise MetricsError(f"metrics file not found: {path}")
        fmt = detect_format(path)
    if fmt == "csv":
        return CsvReader(path, chunk_rows)
    if fmt == "prom":
        return PromReader(path, chunk_rows, scrape_interval_s)
    raise MetricsError(f"unknown metrics format '{fmt}' (csv, prom or auto)")


# --------------------------------------------------------------------------------------------
# CSV

#: Canonical column -> accepted header names (lower case). Units: *_gib in GiB, *_mib in MiB.
COLUMNS: dict[str, tuple[str, ...]] = {
    "timestamp": ("timestamp", "time", "ts"),
    "node": ("node", "hostname", "host"),
    "gpu": ("gpu", "gpu_index", "gpu_id"),
    "uuid": ("gpu_uuid", "uuid"),
    "instance": ("gpu_i_id", "gpu_instance"),
    "profile": ("gpu_i_profile", "mig_profile"),
    "model": ("modelname", "gpu_model", "model"),
    "sm": ("sm_util", "gpu_util", "dcgm_fi_dev_gpu_util", "util"),
    "mem_used_gib": ("mem_used_gib", "fb_used_gib"),
    "mem_used_mib": ("mem_used_mib", "fb_used", "dcgm_fi_dev_fb_used"),
    "mem_total_gib": ("mem_total_gib", "fb_total_gib"),
    "mem_total_mib": ("mem_total_mib", "fb_total", "dcgm_fi_dev_fb_total"),
    "mem_free_gib": ("mem_free_gib", "fb_free_gib"),
    "mem_free_mib": ("mem_free_mib", "fb_free", "dcgm_fi_dev_fb_free"),
    "power": ("power_w", "power", "power_usage", "dcgm_fi_dev_power_usage"),
    "pod": ("pod", "pod_name"),
    "namespace": ("namespace", "pod_namespace"),
    "container": ("container", "container_name"),
    "job": ("job",),
    "team": ("team",),
}


#: Key columns, in Device and Workload field order.
_DEVICE_COLUMNS = ("node", "gpu", "uuid", "instance", "profile", "model")
_WORKLOAD_COLUMNS = ("pod", "namespace", "container", "job", "team")
#: Numeric columns (besides the timestamp) and their scale to the Chunk's unit.
_NUMERIC = (("sm", 1.0), ("mem_used_gib", 1.0), ("mem_used_mib", 1 / MIB_PER_GIB), ("mem_total_gib", 1.0),
            ("mem_total_mib", 1 / MIB_PER_GIB), ("mem_free_gib", 1.0), ("mem_free_mib", 1 / MIB_PER_GIB),
            ("power", 1.0))


class CsvReader(Reader):
    """Header, then rows. A chunk's text is split once (csv module only when quoted), its numbers parsed
    by numpy's C reader, and each row's GPU and pod looked up as one key (a dict hit per row)."""

    def __init__(self, path: str | Path, chunk_rows: int = CHUNK_ROWS) -> None:
        super().__init__(path, chunk_rows)
        self._pairs = Keys()  # (present key columns...) -> pair id
        self._pair_ids: list[tuple[int, int]] = []  # pair id -> (device id, workload id)

    def chunks(self) -> Iterator[Chunk]:
        with _open(self.path) as f:
            header_line = f.readline()
            if not header_line.strip():
                raise MetricsError(f"{self.path}: empty file (a CSV header is expected on line 1)")
            header = next(csv.reader([header_line]))
            cols = self._columns(header)
            width = len(header)
            for first, lines in _batches(f, self.chunk_rows, after=1):
                fields, kept, text = _split(lines, width, self.path, first)
                count = len(lines)
                del lines
                self.chunks_read += 1
                self.rows_read += kept
                yield self._chunk(fields, kept, text, width, cols, first, count)

    def _columns(self, header: list[str]) -> dict[str, int]:
        names = [h.strip().lower() for h in header]
        found: dict[str, int] = {}
        for canon, aliases in COLUMNS.items():
            for alias in aliases:
                if alias in names:
                    found[canon] = names.index(alias)
                    break
        missing = []
        if "timestamp" not in found:
            missing.append("a timestamp column (timestamp, time, ts)")
        if "sm" not in found:
            missing.append("SM utilisation (sm_util, gpu_util, DCGM_FI_DEV_GPU_UTIL)")
        if "mem_used_gib" not in found and "mem_used_mib" not in found:
            missing.append("memory used (mem_used_gib, or MiB: mem_used_mib, fb_used, DCGM_FI_DEV_FB_USED)")
        if "uuid" not in found and not ("node" in found and "gpu" in found):
            missing.append("the GPU: gpu_uuid, or node (Hostname) and gpu (index)")
        if missing:
            raise MetricsError(f"{self.path} line 1: the header lacks {'; '.join(missing)} "
                               f"(header: {', '.join(header)})")
        return found

    def _chunk(self, fields: list[str], rows: int, text: str | None, width: int, cols: dict[str, int], first: int,
               lines: int) -> Chunk:
        numeric = [(name, scale) for name, scale in _NUMERIC if name in cols]
        values = _numbers(text, [cols[n] for n, _ in numeric], rows) if text is not None else None
        got: dict[str, np.ndarray] = {}
        for k, (name, scale) in enumerate(numeric):
            column = values[:, k] if values is not None else _floats(fields[cols[name]::width], self.path, first,
                                                                    name)
            got[name] = column * scale if scale != 1.0 else column
        missing = np.full(rows, np.nan)
        used = got.get("mem_used_gib", got.get("mem_used_mib"))
        total = got.get("mem_total_gib", got.get("mem_total_mib", missing))
        free = got.get("mem_free_gib", got.get("mem_free_mib", missing))
        assert used is not None
        total = np.where(np.isnan(total), used + free, total)  # one row carries both: exact
        device, workload = self._keys(fields, width, cols)
        return Chunk(device=device, workload=workload, ts=_times(fields[cols["timestamp"]::width], self.path, first),
                     sm=got["sm"], mem_used=used, mem_total=total, mem_free=missing.copy(),
                     power=got.get("power", missing.copy()), lines=lines)

    def _keys(self, fields: list[str], width: int, cols: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
        """(device ids, workload ids) per row, from one lookup of the row's present key columns."""
        present = [c for c in (*_DEVICE_COLUMNS, *_WORKLOAD_COLUMNS) if c in cols]
        pair = self._pairs.codes(zip(*(fields[cols[c]::width] for c in present), strict=True))
        for key in self._pairs.items[len(self._pair_ids):]:
            values = dict(zip(present, key, strict=True))
            dev = self.devices.codes([tuple(values.get(c, "") for c in _DEVICE_COLUMNS)])
            wl = self.workloads.codes([tuple(values.get(c, "") for c in _WORKLOAD_COLUMNS)])
            self._pair_ids.append((int(dev[0]), int(wl[0])))
        table = np.array(self._pair_ids, dtype=np.int64).reshape(-1, 2)
        return table[pair, 0], table[pair, 1]


def _numbers(text: str, usecols: list[int], rows: int) -> np.ndarray | None:
    """The numeric columns of unquoted chunk text by numpy's C parser; None when a field is empty or not a
    number (the per-column path then reads blanks as missing and names the bad value)."""
    if not usecols:
        return np.zeros((rows, 0))
    try:
        out = np.loadtxt(io.StringIO(text), delimiter=",", usecols=usecols, dtype=np.float64, ndmin=2,
                         comments=None, quotechar=None)
    except ValueError:
        return None
    return out if out.shape == (rows, len(usecols)) else None


def _split(lines: list[str], width: int, path: Path, first: int) -> tuple[list[str], int, str | None]:
    """All fields of the chunk, row-major, the number of rows, and the clean text (None when quoted);
    blank lines are skipped and a row with another number of fields than the header is an error naming
    its line.

    Unquoted text (DCGM's) is split in one C-level pass; the csv module handles chunks with quotes.
    """
    text = "".join(lines)
    if '"' in text:
        _check_width(lines, width, path, first)
        rows = [r for r in csv.reader(lines) if r and any(v.strip() for v in r)]
        return [v.strip() for r in rows for v in r], len(rows), None
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    if not text.endswith("\n"):
        text += "\n"
    counts = _comma_counts(text)
    rows = int(counts.size)
    if (counts != width - 1).any():
        _check_width(lines, width, path, first)  # raises unless the odd lines are blank
        body = [ln for ln in text.split("\n") if ln.strip()]
        text, rows = "\n".join(body) + "\n", len(body)
    fields = text.replace("\n", ",").split(",")
    fields.pop()  # after the last newline
    return fields, rows, text


def _comma_counts(text: str) -> np.ndarray:
    """Commas per line of newline-terminated text, counted on its bytes (UTF-8 keeps ',' and '\\n' single bytes)."""
    b = np.frombuffer(text.encode(), dtype=np.uint8)
    starts = np.concatenate([[0], np.flatnonzero(b == 10)[:-1] + 1])
    return np.add.reduceat((b == 44).view(np.uint8), starts, dtype=np.int64)


def _check_width(lines: list[str], width: int, path: Path, first: int) -> None:
    for k, line in enumerate(lines):
        if not line.strip():
            continue
        n = len(next(csv.reader([line])))
        if n != width:
            raise MetricsError(f"{path} line {first + k}: {n} fields, the header has {width}")


def _floats(values: list[str], path: Path, first: int, column: str) -> np.ndarray:
    try:
        return np.fromiter(map(float, values), dtype=np.float64, count=len(values))
    except ValueError:
        pass
    out = np.empty(len(values))
    for i, v in enumerate(values):
        if not v.strip():
            out[i] = np.nan  # a sample without this metric
            continue
        try:
            out[i] = float(v)
        except ValueError:
            raise MetricsError(f"{path}: row {i + 1} of the chunk starting at line {first}: column "
                               f"{column}: {v!r} is not a number") from None
    return out


def _times(values: list[str], path: Path, first: int) -> np.ndarray:
    """ISO 8601 (zone-less = UTC) or epoch seconds; epoch values above 1e11 are milliseconds."""
    try:
        ts = np.fromiter(map(float, values), dtype=np.float64, count=len(values))
    except ValueError:
        table: dict[str, float] = {}

        def parse(v: str) -> float:
            t = table.get(v)
            if t is None:
                t = table[v] = _iso(v, path, first)
            return t

        return np.fromiter(map(parse, values), dtype=np.float64, count=len(values))
    return np.where(ts > 1e11, ts / 1000.0, ts)


def _iso(value: str, path: Path, first: int) -> float:
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise MetricsError(f"{path}: chunk starting at line {first}: timestamp {value!r} is neither ISO 8601 "
                           "nor epoch seconds") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.timestamp()


# --------------------------------------------------------------------------------------------
# Prometheus text exposition

#: DCGM metric -> (Chunk column, scale to its unit).
PROM_METRICS: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("sm", 1.0),
    "DCGM_FI_DEV_FB_USED": ("mem_used", 1 / MIB_PER_GIB),
    "DCGM_FI_DEV_FB_FREE": ("mem_free", 1 / MIB_PER_GIB),
    "DCGM_FI_DEV_POWER_USAGE": ("power", 1.0),
}
_METRIC_COLUMNS = ("sm", "mem_used", "mem_free", "power")
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


class PromReader(Reader):
    """One sample per line; labels are parsed once per distinct label set (they repeat every scrape)."""

    def __init__(self, path: str | Path, chunk_rows: int = CHUNK_ROWS, scrape_interval_s: float = 15.0) -> None:
        super().__init__(path, chunk_rows)
        if not scrape_interval_s > 0:
            raise MetricsError(f"scrape interval must be positive, got {scrape_interval_s}")
        self.scrape_interval_s = scrape_interval_s
        self._labels: dict[str, tuple[int, int]] = {}
        self._scrape = 0
        self._seen: set[tuple[int, str]] = set()

    def chunks(self) -> Iterator[Chunk]:
        with _open(self.path) as f:
            for first, lines in _batches(f, self.chunk_rows, after=0):
                chunk = self._parse(lines, first)
                self.chunks_read += 1
                self.rows_read += len(chunk)
                yield chunk

    def _parse(self, lines: list[str], first: int) -> Chunk:
        dev: list[int] = []
        wl: list[int] = []
        ts: list[float] = []
        kind: list[int] = []
        val: list[float] = []
        for k, raw in enumerate(lines):
            line = raw.strip()
            if not line or line[0] == "#":
                continue
            brace = line.find("{")
            if brace >= 0:
                name = line[:brace]
                close = line.rfind("}")
                if close < brace:
                    raise MetricsError(f"{self.path} line {first + k}: unclosed '{{' in {line[:80]!r}")
                labels, rest = line[brace + 1:close], line[close + 1:].split()
            else:
                name, *rest = line.split()
                labels = ""
            metric = PROM_METRICS.get(name.strip())
            if metric is None:
                continue  # other metrics of the exporter
            if not 1 <= len(rest) <= 2:
                raise MetricsError(f"{self.path} line {first + k}: expected 'value [timestamp_ms]' after the "
                                   f"labels of {name}, got {' '.join(rest)!r}")
            try:
                value = float(rest[0])
                stamp = float(rest[1]) / 1000.0 if len(rest) == 2 else None
            except ValueError:
                raise MetricsError(f"{self.path} line {first + k}: {name}: {' '.join(rest)!r} is not "
                                   "'value [timestamp_ms]'") from None
            d, w = self._series(labels, first + k)
            column = _METRIC_COLUMNS.index(metric[0])
            if stamp is None:
                key = (column, labels)
                if key in self._seen:  # a series repeats: the next scrape began
                    self._scrape += 1
                    self._seen.clear()
                self._seen.add(key)
                stamp = self._scrape * self.scrape_interval_s
            dev.append(d)
            wl.append(w)
            ts.append(stamp)
            kind.append(column)
            val.append(value * metric[1])
        kinds = np.array(kind, dtype=np.int64)
        values = np.array(val, dtype=np.float64)
        per = {c: np.where(kinds == i, values, np.nan) for i, c in enumerate(_METRIC_COLUMNS)}
        return Chunk(device=np.array(dev, dtype=np.int64), workload=np.array(wl, dtype=np.int64),
                     ts=np.array(ts, dtype=np.float64), sm=per["sm"], mem_used=per["mem_used"],
                     mem_total=np.full(values.size, np.nan), mem_free=per["mem_free"], power=per["power"],
                     lines=len(lines))

    def _series(self, labels: str, line_no: int) -> tuple[int, int]:
        found = self._labels.get(labels)
        if found is None:
            pairs = dict(_parse_labels(labels, self.path, line_no))
            gpu = pairs.get("gpu")
            if gpu is not None and not gpu.isdigit():
                raise MetricsError(f"{self.path} line {line_no}: label gpu={gpu!r} is not a GPU index")
            if pairs.get("UUID") is None and (pairs.get("Hostname") is None or gpu is None):
                raise MetricsError(f"{self.path} line {line_no}: a DCGM sample needs label UUID, or Hostname and "
                                   f"gpu, to name its GPU (labels: {labels[:120]})")
            device = tuple(pairs.get(k, "") for k in ("Hostname", "gpu", "UUID", "GPU_I_ID", "GPU_I_PROFILE",
                                                       "modelName"))
            workload = (*(pairs.get(k, "") for k in ("pod", "namespace", "container")), "", "")
            found = (int(self.devices.codes([device])[0]), int(self.workloads.codes([workload])[0]))
            self._labels[labels] = found
        return found


def _parse_labels(text: str, path: Path, line_no: int) -> Iterator[tuple[str, str]]:
    pos = 0
    while pos < len(text.rstrip()):
        m = _LABEL.match(text, pos)
        if m is None:
            raise MetricsError(f"{path} line {line_no}: cannot read labels at {text[pos:pos + 40]!r}")
        yield m.group(1), m.group(2).replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        pos = m.end()


# --------------------------------------------------------------------------------------------
# Accumulation


@dataclass
class Usage:
    """Per-series accumulators; a series is one (device, workload) pair of the reader's registries."""

    bucket_s: float = 3600.0
    max_buckets: int = 512
    devices: list[Device] = field(default_factory=list)
    workloads: list[Workload] = field(default_factory=list)
    rows: int = 0
    chunks: int = 0

    def __post_init__(self) -> None:
        if not self.bucket_s > 0 or self.max_buckets < 2:
            raise MetricsError("bucket_s must be positive and max_buckets at least 2")
        self._series: dict[int, int] = {}  # device * 2**32 + workload -> series
        self.series_device = np.zeros(0, dtype=np.int64)
        self.series_workload = np.zeros(0, dtype=np.int64)
        z = np.zeros(0)
        self.n_sm, self.sum_sm = z.copy(), z.copy()
        self.hist = np.zeros((0, BINS), dtype=np.int64)
        self.n_mem, self.sum_mem, self.max_mem = z.copy(), z.copy(), z.copy()
        self.n_total, self.sum_total = z.copy(), z.copy()
        self.n_free, self.sum_free = z.copy(), z.copy()
        self.n_power, self.sum_power, self.max_power = z.copy(), z.copy(), z.copy()
        self.t_first, self.t_last = z.copy(), z.copy()
        self.t0: float | None = None  # start of bucket 0
        self._t_end = 0.0  # latest SM sample time
        self.tl_sum = np.zeros((0, 0))
        self.tl_n = np.zeros((0, 0))

    # -- reading ---------------------------------------------------------------------------

    @classmethod
    def read(cls, reader: Reader, bucket_s: float = 3600.0, max_buckets: int = 512) -> Usage:
        usage = cls(bucket_s=bucket_s, max_buckets=max_buckets)
        for chunk in reader.chunks():
            usage.add(chunk)
        usage.devices = [reader.device(i) for i in range(len(reader.devices))]
        usage.workloads = [reader.workload(i) for i in range(len(reader.workloads))]
        return usage

    def add(self, chunk: Chunk) -> None:
        self.chunks += 1
        if not len(chunk):
            return
        self.rows += len(chunk)
        sid = self._series_ids(chunk.device, chunk.workload)
        n = self.series_device.size
        sm_ok = ~np.isnan(chunk.sm)
        s, v = sid[sm_ok], chunk.sm[sm_ok]
        self.n_sm += np.bincount(s, minlength=n)
        self.sum_sm += np.bincount(s, weights=v, minlength=n)
        bins = np.clip(np.floor(v), 0, BINS - 1).astype(np.int64)
        self.hist += np.bincount(s * BINS + bins, minlength=n * BINS).reshape(n, BINS)
        t = chunk.ts[sm_ok]
        if t.size:
            np.minimum.at(self.t_first, s, t)
            np.maximum.at(self.t_last, s, t)
            self._timeline(chunk.device[sm_ok], t, v)
        for values, count, total, peak in ((chunk.mem_used, self.n_mem, self.sum_mem, self.max_mem),
                                           (chunk.mem_total, self.n_total, self.sum_total, None),
                                           (chunk.mem_free, self.n_free, self.sum_free, None),
                                           (chunk.power, self.n_power, self.sum_power, self.max_power)):
            ok = ~np.isnan(values)
            if not ok.any():
                continue
            count += np.bincount(sid[ok], minlength=n)
            total += np.bincount(sid[ok], weights=values[ok], minlength=n)
            if peak is not None:
                np.maximum.at(peak, sid[ok], values[ok])

    def _series_ids(self, device: np.ndarray, workload: np.ndarray) -> np.ndarray:
        keys = device * (1 << 32) + workload
        uniq, inverse = np.unique(keys, return_inverse=True)
        ids = np.empty(uniq.size, dtype=np.int64)
        new_dev, new_wl = [], []
        for k, key in enumerate(uniq.tolist()):
            sid = self._series.get(key)
            if sid is None:
                sid = self._series[key] = self.series_device.size + len(new_dev)
                new_dev.append(key >> 32)
                new_wl.append(key & 0xFFFFFFFF)
            ids[k] = sid
        if new_dev:
            self._grow(len(new_dev), new_dev, new_wl)
        return ids[inverse.reshape(-1)]

    def _grow(self, k: int, devices: list[int], workloads: list[int]) -> None:
        self.series_device = np.concatenate([self.series_device, np.array(devices, dtype=np.int64)])
        self.series_workload = np.concatenate([self.series_workload, np.array(workloads, dtype=np.int64)])
        for name in ("n_sm", "sum_sm", "n_mem", "sum_mem", "n_total", "sum_total", "n_free", "sum_free", "n_power",
                     "sum_power"):
            setattr(self, name, np.concatenate([getattr(self, name), np.zeros(k)]))
        for name in ("max_mem", "max_power", "t_last"):
            setattr(self, name, np.concatenate([getattr(self, name), np.full(k, -np.inf)]))
        self.t_first = np.concatenate([self.t_first, np.full(k, np.inf)])
        self.hist = np.concatenate([self.hist, np.zeros((k, BINS), dtype=np.int64)])

    def _timeline(self, device: np.ndarray, ts: np.ndarray, sm: np.ndarray) -> None:
        """Per-GPU utilisation sums per time bucket; the bucket doubles whenever the window would need more
        than max_buckets of them, so the timeline stays (GPUs × max_buckets) whatever the file's span."""
        lo, hi = float(ts.min()), float(ts.max())
        start = lo if self.t0 is None else min(lo, self.t0)
        self._t_end = hi if self.t0 is None else max(hi, self._t_end)
        size = self.bucket_s
        t0 = math.floor(start / size) * size
        while (self._t_end - t0) // size + 1 > self.max_buckets:
            size *= 2
            t0 = math.floor(start / size) * size
        width = int((self._t_end - t0) // size) + 1
        rows = max(self.tl_sum.shape[0], int(device.max()) + 1)
        if (t0, size, width, rows) != (self.t0, self.bucket_s, self.tl_sum.shape[1], self.tl_sum.shape[0]):
            self._regrid(t0, size, width, rows)
        flat = device * width + ((ts - t0) // size).astype(np.int64)
        self.tl_sum += np.bincount(flat, weights=sm, minlength=self.tl_sum.size).reshape(self.tl_sum.shape)
        self.tl_n += np.bincount(flat, minlength=self.tl_n.size).reshape(self.tl_n.shape)

    def _regrid(self, t0: float, size: float, width: int, rows: int) -> None:
        """Move the timeline onto a grid starting at t0 with buckets of `size` (a power-of-two multiple of
        the old one, both aligned, so every old bucket falls inside exactly one new bucket)."""
        old_sum, old_n = self.tl_sum, self.tl_n
        self.tl_sum, self.tl_n = np.zeros((rows, width)), np.zeros((rows, width))
        if old_sum.size and self.t0 is not None:
            cols = ((self.t0 + np.arange(old_sum.shape[1]) * self.bucket_s - t0) // size).astype(np.int64)
            np.add.at(self.tl_sum.T, cols, np.pad(old_sum, ((0, rows - old_sum.shape[0]), (0, 0))).T)
            np.add.at(self.tl_n.T, cols, np.pad(old_n, ((0, rows - old_n.shape[0]), (0, 0))).T)
        self.t0, self.bucket_s = t0, size

    # -- reading back ----------------------------------------------------------------------

    @property
    def window(self) -> tuple[float, float] | None:
        """(first, last) sample time of SM utilisation, epoch seconds; None before any."""
        seen = self.n_sm > 0
        if not seen.any():
            return None
        return float(self.t_first[seen].min()), float(self.t_last[seen].max())

    def stats(self, series: np.ndarray, idle_below: float) -> Stats:
        """Merged figures of a set of series (one GPU, a node, a team, a job)."""
        series = np.asarray(series, dtype=np.int64)
        hist = self.hist[series].sum(axis=0)
        n = int(hist.sum())
        cut = int(math.ceil(idle_below))
        intervals = self._intervals()[series]
        hours = float((self.n_sm[series] * intervals).sum() / 3600.0)
        idle_h = float((self.hist[series, :cut].sum(axis=1) * intervals).sum() / 3600.0)
        mem_n = self.n_mem[series].sum()
        total_n, free_n = self.n_total[series].sum(), self.n_free[series].sum()
        if total_n:
            mem_total = float(self.sum_total[series].sum() / total_n)
        elif free_n and mem_n:  # mean(used) + mean(free): the framebuffer's fixed total
            mem_total = float(self.sum_mem[series].sum() / mem_n + self.sum_free[series].sum() / free_n)
        else:
            mem_total = None
        power_n = self.n_power[series].sum()
        return Stats(
            samples=n,
            mean_sm=float(self.sum_sm[series].sum() / n) if n else None,
            p95_sm=percentile(hist, 95.0),
            idle_share=float(hist[:cut].sum() / n) if n else None,
            hours=hours, idle_hours=idle_h,
            mem_mean=float(self.sum_mem[series].sum() / mem_n) if mem_n else None,
            mem_peak=float(self.max_mem[series].max()) if mem_n else None,
            mem_total=mem_total,
            power_mean=float(self.sum_power[series].sum() / power_n) if power_n else None,
            hist=hist,
        )

    def _intervals(self) -> np.ndarray:
        """Seconds each SM sample of a series stands for: its span over (samples − 1); series with one
        sample take the median of the others (or the bucket when there are none)."""
        n = self.n_sm
        span = np.where(n > 1, self.t_last - self.t_first, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            interval = np.where(n > 1, span / np.maximum(n - 1, 1), np.nan)
        known = interval[~np.isnan(interval) & (interval > 0)]
        fallback = float(np.median(known)) if known.size else self.bucket_s
        return np.where(np.isnan(interval) | (interval <= 0), fallback, interval)

    def device_series(self) -> dict[int, np.ndarray]:
        """Device id -> its series."""
        order = np.argsort(self.series_device, kind="stable")
        devs, starts = np.unique(self.series_device[order], return_index=True)
        return {int(d): s for d, s in zip(devs.tolist(), np.split(order, starts[1:]), strict=True)}

    def timeline(self, devices: np.ndarray) -> np.ndarray:
        """Mean SM utilisation per bucket over the given devices (NaN where none reported)."""
        devices = devices[devices < self.tl_sum.shape[0]]
        total, count = self.tl_sum[devices].sum(axis=0), self.tl_n[devices].sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 0, total / np.maximum(count, 1), np.nan)


@dataclass(frozen=True)
class Stats:
    samples: int
    mean_sm: float | None
    p95_sm: float | None
    idle_share: float | None
    hours: float  # GPU-hours the samples cover
    idle_hours: float  # of which under the idle threshold
    mem_mean: float | None  # GiB
    mem_peak: float | None  # GiB
    mem_total: float | None  # GiB, mean framebuffer size
    power_mean: float | None
    hist: np.ndarray  # (BINS,) sample counts per whole percent


def percentile(hist: np.ndarray, q: float) -> float | None:
    """Nearest-rank percentile of whole-percent samples: the smallest bin holding the ceil(q% · n)-th sample."""
    n = int(hist.sum())
    if not n:
        return None
    rank = max(1, math.ceil(q / 100.0 * n))
    return float(np.searchsorted(np.cumsum(hist), rank))


def read_usage(path: str | Path, fmt: str = "auto", chunk_rows: int = CHUNK_ROWS, bucket_s: float = 3600.0,
               scrape_interval_s: float = 15.0) -> Usage:
    """Stream a metrics file into per-series statistics."""
    return Usage.read(open_metrics(path, fmt, chunk_rows, scrape_interval_s), bucket_s=bucket_s)
