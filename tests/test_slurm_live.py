"""placement as the brain of a real Slurm (Debian's slurmctld/slurmd 22.05, 4 simulated 8-GPU nodes): a mixed
queue ends sound, finished work makes room, a quiet cycle changes nothing, a half-applied plan converges,
preemption goes through requeuehold, and a controller that is down is said plainly. Skips, saying why, where
Slurm is not installed."""

from __future__ import annotations

import pytest
from slurmlab import assert_sound, clean, released_started, squeue, start_lab, wait_for

from placement.slurm import Options, Slurm, SlurmError, cycle
from placement.slurm.apply import plan_steps, run_steps
from placement.slurm.cli import main
from placement.slurm.lab import SlurmLab
from placement.slurm.read import read
from placement.slurm.syntax import MARK


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    lab = start_lab(tmp_path_factory.mktemp("slurm"), nodes=4)
    yield lab
    lab.stop()


@pytest.fixture
def slurm(lab: SlurmLab) -> Slurm:
    clean(lab)
    return Slurm(env=lab.env)


def _mixed_queue(lab: SlurmLab) -> dict[str, tuple[int, int]]:
    """Job id -> (nodes, GPUs per node): singles, a whole node, two gangs, and one that never fits."""
    asks = {}
    for _ in range(4):
        asks[lab.submit("--gres=gpu:1")] = (1, 1)
    asks[lab.submit("--gpus-per-node=8", "--exclusive")] = (1, 8)
    asks[lab.submit("-N2", "--gpus-per-node=8")] = (2, 8)
    asks[lab.submit("-N2", "--gpus=12", "--comment=runtime=2h")] = (2, 6)
    asks[lab.submit("-N5", "--gpus-per-node=8")] = (5, 8)
    return asks


def test_a_mixed_queue_ends_sound_and_waiting_jobs_say_why(lab: SlurmLab, slurm: Slurm) -> None:
    asks = _mixed_queue(lab)
    first = cycle(slurm)
    assert not first.outcome.failed, first.outcome.failed
    assert wait_for(lambda: released_started(lab)), squeue(lab)
    busy = assert_sound(lab, asks)
    # FIFO gang placement of this queue, in submission order: 4 singles + the whole node + the 2x8 gang = 28
    assert busy >= 28
    jobs = {str(j["job_id"]): j for j in squeue(lab)}
    waiting = [j for j in jobs.values() if j["job_state"] == "PENDING"]
    assert waiting, "the 5-node gang can never fit on 4 nodes"
    for j in waiting:
        assert MARK in (j["comment"] or ""), j
    never = [jid for jid, (n, _) in asks.items() if n == 5][0]
    assert "gang_size" in jobs[never]["comment"]
    assert jobs[never]["job_state"] == "PENDING" and jobs[never]["state_reason"] == "JobHeldUser"
    # the runtime= the user wrote stays in front of what the placer writes
    twelve = [jid for jid, (n, g) in asks.items() if (n, g) == (2, 6)][0]
    assert jobs[twelve]["comment"].startswith("runtime=2h")

    settle = cycle(slurm)  # the starts changed what the waiting jobs wait beside: their reasons follow
    assert not settle.outcome.started and not settle.outcome.failed, settle.summary()
    quiet = cycle(slurm)  # nothing changed since: no command at all
    assert quiet.outcome.commands == [], quiet.outcome.commands

    # a job ending lets the next call start waiting work in its room
    running = [j for j in jobs.values() if j["job_state"] == "RUNNING" and asks.get(str(j["job_id"])) == (2, 8)]
    before = {str(j["job_id"]) for j in squeue(lab) if j["job_state"] == "RUNNING"}
    if running:
        lab.run(["scancel", str(running[0]["job_id"])])
        assert wait_for(lambda: not any(j["job_state"] in ("RUNNING", "COMPLETING") and
                                        j["job_id"] == running[0]["job_id"] for j in squeue(lab)))
        later = cycle(slurm)
        assert later.outcome.started, later.summary()
        assert wait_for(lambda: released_started(lab))
        now = {str(j["job_id"]) for j in squeue(lab) if j["job_state"] == "RUNNING"}
        assert now - before
        assert_sound(lab, asks)


def test_a_half_applied_plan_converges(lab: SlurmLab, slurm: Slurm) -> None:
    """As if the placer were killed mid-apply: some jobs updated but not released, one released only."""
    asks = {lab.submit("--gres=gpu:2"): (1, 2) for _ in range(6)}
    asks[lab.submit("-N2", "--gpus-per-node=8")] = (2, 8)
    snap = read(slurm)
    import placement

    plan = placement.plan(snap.request)
    steps = plan_steps(snap, plan)
    partial = [type(s)(s.job, [c for c in s.commands if c[1] != "release"]) for s in steps[::2]]
    partial += [type(s)(s.job, s.commands) for s in steps[1:2]]
    run_steps(slurm, partial)
    first = cycle(slurm)
    assert not first.outcome.failed, first.outcome.failed
    assert wait_for(lambda: released_started(lab)), squeue(lab)
    busy = assert_sound(lab, asks)
    assert busy == 28  # 6 x 2 GPUs + the 2 x 8 gang: everything fits on 32 GPUs
    assert not cycle(slurm).outcome.started
    assert cycle(slurm).outcome.commands == []


def test_preemption_requeues_held_and_places_again(lab: SlurmLab, slurm: Slurm) -> None:
    low = [lab.submit("--gpus-per-node=8", "--nice=50", "--comment=preemptible") for _ in range(4)]
    assert not cycle(slurm).outcome.failed
    assert wait_for(lambda: released_started(lab))
    high = lab.submit("--gpus-per-node=8")
    options = Options(policy={"preemption": True})
    done = cycle(slurm, options)
    assert len(done.outcome.preempted) == 1 and done.outcome.preempted[0] in low, done.summary()
    assert high in done.outcome.started
    assert wait_for(lambda: any(str(j["job_id"]) == high and j["job_state"] == "RUNNING" for j in squeue(lab)), 30)
    jobs = {str(j["job_id"]): j for j in squeue(lab)}
    victim = jobs[done.outcome.preempted[0]]
    assert victim["job_state"] == "PENDING" and victim["state_reason"] == "JobHeldUser"
    assert victim["restart_cnt"] == 1
    assert_sound(lab, {**dict.fromkeys(low, (1, 8)), high: (1, 8)})


def test_dry_run_prints_commands_and_changes_nothing(lab: SlurmLab, slurm: Slurm, capsys: pytest.CaptureFixture,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    job = lab.submit("--gres=gpu:1")
    monkeypatch.setenv("SLURM_CONF", str(lab.conf))
    assert main(["run", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"scontrol release {job}" in out and "ReqNodeList=" in out
    assert [j["state_reason"] for j in squeue(lab) if str(j["job_id"]) == job] == ["JobHeldUser"]


def test_bad_options_exit_2(capsys: pytest.CaptureFixture) -> None:
    from placement.cli import main as placement_main

    assert placement_main(["slurm", "run", "--interval", "0"]) == 2
    assert main(["run", "--interval", "0"]) == 2
    assert main(["run", "--qos-priority", "high"]) == 2
    assert main(["run", "--gpu-model", "nope"]) == 2
    assert "error:" in capsys.readouterr().err


def test_controller_down_is_a_clear_error(tmp_path, capsys: pytest.CaptureFixture,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    lab = start_lab(tmp_path / "down", nodes=1)
    try:
        lab.stop_controller()
        slurm = Slurm(env=lab.env, timeout_s=5)
        with pytest.raises(SlurmError, match="squeue|sinfo"):
            cycle(slurm)
        monkeypatch.setenv("SLURM_CONF", str(lab.conf))
        assert main(["run", "--once", "--timeout", "5"]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "Traceback" not in err
    finally:
        lab.stop()


def test_a_placer_killed_at_random_moments_loses_no_job_and_gives_no_gpu_twice(lab: SlurmLab, slurm: Slurm) -> None:
    """The real command as a service would run it, SIGKILLed mid-cycle six times and started again."""
    import os
    import random
    import signal
    import subprocess
    import sys
    import time

    rng = random.Random(7)
    asks: dict[str, tuple[int, int]] = {}
    env = {**lab.env, "PYTHONPATH": os.pathsep.join(sys.path)}
    argv = [sys.executable, "-c", "import sys; from placement.slurm.cli import main; sys.exit(main(sys.argv[1:]))",
            "run", "--interval", "0.2"]
    for _ in range(6):
        for _ in range(3):
            g = rng.choice([1, 2, 4, 8])
            asks[lab.submit(f"--gres=gpu:{g}", sleep_s=rng.choice([2, 3, 600]))] = (1, g)
        asks[lab.submit("-N2", "--gpus-per-node=8", sleep_s=3)] = (2, 8)
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(1.0, 2.5))  # one import (~1 s), then cycles until the kill lands in one
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert_sound(lab, asks)
    assert not cycle(slurm).outcome.failed
    assert wait_for(lambda: released_started(lab)), [(j["job_id"], j["state_reason"], j["required_nodes"],
                                                      j["tres_per_node"], j["comment"]) for j in squeue(lab)
                                                     if j["job_state"] == "PENDING" and j["priority"]]
    assert_sound(lab, asks)
    known = {str(j["job_id"]): j["job_state"] for j in squeue(lab) if str(j["job_id"]) in asks}
    assert set(asks) == set(known)  # no job lost
    assert all(s in ("PENDING", "RUNNING", "COMPLETED", "COMPLETING") for s in known.values()), known
    started = [j for j in squeue(lab) if str(j["job_id"]) in asks and j["restart_cnt"]]
    assert started == []  # no job started twice: nothing was requeued
