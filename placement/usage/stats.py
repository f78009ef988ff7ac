"""Chunks folded into bounded per-series statistics, and merged back per GPU, node, team or job.

A series is one (GPU, pod) pair. `Usage` keeps counts, sums, maxima and a whole-percent histogram
of SM utilisation per series, and a per-GPU timeline whose bucket doubles as the window grows;
`Usage.stats` merges any set of series into one `Stats` (exact means, idle shares, percentiles).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from placement.usage.reader import BINS, Chunk, Device, MetricsError, Reader, Workload


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
