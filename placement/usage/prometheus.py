"""DCGM Exporter's Prometheus text exposition -> chunks: one sample per line, labels parsed once.

Only the DCGM metrics in `PROM_METRICS` are read; other metrics of the exporter are skipped.
Samples without a timestamp are taken as consecutive scrapes `scrape_interval_s` apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from placement.usage.reader import CHUNK_ROWS, MIB_PER_GIB, Chunk, MetricsError, Reader, batches, open_text

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
        with open_text(self.path) as f:
            for first, lines in batches(f, self.chunk_rows, after=0):
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
