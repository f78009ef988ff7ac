"""Sweeps on this machine: grids expand to validated what-if points, every executor gives the same points,
a failing point is retried once and reported without losing the others, Ctrl-C leaves nothing running."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from placement_models import PlacementRequest

from placement import plan
from placement.executor import ExecutorError, InlineExecutor, LocalExecutor, make_executor, run_all
from placement.sweep.cli import main as sweep_main
from placement.sweep.grid import MAX_POINTS, GridError, Point, grid_from, load_grid
from placement.sweep.run import SweepResult, _solve_metrics, pareto, render_table, sweep
from placement.sweep.trace import TraceError, TraceOptions, generated, load_trace, sim_cluster
from placement.whatif import Scenario, apply
from placement.whatif_cli import main as what_if_main

ROOT = Path(__file__).resolve().parents[1]
REQUEST = ROOT / "instances" / "whatif" / "request.json"


def _base(time_limit: float = 2.0) -> dict[str, Any]:
    data = json.loads(REQUEST.read_text())
    data["policy"].update({"deterministic": True, "time_limit_s": time_limit, "workers": 1})
    return PlacementRequest.model_validate(data).model_dump(mode="json")


def _strip(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A point without its wall seconds: what must be equal across executors in deterministic mode."""
    return [{k: v for k, v in p.items() if k != "seconds"} for p in points]


# ------------------------------------------------------------------------------------------------- grids


def test_grid_file_multiplies_axes_substitutes_values_and_appends_listed_points() -> None:
    grid = grid_from(yaml.safe_load("""
axes:
  spot_nodes:
    change: {add_nodes: {pool: h100-spot, count: $value, like: s00}}
    values: [0, 4]
  spot_price:
    change: [{pool: {name: h100-spot, gpu_hour_price: $value}}]
    values: {cheap: 0.9, list: 1.3}
  load:
    values: {as-is: [], off-peak: [{peak: false}]}
points:
  - name: lose-rack
    changes: [{remove_rack: r00}]
"""))
    points = grid.points()
    assert grid.size == len(points) == 2 * 2 * 2 + 1
    first, last = points[0], points[-1]
    assert first.name == "spot_nodes=0,spot_price=cheap,load=as-is"
    # count 0 adds nothing: the change is dropped, so the point is the request as it is (plus the price)
    assert first.changes == [{"pool": {"name": "h100-spot", "gpu_hour_price": 0.9}}]
    assert points[5].values == {"spot_nodes": 4, "spot_price": "cheap", "load": "off-peak"}
    assert points[5].changes == [{"add_nodes": {"pool": "h100-spot", "count": 4, "like": "s00"}},
                                 {"pool": {"name": "h100-spot", "gpu_hour_price": 0.9}}, {"peak": False}]
    assert (last.name, last.values, last.changes) == ("lose-rack", {}, [{"remove_rack": "r00"}])
    assert all(isinstance(p.scenario(), Scenario) for p in points)


def test_shortcuts_build_the_common_changes() -> None:
    grid = load_grid(["add_nodes.h100-spot=0,2", "price.h100-od=3.5", "policy.weights.cost=0,0.1", "peak=true"])
    points = grid.points()
    assert len(points) == 4
    assert points[-1].changes == [{"add_nodes": {"pool": "h100-spot", "count": 2}},
                                  {"pool": {"name": "h100-od", "gpu_hour_price": 3.5}},
                                  {"policy": {"weights": {"cost": 0.1}}}, {"peak": True}]


@pytest.mark.parametrize(("data", "phrase"), [
    ({"axes": {"spot": {"change": {"add_nodez": {"pool": "p", "count": "$value"}}, "values": [1]}}},
     "axes.spot (value 1)"),
    ({"axes": {"spot": {"change": {"add_nodes": {"pool": "p", "count": "$value"}}, "values": []}}},
     "axes.spot.values: empty"),
    ({"axes": {"spot": {"change": {"add_nodes": {"pool": "p", "count": 4}}, "values": [1, 2]}}},
     "axes.spot.change: has no $value"),
    ({"axes": {"spot": {"change": {"peak": "$value"}, "values": [True], "step": 2}}}, "axes.spot: unknown field"),
    ({"axes": {"layout": {"values": [1, 2]}}}, "axes.layout.values: without 'change'"),
    ({"points": [{"changes": []}]}, "points[0]"),
    ({"axis": {}}, "unknown field(s) axis"),
])
def test_a_bad_grid_names_the_field(data: dict[str, Any], phrase: str) -> None:
    with pytest.raises(GridError, match=None) as err:
        grid_from(data).points()
    assert phrase in str(err.value)


def test_a_sweep_has_at_most_ten_thousand_points() -> None:
    axes = {f"a{i}": {"change": {"policy": {"seed": "$value"}}, "values": list(range(11))} for i in range(4)}
    with pytest.raises(GridError, match="14,641 points") as err:
        grid_from({"axes": axes}).points()
    assert f"at most {MAX_POINTS:,}" in str(err.value)


def test_unknown_shortcut_and_missing_file_are_errors() -> None:
    with pytest.raises(GridError, match="unknown shortcut"):
        load_grid(["spot=1,2"])
    with pytest.raises(GridError, match="no such file"):
        load_grid(["nothere.yaml"])


# ------------------------------------------------------------------------------------------------- executors


def test_executor_names() -> None:
    assert isinstance(make_executor("local", 1), InlineExecutor)
    with make_executor("local", 2) as ex:
        assert isinstance(ex, LocalExecutor) and ex.workers == 2
    with pytest.raises(ExecutorError, match="unknown --executor 'dask'"):
        make_executor("dask")


def test_interrupt_cancels_queued_calls_and_terminates_running_workers() -> None:
    """Ctrl-C arrives as KeyboardInterrupt in the driver (here from the progress callback, after the first
    answer): the long calls still running must not outlive it."""
    before = set(multiprocessing.active_children())  # other tests' children are not this test's to judge
    executor = LocalExecutor(2)

    def stop(*_: Any) -> None:
        raise KeyboardInterrupt

    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        run_all(time.sleep, [0.0, 60, 60, 60], executor, on_done=stop, poll_s=0.1)
    executor.close()
    assert time.perf_counter() - t0 < 30
    assert [p for p in multiprocessing.active_children() if p not in before] == []


def test_a_lost_worker_process_costs_one_attempt_not_the_sweep(tmp_path: Path) -> None:
    points = [Point(f"seed={s}", {"seed": s}, [{"policy": {"seed": s}}]) for s in range(4)]
    with LocalExecutor(2) as ex:
        result = sweep(_base(), points, ex, faults={1: f"exit-once:{tmp_path / 'died'}"})
    assert [p["ok"] for p in result.points] == [True] * 4
    assert result.points[1]["attempts"] == 2


# ------------------------------------------------------------------------------------------------- solve mode


def test_every_point_is_the_same_inline_and_in_a_process_pool_and_equals_a_separate_solve() -> None:
    base = _base()
    points = load_grid(["add_nodes.h100-spot=0,2,4", "price.h100-spot=0.9,1.3"]).points()
    with make_executor("local", 1) as inline:
        one = sweep(base, points, inline)
    with make_executor("local", 2) as pool:
        two = sweep(base, points, pool)
    assert _strip(one.points) == _strip(two.points)
    assert [p["index"] for p in two.points] == list(range(6))
    request = apply(PlacementRequest.model_validate(base), points[3].scenario())
    alone = _solve_metrics(PlacementRequest.model_validate(base), request, plan(request))
    assert {k: two.points[3][k] for k in alone} == alone
    # more spot nodes place more of the pending demand; the cheap-price points dominate the dear ones
    unplaced = [p["gpus_unplaced"] for p in two.points]
    assert unplaced[0] >= unplaced[2] >= unplaced[4]
    assert [p["pareto"] for p in two.points] == [True, False, True, False, True, False]


def test_a_failing_point_is_retried_once_and_reported_the_others_all_run() -> None:
    points = load_grid(["remove_rack=r00,r99,r01"]).points()
    with make_executor("local", 2) as ex:
        result = sweep(_base(), points, ex)
    ok = {p["name"]: p["ok"] for p in result.points}
    assert ok == {"remove_rack=r00": True, "remove_rack=r99": False, "remove_rack=r01": True}
    bad = result.points[1]
    assert bad["attempts"] == 2 and bad["status"] == "FAILED"
    assert "no node in rack r99" in bad["error"] and not bad["pareto"]


def test_a_transient_failure_succeeds_on_its_retry(tmp_path: Path) -> None:
    points = load_grid(["policy.seed=1,2,3"]).points()
    with make_executor("local", 2) as ex:
        result = sweep(_base(), points, ex, faults={2: f"once:{tmp_path / 'marker'}"})
    assert [p["ok"] for p in result.points] == [True, True, True]
    assert [p["attempts"] for p in result.points] == [1, 1, 2]
    with make_executor("local", 1) as ex:
        always = sweep(_base(), points[:2], ex, faults={0: "always"})
    assert always.points[0]["error"] == "RuntimeError: injected fault (always)"
    assert always.points[1]["ok"]


def test_pareto_front_keeps_points_no_other_beats_on_both() -> None:
    pts = [{"index": i, "ok": True, "c": c, "w": w} for i, (c, w) in enumerate([(1, 9), (2, 5), (2, 7), (3, 5),
                                                                               (4, 1), (5, 1)])]
    pts.append({"index": 6, "ok": False, "c": 0, "w": 0})
    assert pareto(pts, "c", "w") == {0, 1, 4}


# ------------------------------------------------------------------------------------------------- trace mode


def test_generated_traces_are_seeded_and_csv_traces_load(tmp_path: Path) -> None:
    a, b = generated(50, seed=3, hours=6), generated(50, seed=3, hours=6)
    assert a == b and a[0].submit_s == 0.0 and len(a) == 50
    csv_file = tmp_path / "t.csv"
    csv_file.write_text("job_id,submission_time,duration,num_gpu\nx,100,60,2\ny,50,30,0\nz,160,30,8\n")
    jobs = load_trace(str(csv_file))
    assert [(j.name, j.submit_s, j.gpus) for j in jobs] == [("x", 0.0, 2), ("z", 60.0, 8)]
    with pytest.raises(TraceError, match="--trace nothing.csv"):
        load_trace("nothing.csv")


def test_trace_points_simulate_the_changed_cluster_the_same_inline_and_in_a_pool() -> None:
    base = _base(time_limit=1.0)
    trace = generated(40, seed=1, hours=8)
    points = load_grid(["add_nodes.h100-spot=0,4"]).points()
    points.append(Point("mig", {}, [{"mig": {"node": "n03", "layout": {}}}]))
    with make_executor("local", 1) as inline:
        one = sweep(base, points[:2], inline, trace=trace, options=TraceOptions())
    with make_executor("local", 2) as pool:
        two = sweep(base, points, pool, trace=trace, options=TraceOptions())
    assert _strip(one.points) == _strip(two.points[:2])
    p0, p4 = two.points[0], two.points[1]
    assert (p0["nodes"], p0["spot_nodes"], p4["nodes"], p4["spot_nodes"]) == (12, 4, 16, 8)
    assert p0["done"] == 40 and p0["drained"] and p0["wait_mean_h"] is not None
    assert p4["cluster_cost_per_hour"] > p0["cluster_cost_per_hour"] and p4["spot_share_pct"] == 50.0
    assert (p0["nodes_added"], p4["nodes_added"]) == (0, 4)
    assert not two.points[2]["ok"] and "trace mode cannot simulate a mig change" in two.points[2]["error"]


def test_trace_mode_needs_identical_nodes() -> None:
    data = _base()
    data["cluster"]["nodes"][0]["gpus"] = 4
    request = PlacementRequest.model_validate(data)
    with pytest.raises(ValueError, match="one GPU count"):
        sim_cluster(request, TraceOptions())


# ------------------------------------------------------------------------------------------------- the face


def test_cli_prints_the_table_writes_json_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    grid = tmp_path / "grid.yaml"
    grid.write_text("axes:\n  spot:\n    change: {add_nodes: {pool: h100-spot, count: $value}}\n    values: [0, 2]\n"
                    "points:\n  - name: broken\n    changes: [{remove_rack: r99}]\n")
    out = tmp_path / "sweep.json"
    code = sweep_main([str(REQUEST), "--grid", str(grid), "--grid", "price.h100-spot=1.3", "--deterministic",
                       "--time-limit", "2", "--workers", "2", "--json", str(out), "--plots", str(tmp_path / "plots")])
    captured = capsys.readouterr()
    assert code == 1  # one point failed; the others are all there
    assert "front" in captured.out and "FAILED" in captured.out and "no node in rack r99" in captured.out
    assert "[3/3]" in captured.err
    data = json.loads(out.read_text())
    assert [p["name"] for p in data["points"]] == ["spot=0,price.h100-spot=1.3", "spot=2,price.h100-spot=1.3",
                                                    "broken"]
    assert data["pareto_over"] == ["cluster_cost_per_hour", "gpus_unplaced"]
    assert {"changes", "objective", "objective_comparable", "cluster_cost_per_hour", "placed_cost_per_hour",
            "nodes_added", "gpus_placed", "utilisation_pct", "status", "seconds", "error", "pareto"} <= set(
        data["points"][0])
    assert [p["nodes_added"] for p in data["points"][:2]] == [0, 2]
    # the base's own price and more nodes score plans as the base does: the objectives compare
    assert [p["objective_comparable"] for p in data["points"][:2]] == [True, True]
    legend = {" ".join(line.split()[:2]): line for line in captured.out.splitlines() if line.startswith("  ")}
    assert "objective" in captured.out and "every GPU in the cluster" in legend["cluster cost/h"]
    pytest.importorskip("matplotlib")
    assert (tmp_path / "plots" / "cost-vs-unplaced.png").stat().st_size > 1000
    assert (tmp_path / "plots" / "utilisation-vs-spot.png").stat().st_size > 1000


def test_cli_bad_input_is_exit_2_with_an_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("axes:\n  spot:\n    change: {add_nodes: {pool: h100-spot, count: $value}}\n    values: [-1]\n")
    assert sweep_main([str(REQUEST), "--grid", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "axes.spot (value -1)" in err and "count" in err
    assert sweep_main([str(REQUEST), "--grid", "peak=true", "--executor", "spark"]) == 2
    assert "unknown --executor 'spark'" in capsys.readouterr().err
    assert sweep_main([str(REQUEST), "--grid", "peak=true", "--trace", "nowhere:1"]) == 2
    assert "error: --trace nowhere:1" in capsys.readouterr().err
    mig = tmp_path / "mig.yaml"
    mig.write_text("points:\n  - {name: part, changes: [{mig: {node: n03, layout: {}}}]}\n")
    assert sweep_main([str(REQUEST), "--grid", str(mig), "--trace", "generated:10"]) == 2
    assert "error: point part: trace mode cannot simulate a mig change" in capsys.readouterr().err


def test_cli_list_shows_the_points_without_solving(capsys: pytest.CaptureFixture[str]) -> None:
    assert sweep_main([str(REQUEST), "--grid", "add_nodes.h100-spot=0,4", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[1].startswith("1\tadd_nodes.h100-spot=4\t")


def test_what_if_takes_the_executor_flag(capsys: pytest.CaptureFixture[str]) -> None:
    scenario = str(ROOT / "instances" / "whatif" / "more-spot.yaml")
    assert what_if_main([str(REQUEST), "--scenario", scenario, "--executor", "nope"]) == 2
    assert "unknown --executor 'nope'" in capsys.readouterr().err


#: ``python -m placement.sweep ARGS`` with Ctrl-C's default handler: a shell that starts a job in the background
#: (as CI runners may) hands it SIGINT ignored, and Python keeps it ignored.
INTERRUPTIBLE = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                 "sys.argv = ['placement.sweep', *sys.argv[1:]]; "
                 "runpy.run_module('placement.sweep', run_name='__main__')")


def _children(pid: int) -> set[int]:
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find the worker processes")
def test_ctrl_c_mid_sweep_exits_130_and_leaves_no_worker_running(tmp_path: Path) -> None:
    """SIGINT to the sweep alone (not its process group, so the workers are not told): the sweep must end them."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    argv = [str(REQUEST), "--grid", "policy.seed=1,2,3,4,5,6", "--trace", "generated:3000:1:48", "--workers", "2",
            "--time-limit", "2"]
    proc = subprocess.Popen([sys.executable, "-c", INTERRUPTIBLE, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        assert proc.stderr is not None
        header = proc.stderr.readline()
        assert header.startswith("sweep: 6 points"), header
        deadline = time.time() + 30
        workers: set[int] = set()
        while time.time() < deadline and len(workers) < 2:
            time.sleep(0.5)
            workers = _children(proc.pid) - {proc.pid}
        assert workers, "the sweep started no worker processes"
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted: 0 of 6 points finished" in err
    time.sleep(0.5)
    alive = [pid for pid in workers if Path(f"/proc/{pid}").exists()
             and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
    assert alive == []


def test_the_objective_column_shows_only_where_points_score_plans_as_the_base() -> None:
    def point(i: int, comparable: bool) -> dict[str, Any]:
        return {"index": i, "name": f"p{i}", "values": {}, "ok": True, "status": "optimal", "objective": 10.0 + i,
                "objective_comparable": comparable, "cluster_cost_per_hour": 1.0, "nodes_added": i}

    mixed = render_table(SweepResult("solve", [], [point(0, True), point(1, False)], "inline", 0.0))
    assert "objective" in mixed.splitlines()[0]
    assert mixed.splitlines()[2].split()[-2] == "-" and "10.00" in mixed.splitlines()[1]
    assert "'-' elsewhere" in mixed
    none = render_table(SweepResult("solve", [], [point(0, False), point(1, False)], "inline", 0.0))
    assert "objective" not in none
