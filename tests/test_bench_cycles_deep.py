"""``placement bench cycles --deep-queue N``: our plan call timed on the strict-FIFO peer's deep-queue states."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.bench.cycles.cli import main
from placement.bench.cycles.deep import deep_states, time_calls
from placement.bench.cycles.sim import SimConfig
from placement.bench.cycles.state import TraceJob


def _jobs() -> list[TraceJob]:
    # A 16-GPU gang blocks the head of a FIFO queue on two 8-GPU nodes while one-GPU jobs pile up behind it.
    jobs = [TraceJob("long", submit_s=0.0, duration_s=36_000.0, gpus=4, estimate_s=36_000.0),
            TraceJob("gang", submit_s=30.0, duration_s=3_600.0, gpus=16, estimate_s=3_600.0)]
    jobs += [TraceJob(f"s{i:02d}", submit_s=60.0 + 60 * i, duration_s=1_800.0, gpus=1, estimate_s=1_800.0)
             for i in range(40)]
    return jobs


def test_states_hold_the_queue_asked_and_the_call_is_timed() -> None:
    states = deep_states(_jobs(), SimConfig(nodes=2), depth=20)
    assert states and all(len(s.queue) >= 20 for s in states)
    rows = time_calls(states[:1], 8, time_limit_s=1.0, seed=0)
    row = rows[0]
    assert row["queued"] == len(states[0].queue) and row["free"] == int(states[0].free.sum())
    assert 0 < row["median_s"] <= row["max_s"] and row["status"] in ("optimal", "feasible")
    assert row["started"] <= row["free"]  # one-GPU jobs: never more than the free GPUs


def test_no_state_that_deep() -> None:
    assert deep_states(_jobs(), SimConfig(nodes=2), depth=500) == []


def _itp(tmp_path: Path) -> Path:
    (tmp_path / "itp").mkdir()
    rows = ["job_id,submission_time,duration,num_gpu", "g,0,36000,16"]
    rows += [f"j{i},{60 + 60 * i},1800,1" for i in range(30)]
    (tmp_path / "itp" / "cluster98.csv").write_text("\n".join(rows) + "\n")
    return tmp_path


def test_cli_prints_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--data", str(_itp(tmp_path)), "--trace", "itp:cluster98", "--nodes", "2", "--deep-queue", "10"]) == 0
    out = capsys.readouterr().out
    assert "call s median" in out and "strict-FIFO" in out


def test_cli_refuses_a_depth_below_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--data", str(_itp(tmp_path)), "--trace", "itp:cluster98", "--deep-queue", "0"]) == 2
    assert "error: --deep-queue" in capsys.readouterr().err
