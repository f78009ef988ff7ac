"""Sweeps on a real Ray runtime (started here, on loopback, 2 CPUs): every point equals the local executor's,
failures are retried and reported the same way, what-if runs there too, and an interrupt cancels the tasks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip(
    "ray", reason="Ray is not installed: pip install 'gpu-placement-planner[ray]' to run the Ray tests")

from placement_models import PlacementRequest  # noqa: E402
from test_sweep import _base, _strip  # noqa: E402

from placement.executor import RayExecutor, make_executor, run_all  # noqa: E402
from placement.sweep.cli import main as sweep_main  # noqa: E402
from placement.sweep.grid import load_grid  # noqa: E402
from placement.sweep.run import sweep  # noqa: E402
from placement.sweep.trace import TraceOptions, generated  # noqa: E402
from placement.whatif import Scenario, what_if  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REQUEST = ROOT / "instances" / "whatif" / "request.json"


@pytest.fixture(scope="module")
def ray_runtime() -> Iterator[None]:
    """One local Ray runtime for the module (startup takes seconds): loopback, 2 CPUs, no dashboard."""
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False,
             configure_logging=False)
    yield
    ray.shutdown()


def test_every_solve_point_on_ray_equals_the_local_executor(ray_runtime: None) -> None:
    base = _base()
    points = load_grid(["add_nodes.h100-spot=0,2,4", "price.h100-spot=0.9,1.3", "peak=true,false"]).points()
    with make_executor("local", 2) as local:
        here = sweep(base, points, local)
    with make_executor("ray") as remote:
        assert isinstance(remote, RayExecutor) and remote.workers == 2
        there = sweep(base, points, remote)
    assert there.executor == "ray"
    assert len(there.points) == 12 and all(p["ok"] for p in there.points)
    assert _strip(there.points) == _strip(here.points)
    assert ray.is_initialized()  # the executor joined the runtime it found and left it running


def test_every_trace_point_on_ray_equals_the_local_executor(ray_runtime: None) -> None:
    base = _base(time_limit=1.0)
    trace = generated(40, seed=2, hours=8)
    points = load_grid(["add_nodes.h100-spot=0,4", "reclaim.h100-spot=0.05,0.5"]).points()
    with make_executor("local", 2) as local:
        here = sweep(base, points, local, trace=trace, options=TraceOptions())
    with make_executor("ray") as remote:
        there = sweep(base, points, remote, trace=trace, options=TraceOptions())
    assert _strip(there.points) == _strip(here.points)
    assert all(p["ok"] and p["done"] == 40 for p in there.points)


def test_on_ray_a_failing_point_is_retried_and_reported_the_others_run(ray_runtime: None, tmp_path: Path) -> None:
    points = load_grid(["remove_rack=r00,r99,r01"]).points()
    with make_executor("ray") as remote:
        result = sweep(_base(), points, remote, faults={2: f"once:{tmp_path / 'marker'}"})
    assert [p["ok"] for p in result.points] == [True, False, True]
    assert [p["attempts"] for p in result.points] == [1, 2, 2]
    assert "no node in rack r99" in result.points[1]["error"]
    with make_executor("local", 2) as local:
        here = sweep(_base(), points[:2], local)
    assert result.points[1]["error"] == here.points[1]["error"]  # the same words on every executor


def test_what_if_on_ray_equals_what_if_locally(ray_runtime: None) -> None:
    request = PlacementRequest.model_validate(_base())
    scenarios = [Scenario.model_validate({"name": "off-peak", "changes": [{"peak": False}]}),
                 Scenario.model_validate({"name": "more-spot", "changes": [{"add_nodes": {"pool": "h100-spot",
                                                                                           "count": 2}}]})]
    here = what_if(request, scenarios, processes=2)
    with make_executor("ray") as remote:
        there = what_if(request, scenarios, executor=remote)
    assert there.rows == here.rows
    assert [p.assignments for p in there.plans] == [p.assignments for p in here.plans]


def test_an_interrupt_cancels_the_ray_tasks_still_running(ray_runtime: None) -> None:
    submitted: list[Any] = []

    class Spy(RayExecutor):
        def submit(self, fn: Any, arg: Any) -> Any:
            ref = super().submit(fn, arg)
            submitted.append(ref)
            return ref

    def stop(*_: Any) -> None:
        raise KeyboardInterrupt

    with Spy() as remote:
        t0 = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            run_all(time.sleep, [0.0, 120, 120, 120], remote, on_done=stop, poll_s=0.1)
        assert len(submitted) == 4
        for ref in submitted[1:]:
            with pytest.raises((ray.exceptions.TaskCancelledError, ray.exceptions.WorkerCrashedError)):
                ray.get(ref, timeout=30)
        assert time.perf_counter() - t0 < 60


def test_cli_sweep_on_ray(ray_runtime: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ray.json"
    code = sweep_main([str(REQUEST), "--grid", "add_nodes.h100-spot=0,2", "--deterministic", "--time-limit", "2",
                       "--executor", "ray", "--json", str(out)])
    assert code == 0, capsys.readouterr().err
    data = json.loads(out.read_text())
    assert data["executor"] == "ray" and [p["ok"] for p in data["points"]] == [True, True]



#: ``python -m placement.sweep ARGS`` with Ctrl-C's default handler: a shell that starts a job in the background
#: (as CI runners may) hands it SIGINT ignored, and Python keeps it ignored.
INTERRUPTIBLE = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                 "sys.argv = ['placement.sweep', *sys.argv[1:]]; "
                 "runpy.run_module('placement.sweep', run_name='__main__')")


def _descendants(pid: int) -> set[int]:
    """Every process under ``pid`` (the Ray runtime a driver starts: gcs_server, raylet, and the raylet's workers)."""
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    out, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier} - out
        out |= frontier
    return out


def _alive(pids: set[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find the Ray processes")
def test_ctrl_c_on_a_ray_sweep_exits_130_and_stops_the_runtime_it_started(tmp_path: Path) -> None:
    """A sweep that started its own Ray runtime, interrupted mid-sweep: its tasks are cancelled and the runtime
    it started (gcs_server, raylet, workers) is gone when it exits."""
    argv = [str(REQUEST), "--grid", "policy.seed=1,2,3,4", "--trace", "generated:3000:1:48", "--time-limit", "2",
            "--executor", "ray", "--workers", "2"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-c", INTERRUPTIBLE, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        assert proc.stderr is not None
        line = ""
        deadline = time.time() + 90
        while time.time() < deadline and not line.startswith("sweep: "):
            line = proc.stderr.readline()
        assert line.startswith("sweep: 4 points"), line
        time.sleep(3)
        runtime = _descendants(proc.pid)
        assert len(runtime) >= 3, "the sweep started no Ray runtime"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted: 0 of 4 points finished" in err
    deadline = time.time() + 15
    while _alive(runtime) and time.time() < deadline:
        time.sleep(0.5)
    assert _alive(runtime) == []
