"""The placer's loop: a cycle every interval, brought forward when Slurm's queue changes."""

from __future__ import annotations

import pytest

from placement.slurm import loop
from placement.slurm.commands import SlurmError
from placement.slurm.loop import wait
from placement.slurm.read import Options


class Clock:
    """A fake monotonic clock that `sleep` moves."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


class Queue:
    """A Slurm whose short squeue reads the given states in turn (the last one for ever); an Exception
    in the list is raised there."""

    def __init__(self, *states: str | Exception) -> None:
        self.states = list(states)
        self.calls = 0

    def queue_state(self) -> str:
        self.calls += 1
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        if isinstance(state, Exception):
            raise state
        return state


def test_a_change_in_the_queue_ends_the_wait_at_the_next_look() -> None:
    clock, slurm = Clock(), Queue("1 R", "1 R", "1 CG")
    assert wait(slurm, "1 R", until=30.0, poll_s=0.5, sleep=clock.sleep, clock=clock) is True  # type: ignore[arg-type]
    assert clock.now == 1.5 and slurm.calls == 3


def test_a_quiet_queue_waits_the_whole_interval_and_no_longer() -> None:
    clock, slurm = Clock(), Queue("1 R")
    assert wait(slurm, "1 R", until=2.0, poll_s=0.3, sleep=clock.sleep, clock=clock) is False  # type: ignore[arg-type]
    assert abs(clock.now - 2.0) < 1e-9 and max(clock.slept) <= 0.3 + 1e-9


def test_no_poll_or_an_unreadable_queue_is_a_plain_sleep_to_the_deadline() -> None:
    clock = Clock()
    assert wait(Queue("x"), "1 R", until=5.0, poll_s=None, sleep=clock.sleep, clock=clock) is False  # type: ignore[arg-type]
    assert clock.slept == [5.0]
    clock, slurm = Clock(), Queue(SlurmError("down"), "2 PD")
    # Slurm down at the first look: the queue it then shows is not taken for a change (nothing to compare)
    assert wait(slurm, "1 R", until=5.0, poll_s=1.0, sleep=clock.sleep, clock=clock) is False  # type: ignore[arg-type]
    assert clock.now == 5.0 and slurm.calls == 1


def test_the_loop_starts_its_next_cycle_when_a_job_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """run(): the queue read before a cycle is what the wait compares with, so a job ending during the cycle
    or after it brings the next cycle forward."""
    clock, began = Clock(), []

    def cycle(slurm: object, options: Options | None = None) -> object:
        began.append(clock.now)
        raise SlurmError("no plan in this test")

    monkeypatch.setattr(loop, "cycle", cycle)
    slurm = Queue("1 R", "1 R", "1 R", "")
    loop.run(slurm, Options(), interval_s=30, once=False, say=lambda _: None, cycles=2, poll_s=1.0,  # type: ignore[arg-type]
             sleep=clock.sleep, clock=clock)
    assert began == [0.0, 3.0]
