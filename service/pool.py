"""The bounded solver pool: at most N solves at once, a bounded queue, and 503 beyond it.

Solves run on threads, not processes: CP-SAT releases the GIL while it searches, so threads use
the cores without pickling requests and plans across process boundaries, and a `threading.Event`
can stop a running search (a process pool could not share one). The executor's own queue is
unbounded, so admission is counted here: a slot is taken before submitting and given back only
when the thread has really finished — not when the HTTP handler gives up on it — so a client
that disconnects or a deadline that passes never lets more threads pile up than configured.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from placement_service.metrics import Metrics

T = TypeVar("T")

#: Weight of the newest solve in the running average that sizes Retry-After.
_EWMA_ALPHA = 0.2


class PoolFull(Exception):
    """Every solver thread is busy and the queue is full (or the pool is shutting down)."""

    def __init__(self, retry_after_s: int, reason: str) -> None:
        super().__init__(reason)
        self.retry_after_s = retry_after_s
        self.reason = reason


class SolvePool:
    """Admission control plus a lazily created thread pool; one per app."""

    def __init__(self, max_concurrent: int, max_queue: int, metrics: Metrics, max_retry_after_s: float) -> None:
        self.max_concurrent = max_concurrent
        self.capacity = max_concurrent + max_queue
        self.metrics = metrics
        self.max_retry_after_s = max_retry_after_s
        self.draining = False
        self._lock = threading.Lock()
        self._in_flight = 0
        self._stops: set[threading.Event] = set()
        self._executor: ThreadPoolExecutor | None = None
        self._avg_solve_s: float | None = None  # unknown until a solve ends: nothing is shed on a guess

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def saturated(self) -> bool:
        return self._in_flight >= self.capacity

    def retry_after(self) -> int:
        """Seconds until a slot is likely free: the average solve times the depth of the backlog."""
        backlog = max(1, self._in_flight) / self.max_concurrent
        average = 1.0 if self._avg_solve_s is None else self._avg_solve_s
        return max(1, min(math.ceil(self.max_retry_after_s), math.ceil(average * backlog)))

    def expected_wait(self) -> float:
        """Seconds a request admitted now would likely wait for a thread: the requests queued ahead of
        it, shared over the threads, times the average time one holds a thread."""
        ahead = self._in_flight - self.max_concurrent + 1
        if ahead <= 0 or self._avg_solve_s is None:
            return 0.0
        return ahead / self.max_concurrent * self._avg_solve_s

    def check(self, budget_s: float | None = None) -> None:
        """Cheap early refusal, before a body is read and parsed; `submit` is the real gate.

        With `budget_s`, also refuse when the queue ahead would likely use up that budget: the
        caller gets a 503 with Retry-After now rather than an answer that cannot come in time.
        """
        if self.draining:
            raise PoolFull(self.retry_after(), "shutting down")
        if self.saturated:
            self.metrics.rejected.inc()
            raise PoolFull(self.retry_after(), "all solver threads busy and the queue is full")
        if budget_s is not None and self.expected_wait() >= budget_s:
            self.metrics.rejected.inc()
            raise PoolFull(self.retry_after(), "the queue ahead would not let this request finish in time")

    def stop_running(self, reason: str) -> int:
        """Tell every running solve to return its best plan now (the pool keeps admitting nothing new
        only if `draining` is set); returns how many were told."""
        with self._lock:
            stops = list(self._stops)
        told = 0
        for stop in stops:
            if not stop.is_set():
                stop.set()
                self.metrics.stopped.labels(reason).inc()
                told += 1
        return told

    def submit(self, fn: Callable[[], T], stop: threading.Event) -> asyncio.Future[T]:
        """Run `fn` on a solver thread; raise `PoolFull` at once when no slot is free."""
        with self._lock:
            if self.draining:
                raise PoolFull(self.retry_after(), "shutting down")
            if self._in_flight >= self.capacity:
                self.metrics.rejected.inc()
                raise PoolFull(self.retry_after(), "all solver threads busy and the queue is full")
            self._in_flight += 1
            self._stops.add(stop)
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.max_concurrent, thread_name_prefix="placement-solve")
            executor = self._executor
        self.metrics.solves_in_flight.inc()
        queued_at = time.perf_counter()

        def run() -> T:
            self.metrics.queue_seconds.observe(time.perf_counter() - queued_at)
            self.metrics.solves_running.inc()
            started = time.perf_counter()
            try:
                return fn()
            finally:
                elapsed = time.perf_counter() - started
                self.metrics.solves_running.dec()
                with self._lock:
                    if self._avg_solve_s is None:
                        self._avg_solve_s = elapsed
                    else:
                        self._avg_solve_s += _EWMA_ALPHA * (elapsed - self._avg_solve_s)

        def release(_: Future[Any]) -> None:
            with self._lock:
                self._in_flight -= 1
                self._stops.discard(stop)
            self.metrics.solves_in_flight.dec()

        try:
            future = executor.submit(run)
        except RuntimeError as exc:  # executor shut down between the check and the submit
            release(Future())
            raise PoolFull(self.retry_after(), "shutting down") from exc
        future.add_done_callback(release)
        return asyncio.wrap_future(future)

    def open(self) -> None:
        """Admit solves again; lifespan startup calls it, so an app restarted in-process works."""
        with self._lock:
            self.draining = False

    def close(self) -> None:
        """Stop admitting, tell running solves to return their best plan now, and drop queued ones."""
        with self._lock:
            self.draining = True
            stops = list(self._stops)
            executor, self._executor = self._executor, None
        for stop in stops:
            if not stop.is_set():
                stop.set()
                self.metrics.stopped.labels("shutdown").inc()
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
