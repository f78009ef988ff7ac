"""Our planner in the simulated scheduler loop: every decision valid, every job done, big gangs not starved."""

from __future__ import annotations

import numpy as np

from placement.bench.cycles.ours import Ours
from placement.bench.cycles.sim import SimConfig, simulate
from placement.bench.cycles.state import Running, TraceJob


def _trace() -> list[TraceJob]:
    """A stream of short one-GPU jobs on two 8-GPU nodes, and a 16-GPU gang arriving early among them."""
    jobs = [TraceJob(f"s{i:03d}", submit_s=60.0 * i, duration_s=1800.0 + 300 * (i % 5), gpus=1 + i % 3)
            for i in range(60)]
    jobs.insert(3, TraceJob("big", submit_s=150.0, duration_s=3600.0, gpus=16))
    for job in jobs:
        job.estimate_s = job.duration_s
    return jobs


def test_every_job_runs_and_the_reservation_bounds_the_big_gangs_wait() -> None:
    cfg = SimConfig(nodes=2, gpus_per_node=8, cycle_s=60.0)
    held = simulate(_trace(), Ours(time_limit_s=0.5, workers=1, preset="bounded-wait",
                                   policy={"reserve_after_h": 0.25}), cfg)
    free_for_all = simulate(_trace(), Ours(time_limit_s=0.5, workers=1), cfg)
    for result in (held, free_for_all):
        assert result.drained and result.invalid_decisions == 0
    big = [i for i, job in enumerate(held.jobs) if job.name == "big"][0]
    waited_held = held.first_start_s[big] - held.jobs[big].submit_s
    waited_free = free_for_all.first_start_s[big] - free_for_all.jobs[big].submit_s
    assert waited_held < waited_free


def test_without_estimates_las_classes_let_fresh_jobs_evict_long_running_ones() -> None:
    """One node, a long 8-GPU job first, then short one-GPU jobs: under `preset: las` the long job drops a class
    once it has run 1 GPU-hour and is preempted (back to the queue, resumed later); every job finishes."""
    long_job = TraceJob("long", submit_s=0.0, duration_s=8 * 3600.0, gpus=8)
    shorts = [TraceJob(f"s{i}", submit_s=3600.0 + 60.0 * i, duration_s=900.0, gpus=1) for i in range(4)]
    cfg = SimConfig(nodes=1, gpus_per_node=8, cycle_s=60.0, checkpoint_h=0.5)
    las = simulate([long_job, *shorts], Ours(time_limit_s=0.5, workers=1, preset="las"), cfg)
    plain = simulate([TraceJob(j.name, j.submit_s, j.duration_s, j.gpus) for j in [long_job, *shorts]],
                     Ours(time_limit_s=0.5, workers=1), cfg)
    assert las.drained and plain.drained and las.invalid_decisions == 0
    assert las.preemptions >= 1 and plain.preemptions == 0
    first = {job.name: las.first_start_s[i] - job.submit_s for i, job in enumerate(las.jobs)}
    assert all(first[f"s{i}"] < 600 for i in range(4))  # started within a few cycles, not after the long job
    assert all(plain.first_start_s[i] - job.submit_s > 3600 for i, job in enumerate(plain.jobs) if job.gpus == 1)


def test_the_request_says_what_a_scheduler_knows_and_the_preset() -> None:
    ours = Ours(preset="las")
    fresh = TraceJob("fresh", submit_s=0.0, duration_s=60.0, gpus=2)
    old = TraceJob("old", submit_s=0.0, duration_s=9e4, gpus=4, attained_gpu_s=4 * 3600.0)
    request = ours.request(7200.0, [fresh], [Running(old, start_s=3600.0, nodes={0: 4}, checkpoint_s=5400.0)],
                           free=np.array([4]), gpus_per_node=8)
    [job], [run] = request["jobs"], request["cluster"]["running"]
    assert (job["attained_gpu_h"], run["attained_gpu_h"]) == (0.0, 4.0)
    assert run["checkpointed_at"].startswith("2026-01-01T01:30")
    assert request["policy"]["preset"] == "las" and "weights" not in request["policy"]
