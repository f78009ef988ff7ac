"""DCGM metrics as CSV with a header -> chunks: the columns it accepts and how rows are parsed fast.

A chunk's text is split in one pass (the csv module only when fields are quoted), its numbers
parsed by numpy's C reader, and each row's GPU and pod looked up as one key. Errors name the
file, the line and the column.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from placement.usage.reader import CHUNK_ROWS, MIB_PER_GIB, Chunk, Keys, MetricsError, Reader, batches, open_text

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
        with open_text(self.path) as f:
            header_line = f.readline()
            if not header_line.strip():
                raise MetricsError(f"{self.path}: empty file (a CSV header is expected on line 1)")
            header = next(csv.reader([header_line]))
            cols = self._columns(header)
            width = len(header)
            for first, lines in batches(f, self.chunk_rows, after=1):
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
