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

The modules: reader (batches, chunks, the `Reader` base), dcgm_csv and prometheus (one reader
per format), stats (`Usage`, the accumulators). This module opens a file with the right reader.
"""

from __future__ import annotations

from pathlib import Path

from placement.usage.dcgm_csv import COLUMNS, CsvReader
from placement.usage.prometheus import PROM_METRICS, PromReader
from placement.usage.reader import (
    BINS,
    CHUNK_ROWS,
    MIB_PER_GIB,
    Chunk,
    Device,
    Keys,
    MetricsError,
    Reader,
    Workload,
    detect_format,
)
from placement.usage.stats import Stats, Usage, percentile

__all__ = ["BINS", "CHUNK_ROWS", "COLUMNS", "MIB_PER_GIB", "PROM_METRICS", "Chunk", "CsvReader", "Device", "Keys",
           "MetricsError", "PromReader", "Reader", "Stats", "Usage", "Workload", "detect_format", "open_metrics",
           "percentile", "read_usage"]


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


def read_usage(path: str | Path, fmt: str = "auto", chunk_rows: int = CHUNK_ROWS, bucket_s: float = 3600.0,
               scrape_interval_s: float = 15.0) -> Usage:
    """Stream a metrics file into per-series statistics."""
    return Usage.read(open_metrics(path, fmt, chunk_rows, scrape_interval_s), bucket_s=bucket_s)
