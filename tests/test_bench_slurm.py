"""The Slurm bench's pure parts (trace -> sbatch lines, numbers and checks from a recorded completion log, the
placer's trace-time view), and one tiny live replay of both runs into a real Slurm."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from placement.bench.cycles.state import TraceJob
from placement.bench.slurm import kill_moments, run_one, table
from placement.bench.slurm.placer import dilate
from placement.bench.slurm.records import Ask, check, metrics, parse_jobcomp, parse_starts
from placement.bench.slurm.replay import submissions
from placement.slurm.lab import missing
from placement.slurm.syntax import comment_words, parse_hours


def test_a_trace_becomes_sbatch_lines_scaled_and_shaped_as_the_cycles_bench_shapes_gangs(tmp_path) -> None:
    jobs = [TraceJob("b", 1200.0, 36_000.0, 12), TraceJob("a", 0.0, 600.0, 1), TraceJob("c", 1800.0, 60_000.0, 32)]
    subs = submissions(jobs, 600.0)
    assert [s.name for s in subs] == ["a", "b", "c"]  # arrival order
    a, b, c = subs
    assert (a.at_s, a.sleep_s, a.nodes, a.per_node, a.limit_min) == (0.0, 1.0, 1, 1, 1)
    assert (b.at_s, b.nodes, b.per_node, b.limit_min) == (2.0, 2, 6, 2)  # 60 s + the slack: 2 minutes
    assert (c.nodes, c.per_node) == (4, 8)
    argv = b.argv(tmp_path)
    assert {"-N2", "--gpus-per-node=6", "--time=2", "-J", "b"} <= set(argv)
    assert not any(x.startswith("--comment") for x in argv)  # both schedulers see the time limit only
    assert argv[-1].startswith("--wrap=scontrol show job -d $SLURM_JOB_ID & sleep 60.000")
    exact = submissions(jobs, 600.0, "exact")[1].argv(tmp_path)
    said = [x for x in exact if x.startswith("--comment=")][0].removeprefix("--comment=")
    assert parse_hours(comment_words(said)["runtime"]) == pytest.approx(60 / 3600)  # what the placer reads
    with pytest.raises(ValueError):
        submissions(jobs, 600.0, "noisy")


def _line(jid: int, state: str, submit: str, start: str, end: str, nodes: str, count: int) -> str:
    return (f"JobId={jid} UserId=root(0) GroupId=root(0) Name=j{jid} JobState={state} Partition=gpu TimeLimit=1 "
            f"StartTime=2026-12-06T04:00:{start} EndTime=2026-12-06T04:00:{end} NodeList={nodes} NodeCnt={count} "
            f"ProcCnt={count} WorkDir=/w ReservationName= Tres=cpu=1,node=1 Account= QOS= WcKey= Cluster=unknown "
            f"SubmitTime=2026-12-06T04:00:{submit} EligibleTime=2026-12-06T04:00:{submit} DerivedExitCode=0:0 "
            "ExitCode=0:0 ")


LOG = "\n".join([
    _line(1, "COMPLETED", "00", "00", "10", "n1", 1),
    _line(2, "RESIZING", "00", "02", "02", "n[1-2]", 2),  # a running job's size updated: not an end
    _line(2, "COMPLETED", "00", "02", "06", "n[1-2]", 2),
    _line(3, "COMPLETED", "04", "08", "12", "n2", 1),
])


def _start(nodes: str, gres: str) -> str:
    return f"JobId=9 JobName=wrap\n   JobState=RUNNING\n     Nodes={nodes} CPU_IDs=0 Mem=0 GRES={gres}\n   Other=1\n"


def test_numbers_come_from_the_completion_log_in_trace_hours() -> None:
    asks = {"1": Ask("j1", 1, 1, 0), "2": Ask("j2", 2, 8, 0), "3": Ask("j3", 1, 2, 0)}
    m = metrics(asks, parse_jobcomp(LOG), speedup=360.0, total_gpus=16)  # 1 wall s = 0.1 trace h
    assert m["done"] == 3
    assert m["wait_mean_h"] == pytest.approx((0 + 0.2 + 0.4) / 3)
    assert m["jct_mean_h"] == pytest.approx((1.0 + 0.6 + 0.8) / 3)
    assert m["big_gangs"] == 0
    # GPU-seconds within the arrival span 0..4 s: job 1 4 s x 1, job 2 2 s x 16 = 36 of 16 x 4
    assert m["util_span_pct"] == pytest.approx(100 * 36 / 64)
    assert m["run_h"] == pytest.approx(1.2)


def test_checks_find_a_gpu_held_twice_a_job_not_whole_and_a_job_that_never_ended() -> None:
    asks = {"1": Ask("j1", 1, 1, 0), "2": Ask("j2", 2, 8, 0), "3": Ask("j3", 1, 2, 0)}
    every = "gpu:g0:1(IDX:0),gpu:g1:1(IDX:1),gpu:g2:1(IDX:2),gpu:g3:1(IDX:3),gpu:g4:1(IDX:4),gpu:g5:1(IDX:5)," \
            "gpu:g6:1(IDX:6),gpu:g7:1(IDX:7)"
    sound = {"1": parse_starts(_start("n1", "gpu:g3:1(IDX:3),gpu:g4:0(IDX:)")),
             "2": parse_starts(_start("n[1-2]", every).replace("JobId=9", "JobId=2")),
             "3": parse_starts(_start("n2", "gpu:g0:1(IDX:0),gpu:g1:1(IDX:1)"))}
    assert sound["2"] == [{"n1": list(range(8)), "n2": list(range(8))}]
    ok = check(asks, parse_jobcomp(LOG), sound)
    # job 2 held n1's GPU 3 from 2 s to 6 s, job 1 from 0 to 10 s: the recorded run overlaps
    assert ok.completed_once == 3 and ok.resized == ["2"]
    assert ok.gpu_twice == [("n1", 3, "1", "2")] and ok.not_whole == {}
    twice = check(asks, parse_jobcomp(LOG), {**sound, "3": sound["3"] * 2, "2": [{"n1": list(range(8))}]})
    assert "3" in twice.not_once and twice.not_whole == {"2": "asked 2x8, got 1 nodes "}
    lost = check({**asks, "4": Ask("j4", 1, 1, 0)}, parse_jobcomp(LOG), sound)
    assert lost.not_once["4"].startswith("0 completion records")


def test_kill_moments_are_spread_over_the_arrivals() -> None:
    moments = kill_moments(20, 300.0, seed=1)
    assert len(set(moments)) == 20 and moments == sorted(moments)
    assert moments[0] >= 1.0 and moments[-1] <= 300.0 and moments[-1] - moments[0] > 150
    assert kill_moments(20, 300.0, seed=1) == moments


def test_the_placer_sees_the_request_in_trace_time() -> None:
    now = datetime(2026, 1, 1, 12, tzinfo=timezone.utc)
    request = {"policy": {"now": now.isoformat()},
               "jobs": [{"name": "1", "submitted_at": (now - timedelta(seconds=10)).isoformat(),
                         "expected_runtime_h": 0.01, "max_runtime_h": 0.02}],
               "cluster": {"running": [{"job": "2", "started_at": (now - timedelta(seconds=30)).isoformat(),
                                        "max_runtime_h": 0.05}]}}
    slow = dilate(request, 600.0)
    assert datetime.fromisoformat(slow["jobs"][0]["submitted_at"]) == now - timedelta(seconds=6000)
    assert slow["jobs"][0]["expected_runtime_h"] == pytest.approx(6.0)
    assert datetime.fromisoformat(slow["cluster"]["running"][0]["started_at"]) == now - timedelta(hours=5)
    assert slow["cluster"]["running"][0]["max_runtime_h"] == pytest.approx(30.0)
    assert request["jobs"][0]["expected_runtime_h"] == 0.01  # the reader's request is left as read


@pytest.mark.skipif(missing() is not None, reason=f"no real Slurm here: {missing()}")
def test_a_tiny_replay_runs_both_ways_soundly(tmp_path) -> None:
    jobs = [TraceJob(f"t{i}", 600.0 * i, 1200.0 + 600 * (i % 3), g) for i, g in enumerate([8, 4, 16, 2, 8])]
    subs = submissions(jobs, 1200.0)
    rows = [run_one(run, subs, root=tmp_path / run, nodes=2, speedup=1200.0, kills=1 if run == "placement" else 0,
                    seed=3, interval_s=0.5, timeout_s=60, solve=(1.0, True)) for run in ("backfill", "placement")]
    for row in rows:
        assert row["finished"], row
        assert row["completed_once"] == 5 and row["invalid_starts"] == 0 and row["gpu_twice"] == [], row
    assert rows[1]["kills"] == 1
    assert "| placement |" in table(rows)
