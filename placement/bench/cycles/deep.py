"""Plan call time with a deep queue: ``placement bench cycles --deep-queue N``.

Why this exists: a scheduler that plans well rarely lets its own queue grow deep, so the loop's call
times say little about the call a struggling cluster makes. This runs the strict-FIFO peer over the
trace (head-of-line blocking builds queues fast), keeps the first few loop states with at least
`depth` jobs waiting (hours apart), and times our scheduler's plan call on each, as the scheduler
would send it: the same cluster, the same running jobs, the same queue.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np

from placement.api import plan
from placement.bench.cycles.ours import Ours
from placement.bench.cycles.peers import StrictFifo
from placement.bench.cycles.sim import SimConfig, simulate
from placement.bench.cycles.state import Decision, Running, TraceJob
from placement.bench.table import Column, markdown, row_cells

#: Loop states kept, and the simulated hours between two of them.
STATES = 3
APART_H = 6.0
#: Calls timed per state.
CALLS = 3


@dataclass
class State:
    """One loop state: the time, the queue, what runs and the free GPUs per node."""

    now_s: float
    queue: list[TraceJob]
    running: list[Running]
    free: np.ndarray


class _Recorder(StrictFifo):
    """The strict-FIFO peer, keeping the states with a deep queue as it goes."""

    def __init__(self, depth: int) -> None:
        super().__init__()
        self.depth = depth
        self.states: list[State] = []

    def cycle(self, now_s: float, queue: list[TraceJob], running: list[Running], free: np.ndarray,
              gpus_per_node: int) -> Decision:
        if (len(queue) >= self.depth and len(self.states) < STATES
                and (not self.states or now_s - self.states[-1].now_s >= APART_H * 3600.0)):
            self.states.append(State(now_s, list(queue), list(running), free.copy()))
        return super().cycle(now_s, queue, running, free, gpus_per_node)


def deep_states(jobs: list[TraceJob], cfg: SimConfig, depth: int) -> list[State]:
    """Up to STATES loop states of the strict-FIFO peer with at least `depth` jobs queued."""
    recorder = _Recorder(depth)
    simulate(jobs, recorder, cfg)
    return recorder.states


#: The table's columns: (header, row key, format spec).
COLUMNS: list[Column] = [
    ("at h", "at_h", ".1f"), ("queued", "queued", "d"), ("running", "running", "d"), ("free GPUs", "free", "d"),
    ("call s median", "median_s", ".3f"), ("call s max", "max_s", ".3f"), ("status", "status", "s"),
    ("started", "started", "d"), ("compile s", "compile_s", ".3f"), ("search s", "search_s", ".3f"),
    ("decode s", "decode_s", ".3f"),
]


def time_calls(states: list[State], gpus_per_node: int, time_limit_s: float, seed: int) -> list[dict[str, object]]:
    """Per state: queue and free GPUs, our plan call's seconds (median and max of CALLS) and its phases."""
    rows: list[dict[str, object]] = []
    for state in states:
        request = Ours(time_limit_s=time_limit_s, seed=seed).request(
            state.now_s, state.queue, state.running, state.free, gpus_per_node)
        seconds = []
        for _ in range(CALLS):
            t0 = time.perf_counter()
            out = plan(request)
            seconds.append(time.perf_counter() - t0)
        phases = out.solver.phases or {}
        rows.append({"at_h": state.now_s / 3600.0, "queued": len(state.queue), "running": len(state.running),
                     "free": int(state.free.sum()), "median_s": statistics.median(seconds), "max_s": max(seconds),
                     "status": out.status, "started": len({a.job for a in out.assignments}),
                     "compile_s": phases.get("compile", 0.0), "search_s": phases.get("search", 0.0),
                     "decode_s": phases.get("decode", 0.0)})
    return rows


def format_rows(rows: list[dict[str, object]]) -> str:
    if not rows:
        return "no loop state reached that queue depth"
    return "\n".join(markdown([h for h, _, _ in COLUMNS], [row_cells(row, COLUMNS) for row in rows], {"status"}))
