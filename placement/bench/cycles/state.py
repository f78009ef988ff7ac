"""What the cycle simulator and every scheduling policy share: trace jobs, running jobs, the cluster.

The simulator (placement.bench.cycles.sim) owns time: it admits arrivals, ends jobs when their true
duration has run, and every `cycle_s` asks one policy which queued jobs start now (and, for
policies that preempt, which running jobs stop). A policy sees the queue, what runs where, the
free GPUs per node, and each job's runtime *estimate* — never its true duration.

Nodes have `gpus_per_node` GPUs each, as in the ITP and openb-like clusters the bench builds; a gang of
g GPUs runs as `pods_of(g)` pods that each sit whole on one node. Nodes may differ in GPU model (a mixed
fleet, `SimConfig.node_models`): a job with a speed table (`TraceJob.speeds`) then runs at the speed of
the slowest model its gang sits on, and its `duration_s`, `done_s` and estimates are work, measured in
seconds at speed 1.0. Without models or speeds every speed is 1.0 and work is running time, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


@dataclass
class TraceJob:
    """One job of a trace, as the simulator tracks it."""

    name: str
    submit_s: float  #: arrival, seconds from the trace's start
    duration_s: float  #: true work: running time at speed 1.0 (the simulator's secret)
    gpus: int  #: GPUs of the whole gang
    estimate_s: float | None = None  #: runtime estimate the policies see (None: no estimate)
    priority: int = 0
    team: str | None = None
    #: work already done before the last preemption and kept by a checkpoint (seconds at speed 1.0)
    done_s: float = 0.0
    #: GPU-seconds the job has run so far, over all its runs (Tiresias' attained service)
    attained_gpu_s: float = 0.0
    preemptions: int = 0
    #: GPU model -> relative throughput (work per second of running); a model absent counts as 1.0, and
    #: 0.0 means the job cannot run on that model (the simulator refuses such a start). None: 1.0 everywhere.
    speeds: dict[str, float] | None = None

    @property
    def remaining_s(self) -> float:
        """Work left, in seconds at speed 1.0."""
        return max(0.0, self.duration_s - self.done_s)

    def speed_on(self, model: str | None) -> float:
        """Work per second of running on one GPU of ``model`` (1.0 without a table, a model, or an entry)."""
        if self.speeds is None or model is None:
            return 1.0
        return float(self.speeds.get(model, 1.0))


def gang_speed(job: TraceJob, nodes: Iterable[int], node_models: Sequence[str] | None) -> float:
    """The speed of ``job`` on ``nodes``: a gang runs in lockstep, so at its slowest member's speed."""
    if node_models is None or job.speeds is None:
        return 1.0
    return min(job.speed_on(node_models[n]) for n in nodes)


def pods_of(gpus: int, gpus_per_node: int) -> list[int]:
    """GPUs per pod of a gang: one pod when it fits a node, else equal pods of the largest size ≤ a node
    that divides the gang (64 → 8 × 8, 12 → 2 × 6 on 8-GPU nodes)."""
    if gpus <= gpus_per_node:
        return [gpus]
    size = max(d for d in range(1, gpus_per_node + 1) if gpus % d == 0)
    return [size] * (gpus // size)


@dataclass
class Running:
    """A job that runs: where its pods sit and since when."""

    job: TraceJob
    start_s: float
    #: node index -> GPUs the job holds there
    nodes: dict[int, int]
    #: last checkpoint (a preemption loses the work since then)
    checkpoint_s: float | None = None
    #: work per second of this run: the job's speed on the slowest GPU model it holds (1.0 on a uniform fleet)
    speed: float = 1.0


@dataclass
class Decision:
    """What a policy does in one cycle: jobs to start (with the GPUs they take per node) and running jobs
    to preempt (by name; they go back to the queue and lose the work since their last checkpoint)."""

    starts: list[tuple[TraceJob, dict[int, int]]] = field(default_factory=list)
    preempt: list[str] = field(default_factory=list)


class SchedulerPolicy(Protocol):
    """A scheduler the simulator drives; `name` labels its row in the report."""

    name: str

    def cycle(self, now_s: float, queue: list[TraceJob], running: list[Running], free: np.ndarray,
              gpus_per_node: int) -> Decision:
        """Decide this cycle. `queue` is in arrival order; `free[n]` is node n's free GPUs (do not modify)."""
        ...
