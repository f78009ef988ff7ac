"""Helios traces in the cycle bench: HeliosData's Slurm log read into jobs, sliced and replayed."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.bench.cycles.cli import main
from placement.bench.cycles.traces import DataNotFound, load, parse_trace

HEAD = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"


def _helios(tmp_path: Path) -> Path:
    folder = tmp_path / "helios" / "Venus"
    folder.mkdir(parents=True)
    rows = [HEAD,
            "11,uA,vcA,8,32,1,COMPLETED,2020-06-09 18:41:30,2020-06-09 18:41:30,2020-06-09 20:41:30,7200,0",
            "10,uB,vcB,1,4,1,FAILED,2020-06-09 18:41:01,2020-06-09 18:41:05,2020-06-09 18:45:05,240,4",
            "12,uC,vcA,0,8,1,COMPLETED,2020-06-09 18:42:00,2020-06-09 18:42:00,2020-06-09 19:42:00,3600,0",
            "13,uD,vcC,2,8,1,CANCELLED,2020-06-09 18:43:00,,,0,0",
            "14,uE,vcC,16,64,2,COMPLETED,2020-06-09 19:00:00,2020-06-09 19:10:00,2020-06-10 19:10:00,86400,600"]
    (folder / "cluster_log.csv").write_text("\n".join(rows) + "\n")
    return tmp_path


def test_gpu_jobs_that_ran_in_submission_order_with_their_team(tmp_path: Path) -> None:
    jobs = load("helios:venus", _helios(tmp_path))
    assert [(j.name, j.gpus, j.team) for j in jobs] == [("10", 1, "vcB"), ("11", 8, "vcA"), ("14", 16, "vcC")]
    assert [j.submit_s for j in jobs] == [0.0, 29.0, 1139.0]  # the clock starts at the first kept arrival
    assert [j.duration_s for j in jobs] == [240.0, 7200.0, 86400.0]  # run time, not the wait before it


def test_a_slice_and_the_spec(tmp_path: Path) -> None:
    assert [j.name for j in load("helios:Venus:1-2", _helios(tmp_path))] == ["11", "14"]
    assert parse_trace("helios:venus:0-1999").label == "helios:venus:0-1999"


def test_a_missing_cluster_names_the_ones_there(tmp_path: Path) -> None:
    with pytest.raises(DataNotFound, match="Clusters there: Venus"):
        load("helios:earth", _helios(tmp_path))


def test_the_bench_replays_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--data", str(_helios(tmp_path)), "--trace", "helios:venus", "--nodes", "2",
                 "--policies", "fifo,volcano,kueue"]) == 0
    assert "helios:venus, 3 jobs" in capsys.readouterr().out
