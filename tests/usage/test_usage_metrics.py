"""Streaming readers: known answers from synthetic weeks, the chunk bound, Prometheus text, bad input."""

from __future__ import annotations

import gzip
import math
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from usage_synth import STEP_S, T0, WEEK_S, gpu_rows, interleave, write_csv

from placement.usage.metrics import (
    BINS,
    Chunk,
    CsvReader,
    MetricsError,
    PromReader,
    Usage,
    detect_format,
    open_metrics,
    percentile,
    read_usage,
)

WEEK = WEEK_S // STEP_S  # 40,320 samples


def _by_name(usage: Usage, idle_below: float = 20.0) -> dict[str, object]:
    return {usage.devices[d].name: usage.stats(s, idle_below) for d, s in usage.device_series().items()}


# --------------------------------------------------------------------------------------------
# Known answers


def test_a_gpu_at_ten_percent_for_a_week(tmp_path: Path) -> None:
    """GPU 0: 10 % every 15 s for a week. GPU 1: 90 % for 4 samples in 5, 0 % for the fifth."""
    busy = np.where(np.arange(WEEK) % 5 == 4, 0.0, 90.0)
    rows = interleave(gpu_rows("n1", 0, np.full(WEEK, 10.0)), gpu_rows("n1", 1, busy, mem=30.0, pod="train-0"))
    usage = read_usage(write_csv(tmp_path / "week.csv", rows), chunk_rows=7_000)
    assert usage.rows == 2 * WEEK
    idle, busy_gpu = _by_name(usage)["n1/gpu0"], _by_name(usage)["n1/gpu1"]
    assert idle.samples == WEEK
    assert idle.mean_sm == pytest.approx(10.0)
    assert idle.p95_sm == 10.0
    assert idle.idle_share == 1.0
    assert idle.hours == pytest.approx(168.0)  # (WEEK − 1) intervals of 15 s span the week minus one step
    assert idle.idle_hours == pytest.approx(168.0)
    assert busy_gpu.mean_sm == pytest.approx(72.0)
    assert busy_gpu.p95_sm == 90.0
    assert busy_gpu.idle_share == pytest.approx(0.2)
    assert busy_gpu.idle_hours == pytest.approx(0.2 * 168.0)
    assert busy_gpu.mem_peak == 30.0 and busy_gpu.mem_total == 80.0
    assert usage.window == (T0, T0 + (WEEK - 1) * STEP_S)


def test_a_job_using_8_of_32_gib(tmp_path: Path) -> None:
    """Memory ramps 2 → 8 GiB and back; mean and peak are those of the ramp."""
    mem = np.concatenate([np.linspace(2.0, 8.0, 50), np.linspace(8.0, 2.0, 50)])
    usage = read_usage(write_csv(tmp_path / "m.csv", gpu_rows("n1", 0, np.full(100, 55.0), mem=mem, pod="inf-3")))
    (stats,) = _by_name(usage).values()
    assert stats.mem_peak == pytest.approx(8.0)
    assert stats.mem_mean == pytest.approx(mem.mean())
    assert [w.pod for w in usage.workloads] == ["inf-3"]


def test_idle_threshold_and_percentiles_are_exact_on_whole_percent() -> None:
    hist = np.zeros(BINS, dtype=np.int64)
    hist[[0, 19, 20, 100]] = [10, 5, 4, 1]  # 20 samples
    assert percentile(hist, 50) == 0.0  # 10th sample
    assert percentile(hist, 60) == 19.0  # 12th
    assert percentile(hist, 95) == 20.0  # 19th
    assert percentile(hist, 100) == 100.0
    assert percentile(np.zeros(BINS), 95) is None


# --------------------------------------------------------------------------------------------
# Streaming: the memory bound is the chunk, whatever the file


def test_streaming_reads_a_big_file_chunk_by_chunk(tmp_path: Path) -> None:
    """100,000 rows through a 2,500-row budget: 40 chunks, none over budget, statistics as if read whole,
    and peak traced memory far below what the file takes as Python strings."""
    gpus, steps = 50, 2_000
    sm = (np.arange(steps)[:, None] + 7 * np.arange(gpus)[None, :]) % 101  # known per GPU
    rows = [f"{T0 + STEP_S * k},n{g // 8},{g % 8},{sm[k, g]},{g % 80},80,250,job{g % 5}-{g},team{g % 3},"
            for k in range(steps) for g in range(gpus)]
    path = write_csv(tmp_path / "big.csv", rows)
    size = path.stat().st_size
    reader = CsvReader(path, chunk_rows=2_500)
    usage = Usage()
    lengths = []
    tracemalloc.start()
    try:
        for chunk in reader.chunks():
            lengths.append(len(chunk))
            usage.add(chunk)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert reader.chunks_read == len(lengths) == math.ceil(len(rows) / 2_500) == 40
    assert max(lengths) <= 2_500 and sum(lengths) == len(rows)
    assert peak < size  # the whole file as strings would take several times its size
    usage.devices = [reader.device(i) for i in range(len(reader.devices))]
    for d, series in usage.device_series().items():
        dev = usage.devices[d]
        g = int(dev.node[1:]) * 8 + dev.gpu
        assert usage.stats(series, 20).mean_sm == pytest.approx(sm[:, g].mean())


def test_a_gzipped_file_streams_the_same(tmp_path: Path) -> None:
    rows = gpu_rows("n1", 0, [10, 20, 30, 40])
    plain = write_csv(tmp_path / "m.csv", rows)
    packed = tmp_path / "m.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    a, b = read_usage(plain), read_usage(packed)
    assert a.rows == b.rows == 4
    assert np.array_equal(a.hist, b.hist)


def test_the_timeline_coarsens_instead_of_growing() -> None:
    """A year of hourly samples into at most 64 buckets: the bucket doubles until the year fits, no
    sample is lost, and each bucket's mean is the mean of the hours it holds."""
    hours = 365 * 24
    usage = Usage(bucket_s=3600.0, max_buckets=64)
    for start in range(0, hours, 1000):  # chunks in time order
        k = np.arange(start, min(hours, start + 1000))
        usage.add(Chunk(device=np.zeros(k.size, dtype=np.int64), workload=np.zeros(k.size, dtype=np.int64),
                        ts=T0 + 3600.0 * k, sm=(k % 24).astype(float), mem_used=np.ones(k.size),
                        mem_total=np.full(k.size, 80.0), mem_free=np.full(k.size, np.nan),
                        power=np.full(k.size, np.nan), lines=int(k.size)))
    assert usage.tl_sum.shape[1] <= 64
    assert usage.bucket_s == 3600.0 * 256  # 8760 h / 256 h = 34.2 buckets; 128 h would need 69
    assert usage.tl_n.sum() == hours
    assert usage.tl_sum.sum() == pytest.approx(float((np.arange(hours) % 24).sum()))
    # Buckets align to multiples of their size in epoch time: the first holds the hours before the next one.
    in_first = 256 - (T0 // 3600) % 256
    assert usage.t0 == T0 - 3600.0 * (256 - in_first)
    assert usage.timeline(np.array([0]))[0] == pytest.approx(float((np.arange(in_first) % 24).mean()))


def test_out_of_order_chunks_extend_the_timeline_backwards() -> None:
    usage = Usage(bucket_s=3600.0, max_buckets=100)
    for hour in (10, 2):
        usage.add(Chunk(device=np.array([0]), workload=np.array([0]), ts=np.array([T0 + 3600.0 * hour]),
                        sm=np.array([50.0]), mem_used=np.array([1.0]), mem_total=np.array([80.0]),
                        mem_free=np.array([np.nan]), power=np.array([np.nan]), lines=1))
    assert usage.t0 == T0 + 2 * 3600.0
    assert usage.tl_n[0, 0] == 1 and usage.tl_n[0, 8] == 1 and usage.tl_n.sum() == 2


# --------------------------------------------------------------------------------------------
# CSV dialects and errors


def test_csv_accepts_dcgm_names_mib_free_iso_times_and_quotes(tmp_path: Path) -> None:
    path = tmp_path / "dcgm.csv"
    path.write_text(
        "Time,UUID,DCGM_FI_DEV_GPU_UTIL,DCGM_FI_DEV_FB_USED,DCGM_FI_DEV_FB_FREE,pod\n"
        "2027-01-01T00:00:00Z,GPU-1,40,2048,79872,\"a,b\"\n"
        "2027-01-01T00:00:15Z,GPU-1,60,4096,77824,\"a,b\"\n"
        "\n")
    usage = read_usage(path)
    (stats,) = _by_name(usage).values()
    assert usage.devices[0].uuid == "GPU-1" and usage.devices[0].node is None
    assert usage.workloads[0].pod == "a,b"
    assert stats.mean_sm == 50.0 and stats.mem_peak == 4.0 and stats.mem_total == 80.0
    assert usage.window == (T0, T0 + 15)


def test_epoch_milliseconds_and_blank_metrics(tmp_path: Path) -> None:
    path = tmp_path / "ms.csv"
    path.write_text("ts,node,gpu,sm_util,mem_used_gib,power_w\n"
                    f"{T0 * 1000},n1,0,10,1,\n{(T0 + 15) * 1000},n1,0,30,2,300\n")
    usage = read_usage(path)
    (stats,) = _by_name(usage).values()
    assert usage.window == (T0, T0 + 15)
    assert stats.power_mean == 300.0  # the blank power is missing, not zero
    assert stats.mem_total is None


@pytest.mark.parametrize(("text", "message"), [
    ("time,node,gpu,mem_used_gib\n", "lacks SM utilisation"),
    ("timestamp,sm_util,mem_used_gib\n", "lacks the GPU: gpu_uuid, or node (Hostname) and gpu"),
    ("timestamp,uuid,sm_util\n", "lacks memory used"),
    ("timestamp,uuid,sm_util,mem_used_gib\n1,g,5,1\n2,g,5\n", "line 3: 3 fields, the header has 4"),
    ("timestamp,uuid,sm_util,mem_used_gib\n1,g,5,1\n2,g,lots,1\n", "column sm: 'lots' is not a number"),
    ("timestamp,uuid,sm_util,mem_used_gib\nyesterday,g,5,1\n", "timestamp 'yesterday' is neither ISO 8601"),
    ("timestamp,node,gpu,sm_util,mem_used_gib\n1,n1,first,5,1\n", "GPU index 'first'"),
    ("", "empty file"),
])
def test_bad_csv_is_named_precisely(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(MetricsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_usage(path, fmt="csv")


def test_missing_file_and_bad_options(tmp_path: Path) -> None:
    with pytest.raises(MetricsError, match="not found"):
        open_metrics(tmp_path / "nope.csv")
    path = write_csv(tmp_path / "m.csv", gpu_rows("n1", 0, [1]))
    with pytest.raises(MetricsError, match="chunk_rows must be at least 1"):
        CsvReader(path, chunk_rows=0)
    with pytest.raises(MetricsError, match="unknown metrics format 'parquet'"):
        open_metrics(path, "parquet")


# --------------------------------------------------------------------------------------------
# Prometheus text exposition

LABELS = 'gpu="{g}",UUID="GPU-{g}",device="nvidia{g}",modelName="NVIDIA H100 80GB HBM3",Hostname="n1",' \
         'container="main",namespace="ml",pod="{pod}"'


def _scrape(k: int, utils: list[int], used_mib: list[int], stamp: bool = True) -> str:
    ms = f" {(T0 + 15 * k) * 1000}" if stamp else ""
    lines = ["# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).", "# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    pods = ["train-0", ""]
    lines += [f"DCGM_FI_DEV_GPU_UTIL{{{LABELS.format(g=g, pod=pods[g])}}} {u}{ms}" for g, u in enumerate(utils)]
    lines += [f"DCGM_FI_DEV_FB_USED{{{LABELS.format(g=g, pod=pods[g])}}} {m}{ms}" for g, m in enumerate(used_mib)]
    lines += [f"DCGM_FI_DEV_FB_FREE{{{LABELS.format(g=g, pod=pods[g])}}} {81920 - m}{ms}"
              for g, m in enumerate(used_mib)]
    lines += [f"DCGM_FI_DEV_POWER_USAGE{{{LABELS.format(g=g, pod=pods[g])}}} 300.5{ms}" for g in range(len(utils))]
    lines += [f'DCGM_FI_DEV_SM_CLOCK{{gpu="{g}",Hostname="n1"}} 1980{ms}' for g in range(len(utils))]
    return "\n".join(lines) + "\n"


def test_prometheus_scrapes_with_timestamps(tmp_path: Path) -> None:
    path = tmp_path / "dcgm.prom"
    path.write_text("".join(_scrape(k, [80, 5], [8192, 0]) for k in range(4)))
    assert detect_format(path) == "prom"
    usage = read_usage(path, chunk_rows=7)  # chunks cut scrapes anywhere: metrics need no joining
    stats = _by_name(usage)
    busy, idle = stats["n1/gpu0"], stats["n1/gpu1"]
    assert busy.samples == 4 and busy.mean_sm == 80.0 and busy.mem_peak == 8.0
    assert busy.mem_total == pytest.approx(80.0)  # mean(used) + mean(free)
    assert busy.power_mean == 300.5
    assert idle.idle_share == 1.0 and idle.mem_peak == 0.0
    assert usage.window == (T0, T0 + 45)
    assert {w.pod for w in usage.workloads} == {"train-0", None}
    assert usage.devices[0].model == "NVIDIA H100 80GB HBM3"


def test_prometheus_scrapes_without_timestamps_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "loop.prom"
    path.write_text("".join(_scrape(k, [10 * k, 0], [1024, 0], stamp=False) for k in range(3)))
    usage = PromReader(path, scrape_interval_s=30.0)
    result = Usage.read(usage)
    assert result.window == (0.0, 60.0)  # three scrapes, 30 s apart
    stats = {result.devices[d].name: result.stats(s, 20) for d, s in result.device_series().items()}
    assert stats["n1/gpu0"].mean_sm == 10.0


def test_prometheus_label_escapes_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "x.prom"
    path.write_text('DCGM_FI_DEV_GPU_UTIL{Hostname="n1",gpu="0",pod="a\\"b"} 7 1000\n'
                    'DCGM_FI_DEV_FB_USED{Hostname="n1",gpu="0",pod="a\\"b"} 1024 1000\n')
    usage = read_usage(path)
    assert usage.workloads[0].pod == 'a"b'
    bad = tmp_path / "bad.prom"
    bad.write_text('# TYPE x gauge\nDCGM_FI_DEV_GPU_UTIL{pod="p"} 7 1000\n')
    with pytest.raises(MetricsError, match=r"bad.prom line 2: a DCGM sample needs label UUID, or Hostname and gpu"):
        read_usage(bad)
    bad.write_text('DCGM_FI_DEV_GPU_UTIL{UUID="g"} seven\n')
    with pytest.raises(MetricsError, match=r"line 1: DCGM_FI_DEV_GPU_UTIL: 'seven' is not 'value \[timestamp_ms\]'"):
        read_usage(bad)
