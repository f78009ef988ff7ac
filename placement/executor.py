"""Where independent solves run: this machine's cores (a process pool) or a Ray cluster, behind one interface.

Why this exists: what-if, benchmarks and sweeps all solve many independent requests (or simulate many
independent traces). One machine runs a handful; a sweep needs hundreds, and the teams that ask for
sweeps already run Ray. Every caller hands :func:`run_all` a top-level function and its arguments and
gets the outcomes back in input order, whatever executor ran them and whatever order they finished in:

* ``local`` (the default): a :class:`~concurrent.futures.ProcessPoolExecutor`, no new dependency; with
  one worker the calls run in this process (no process start, the same results);
* ``ray`` or ``ray:ADDRESS``: one Ray task per call. ``ray`` starts a Ray runtime on this machine
  (``ray.init(num_cpus=workers)``), ``ray:auto`` or ``ray:ray://head:10001`` joins a running cluster
  (KubeRay). Each task asks Ray for ``cpus_per_task`` CPUs: the CP-SAT workers (``policy.workers``) the
  call will use, so Ray never packs more solver threads on a node than it has cores. Ray is an optional
  extra (``pip install 'gpu-placement-planner[ray]'``); the cluster's image must have the same ``placement`` installed.

A call that raises is retried once (on any worker), then reported as failed with its error; the other
calls are unaffected. A worker process that dies (out of memory, killed) counts as a failed attempt of
the calls it was running; the pool is rebuilt for the rest. Ctrl-C cancels what has not finished: queued
calls are dropped, running local workers are terminated, Ray tasks are cancelled with ``ray.cancel``.

The callee decides determinism: a deterministic solve (``policy.deterministic``) gives the same result on
every executor, since the same function gets the same argument.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor
from concurrent.futures import wait as futures_wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

#: How the executors are named on command lines (``--executor``).
EXECUTOR_HELP = ("where solves run: 'local' (process pool on this machine, the default), 'ray' (a Ray runtime "
                 "started on this machine) or 'ray:ADDRESS' (join a Ray cluster: 'ray:auto', 'ray:ray://head:10001'; "
                 "needs pip install 'gpu-placement-planner[ray]')")


class ExecutorError(ValueError):
    """An executor that cannot be made (unknown name, Ray not installed or not reachable); the message says why."""


@dataclass
class Outcome:
    """What one call came to: its value, or the error of its last attempt (``value`` is then None)."""

    index: int
    value: Any = None
    error: str | None = None
    attempts: int = 0
    seconds: float = 0.0  #: wall seconds from the first submission to the final answer

    @property
    def ok(self) -> bool:
        return self.error is None


class Executor:
    """The shared interface: submit a call, wait for some to finish, read one, cancel the rest, close.

    Handles are whatever the executor uses (futures, Ray object refs); callers only pass them back."""

    label = "executor"
    workers = 1

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> Any:
        raise NotImplementedError

    def share(self, value: Any) -> Any:
        """``value`` as calls should carry it when many share it (the base request, a trace): itself here, one
        copy in Ray's object store on Ray. The callee reads it back with :func:`resolve`."""
        return value

    def wait(self, handles: Sequence[Any], timeout: float | None) -> list[Any]:
        """The handles among ``handles`` that have finished (at least one unless the timeout passed)."""
        raise NotImplementedError

    def result(self, handle: Any) -> Any:
        """The call's value; raises what the call raised."""
        raise NotImplementedError

    def cancel(self, handles: Sequence[Any]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class InlineExecutor(Executor):
    """Calls run here, one at a time, at submission: one worker needs no process pool."""

    label = "local"

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(arg))
        except Exception as exc:  # the call's failure is its outcome, as in a pool
            future.set_exception(exc)
        return future

    def wait(self, handles: Sequence[Any], timeout: float | None) -> list[Any]:
        return list(handles)

    def result(self, handle: Future) -> Any:
        return handle.result()

    def cancel(self, handles: Sequence[Any]) -> None:
        pass


class LocalExecutor(Executor):
    """A process pool on this machine; the pool is rebuilt when a worker process dies."""

    label = "local"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        # spawn, not fork: a forked copy of a process that runs solver or Ray threads can deadlock, and spawn
        # proves every call is a top-level importable function, as Ray needs too.
        return ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"))

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> Future:
        try:
            return self._pool.submit(fn, arg)
        except BrokenProcessPool:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = self._new_pool()
            return self._pool.submit(fn, arg)

    def wait(self, handles: Sequence[Any], timeout: float | None) -> list[Any]:
        done, _ = futures_wait(handles, timeout=timeout, return_when=FIRST_COMPLETED)
        return [h for h in handles if h in done]

    def result(self, handle: Future) -> Any:
        return handle.result()

    def cancel(self, handles: Sequence[Any]) -> None:
        """Drop queued calls and end running ones: a process pool cannot cancel a running call, so its
        worker processes are terminated (``_processes`` is private but stable since Python 3.3)."""
        for h in handles:
            h.cancel()
        seen: dict[int, Any] = {}
        processes = list((getattr(self._pool, "_processes", None) or {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        for _ in range(3):  # the pool's manager thread may still start a worker while it shuts down: look again
            processes += list((getattr(self._pool, "_processes", None) or {}).values())
            fresh = [p for p in processes if id(p) not in seen]
            if not fresh:
                break
            for p in fresh:
                seen[id(p)] = p
                if p.is_alive():
                    p.terminate()
            for p in fresh:
                p.join(timeout=5)
            time.sleep(0.05)
        for p in seen.values():  # one that ignored SIGTERM while starting up under load
            if p.is_alive():
                p.kill()
                p.join(timeout=5)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _ray_call(fn: Callable[[Any], Any], arg: Any) -> Any:
    """The body of every Ray task: a module-level function, so workers import it by name."""
    return fn(arg)


class RayExecutor(Executor):
    """One Ray task per call. Joins ``address`` when given, else a Ray runtime already started in this process
    (tests share one), else starts one on this machine with ``workers`` CPUs; shuts down only what it started."""

    label = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None, cpus_per_task: float = 1.0) -> None:
        try:
            import ray
        except ImportError as exc:
            raise ExecutorError(f"--executor ray needs Ray: pip install 'gpu-placement-planner[ray]' ({exc})") from None
        self._ray = ray
        self._owns = False
        if not ray.is_initialized():
            try:
                if address:
                    ray.init(address=address, log_to_driver=False)
                else:
                    ray.init(num_cpus=max(1, workers or os.cpu_count() or 1), include_dashboard=False,
                             log_to_driver=False)
            except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ... when the cluster is not there
                raise ExecutorError(f"cannot start or join Ray{f' at {address}' if address else ''}: {exc}") from None
            self._owns = True
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1) // max(cpus_per_task, 1e-9)))
        self.label = f"ray:{address}" if address else "ray"
        # max_retries=0: retries are ours (once, for exceptions and lost workers alike), so every executor
        # counts attempts the same way.
        self._remote = ray.remote(num_cpus=cpus_per_task, max_retries=0)(_ray_call)

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> Any:
        return self._remote.remote(fn, arg)

    def share(self, value: Any) -> Any:
        """One copy in the object store: a thousand tasks then carry a reference, not a thousand copies of a
        month-long trace through the driver."""
        return self._ray.put(value)

    def wait(self, handles: Sequence[Any], timeout: float | None) -> list[Any]:
        if not handles:
            return []
        done, _ = self._ray.wait(list(handles), num_returns=1, timeout=timeout)
        return done

    def result(self, handle: Any) -> Any:
        try:
            return self._ray.get(handle)
        except self._ray.exceptions.RayTaskError as exc:
            # the call's own exception, so a failed point reads the same as on the local executor
            cause = getattr(exc, "cause", None)
            raise (cause if isinstance(cause, BaseException) else exc) from None

    def cancel(self, handles: Sequence[Any], settle_s: float = 10.0) -> None:
        """Cancel (force: the worker running a task is killed), then make sure: a task caught between queued
        and running can miss its cancellation, so the ones not ended are cancelled again, for ``settle_s``."""
        left = list(handles)
        deadline = time.monotonic() + settle_s
        while left:
            for h in left:
                with contextlib.suppress(Exception):  # already finished or already gone: nothing left to cancel
                    self._ray.cancel(h, force=True)
            if time.monotonic() >= deadline:
                break
            _, left = self._ray.wait(left, num_returns=len(left), timeout=0.5)

    def close(self) -> None:
        if self._owns:
            self._ray.shutdown()


def resolve(value: Any) -> Any:
    """What :meth:`Executor.share` made of a value, back as the value (inside a Ray task: from the object store)."""
    kind = type(value)
    if kind.__name__ == "ObjectRef" and kind.__module__.startswith("ray"):
        import ray

        return ray.get(value)
    return value


def make_executor(spec: str | None = None, workers: int | None = None, cpus_per_task: float = 1.0) -> Executor:
    """``local`` (or None), ``ray`` or ``ray:ADDRESS`` → an executor; ExecutorError for anything else."""
    spec = (spec or "local").strip()
    if spec == "local":
        return InlineExecutor() if workers == 1 else LocalExecutor(workers)
    if spec == "ray" or spec.startswith("ray:"):
        address = (spec[4:] or None) if spec.startswith("ray:") else None
        return RayExecutor(address, workers, cpus_per_task)
    raise ExecutorError(f"unknown --executor {spec!r}: expected 'local', 'ray' or 'ray:ADDRESS'")


def _error_text(exc: BaseException) -> str:
    """The error as one line a table can show: type and message, and where it was raised when there is no message."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if not text:
        frames = traceback.extract_tb(exc.__traceback__)
        text = f"at {frames[-1].filename}:{frames[-1].lineno}" if frames else "no message"
    return f"{type(exc).__name__}: {text}"


def run_all(fn: Callable[[Any], Any], args: Sequence[Any], executor: Executor, *, retries: int = 1,
            on_done: Callable[[Outcome, int, int], None] | None = None, poll_s: float = 0.5) -> list[Outcome]:
    """Every ``fn(arg)`` on ``executor``, the outcomes in input order.

    At most ``2 × workers`` calls are in flight, so a 10,000-point sweep does not queue 10,000 pickled
    requests at once and Ctrl-C has little to cancel. A call that raises is submitted again, up to
    ``retries`` times; ``on_done(outcome, finished, total)`` is called as each call reaches its answer.
    KeyboardInterrupt cancels everything in flight and propagates."""
    total = len(args)
    outcomes: list[Outcome | None] = [None] * total
    started = [0.0] * total
    attempts = [0] * total
    pending = list(range(total - 1, -1, -1))  # a stack: pop() takes the lowest index first
    in_flight: dict[Any, int] = {}
    finished = 0
    limit = max(1, 2 * executor.workers)

    def submit(i: int) -> None:
        if attempts[i] == 0:
            started[i] = time.perf_counter()
        attempts[i] += 1
        in_flight[executor.submit(fn, args[i])] = i

    try:
        while pending or in_flight:
            while pending and len(in_flight) < limit:
                submit(pending.pop())
            for handle in executor.wait(list(in_flight), timeout=poll_s):
                i = in_flight.pop(handle)
                try:
                    value, error = executor.result(handle), None
                except Exception as exc:
                    value, error = None, _error_text(exc)
                if error is not None and attempts[i] <= retries:
                    submit(i)
                    continue
                outcome = Outcome(i, value, error, attempts[i], time.perf_counter() - started[i])
                outcomes[i] = outcome
                finished += 1
                if on_done is not None:
                    on_done(outcome, finished, total)
    except BaseException:
        executor.cancel(list(in_flight))
        raise
    return [o for o in outcomes if o is not None]
