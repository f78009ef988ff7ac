"""A Gavel-like heterogeneity-aware max-min fairness scheduler, written from the paper, as a peer on a mixed fleet.

Why this exists: the question the fleet bench asks is whether our optimizer, told each job's speeds, does as
well as the published heterogeneity-aware scheduler; that needs Gavel's policy beside it, driven by the same
simulator and seeing the same jobs. Source: Narayanan et al., "Heterogeneity-Aware Cluster Scheduling Policies
for Deep Learning Workloads", OSDI 2020 (§3 effective throughput, §4.1 max-min fairness "LAS", §5 round-based
mechanism); the public code (github.com/stanford-futuredata/gavel, MIT) was read to learn the details named below,
none of it is copied.

The policy, as the paper defines it:

* **Allocation.** ``x[j, k]`` is the fraction of time job j runs on GPU type k (on its ``sf_j`` GPUs), with
  ``Σ_k x[j, k] ≤ 1`` and ``Σ_j sf_j x[j, k] ≤ GPUs of type k``. Effective throughput is
  ``Σ_k T[j, k] x[j, k]``; it is normalised by the throughput of an equal share, ``T[j] · (GPUs_k / GPUs)``
  (Gavel's ``ProportionalPolicy``: every job gets the same slice of each type), and weighted by ``sf_j`` as
  Gavel's ``MaxMinFairnessPolicyWithPerf`` does (so that equal shares are equal GPU-time). The allocation
  maximises the smallest normalised throughput (an LP). ``T`` is the job's speed table (throughput relative to
  the V100; the normalisation makes the reference irrelevant); a speed of 0 pins ``x[j, k]`` to 0.
* **Rounds.** Every round (a simulator cycle; Gavel's is 360 s) each job's priority on type k is
  ``x[j, k] / f[j, k]``, where ``f[j, k]`` is its share of the time type k has run jobs since the allocation
  was last computed (a job not run yet there: ``x[j, k] × 10⁹``). All (job, type) pairs are walked in one
  order, descending priority, then allocation, then type fastest first (V100, P100, K80), then arrival, and a
  job is chosen for the first pair whose type has ``sf_j`` GPUs left; pairs of priority 0 (no allocation there)
  come last and still fill what is left, so no GPU idles while a job could use it. This is the paper's
  description (§5: jobs scheduled in decreasing priority order); Gavel's code by default walks each type's
  queue in turn, V100 first, which at low load lets a job take leftover V100s at priority 0 before its
  allocated P100 is even considered.
* **Mechanism.** A chosen job that already runs on that type keeps its GPUs; any other running job is
  preempted (through the simulator; with checkpoints at every round, as Gavel assumes, no work is lost) and a
  job chosen for another type migrates in the same decision. New jobs are placed largest first (Gavel's
  order, against fragmentation), best fit within the nodes of their type.

Simplified, and said so: (1) the LP is solved with GLOP, and because a simplex vertex may leave ties arbitrary
where Gavel's interior-point solver (ECOS) returns a central point, a second LP keeps the max-min level and
maximises the sum of normalised throughputs (Gavel's water-filling variant goes further; not modelled).
(2) The allocation is recomputed at once whenever the set of jobs changes (Gavel waits at least 1,920 s
between resets). (3) Gavel's tie-break by accumulated deficit across resets is left out (received time
restarts at each reset). (4) No space sharing (Gavel's ``Packing`` variants) and no priority weights.
(5) A chosen job that cannot be placed because its type's free GPUs are fragmented across nodes waits for
the next round, and what is left is filled in the same priority order.
"""

from __future__ import annotations

import numpy as np
from ortools.linear_solver import pywraplp

from placement.bench.cycles.peers_common import best_fit
from placement.bench.cycles.state import Decision, Running, TraceJob
from placement.bench.fleet.mix import Fleet

#: Priority of a job that has not run on a type since the last reset: Gavel's "× 1e9, not inf" (so that
#: jobs never run are still ordered by their allocation).
UNSEEN = 1e9


def max_min_allocation(speeds: np.ndarray, scale: np.ndarray, gpus: np.ndarray) -> np.ndarray:
    """Gavel's heterogeneity-aware max-min fairness allocation ``x`` (jobs × types), see the module docstring.

    ``speeds[j, k]``: throughput of job j on type k (any per-job unit; 0: cannot run); ``scale[j]``: its GPUs;
    ``gpus[k]``: GPUs of type k. Jobs that can run nowhere get a row of zeros."""
    speeds = np.asarray(speeds, dtype=float)
    n_jobs, n_types = speeds.shape
    x = np.zeros((n_jobs, n_types))
    if n_jobs == 0 or gpus.sum() <= 0:
        return x
    equal = speeds @ (gpus / gpus.sum())  # throughput of an equal share of every type
    runnable = (speeds > 0) & (scale[:, None] <= gpus[None, :])
    rows = [j for j in range(n_jobs) if equal[j] > 0 and runnable[j].any()]
    if not rows:
        return x
    norm = speeds * scale[:, None] / np.where(equal > 0, equal, 1.0)[:, None]
    solver = pywraplp.Solver.CreateSolver("GLOP")
    var = {(j, k): solver.NumVar(0.0, 1.0 if runnable[j, k] else 0.0, f"x{j}_{k}")
           for j in rows for k in range(n_types)}
    level = solver.NumVar(0.0, solver.infinity(), "t")
    for j in rows:
        solver.Add(sum(var[j, k] for k in range(n_types)) <= 1.0)
    for k in range(n_types):
        solver.Add(sum(float(scale[j]) * var[j, k] for j in rows) <= float(gpus[k]))
    through = {j: sum(float(norm[j, k]) * var[j, k] for k in range(n_types) if runnable[j, k]) for j in rows}
    floors = [solver.Add(through[j] >= level) for j in rows]
    solver.Maximize(level)
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        raise RuntimeError("Gavel's max-min LP did not solve to optimality")
    best = level.solution_value()
    # second stage: keep everyone at the max-min level (a hair of slack for the simplex), then use what is left
    for c in floors:
        c.SetCoefficient(level, 0.0)
        c.SetLb(best * (1 - 1e-7) - 1e-9)
    solver.Maximize(sum(through[j] for j in rows))
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        raise RuntimeError("Gavel's second-stage LP did not solve to optimality")
    for (j, k), v in var.items():
        x[j, k] = min(1.0, max(0.0, v.solution_value()))
    return x


class GavelLike:
    """Gavel's max-min fairness over effective throughput, realised round by round (see the module docstring).

    Built with the fleet it schedules (the simulator's ``SchedulerPolicy.cycle`` passes free GPUs, not models)."""

    every_cycle = True  # a round every cycle: the mechanism time-slices

    def __init__(self, fleet: Fleet, name: str = "gavel") -> None:
        self.name = name
        self.fleet = fleet
        self.models = fleet.models
        index = {m: k for k, m in enumerate(self.models)}
        self.node_type = np.array([index[m] for m in fleet.node_models], dtype=np.int64)
        self.gpus = np.array([fleet.gpus_of(m) for m in self.models], dtype=float)
        self._jobs: frozenset[str] = frozenset()
        self.allocation: dict[str, np.ndarray] = {}
        self._received: dict[str, np.ndarray] = {}
        self._last_s: float | None = None
        self.resets = 0

    def _type_of(self, r: Running) -> int | None:
        kinds = {int(self.node_type[n]) for n in r.nodes}
        return kinds.pop() if len(kinds) == 1 else None

    def _account(self, now_s: float, running: list[Running]) -> None:
        """Credit each running job with the time since the last round, on the type it ran on."""
        if self._last_s is not None:
            for r in running:
                k = self._type_of(r)
                if k is not None and r.job.name in self._received:
                    self._received[r.job.name][k] += now_s - max(self._last_s, r.start_s)
        self._last_s = now_s

    def _reallocate(self, active: list[TraceJob]) -> None:
        """A new allocation when the set of jobs changed; received time restarts from zero (a reset)."""
        names = frozenset(j.name for j in active)
        if names == self._jobs:
            return
        speeds = np.array([[j.speed_on(m) for m in self.models] for j in active], dtype=float).reshape(
            len(active), len(self.models))
        scale = np.array([j.gpus for j in active], dtype=float)
        x = max_min_allocation(speeds, scale, self.gpus)
        self.allocation = {j.name: x[i] for i, j in enumerate(active)}
        self._received = {j.name: np.zeros(len(self.models)) for j in active}
        self._jobs = names
        self.resets += 1

    def priorities(self, active: list[TraceJob]) -> np.ndarray:
        """Gavel's per-(job, type) priority: allocation over the share of the type's time received."""
        got = np.array([self._received[j.name] for j in active]).reshape(len(active), len(self.models))
        x = np.array([self.allocation[j.name] for j in active]).reshape(got.shape)
        total = got.sum(axis=0)
        share = np.divide(got, total, out=np.zeros_like(got), where=total > 0)
        prio = np.where(share > 0, x / np.where(share > 0, share, 1.0), x * UNSEEN)
        speeds = np.array([[j.speed_on(m) for m in self.models] for j in active]).reshape(got.shape)
        return np.where((x > 0) & (speeds > 0), prio, 0.0)

    def cycle(self, now_s: float, queue: list[TraceJob], running: list[Running], free: np.ndarray,
              gpus_per_node: int) -> Decision:
        self._account(now_s, running)
        active = [r.job for r in running] + list(queue)
        if not active:
            return Decision()
        self._reallocate(active)
        prio = self.priorities(active)
        x = np.array([self.allocation[j.name] for j in active]).reshape(prio.shape)
        order = {j.name: i for i, j in enumerate(sorted(active, key=lambda j: j.submit_s))}
        held = np.zeros_like(np.asarray(free, dtype=np.int64))
        for r in running:
            for n, g in r.nodes.items():
                held[n] += g
        cap = np.asarray(free, dtype=np.int64) + held
        left = np.array([int(cap[self.node_type == k].sum()) for k in range(len(self.models))])
        pairs = [(j, k) for k in range(len(self.models)) for j in range(len(active))]
        entries = sorted(pairs, key=lambda e: (-prio[e], -x[e], e[1], order[active[e[0]].name]))
        chosen: dict[str, int] = {}
        for j, k in entries:
            job = active[j]
            if job.name in chosen or job.speed_on(self.models[k]) <= 0 or job.gpus > left[k]:
                continue
            chosen[job.name] = k
            left[k] -= job.gpus
        return self._realise(active, entries, chosen, running, free, gpus_per_node)

    def _realise(self, active: list[TraceJob], entries: list[tuple[int, int]], chosen: dict[str, int],
                 running: list[Running], free: np.ndarray, gpus_per_node: int) -> Decision:
        """Keep, preempt, migrate and start so that the chosen jobs run on their chosen types."""
        avail = np.array(free, dtype=np.int64, copy=True)
        was = {r.job.name: r for r in running}
        kept = {name for name, r in was.items() if chosen.get(name) == self._type_of(r)}
        preempt = [name for name in was if name not in kept]
        for name in preempt:
            for n, g in was[name].nodes.items():
                avail[n] += g
        starts: dict[str, dict[int, int]] = {}

        def place(job: TraceJob, k: int) -> bool:
            old = was.get(job.name)
            if old is not None and self._type_of(old) == k and all(avail[n] >= g for n, g in old.nodes.items()):
                nodes = dict(old.nodes)  # back on its own GPUs: no preemption after all
                preempt.remove(job.name)
                kept.add(job.name)
            else:
                mask = np.where(self.node_type == k, avail, 0)
                got = best_fit(mask, job.gpus, gpus_per_node)
                if got is None:
                    return False
                nodes = starts[job.name] = got
            for n, g in nodes.items():
                avail[n] -= g
            return True

        first = sorted((active[j] for j, _ in entries if active[j].name in chosen and active[j].name not in kept),
                       key=lambda job: -job.gpus)
        seen: set[str] = set()
        for job in first:
            if job.name not in seen:
                seen.add(job.name)
                place(job, chosen[job.name])
        for j, k in entries:  # fill what fragmentation left, in the same order
            job = active[j]
            if job.name in kept or job.name in starts or job.speed_on(self.models[k]) <= 0:
                continue
            place(job, k)
        by_name = {j.name: j for j in active}
        return Decision(starts=[(by_name[n], nodes) for n, nodes in starts.items()], preempt=preempt)
