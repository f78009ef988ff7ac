"""Work beside the call: the value comes back from a forked child, or is computed here where no child can run or
the child failed; a late child is stopped, and one whose value was never asked for does not outlive its block."""

from __future__ import annotations

import os
import time

import pytest

from placement import cores

needs_fork = pytest.mark.skipif(not cores.available(), reason="no second core or no fork here")


def _pid_and(value: int) -> tuple[int, int]:
    return os.getpid(), value


def _gone(pid: int) -> bool:
    """Is `pid` no longer a child of this process (collected, so no zombie is left)?"""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


@needs_fork
def test_the_value_comes_from_a_child_on_another_process() -> None:
    work = cores.Beside(lambda: _pid_and(41 + 1))
    assert work.forked
    pid, value = work.result()
    assert value == 42 and pid != os.getpid()


def test_without_a_fork_the_caller_computes_the_value_when_asked() -> None:
    calls: list[int] = []

    def fn() -> tuple[int, int]:
        calls.append(1)
        return _pid_and(7)

    work = cores.Beside(fn, fork=False)
    assert not calls  # nothing runs before the value is asked for
    assert work.result() == (os.getpid(), 7)


def test_one_core_or_the_environment_switch_means_no_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cores.ENV, "1")
    assert not cores.available()
    assert not cores.Beside(lambda: 1).forked


@needs_fork
def test_a_child_that_dies_is_replaced_by_the_caller() -> None:
    parent = os.getpid()

    def fn() -> int:
        if os.getpid() != parent:
            os._exit(3)  # the child dies without a word
        return 5

    assert cores.Beside(fn).result() == 5


@needs_fork
def test_an_error_is_raised_as_it_would_be_without_a_child() -> None:
    def fn() -> int:
        raise ValueError("bad field")

    with pytest.raises(ValueError, match="bad field"):
        cores.Beside(fn).result()


@needs_fork
def test_a_late_child_is_stopped_and_collected() -> None:
    work = cores.Beside(lambda: time.sleep(30))
    pid = work._pid
    assert pid is not None
    began = time.monotonic()
    with pytest.raises(cores.Late):
        work.result(timeout=0.2)
    assert time.monotonic() - began < 5.0
    assert _gone(pid)


@needs_fork
def test_a_child_never_asked_is_stopped_when_its_block_ends() -> None:
    with pytest.raises(RuntimeError), cores.beside(lambda: time.sleep(30)) as work:
        pid = work._pid
        raise RuntimeError("the caller failed first")
    assert pid is not None and _gone(pid)


@needs_fork
def test_a_big_value_comes_back_whole() -> None:
    big = list(range(500_000))  # several MB pickled: more than a pipe's buffer
    assert cores.Beside(lambda: big).result() == big


def _ended(pid: int) -> bool:
    """Has process `pid` ended (gone, or a zombie its new parent has not collected yet)?"""
    try:
        with open(f"/proc/{pid}/status") as status:
            return any(line.startswith("State:") and "Z" in line.split()[1] for line in status)
    except FileNotFoundError:
        return True


@needs_fork
def test_a_child_ends_with_the_process_that_forked_it() -> None:
    """A server stopped mid-call leaves no child running on with its sockets."""
    read, write = os.pipe()
    middle = os.fork()
    if middle == 0:  # a caller that starts work beside it and dies without waiting
        try:
            work = cores.Beside(lambda: time.sleep(30))
            os.write(write, str(work._pid).encode())
        finally:
            os._exit(0)
    os.close(write)
    child = int(os.read(read, 64))
    os.close(read)
    os.waitpid(middle, 0)
    deadline = time.monotonic() + 5.0
    while not _ended(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _ended(child)


@needs_fork
def test_a_pipe_another_child_holds_open_does_not_hold_up_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another thread's fork at the same moment copies this pipe's open end into its own child: the value comes
    with its length, so its end is not awaited."""
    real_fork = os.fork
    holders: list[int] = []

    def fork_beside_a_holder() -> int:
        holder = real_fork()
        if holder == 0:  # holds every descriptor open, the pipe's too, for 30 s
            time.sleep(30)
            os._exit(0)
        holders.append(holder)
        return real_fork()

    monkeypatch.setattr(cores.os, "fork", fork_beside_a_holder)
    try:
        began = time.monotonic()
        assert cores.Beside(lambda: 42).result() == 42
        parent = os.getpid()
        assert cores.Beside(lambda: os._exit(3) if os.getpid() != parent else 7).result() == 7  # the child dies
        assert time.monotonic() - began < 10.0
    finally:
        monkeypatch.undo()
        for pid in holders:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
