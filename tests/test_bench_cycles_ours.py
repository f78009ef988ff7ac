"""Our planner in the simulated scheduler loop: every decision valid, every job done, big gangs not starved."""

from __future__ import annotations

from placement.bench.cycles.ours import Ours
from placement.bench.cycles.sim import SimConfig, simulate
from placement.bench.cycles.state import TraceJob


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
    held = simulate(_trace(), Ours(time_limit_s=0.5, workers=1, reserve_after_h=0.25), cfg)
    free_for_all = simulate(_trace(), Ours(time_limit_s=0.5, workers=1, reserve_after_h=None), cfg)
    for result in (held, free_for_all):
        assert result.drained and result.invalid_decisions == 0
    big = [i for i, job in enumerate(held.jobs) if job.name == "big"][0]
    waited_held = held.first_start_s[big] - held.jobs[big].submit_s
    waited_free = free_for_all.first_start_s[big] - free_for_all.jobs[big].submit_s
    assert waited_held < waited_free
