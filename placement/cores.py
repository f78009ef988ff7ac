"""Work beside the call on another core: a function run in a forked child while the caller goes on.

One thread runs Python at a time, and most of a big call is Python (indexing, the greedy plan, compiling,
decoding, verifying); only CP-SAT's workers used the second core. A forked child starts with the caller's
whole state (copy on write: ~10 ms at 500 MB), so nothing is sent to it; it sends back its result, pickled,
through a pipe. The calls that use it hand the child work whose result is small (a plan's terms and
statistics, a list of violations) and keep the big work (decoding the plan) in the caller.

A result is the same wherever it was computed: where no child can be forked (no `os.fork`, as on Windows;
one usable core; `PLACEMENT_CORES=1` in the environment), the function runs in the caller when its result is
asked for, and a child that fails (its function raised, or it died) is run again in the caller, so an error is
raised as it would be without a child. Deterministic mode relies on it: the same plan with or without a child.

A child forked from a process with other threads holds no lock another thread held at that moment (only
the forking thread is copied); a child stuck on one anyway is what `result`'s timeout is for.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Generic, TypeVar

T = TypeVar("T")

#: Set to 1 to run every piece of work in the caller (one core, or a host that must not fork).
ENV = "PLACEMENT_CORES"

# Python 3.12+ warns on every fork from a process with threads (a served call runs on one of the server's):
# the child here runs only the calling thread's own work, bounded by a timeout (module docstring).
warnings.filterwarnings("ignore", message=r".*use of fork\(\) may lead to deadlocks", category=DeprecationWarning)


def available() -> bool:
    """Can work go to a forked child on a core of its own?"""
    if not hasattr(os, "fork") or not sys.platform.startswith("linux") or os.environ.get(ENV, "").strip() == "1":
        return False
    try:
        return len(os.sched_getaffinity(0)) >= 2
    except OSError:  # pragma: no cover - affinity unreadable: assume one core
        return False


def _die_with_parent(parent: int) -> None:
    """Linux: the child is killed if the thread that forked it ends first (a server stopped mid-call must not
    leave children holding its sockets), and ends at once if `parent` already has. Best effort: without libc's
    prctl the child just ends with its work."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # pragma: no cover - no libc prctl here
        return
    if os.getppid() != parent:  # it ended before the signal was asked for
        os._exit(1)


#: prctl's option that sends the child a signal when its parent ends (linux/prctl.h)
_PR_SET_PDEATHSIG = 1
#: The length before a child's message (bytes, unsigned 64-bit)
_HEADER = struct.Struct("<Q")
#: Seconds between looks at a child that sends nothing yet
_POLL_S = 0.05


class Late(Exception):
    """The child did not finish within the time it was given; it was stopped."""


class Beside(Generic[T]):
    """`fn()` running in a forked child (or waiting to run in the caller, where no child could start)."""

    def __init__(self, fn: Callable[[], T], *, fork: bool | None = None) -> None:
        self._fn = fn
        self._pid: int | None = None
        self._fd: int | None = None
        self._status = 0
        self.forked = available() if fork is None else fork
        if self.forked:
            self._start()

    def _start(self) -> None:
        read, write = os.pipe()
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError:  # no memory or process slots for a child: the caller does the work
            os.close(read)
            os.close(write)
            self.forked = False
            return
        if pid == 0:  # the child: compute, send, and leave without running the caller's exit handlers
            code = 1
            try:
                _die_with_parent(parent)
                os.close(read)
                data = pickle.dumps(self._fn(), protocol=pickle.HIGHEST_PROTOCOL)
                view = memoryview(_HEADER.pack(len(data)) + data)
                while view:
                    view = view[os.write(write, view):]
                code = 0
            except BaseException:  # noqa: BLE001 - any failure: the caller runs the work itself
                code = 1
            finally:
                os._exit(code)
        os.close(write)
        self._pid, self._fd = pid, read

    def result(self, timeout: float | None = None) -> T:
        """The function's value: the child's once it has sent it, else computed here. `timeout` (seconds, None:
        no limit) bounds the wait for a child: past it the child is stopped and `Late` raised."""
        if not self.forked:
            return self._fn()
        data = self._receive(None if timeout is None else time.monotonic() + timeout)
        if data is None:  # the child failed: the same work here, raising what it raises
            return self._fn()
        return pickle.loads(data)

    def _receive(self, deadline: float | None) -> bytes | None:
        """The child's bytes, or None when it failed; Late past `deadline`. The message carries its length: a
        child forked at the same moment by another thread may hold this pipe open too, so its end is not the
        message's; while nothing arrives, the child's exit is looked for instead."""
        assert self._fd is not None and self._pid is not None
        buffer = bytearray()
        want: int | None = None
        try:
            while want is None or len(buffer) < want:
                wait = _POLL_S if deadline is None else min(_POLL_S, max(0.0, deadline - time.monotonic()))
                ready, _, _ = select.select([self._fd], [], [], wait)
                if ready:
                    chunk = os.read(self._fd, 1 << 20)
                    if not chunk:
                        return self._collected(None)  # the child ended mid-message
                    buffer += chunk
                    if want is None and len(buffer) >= _HEADER.size:
                        want = _HEADER.size + _HEADER.unpack_from(buffer)[0]
                elif self._exited():  # it ended, and another child may hold the pipe open: take what is there
                    while select.select([self._fd], [], [], 0)[0] and (chunk := os.read(self._fd, 1 << 20)):
                        buffer += chunk
                    whole = len(buffer) >= _HEADER.size and len(buffer) == _HEADER.size + _HEADER.unpack_from(buffer)[0]
                    return self._collected(bytes(buffer[_HEADER.size:]) if whole else None)
                elif deadline is not None and time.monotonic() >= deadline:
                    self.stop()
                    raise Late("the work beside the call did not finish in time")
        finally:
            self._close()
        return self._collected(bytes(buffer[_HEADER.size:]))

    def _exited(self) -> bool:
        """Has the child ended (collected here, its exit status kept)?"""
        assert self._pid is not None
        pid, status = os.waitpid(self._pid, os.WNOHANG)
        if pid == 0:
            return False
        self._status, self._pid = status, None
        return True

    def _collected(self, data: bytes | None) -> bytes | None:
        """`data` once the child has ended well (collected now if not yet), else None."""
        if self._pid is not None:
            _, self._status = os.waitpid(self._pid, 0)
            self._pid = None
        return data if data is not None and os.waitstatus_to_exitcode(self._status) == 0 else None

    def stop(self) -> None:
        """Stop the child, if one still runs, and collect it."""
        self._close()
        if self._pid is not None:
            with suppress(ProcessLookupError):  # already gone
                os.kill(self._pid, signal.SIGKILL)
            os.waitpid(self._pid, 0)
            self._pid = None

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@contextmanager
def beside(fn: Callable[[], T], *, fork: bool | None = None) -> Iterator[Beside[T]]:
    """`Beside(fn)` for the block; a child whose result was never asked for is stopped when the block ends
    (an error in the caller must not leave it running)."""
    work = Beside(fn, fork=fork)
    try:
        yield work
    finally:
        work.stop()
