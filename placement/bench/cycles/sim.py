"""The scheduler loop over a trace: arrivals, departures, spot reclaims, and one policy decision per cycle.

Why this exists: a placement plan is only as good as the waits and completions it leads to once
jobs arrive and leave over weeks; a single snapshot cannot show a gang starving behind small jobs
or a preemption throwing work away. The simulator owns time and the truth (each job's real
duration); a policy (:class:`~placement.bench.cycles.state.SchedulerPolicy`) sees only the queue,
what runs where, the free GPUs and the runtime estimates, and every decision it makes is checked
strictly, so no policy can look better by doing something a real cluster would refuse.

The loop, at each cycle boundary ``now`` (multiples of ``cycle_s``):

1. jobs with ``submit_s ≤ now`` join the queue (arrival order);
2. running jobs whose true end ``start + remaining`` is ``≤ now`` leave (their finish is that true
   end, not the boundary: only the freed GPUs wait for the boundary);
3. spot nodes come back or are reclaimed (their jobs preempted), effective at the boundary;
4. if anything changed since the last call (an arrival, a departure, a preemption, a node
   reclaimed or back), or the policy sets ``every_cycle = True``, the policy is called; its
   preemptions apply first, then its starts, checked against the free GPUs after the preemptions
   (a job preempted by a decision may start again in the same decision: a migration).

On a mixed fleet (``SimConfig.node_models``) a job with a speed table runs at its speed on the slowest
GPU model its gang holds (:func:`~placement.bench.cycles.state.gang_speed`): its true end is
``start + remaining work / speed``, a preemption keeps the work of the checkpointed running time, and a
start on a model where its speed is 0 is refused. Time (waits, checkpoints, attained GPU-seconds,
utilisation) stays wall-clock; only work is scaled.

When nothing can change before the next event, the clock jumps to the boundary at or after it, so a
quiet week costs nothing. The run ends when every job has finished (drained) or at a safety cap
after the last arrival (not drained).
"""

from __future__ import annotations

import bisect
import heapq
import math
import numbers
import time
from dataclasses import dataclass, field, replace

import numpy as np

from placement.bench.cycles.state import Decision, Running, SchedulerPolicy, TraceJob, gang_speed, pods_of

#: Slack on time comparisons, so float arithmetic never moves an event to the next cycle.
EPS = 1e-6
HOUR = 3600.0
DAY = 86400.0


class InvalidDecision(ValueError):
    """A policy asked for something a real cluster would refuse; the message names the policy and what."""


@dataclass(frozen=True)
class SimConfig:
    """The cluster and the clock: nodes of ``gpus_per_node`` GPUs, the cycle, checkpoints, optional spot
    reclaims, and optionally each node's GPU model (a mixed fleet)."""

    nodes: int
    gpus_per_node: int = 8
    cycle_s: float = 60.0
    #: a running job checkpoints every this many hours of running; ≤ 0: never (a preemption loses the whole run)
    checkpoint_h: float = 1.0
    #: the last ``spot_nodes`` nodes are spot: each is reclaimed at Poisson rate ``reclaim_per_h`` per hour up
    spot_nodes: int = 0
    reclaim_per_h: float = 0.05
    #: hours a reclaimed node stays down
    reclaim_down_h: float = 1.0
    seed: int = 0
    #: stop (not drained) this long after the last arrival
    cap_after_last_arrival_s: float = 60 * DAY
    #: GPU model of each node (the keys of ``TraceJob.speeds``); None: one model, every job at speed 1.0
    node_models: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise ValueError("the cluster needs at least one node with at least one GPU")
        if self.cycle_s <= 0:
            raise ValueError("cycle_s must be positive")
        if not 0 <= self.spot_nodes <= self.nodes:
            raise ValueError(f"spot_nodes must be between 0 and the {self.nodes} nodes")
        if self.reclaim_per_h < 0 or self.reclaim_down_h < 0:
            raise ValueError("reclaim_per_h and reclaim_down_h must be ≥ 0")
        if self.node_models is not None:
            object.__setattr__(self, "node_models", tuple(self.node_models))
            if len(self.node_models) != self.nodes:
                raise ValueError(f"node_models names {len(self.node_models)} models for {self.nodes} nodes")

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass
class SimResult:
    """What one policy did to one trace; :mod:`placement.bench.cycles.report` turns it into metrics."""

    policy: str
    config: SimConfig
    jobs: list[TraceJob]  #: final copies, in arrival order
    first_start_s: np.ndarray  #: per job; NaN when it never started
    finish_s: np.ndarray  #: per job, the true end; NaN when it never finished
    #: every run of every job as (start, end, gpus); end is the true finish or the preemption
    runs: list[tuple[float, float, int]]
    times_s: np.ndarray  #: the cycle boundaries visited (state is constant between them)
    queue_len: np.ndarray  #: jobs waiting after each visited boundary's decision
    busy_gpus: np.ndarray  #: GPUs held by running jobs after each visited boundary's decision
    plan_ms: np.ndarray  #: wall-clock milliseconds of every policy call
    preemptions: int
    lost_gpu_s: float  #: GPU-seconds of work thrown away by preemptions (since each job's last checkpoint)
    reclaims: int
    drained: bool
    end_s: float  #: the last finish when drained, else where the run stopped
    invalid_decisions: int = 0
    estimates: str = ""
    extra: dict = field(default_factory=dict)


def reclaim_schedule(cfg: SimConfig, horizon_s: float) -> list[tuple[float, int, float]]:
    """(reclaim time, node, back time) of every spot reclaim up to ``horizon_s``, drawn from ``cfg.seed``.

    Drawn before the run and independent of the policy, so every policy suffers the same reclaims.
    A node's next reclaim is drawn from when it is back (a down node cannot be reclaimed again)."""
    if cfg.spot_nodes == 0 or cfg.reclaim_per_h <= 0:
        return []
    rng = np.random.default_rng(cfg.seed)
    down = cfg.reclaim_down_h * HOUR
    events = []
    for node in range(cfg.nodes - cfg.spot_nodes, cfg.nodes):
        t = 0.0
        while True:
            t += float(rng.exponential(HOUR / cfg.reclaim_per_h))
            if t > horizon_s:
                break
            events.append((t, node, t + down))
            t += down
    events.sort()
    return events


def _boundary(t: float, cycle_s: float) -> int:
    """Index of the first cycle boundary at or after ``t``."""
    return max(0, math.ceil((t - EPS) / cycle_s))


def check_decision(decision: object, queue: dict[str, TraceJob], running: dict[str, Running], free: np.ndarray,
                   up: np.ndarray, gpus_per_node: int, node_models: tuple[str, ...] | None = None) -> str | None:
    """The first thing wrong with ``decision``, or None. Preemptions count as done before the starts, so a
    job preempted here may start again (elsewhere) in the same decision. With ``node_models``, a start on a
    node whose model the job cannot run on (speed 0) is wrong."""
    if not isinstance(decision, Decision):
        return f"returned {type(decision).__name__}, not a Decision"
    avail = free.copy()
    preempted: set[str] = set()
    for name in decision.preempt:
        if name not in running:
            return f"preempts {name!r}, which is not running"
        if name in preempted:
            return f"preempts {name!r} twice"
        preempted.add(name)
        for n, g in running[name].nodes.items():
            avail[n] += g
    started: set[str] = set()
    for item in decision.starts:
        try:
            job, nodes = item
        except (TypeError, ValueError):
            return f"start {item!r} is not a (job, {{node: gpus}}) pair"
        name = getattr(job, "name", None)
        mine = queue.get(name) if name in queue else running[name].job if name in preempted else None
        if mine is None:
            return f"starts {name!r}, which is not in the queue"
        if name in started:
            return f"starts {name!r} twice"
        started.add(name)
        want = mine.gpus
        if not isinstance(nodes, dict) or not nodes:
            return f"starts {name!r} on no nodes"
        pod = pods_of(want, gpus_per_node)
        size = pod[0]  # pods_of makes equal pods, so a node may hold any whole number of them
        total = 0
        for n, g in nodes.items():
            if not isinstance(n, numbers.Integral) or not 0 <= n < len(avail):
                return f"starts {name!r} on node {n!r}, not one of nodes 0..{len(avail) - 1}"
            if not isinstance(g, numbers.Integral) or g <= 0:
                return f"starts {name!r} with {g!r} GPUs on node {n}"
            if not up[n]:
                return f"starts {name!r} on node {n}, which is down (reclaimed)"
            if node_models is not None and mine.speed_on(node_models[n]) <= 0:
                return f"starts {name!r} on node {n}, a {node_models[n]}, which it cannot run on (speed 0)"
            if g % size:
                return (f"starts {name!r} ({want} GPUs, pods of {size}) with {g} GPUs on node {n}: "
                        "not a whole number of pods")
            avail[n] -= g
            if avail[n] < 0:
                return f"starts {name!r} with {g} GPUs on node {n}, which has only {int(avail[n] + g)} free"
            total += int(g)
        if total != want:
            return f"starts {name!r} with {total} GPUs in all, but the job needs {want}"
    return None


class _Loop:
    """The state of one run; :func:`simulate` is the way in."""

    def __init__(self, jobs: list[TraceJob], policy: SchedulerPolicy, cfg: SimConfig) -> None:
        self.policy, self.cfg = policy, cfg
        self.jobs = [replace(j, done_s=0.0, attained_gpu_s=0.0, preemptions=0)
                     for j in sorted(jobs, key=lambda j: j.submit_s)]
        self.order = {j.name: i for i, j in enumerate(self.jobs)}
        if len(self.order) != len(self.jobs):
            raise ValueError("job names must be unique")
        n = len(self.jobs)
        self.free = np.full(cfg.nodes, cfg.gpus_per_node, dtype=np.int64)
        self.up = np.ones(cfg.nodes, dtype=bool)
        self.queue: list[TraceJob] = []
        self.queue_pos: list[int] = []  # arrival index of each queued job (keeps re-queued jobs in place)
        self.queued: dict[str, TraceJob] = {}
        self.running: dict[str, Running] = {}
        self.run_id: dict[str, int] = {}
        self.base_attained: dict[str, float] = {}
        self.ends: list[tuple[float, int, str]] = []  # heap of (true end, run id, name)
        self.next_run = 0
        self.first_start = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.runs: list[tuple[float, float, int]] = []
        self.busy = 0
        self.preemptions = 0
        self.lost_gpu_s = 0.0
        self.reclaims = 0
        self.done = 0

    # -- what happens to jobs ---------------------------------------------------------------

    def _enqueue(self, job: TraceJob) -> None:
        pos = self.order[job.name]
        i = bisect.bisect(self.queue_pos, pos)
        self.queue.insert(i, job)
        self.queue_pos.insert(i, pos)
        self.queued[job.name] = job

    def _start(self, job: TraceJob, nodes: dict[int, int], now: float) -> None:
        for n, g in nodes.items():
            self.free[n] -= g
        self.busy += job.gpus
        rid = self.next_run
        self.next_run += 1
        speed = gang_speed(job, nodes, self.cfg.node_models)
        self.running[job.name] = Running(job=job, start_s=now, nodes=nodes, checkpoint_s=now, speed=speed)
        self.run_id[job.name] = rid
        self.base_attained[job.name] = job.attained_gpu_s
        heapq.heappush(self.ends, (now + job.remaining_s / speed, rid, job.name))
        idx = self.order[job.name]
        if math.isnan(self.first_start[idx]):
            self.first_start[idx] = now

    def _stop(self, name: str, at: float) -> Running:
        r = self.running.pop(name)
        del self.run_id[name]
        for n, g in r.nodes.items():
            self.free[n] += g
        self.busy -= r.job.gpus
        r.job.attained_gpu_s = self.base_attained.pop(name) + r.job.gpus * (at - r.start_s)
        self.runs.append((r.start_s, at, r.job.gpus))
        return r

    def _finish(self, name: str, end: float) -> None:
        r = self._stop(name, end)
        r.job.done_s = r.job.duration_s
        self.finish[self.order[name]] = end
        self.done += 1

    def _preempt(self, name: str, now: float) -> None:
        """Back to the queue at its arrival position; the work since the last checkpoint is lost.

        Checkpoints fall every ``checkpoint_h`` of running time; the work they keep is that time × the
        run's speed, and the GPU-seconds lost are the running time after the last one."""
        r = self._stop(name, now)
        job, ran = r.job, now - r.start_s
        ckpt = self.cfg.checkpoint_h * HOUR
        kept = min(math.floor(ran / ckpt + EPS) * ckpt, ran) if ckpt > 0 else 0.0
        kept = min(kept * r.speed, job.remaining_s)
        job.done_s += kept
        self.lost_gpu_s += job.gpus * max(0.0, ran - kept / r.speed)
        job.preemptions += 1
        self.preemptions += 1
        self._enqueue(job)

    def _refresh(self, now: float) -> None:
        """Attained service and last checkpoint of the running jobs, as of ``now``, for the policy to see."""
        ckpt = self.cfg.checkpoint_h * HOUR
        for name, r in self.running.items():
            ran = now - r.start_s
            r.job.attained_gpu_s = self.base_attained[name] + r.job.gpus * ran
            r.checkpoint_s = r.start_s + (math.floor(ran / ckpt + EPS) * ckpt if ckpt > 0 else 0.0)

    # -- one policy call ------------------------------------------------------------------------

    def _decide(self, now: float) -> tuple[bool, float]:
        """Call the policy, check and apply its decision; (did it preempt, milliseconds it took)."""
        self._refresh(now)
        view = self.free.copy()
        view.flags.writeable = False
        t0 = time.perf_counter()
        decision = self.policy.cycle(now, self.queue, list(self.running.values()), view, self.cfg.gpus_per_node)
        ms = (time.perf_counter() - t0) * 1000.0
        wrong = check_decision(decision, self.queued, self.running, self.free, self.up, self.cfg.gpus_per_node,
                               self.cfg.node_models)
        if wrong is not None:
            name = getattr(self.policy, "name", type(self.policy).__name__)
            raise InvalidDecision(f"policy {name!r} at t={now:.0f} s: {wrong}")
        assert isinstance(decision, Decision)
        for name in decision.preempt:
            self._preempt(name, now)
        if decision.starts:
            started = set()
            for job, nodes in decision.starts:
                mine = self.queued.pop(job.name)
                started.add(job.name)
                self._start(mine, {int(n): int(g) for n, g in nodes.items()}, now)
            keep = [i for i, j in enumerate(self.queue) if j.name not in started]
            self.queue = [self.queue[i] for i in keep]
            self.queue_pos = [self.queue_pos[i] for i in keep]
        return bool(decision.preempt), ms

    # -- the clock ------------------------------------------------------------------------------

    def run(self) -> SimResult:
        cfg, jobs, cycle = self.cfg, self.jobs, self.cfg.cycle_s
        n = len(jobs)
        last_arrival = jobs[-1].submit_s if jobs else 0.0
        cap = last_arrival + cfg.cap_after_last_arrival_s
        reclaims = reclaim_schedule(cfg, cap)
        returns: list[tuple[float, int]] = []  # heap of (back time, node)
        every = bool(getattr(self.policy, "every_cycle", False))
        times: list[float] = []
        qlen: list[int] = []
        busy: list[int] = []
        plan_ms: list[float] = []
        ai = ri = 0
        k = _boundary(jobs[0].submit_s, cycle) if jobs else 0
        pending = False  # a change the policy has not seen yet
        drained = n == 0
        now = 0.0
        while not drained:
            now = k * cycle
            if now > cap + EPS:
                break
            changed = pending
            while ai < n and jobs[ai].submit_s <= now + EPS:
                self._enqueue(jobs[ai])
                ai += 1
                changed = True
            while self.ends and self.ends[0][0] <= now + EPS:
                end, rid, name = heapq.heappop(self.ends)
                if self.run_id.get(name) == rid:
                    self._finish(name, end)
                    changed = True
            while returns and returns[0][0] <= now + EPS:
                _, node = heapq.heappop(returns)
                self.up[node] = True
                self.free[node] = cfg.gpus_per_node
                changed = True
            while ri < len(reclaims) and reclaims[ri][0] <= now + EPS:
                _, node, back = reclaims[ri]
                ri += 1
                for name in [m for m, r in self.running.items() if node in r.nodes]:
                    self._preempt(name, now)
                self.up[node] = False
                self.free[node] = 0
                heapq.heappush(returns, (back, node))
                self.reclaims += 1
                changed = True
            if self.done == n:
                drained = True
                times.append(now)
                qlen.append(len(self.queue))
                busy.append(self.busy)
                break
            pending = False
            if changed or every:
                pending, ms = self._decide(now)
                plan_ms.append(ms)
            times.append(now)
            qlen.append(len(self.queue))
            busy.append(self.busy)
            if every or pending:
                k += 1
                continue
            while self.ends and self.run_id.get(self.ends[0][2]) != self.ends[0][1]:
                heapq.heappop(self.ends)  # stale: that run was preempted
            upcoming = [t for t in (
                jobs[ai].submit_s if ai < n else None,
                self.ends[0][0] if self.ends else None,
                reclaims[ri][0] if ri < len(reclaims) else None,
                returns[0][0] if returns else None,
            ) if t is not None]
            if not upcoming:
                break  # nothing will ever change again and the policy does not want to be asked: stuck
            k = max(k + 1, _boundary(min(upcoming), cycle))
        finished = self.finish[~np.isnan(self.finish)]
        end_s = float(finished.max()) if drained and finished.size else now
        return SimResult(
            policy=getattr(self.policy, "name", type(self.policy).__name__),
            config=cfg,
            jobs=self.jobs,
            first_start_s=self.first_start,
            finish_s=self.finish,
            runs=self.runs,
            times_s=np.asarray(times, dtype=float),
            queue_len=np.asarray(qlen, dtype=np.int64),
            busy_gpus=np.asarray(busy, dtype=np.int64),
            plan_ms=np.asarray(plan_ms, dtype=float),
            preemptions=self.preemptions,
            lost_gpu_s=self.lost_gpu_s,
            reclaims=self.reclaims,
            drained=drained,
            end_s=end_s,
        )


def simulate(jobs: list[TraceJob], policy: SchedulerPolicy, cfg: SimConfig) -> SimResult:
    """Replay ``jobs`` (copied: the caller's list is not touched) under ``policy`` on the cluster ``cfg``.

    Raises :class:`InvalidDecision` on the first decision a real cluster would refuse."""
    return _Loop(jobs, policy, cfg).run()
