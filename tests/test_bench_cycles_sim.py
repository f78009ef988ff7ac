"""The cycle simulator of ``placement bench cycles``: exact times on hand-made traces, preemption and
checkpoints, strict checks of every decision, spot reclaims, the loaders, the report and the command line."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from placement.bench.cycles import (
    POLICIES,
    Decision,
    InvalidDecision,
    SimConfig,
    TraceJob,
    main,
    pods_of,
    simulate,
)
from placement.bench.cycles.report import COLUMNS, format_table, metrics, plot
from placement.bench.cycles.sim import reclaim_schedule
from placement.bench.cycles.traces import load, load_openb, parse_trace, with_estimates

H = 3600.0


class Greedy:
    """In arrival order, start every job whose pods fit now (best fit per pod); skips the ones that do not."""

    name = "greedy"

    def __init__(self) -> None:
        self.seen: list[tuple[float, list[str], np.ndarray]] = []

    def cycle(self, now_s, queue, running, free, gpus_per_node):
        self.seen.append((now_s, [j.name for j in queue], free.copy()))
        f = free.copy()
        starts = []
        for job in queue:
            place: dict[int, int] = {}
            for pod in pods_of(job.gpus, gpus_per_node):
                fits = np.flatnonzero(f >= pod)
                if not fits.size:
                    break
                n = int(fits[np.argmin(f[fits])])
                f[n] -= pod
                place[n] = place.get(n, 0) + pod
            else:
                starts.append((job, place))
                continue
            for n, g in place.items():
                f[n] += g
        return Decision(starts=starts)


class Scripted:
    """Returns a fixed decision at the first call (for the checks of invalid decisions)."""

    name = "scripted"

    def __init__(self, make) -> None:
        self.make = make

    def cycle(self, now_s, queue, running, free, gpus_per_node):
        return self.make(queue, running)


def job(name: str, submit: float, duration: float, gpus: int) -> TraceJob:
    return TraceJob(name=name, submit_s=submit, duration_s=duration, gpus=gpus)


def three_jobs() -> list[TraceJob]:
    return [job("A", 0, 570, 8), job("B", 30, 120, 4), job("C", 90, 300, 4)]


def test_arrivals_departures_and_waits_are_exact_on_one_node() -> None:
    policy = Greedy()
    r = simulate(three_jobs(), policy, SimConfig(nodes=1, gpus_per_node=8, cycle_s=60))
    # A runs 0..570; its GPUs come back at the boundary 600, where B and C start together.
    assert r.first_start_s.tolist() == [0, 600, 600]
    assert r.finish_s.tolist() == [570, 720, 900]  # the true ends, not the boundaries
    assert r.drained and r.end_s == 900
    # called only when something changed: arrivals at 0, 60 (B), 120 (C), departures at 600 and 720
    assert [t for t, _, _ in policy.seen] == [0, 60, 120, 600, 720]
    assert r.plan_ms.size == 5
    assert policy.seen[3][1] == ["B", "C"]
    m = metrics(r)
    assert m["wait_mean_h"] == pytest.approx((0 + 570 + 510) / 3 / H)
    assert m["wait_max_h"] == pytest.approx(570 / H)
    assert m["jct_mean_h"] == pytest.approx((570 + 690 + 810) / 3 / H)
    assert (m["jobs"], m["done"], m["preemptions"], m["invalid_decisions"]) == (3, 3, 0, 0)


def test_utilisation_is_over_the_arrival_span_and_over_the_whole_run() -> None:
    r = simulate(three_jobs(), Greedy(), SimConfig(nodes=1, gpus_per_node=8, cycle_s=60))
    m = metrics(r)
    assert m["util_span_pct"] == pytest.approx(100.0)  # A holds all 8 GPUs from the first to the last arrival (0..90)
    assert m["util_run_pct"] == pytest.approx(100 * (8 * 570 + 4 * 120 + 4 * 300) / (8 * 900))
    assert r.times_s.tolist() == [0, 60, 120, 600, 720, 900]
    assert r.queue_len.tolist() == [0, 1, 2, 0, 0, 0]
    assert r.busy_gpus.tolist() == [8, 8, 8, 8, 4, 0]


def test_the_callers_jobs_are_not_touched_and_runs_repeat() -> None:
    jobs = three_jobs()
    a = simulate(jobs, Greedy(), SimConfig(nodes=1))
    b = simulate(jobs, Greedy(), SimConfig(nodes=1))
    assert all(j.done_s == 0 and j.attained_gpu_s == 0 for j in jobs)
    assert a.finish_s.tolist() == b.finish_s.tolist()


def test_a_job_no_node_can_take_ends_the_run_undrained_instead_of_looping() -> None:
    r = simulate([job("big", 0, 60, 16), job("small", 0, 60, 1)], Greedy(), SimConfig(nodes=1))
    assert not r.drained
    assert metrics(r)["done"] == 1 and math.isnan(r.first_start_s[0])


def test_an_every_cycle_policy_stops_at_the_safety_cap() -> None:
    class Idle:
        name = "idle"
        every_cycle = True

        def cycle(self, now_s, queue, running, free, gpus_per_node):
            return Decision()

    r = simulate([job("A", 0, 60, 1)], Idle(), SimConfig(nodes=1, cap_after_last_arrival_s=3600))
    assert not r.drained
    assert r.plan_ms.size == 61  # every boundary 0..3600


class PreemptOnce:
    """Runs greedy, and preempts job A once at 2.5 h (a time-based decision: asks to be called every cycle)."""

    name = "preempt-once"
    every_cycle = True

    def __init__(self) -> None:
        self.greedy = Greedy()
        self.done = False
        self.attained: list[float] = []

    def cycle(self, now_s, queue, running, free, gpus_per_node):
        self.attained += [r.job.attained_gpu_s for r in running if r.job.name == "A"]
        if not self.done and now_s >= 2.5 * H:
            self.done = True
            return Decision(preempt=["A"])
        return self.greedy.cycle(now_s, queue, running, free, gpus_per_node)


def test_preemption_loses_the_work_since_the_last_checkpoint_and_requeues_in_arrival_order() -> None:
    policy = PreemptOnce()
    jobs = [job("A", 0, 10 * H, 8), job("B", 600, H, 8)]
    r = simulate(jobs, policy, SimConfig(nodes=1, cycle_s=60, checkpoint_h=1.0))
    restart = 2.5 * H + 60
    # the call right after the preemption sees A back in front of B, which arrived later
    t, queue, free = next(s for s in policy.greedy.seen if s[0] == restart)
    assert queue == ["A", "B"] and free.tolist() == [8]
    a = r.jobs[0]
    assert r.first_start_s[0] == 0
    assert r.finish_s[0] == pytest.approx(restart + 8 * H)  # 2 h kept by the checkpoint, 8 h to go
    assert (r.preemptions, a.preemptions) == (1, 1)
    assert r.lost_gpu_s == pytest.approx(8 * 0.5 * H)
    assert metrics(r)["lost_gpu_h"] == pytest.approx(4.0)
    assert a.attained_gpu_s == pytest.approx(8 * (2.5 * H + 8 * H))
    assert policy.attained[:2] == pytest.approx([8 * 60, 8 * 120])  # attained service is current at every call
    assert r.runs[0] == (0, 2.5 * H, 8)


def test_a_preempted_gang_starts_at_once_but_its_delay_counts_the_time_it_did_not_run() -> None:
    r = simulate([job("A", 0, 10 * H, 40)], PreemptOnce(), SimConfig(nodes=5, cycle_s=60, checkpoint_h=1.0))
    m = metrics(r)
    assert m["wait_big_mean_h"] == 0
    # preempted at 2.5 h with 2 h kept, restarted a cycle later: 0.5 h lost + 60 s out of the cluster
    assert m["delay_big_mean_h"] == pytest.approx(0.5 + 60 / H)


def test_without_checkpoints_a_preemption_loses_the_whole_run() -> None:
    r = simulate([job("A", 0, 10 * H, 8)], PreemptOnce(), SimConfig(nodes=1, checkpoint_h=0))
    assert r.lost_gpu_s == pytest.approx(8 * 2.5 * H)
    assert r.finish_s[0] == pytest.approx(2.5 * H + 60 + 10 * H)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda q, r: Decision(starts=[(job("ghost", 0, 1, 1), {0: 1})]), "not in the queue"),
        (lambda q, r: Decision(starts=[(q[0], {0: 12})]), "only 8 free"),
        (lambda q, r: Decision(starts=[(q[0], {0: 8, 1: 4})]), "not a whole number of pods"),  # 12 → 2 pods of 6
        (lambda q, r: Decision(starts=[(q[0], {0: 6})]), "needs 12"),
        (lambda q, r: Decision(starts=[(q[0], {0: 6, 1: 6}), (q[0], {2: 6, 3: 6})]), "twice"),
        (lambda q, r: Decision(starts=[(q[0], {7: 6, 1: 6})]), "not one of nodes"),
        (lambda q, r: Decision(preempt=["nobody"]), "not running"),
        (lambda q, r: None, "not a Decision"),
    ],
)
def test_invalid_decisions_raise_naming_the_policy(make, says) -> None:
    with pytest.raises(InvalidDecision, match=says) as err:
        simulate([job("J", 0, 60, 12)], Scripted(make), SimConfig(nodes=4))
    assert "'scripted'" in str(err.value)


def test_a_policy_may_preempt_and_use_the_freed_gpus_in_one_decision() -> None:
    class Swap:
        name = "swap"

        def cycle(self, now_s, queue, running, free, gpus_per_node):
            if not running:
                return Decision(starts=[(queue[0], {0: 8})])
            if queue:
                return Decision(preempt=[running[0].job.name], starts=[(queue[0], {0: 8})])
            return Decision()

    r = simulate([job("A", 0, 120, 8), job("B", 60, 60, 8)], Swap(), SimConfig(nodes=1))
    assert r.first_start_s.tolist() == [0, 60] and r.preemptions >= 1


def test_spot_reclaims_preempt_their_jobs_and_take_the_node_away() -> None:
    cfg = SimConfig(nodes=2, gpus_per_node=8, spot_nodes=1, reclaim_per_h=0.5, reclaim_down_h=2, seed=3)
    events = reclaim_schedule(cfg, 100 * H)
    assert events and all(node == 1 for _, node, _ in events)
    assert reclaim_schedule(cfg, 100 * H) == events  # seeded: every policy suffers the same reclaims
    policy = Greedy()
    jobs = [job(f"J{i}", i * 60, 6 * H, 8) for i in range(6)]
    r = simulate(jobs, policy, cfg)
    assert r.drained and r.reclaims > 0 and r.preemptions > 0 and r.lost_gpu_s > 0
    t0, _, back = events[0]
    while_down = [free for t, _, free in policy.seen if t0 < t < back]
    assert while_down and all(f[1] == 0 for f in while_down)


def test_noisy_estimates_are_seeded_and_within_a_factor_of_two() -> None:
    jobs = [job(f"J{i}", i, 1000.0, 1) for i in range(200)]
    noisy = with_estimates(jobs, "noisy", seed=7)
    assert noisy == with_estimates(jobs, "noisy", seed=7)
    ratios = np.array([j.estimate_s / j.duration_s for j in noisy])
    assert ratios.min() >= 0.5 and ratios.max() <= 2.0 and ratios.std() > 0.2
    assert all(j.estimate_s == 1000.0 for j in with_estimates(jobs, "exact"))
    assert all(j.estimate_s is None for j in with_estimates(jobs, "none"))


def _itp_folder(tmp_path: Path) -> Path:
    (tmp_path / "itp").mkdir()
    rows = ["job_id,submission_time,duration,num_gpu"]
    rows += [f"j{i},{1000 + 300 * (9 - i)},{600 + 60 * i},{[1, 2, 8, 16][i % 4]}" for i in range(10)]
    (tmp_path / "itp" / "cluster99.csv").write_text("\n".join(rows) + "\n")
    return tmp_path


def test_itp_slices_in_submission_order_and_starts_the_clock_at_zero(tmp_path: Path) -> None:
    data = _itp_folder(tmp_path)
    jobs = load("itp:cluster99:2-4", data)
    assert [j.name for j in jobs] == ["j7", "j6", "j5"]  # rows 2..4 once sorted by submission
    assert [j.submit_s for j in jobs] == [0, 300, 600]
    assert parse_trace("itp:cluster04:6000-7999").label == "itp:cluster04:6000-7999"
    with pytest.raises(ValueError):
        parse_trace("itp:cluster04:10-2")


def test_openb_keeps_whole_gpu_pods_with_times(tmp_path: Path) -> None:
    (tmp_path / "openb").mkdir()
    head = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
            "creation_time,deletion_time,scheduled_time")
    rows = [head,
            "p0,1000,1000,2,1000,,LS,Running,100,700,100",  # kept: 2 GPUs, 600 s
            "p1,1000,1000,1,500,,LS,Running,100,700,100",  # a fraction: skipped
            "p2,1000,1000,0,0,,LS,Running,100,700,100",  # CPU only: skipped
            "p3,1000,1000,1,1000,,LS,Running,,,",  # no times: skipped
            "p4,1000,1000,8,1000,,BE,Failed,400,500,400"]
    (tmp_path / "openb" / "openb_pod_list_tiny.csv").write_text("\n".join(rows) + "\n")
    jobs = load_openb(tmp_path, "tiny")
    assert [(j.name, j.submit_s, j.duration_s, j.gpus) for j in jobs] == [("p0", 0, 600, 2), ("p4", 300, 100, 8)]


def test_the_table_has_every_column_and_a_footer() -> None:
    r = simulate(three_jobs(), Greedy(), SimConfig(nodes=1))
    text = format_table([metrics(r), {"policy": "broken", "estimates": "exact", "invalid_decisions": 1,
                                      "error": "starts 'x', which is not in the queue"}])
    header = text.splitlines()[0]
    for title, _, _ in COLUMNS:
        assert f" {title} " in header
    assert "first arrival to last arrival" in text and "invalid decision by broken" in text


def test_the_plot_is_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    r = simulate(three_jobs(), Greedy(), SimConfig(nodes=1))
    out = plot([r], tmp_path / "cycles.png")
    assert out.stat().st_size > 1000


def test_cli_without_a_data_folder_exits_2_naming_the_option(monkeypatch, capsys) -> None:
    monkeypatch.delenv("PLACEMENT_DATA", raising=False)
    assert main(["--policies", "fifo"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "--data" in err


def test_cli_with_a_bad_trace_exits_2(tmp_path: Path, capsys) -> None:
    assert main(["--data", str(tmp_path), "--trace", "slurm:x"]) == 2
    assert capsys.readouterr().err.startswith("error:")
    assert main(["--data", str(_itp_folder(tmp_path)), "--trace", "itp:cluster42"]) == 2
    assert "cluster99" in capsys.readouterr().err  # names the clusters that are there


def test_cli_runs_a_registered_policy_end_to_end(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(POLICIES, "tiny", lambda options: Greedy())
    data = _itp_folder(tmp_path)
    out_json, out_png = tmp_path / "m.json", tmp_path / "m.png"
    code = main(["--data", str(data), "--trace", "itp:cluster99", "--nodes", "2", "--policies", "tiny",
                 "--estimates", "exact,noisy", "--json", str(out_json), "--plot", str(out_png)])
    assert code == 0
    text = capsys.readouterr().out
    assert "| greedy" in text and "wait >32 GPUs h" in text
    rows = json.loads(out_json.read_text())["rows"]
    assert [(r["estimates"], r["done"], r["invalid_decisions"]) for r in rows] == [("exact", 10, 0), ("noisy", 10, 0)]
    assert out_png.exists() or "plot skipped" in text


def test_cli_reports_an_invalid_decision_and_exits_1(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(POLICIES, "liar", lambda options: Scripted(lambda q, r: Decision(preempt=["nobody"])))
    assert main(["--data", str(_itp_folder(tmp_path)), "--trace", "itp:cluster99", "--policies", "liar"]) == 1
    assert "invalid decision by scripted" in capsys.readouterr().out


def _real_data() -> Path:
    env = os.environ.get("PLACEMENT_DATA")
    base = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"
    if not (base / "itp" / "cluster04.csv").is_file():
        pytest.skip("ITP data not found: set PLACEMENT_DATA to run this test")
    return base


def test_a_real_itp_slice_drains_under_a_greedy_policy() -> None:
    jobs = with_estimates(load("itp:cluster04:6000-7999", _real_data()), "noisy", seed=1)
    assert len(jobs) == 2000 and jobs[0].submit_s == 0
    r = simulate(jobs, Greedy(), SimConfig(nodes=42))
    m = metrics(r)
    assert r.drained and m["done"] == 2000 and m["invalid_decisions"] == 0
    assert 50 < m["util_span_pct"] <= 100
