"""The ``loop`` family of the instance library: what a scheduler sends mid-replay of a real trace.

Why this exists: the seeded families are snapshots drawn from distributions; a scheduler's plan call is
made inside a loop, where the running jobs are what earlier cycles started (with start times, runtime
estimates that are off, attained service) and the queue is what a real trace's arrivals left waiting.
Solver researchers need those states too, and they cannot rebuild them without the simulator. So this
replays a slice of a Microsoft ITP trace (``itp:CLUSTER:FIRST-LAST``) through the cycle simulator
(:mod:`placement.bench.cycles.sim`), driven by the Slurm-like EASY backfill peer (deterministic: no
solver in the loop, so the state is a function of the trace alone), and at the first cycle after a
warm-up with a deep queue builds the request our scheduler would send then
(:meth:`placement.bench.cycles.ours.Ours.request`: nodes, running jobs with ``started_at``, estimates,
checkpoints and attained service, the queue with submission times, ``policy.now``, the preset).

The committed instance is self-contained JSON; only rebuilding it reads the trace, from ``--data DIR``
or ``$PLACEMENT_DATA`` (:class:`~placement.bench.cycles.traces.DataNotFound` otherwise, naming both).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from placement.bench.cycles.ours import Ours
from placement.bench.cycles.peers import EasyBackfill
from placement.bench.cycles.sim import HOUR, SimConfig, simulate
from placement.bench.cycles.state import Decision, Running, TraceJob
from placement.bench.cycles.traces import load, with_estimates

#: `policy.reserve_after_h` of the `bounded-wait` preset (placement_models.presets), read here to say which
#: job our loop would have reserved on the cycle before the captured one.
RESERVE_AFTER_H = 6.0
#: Decimals kept of every float in the stored request (hours to a few milliseconds).
DIGITS = 6


@dataclass(frozen=True)
class LoopSpec:
    """One loop instance: the trace slice, the cluster, when to capture and the preset of the call."""

    trace: str  #: ``itp:CLUSTER:FIRST-LAST``
    nodes: int
    depth: int  #: capture the first call with at least this many jobs queued ...
    warm_h: float  #: ... at least this many simulated hours after the first arrival ...
    free_gpus: int = 16  #: ... and at least this many GPUs free (a state where nothing fits asks nothing)
    preset: str = "auto"  #: what the scheduler asks for; ``bounded-wait`` also carries last cycle's reservation
    estimates: str = "noisy"  #: users' guesses, off by up to 2x either way (seeded)
    seed: int = 0


#: Per size: slices of ITP cluster04 (M is the cycle bench's default: 2,000 jobs on 42 nodes), clusters
#: sized so the slice queues up. A trace cluster has about 30-60 nodes' worth of work, so L stays below the
#: seeded families' 256 nodes: its size is the queue (hundreds of jobs), not the node count.
SPECS: dict[str, LoopSpec] = {
    "S": LoopSpec("itp:cluster04:6000-7999", nodes=16, depth=40, warm_h=24.0),
    "M": LoopSpec("itp:cluster04:6000-7999", nodes=42, depth=120, warm_h=24.0),
    "L": LoopSpec("itp:cluster04:6000-9999", nodes=64, depth=300, warm_h=48.0, preset="bounded-wait"),
}


class _Captured(Exception):  # noqa: N818 - a signal, not an error: it stops the replay once the state is kept
    """Raised by the recorder when it has the request, so the replay stops there."""


class _Recorder(EasyBackfill):
    """The EASY backfill peer, building our request at the first deep-queue call after the warm-up."""

    def __init__(self, spec: LoopSpec, first_s: float) -> None:
        super().__init__()
        self.spec = spec
        self.first_s = first_s
        self.request: dict[str, Any] | None = None
        self.waited: list[str] = []  # queued jobs blocked RESERVE_AFTER_H at the previous call, arrival order

    def cycle(self, now_s: float, queue: list[TraceJob], running: list[Running], free: np.ndarray,
              gpus_per_node: int) -> Decision:
        if (now_s - self.first_s >= self.spec.warm_h * HOUR and len(queue) >= self.spec.depth
                and int(free.sum()) >= self.spec.free_gpus):
            ours = Ours(time_limit_s=10.0, seed=0, workers=2, preset=self.spec.preset)
            request = ours.request(now_s, queue, running, free, gpus_per_node)
            request["policy"]["previous_plan"] = self._previous(queue)
            self.request = request
            raise _Captured
        self.waited = [j.name for j in queue if now_s - j.submit_s >= RESERVE_AFTER_H * HOUR]
        return super().cycle(now_s, queue, running, free, gpus_per_node)

    def _previous(self, queue: list[TraceJob]) -> dict[str, Any] | None:
        """Under ``bounded-wait``, last cycle's plan as our loop passes it back: a reservation for the first job
        (arrival order: the trace has one priority) that had waited RESERVE_AFTER_H then and still waits."""
        if self.spec.preset != "bounded-wait":
            return None
        queued = {j.name for j in queue}
        held = next((name for name in self.waited if name in queued), None)
        return None if held is None else {"reservations": [{"job": held}]}


def capture(spec: LoopSpec, data: Path | str | None = None) -> dict[str, Any]:
    """The request of one loop state (deterministic for a given trace file); ValueError when the slice never
    queues ``spec.depth`` jobs after the warm-up, DataNotFound without the trace."""
    jobs = with_estimates(load(spec.trace, data), spec.estimates, seed=spec.seed)
    recorder = _Recorder(spec, min(j.submit_s for j in jobs))
    with contextlib.suppress(_Captured):
        simulate(jobs, recorder, SimConfig(nodes=spec.nodes, seed=spec.seed))
    if recorder.request is None:
        raise ValueError(f"{spec.trace} on {spec.nodes} nodes never queues {spec.depth} jobs with {spec.free_gpus} "
                         f"GPUs free after {spec.warm_h:g} h: no loop state to capture")
    request = recorder.request
    request["policy"] = {k: v for k, v in request["policy"].items() if v is not None}
    return _rounded({"api_version": "placement/v1", **request})


def _rounded(value: Any) -> Any:
    """Floats to DIGITS decimals: the noisy estimates and attained service come out of numpy's exp and log,
    whose last bits may differ between builds; rounded, the stored bytes do not."""
    if isinstance(value, float):
        return round(value, DIGITS)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def loop_instance(size: str, data: Path | str | None = None) -> dict[str, Any]:
    """The ``loop`` instance of one size (S, M or L)."""
    return capture(SPECS[size], data)


def describe(size: str) -> str:
    """One line on where the instance comes from (the README's 'built from')."""
    spec = SPECS[size]
    return (f"{spec.trace}, {spec.nodes} nodes x 8 GPUs, EASY backfill replay, first call after {spec.warm_h:g} h "
            f"with >= {spec.depth} queued and >= {spec.free_gpus} GPUs free, preset {spec.preset}, "
            f"{spec.estimates} estimates")

