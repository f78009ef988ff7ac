"""openb with departures: an event-driven replay where pods arrive, wait, run their lifetime and leave.

Why this exists: the paper's protocol (:mod:`placement.bench.openb.replay`) never lets a pod finish,
so it judges one placement at a time, not a scheduler loop over time. Here pods arrive at their
``creation_time``, are tried at once, wait in a queue when nothing fits, are retried every
scheduling cycle, and once started run for their lifetime and free what they held.

**Lifetime.** ``deletion_time − scheduled_time`` when both are known, else ``deletion_time −
creation_time``; a pod with no deletion time runs to the end of the trace (the largest time in the
CSV). A pod that waits still runs its whole lifetime once started.

**Contention, deterministic.** The trace is sparse in time (default: 8,152 pods over ~3,584 h on
6,212 GPUs; at any time the pods ask < 1 % of the GPUs), so a real-time replay never queues. Two
levers, both exact and documented here:

* ``load`` compresses the *gaps between arrivals* by one factor ``c`` and keeps every lifetime
  (lifetimes are the work: scaling them with the gaps would change no ratio), after capping each
  gap at ``loop_load.GAP_CAP_S`` (one hour of trace time: the default trace trickles ~26 pods over its
  first ~2,750 h, an idle head that would otherwise fill most of the window averaged over). ``c`` is
  chosen so the *offered load* — Σ demand · lifetime / (capacity · arrival span), each lifetime
  counted only up to the last arrival (``loop_load.offered_load``) — is ``load``. Unclipped, the formula is
  dominated by a few pods that live for weeks (~90 % of openb's GPU-hours) and says "1.0" while
  the pods ask < 1 % of the GPUs at any time; clipped, it is exactly the mean share of capacity the
  pods would hold over the arrivals if each started on arrival, the ceiling of the time-averaged
  allocation. The header prints both, and the peak of that unconstrained demand.
* ``node_frac`` keeps an evenly spaced share of the nodes of every (GPU model, GPUs per node)
  group (at least one per group, so no ``gpu_spec`` becomes unsatisfiable): a smaller cluster with
  the same mix. It is needed because the whole default trace asks ~98 % of the full cluster's GPUs
  in total, so pods that also leave can never hold a load near 1 of all 6,212 GPUs.

**The loop.** Events at equal times: departures, then arrivals, then the cycle tick. An online
policy (``choose``) tries an arrival at once; a batch policy (``choose_batch``) decides only at
ticks, so its arrivals wait for the next tick. Ticks fall at first arrival + k · ``cycle_s`` and run
only when something changed since the last pass (a departure or a new waiting pod): with nothing
changed, a deterministic policy would decide the same nothing. An online policy retries the queue in
arrival order, placing each pod that fits (FIFO with backfilling, as a Kubernetes scheduler plugin
scores); within one pass the cluster only fills, so a pod shape that found no node is not retried.
A batch policy gets the waiting pods that fit somewhere, oldest first, ``window`` at a time.

**Never trusted.** Every decision goes through :meth:`ClusterState.place`; one it refuses counts as
invalid and the pod stays queued. A :class:`Ledger` tallies what the running pods hold from the pods
alone (never from the state's free arrays); after every bind it checks the node bound, after every
pass every node, and at the end :func:`audit` recounts from scratch. Each over-full node, wrong GPU
model or state mismatch counts as invalid too.
"""

from __future__ import annotations

import csv
import heapq
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from placement.bench.openb.cluster import Binding, ClusterState, InvalidPlacement, ReplayContext
from placement.bench.openb.trace import GPU_MILLI, NodeTable, Pod, Trace, trace_file, trace_from_rows

HOUR = 3600.0


@dataclass(frozen=True, eq=False)
class LoopPod:
    """A pod of the trace with its times (seconds): arrival as in the CSV, and how long it runs."""

    pod: Pod
    arrival: float
    lifetime: float


@dataclass(frozen=True, eq=False)
class LoopTrace:
    """The trace's pods sorted by arrival (then name), and the pods as the paper's ``Trace`` (for FGD)."""

    trace: Trace
    pods: tuple[LoopPod, ...]


def _time(raw: str | None) -> float | None:
    raw = (raw or "").strip()
    if not raw or raw.lower() in ("none", "nan", "null"):
        return None
    return float(raw)


def loop_trace_from_rows(name: str, rows: Sequence[dict[str, str]]) -> LoopTrace:
    """Pods and their times from CSV-like rows (``creation_time``, ``deletion_time``, ``scheduled_time``)."""
    trace = trace_from_rows(name, rows)
    by_name = {p.name: p for p in trace.pods}
    times = [tuple(_time(r.get(k)) for k in ("creation_time", "deletion_time", "scheduled_time")) for r in rows]
    if any(c is None for c, _, _ in times):
        raise ValueError(f"trace {name!r}: a pod has no creation_time; the departures protocol needs it")
    end = max(max((d or 0.0), c or 0.0) for c, d, _ in times)
    pods = []
    for r, (c, d, s) in zip(rows, times, strict=True):
        assert c is not None
        if d is None:
            life = end - c
        elif s is not None and s >= c:
            life = d - s
        else:
            life = d - c
        pods.append(LoopPod(by_name[r["name"]], c, max(0.0, life)))
    pods.sort(key=lambda p: (p.arrival, p.pod.name))
    return LoopTrace(trace=trace, pods=tuple(pods))


def load_loop_trace(trace: str = "default", data: Path | str | None = None) -> LoopTrace:
    path = trace_file(trace, data)
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    name = trace if not trace.endswith(".csv") else path.stem.removeprefix("openb_pod_list_")
    return loop_trace_from_rows(name, rows)


# -- the cluster: release and an independent audit -----------------------------------------------------


def release(state: ClusterState, pod: Pod, placement: Binding) -> None:
    """Give back what :meth:`ClusterState.place` took (the state has no release of its own)."""
    node, gpus = placement
    state.cpu_free[node] += pod.cpu
    state.mem_free[node] += pod.mem
    for g in gpus:
        state.idle[node, g] += pod.gpu_milli
    state.used_milli -= pod.demand
    state.version[node] += 1


class Ledger:
    """What the running pods hold per node and GPU, tallied from the pods alone, never from the state.

    :meth:`add` and :meth:`remove` follow every bind and departure; :meth:`violations` compares the
    tallies with the node table (over-full CPU, memory, GPU > 1000 milli) and, given the state, with
    its free arrays (a release bug or a policy writing to the state shows up as a mismatch).
    """

    def __init__(self, nodes: NodeTable) -> None:
        self.nodes = nodes
        n, self.g = nodes.size, max(nodes.max_gpus, 1)
        self.cpu = np.zeros(n, dtype=np.int64)
        self.mem = np.zeros(n, dtype=np.int64)
        self.gpu = np.zeros((n, self.g + 1), dtype=np.int64)  # last column: GPU indices the node lacks
        self._have = np.where(np.arange(self.g)[None, :] < nodes.gpus[:, None], GPU_MILLI, 0)

    def add(self, pod: Pod, placement: Binding, sign: int = 1) -> list[str]:
        """Tally a bound pod (``sign`` −1: remove it); the per-pod faults it carries, if any."""
        nodes, (node, gpus) = self.nodes, placement
        if not 0 <= node < nodes.size:
            return [f"{pod.name}: node index {node} out of range"]
        bad = []
        if len(gpus) != pod.num_gpu or len(set(gpus)) != len(gpus):
            bad.append(f"{pod.name}: {len(gpus)} GPUs for a pod of {pod.num_gpu}")
        if pod.num_gpu and pod.spec and nodes.models[nodes.model[node]] not in pod.spec:
            bad.append(f"{pod.name}: GPU model {nodes.models[nodes.model[node]]} outside {pod.spec}")
        self.cpu[node] += sign * pod.cpu
        self.mem[node] += sign * pod.mem
        for x in gpus:
            if not 0 <= x < nodes.gpus[node]:
                bad.append(f"{pod.name}: GPU {x} not on {nodes.names[node]}")
                x = self.g
            self.gpu[node, x] += sign * pod.gpu_milli
        return bad if sign > 0 else []

    def remove(self, pod: Pod, placement: Binding) -> None:
        self.add(pod, placement, sign=-1)

    def violations(self, state: ClusterState | None = None, only: Sequence[int] | None = None) -> list[str]:
        """Over-full nodes (and, with ``state``, free arrays that disagree), over ``only`` or every node."""
        nodes = self.nodes
        idx = np.arange(nodes.size) if only is None else np.asarray(only, dtype=np.int64)
        cpu, mem, gpu = self.cpu[idx], self.mem[idx], self.gpu[idx, : self.g]
        over = (cpu > nodes.cpu[idx]) | (mem > nodes.mem[idx]) | (gpu > GPU_MILLI).any(axis=1)
        bad = [f"node {nodes.names[i]} over-full: cpu {self.cpu[i]}/{nodes.cpu[i]}, mem {self.mem[i]}/"
               f"{nodes.mem[i]}, GPU milli {self.gpu[i, : self.g].tolist()}" for i in idx[over]]
        if state is not None:
            off = (state.cpu_free[idx] != nodes.cpu[idx] - cpu) | (state.mem_free[idx] != nodes.mem[idx] - mem)
            off |= (state.idle[idx] != self._have[idx] - gpu).any(axis=1)
            bad += [f"node {nodes.names[i]}: free arrays disagree with the running pods" for i in idx[off]]
        return bad


def audit(nodes: NodeTable, running: Sequence[tuple[Pod, Binding]], state: ClusterState | None = None) -> list[str]:
    """Every capacity violation of the running pods, recomputed from scratch from the node table alone.

    Over-full CPU, memory or GPU (> 1000 milli), a GPU index the node lacks, a GPU model outside
    the pod's spec, a GPU count differing from the pod's; with ``state``, also a free array that
    disagrees with the running pods (a release bug). Empty when all is well.
    """
    ledger = Ledger(nodes)
    bad = [b for pod, pl in running for b in ledger.add(pod, pl)]
    return bad + ledger.violations(state)


# -- the simulator -------------------------------------------------------------------------------------


@dataclass
class LoopResult:
    """One run: per-pod arrival and start (NaN: never started), the allocation timeline, decision times."""

    policy: str
    seed: int
    nodes: NodeTable
    arrival: np.ndarray  #: (P,) seconds
    start: np.ndarray  #: (P,) seconds, NaN when the pod never started
    unfit: int  #: pods no node of the empty cluster could take (left out of the queue)
    alloc_time_avg: float  #: % of GPU milli, time-averaged from first to last arrival
    alloc_end: float  #: % of GPU milli right after the last arrival
    waiting_end: int  #: pods waiting right after the last arrival
    never_started: int  #: pods still waiting when nothing more could change
    cycle_ms: np.ndarray  #: wall clock of each tick pass that ran
    arrival_ms: np.ndarray  #: wall clock of each on-arrival decision (online policies)
    invalid: int  #: refused decisions + audit findings
    invalid_notes: list[str] = field(default_factory=list)
    cycles: int = 0
    seconds: float = 0.0


def node_rank(size: int, seed: int) -> np.ndarray:
    """The seeded node tie-break ranks (FGD's random rank), a permutation over the name-sorted nodes."""
    return np.random.default_rng(seed).permutation(size).astype(np.int64)


def _shape(p: Pod) -> tuple[Any, ...]:
    return (p.cpu, p.mem, p.num_gpu, p.gpu_milli, p.spec)


def simulate(
    nodes: NodeTable,
    trace: Trace,
    pods: Sequence[LoopPod],
    policy: Any,
    seed: int = 42,
    cycle_s: float = 60.0,
) -> LoopResult:
    """Run ``policy`` over ``pods`` (sorted by arrival) on ``nodes``; see the module docstring for the rules."""
    if not cycle_s > 0:
        raise ValueError(f"cycle must be positive, got {cycle_s}")
    state = ClusterState(nodes, node_rank(nodes.size, seed))
    policy.prepare(ReplayContext(nodes=nodes, trace=trace, seed=seed))
    batch = hasattr(policy, "choose_batch")
    window = max(1, int(getattr(policy, "window", 1)))
    n = len(pods)
    arrival = np.array([p.arrival for p in pods], dtype=float)
    start = np.full(n, np.nan)
    empty = ClusterState(nodes)
    unfit_mask = np.array([not empty.feasible(p.pod).any() for p in pods], dtype=bool)
    first, last = (arrival[0], arrival[-1]) if n else (0.0, 0.0)

    running: dict[int, Binding] = {}
    ledger = Ledger(nodes)
    departures: list[tuple[float, int]] = []
    queue: list[int] = []  # waiting pod indices, arrival order
    invalid: list[str] = []
    cycle_ms: list[float] = []
    arrival_ms: list[float] = []
    area = 0.0
    t_prev = first
    alloc_end = math.nan
    waiting_end = 0
    dirty_at: float | None = None  # time of the first change since the last pass
    last_tick = -1
    cycles = 0

    def advance(t: float) -> None:
        nonlocal area, t_prev
        hi = min(t, last)
        if hi > t_prev:
            area += state.used_milli * (hi - t_prev)
            t_prev = hi

    def bind(i: int, d: Binding | None, now: float) -> bool:
        if d is None:
            return False
        pl = (int(d[0]), tuple(int(x) for x in d[1]))
        try:
            state.place(pods[i].pod, pl)
        except InvalidPlacement as exc:
            invalid.append(f"{policy.name}: {exc}")
            return False
        running[i] = pl
        # The independent check of the node just bound, from the ledger's own tallies.
        invalid.extend(ledger.add(pods[i].pod, pl) + ledger.violations(state, only=[pl[0]]))
        start[i] = now
        heapq.heappush(departures, (now + pods[i].lifetime, i))
        return True

    def run_pass(now: float) -> None:
        nonlocal queue
        if batch:
            while True:
                failed: set[tuple[Any, ...]] = set()
                fits = []
                for i in queue:
                    key = _shape(pods[i].pod)
                    if key in failed:
                        continue
                    if state.feasible(pods[i].pod).any():
                        fits.append(i)
                    else:
                        failed.add(key)
                if not fits:
                    break
                chunk = fits[:window]
                decisions = policy.choose_batch(state, [pods[i].pod for i in chunk])
                if len(decisions) != len(chunk):
                    invalid.append(f"{policy.name}: {len(decisions)} decisions for {len(chunk)} pods")
                    break
                placed = {i for i, d in zip(chunk, decisions, strict=True) if bind(i, d, now)}
                queue = [i for i in queue if i not in placed]
                if not placed:
                    break
            return
        failed = set()
        kept = []
        for i in queue:
            key = _shape(pods[i].pod)
            if key in failed or not bind(i, policy.choose(state, pods[i].pod), now):
                failed.add(key)
                kept.append(i)
        queue = kept

    t_start = time.perf_counter()
    a = 0
    while True:
        t_arr = arrival[a] if a < n else math.inf
        t_dep = departures[0][0] if departures else math.inf
        t_tick = math.inf
        if queue and dirty_at is not None:
            t_tick = first + max(last_tick + 1, math.ceil((dirty_at - first) / cycle_s)) * cycle_s
        if a >= n and not queue:
            break
        if min(t_arr, t_dep, t_tick) == math.inf:
            break
        if t_dep <= t_arr and t_dep <= t_tick:
            t, i = heapq.heappop(departures)
            advance(t)
            pl = running.pop(i)
            release(state, pods[i].pod, pl)
            ledger.remove(pods[i].pod, pl)
            if queue and dirty_at is None:
                dirty_at = t
        elif t_arr <= t_tick:
            t = t_arr
            advance(t)
            if unfit_mask[a]:
                pass
            elif batch:
                queue.append(a)
                dirty_at = t if dirty_at is None else dirty_at
            else:
                t0 = time.perf_counter()
                ok = bind(a, policy.choose(state, pods[a].pod), t)
                arrival_ms.append((time.perf_counter() - t0) * 1000.0)
                if not ok:
                    queue.append(a)
                    dirty_at = t if dirty_at is None else dirty_at
            a += 1
            if a == n:
                alloc_end = 100.0 * state.used_milli / state.capacity_milli
                waiting_end = len(queue)
        else:
            t = t_tick
            advance(t)
            last_tick = round((t - first) / cycle_s)
            t0 = time.perf_counter()
            run_pass(t)
            cycle_ms.append((time.perf_counter() - t0) * 1000.0)
            cycles += 1
            dirty_at = None
            invalid += ledger.violations(state)  # every node, after every pass
    invalid += audit(nodes, [(pods[i].pod, pl) for i, pl in running.items()], state)  # from scratch
    span = last - first
    return LoopResult(
        policy=policy.name,
        seed=seed,
        nodes=nodes,
        arrival=arrival,
        start=start,
        unfit=int(unfit_mask.sum()),
        alloc_time_avg=100.0 * area / (state.capacity_milli * span) if span > 0 else math.nan,
        alloc_end=alloc_end,
        waiting_end=waiting_end,
        never_started=len(queue),
        cycle_ms=np.array(cycle_ms),
        arrival_ms=np.array(arrival_ms),
        invalid=len(invalid),
        invalid_notes=invalid[:20],
        cycles=cycles,
        seconds=time.perf_counter() - t_start,
    )
