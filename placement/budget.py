"""The call's time limit, shared out by phase, and what each phase used.

`policy.time_limit_s` promises the whole call: indexing, the greedy plan, the model, the search,
decoding, explanations and verification. The search is the only phase that can use any time it is
given, so the others are sized before they run: the model gets as many (task, node) pairs as the
time left can compile, and the search stops early enough for decode and verify to finish.

Deterministic mode never reads the wall clock for a decision (the same request gives the same
plan on any machine): the pair budget comes from the limit alone, at a measured compile rate.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

#: (task, node) pairs one second compiles, measured on 2 cores at 4,096 nodes (candidate ranking plus
#: every module's variables and rows, ~40 µs a pair), kept low so slower machines stay within the limit.
PAIRS_PER_S = 20_000
#: Share of the time left after the greedy plan that the model's compile may take.
COMPILE_SHARE = 0.3
#: The least share of the limit a search must have left after its compile: below, the model only scores the
#: greedy plan (its compile left out what only a search reads: dominance and CP-SAT's objective).
MIN_SEARCH_SHARE = 0.05
#: Phases in the order a call runs them (the plan reports each one's seconds).
PHASES = ("problem", "greedy", "compile", "bound", "search", "decode", "verify")
#: Another round of trimming and solving starts only with this many times a round's time left: a round
#: that runs out of time mid-search returns little, and the call must still end within its limit.
ROUND_MARGIN = 1.5


@dataclass(frozen=True)
class PairLimits:
    """The model's size: (task, node) pairs in all, and the pairs each task keeps at least."""

    total: int
    per_task: int


@dataclass
class Budget:
    """Seconds of one call: when it started, its limit, and the seconds each phase took so far."""

    limit_s: float
    deterministic: bool = False
    start: float = field(default_factory=time.perf_counter)
    phases: dict[str, float] = field(default_factory=dict)
    _mark: float | None = None

    def used(self) -> float:
        return time.perf_counter() - self.start

    def left(self) -> float:
        return self.limit_s - self.used()

    def lap(self, phase: str) -> float:
        """Close `phase` (time since the last lap, or since the start) and return its seconds."""
        now = time.perf_counter()
        seconds = now - (self.start if self._mark is None else self._mark)
        self._mark = now
        self.phases[phase] = round(self.phases.get(phase, 0.0) + seconds, 4)
        return seconds

    def resume(self) -> None:
        """Start the next lap now: the time since the last one went to work timed elsewhere (`merge`)."""
        self._mark = time.perf_counter()

    def merge(self, phases: dict[str, float]) -> None:
        """Phases timed elsewhere (work beside the call, placement.cores), added to this call's; the phases then
        overlap, and their seconds add up to more than the call took."""
        for phase, seconds in phases.items():
            self.phases[phase] = round(self.phases.get(phase, 0.0) + seconds, 4)
        self.phases = {phase: self.phases[phase] for phase in sorted(self.phases, key=_phase_rank)}

    def pairs(self, reserve_s: float) -> int:
        """(task, node) pairs the model may have: what COMPILE_SHARE of the time left compiles, after
        `reserve_s` kept for decode and verify. Deterministic mode counts from the limit alone."""
        left = self.limit_s if self.deterministic else self.left()
        return max(0, int(COMPILE_SHARE * max(0.0, left - reserve_s) * PAIRS_PER_S))

    def pair_limits(self, reserve_s: float, tasks: int, cap: int, floor: int) -> PairLimits:
        """What the model may hold: the affordable pairs (`pairs`), at most `cap` in all; each task keeps
        `floor` pairs when its even share of the affordable pairs reaches it, else one. With nothing
        affordable, no task keeps any: the model holds only the greedy plan's own pairs and just scores it.
        The caller passes the candidate stage's constants (`cap`, `floor`), which this layer cannot import."""
        affordable = self.pairs(reserve_s)
        share = affordable // max(1, tasks)
        return PairLimits(min(cap, affordable), 0 if not affordable else 1 if share < floor else floor)

    def search_pays(self, reserve_s: float, pairs: int) -> bool:
        """Is there time to search after compiling `pairs` (task, node) pairs (at PAIRS_PER_S) and keeping
        `reserve_s` for decode and verify: at least MIN_SEARCH_SHARE of the limit? Deterministic mode counts
        from the limit alone (no decision reads the clock)."""
        left = self.limit_s if self.deterministic else self.left()
        return left - reserve_s - pairs / PAIRS_PER_S >= MIN_SEARCH_SHARE * self.limit_s

    def scoring_pays(self, reserve_s: float, pairs: int, overlap_s: float = 0.0) -> bool:
        """Is there time to compile the model that only scores the greedy plan (`pairs`, at PAIRS_PER_S) and keep
        `reserve_s` for decode and verify? `overlap_s` of the reserve runs beside the compile, on another core
        (placement.cores). Deterministic mode counts from the limit alone, and alone (the same plan on any
        machine, whatever its cores)."""
        if self.deterministic:
            return self.limit_s - reserve_s - pairs / PAIRS_PER_S >= 0
        return self.left() - reserve_s - max(0.0, pairs / PAIRS_PER_S - overlap_s) >= 0

    def round_pays(self, reserve_s: float, mean_s: float, last_s: float) -> bool:
        """Is there time for another round of trimming and solving? ROUND_MARGIN times the mean round so far,
        and times the last round, still left after `reserve_s`. Never in deterministic mode, where no
        decision reads the clock (one round)."""
        left = self.left() - reserve_s
        return not self.deterministic and left > ROUND_MARGIN * mean_s and not left < ROUND_MARGIN * last_s


def _phase_rank(phase: str) -> int:
    return PHASES.index(phase) if phase in PHASES else len(PHASES)


_paused = 0
_paused_lock = threading.Lock()
_was_enabled = True


def _fresh_lock() -> None:
    """In a forked child (placement.cores): a lock another thread of the parent held stays held in the child."""
    global _paused_lock
    _paused_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_lock)


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection during the call: the request's and the index's millions of objects
    live for the whole call, and each full collection scanned them again (~0.7 s each at 12,500 nodes,
    several per call; measured: problem, greedy, decode and verify 1.3 s faster together). Not around
    the search: with the collector off there, CP-SAT found 2-3 % worse plans on the mig-M library
    instance in the same 10 s (same model, same hint; three runs each). A counter shared by concurrent
    calls (the service plans on threads) lets the last one out restore the collector as the first one
    in found it."""
    global _paused, _was_enabled
    with _paused_lock:
        if _paused == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _paused_lock:
            _paused -= 1
            if _paused == 0 and _was_enabled:
                gc.enable()
