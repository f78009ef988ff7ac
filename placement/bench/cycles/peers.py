"""The peer schedulers of ``placement bench cycles``, each written from its documented rules.

Why this exists: our optimizer is only worth its cost if it beats what clusters run today. Each peer
here is a small, deterministic re-implementation of one published scheduling rule, seeing exactly
what the simulator shows every policy (queue, running jobs, free GPUs per node, runtime
*estimates*), never a job's true duration:

* :class:`StrictFifo` (``fifo``) — arrival order with head-of-line blocking;
* :class:`VolcanoLike` (``volcano``) — Volcano's ``allocate`` action with the gang and binpack
  plugins: every gang that fits now, all-or-nothing, no reservation;
* :class:`KueueLike` (``kueue``) — Kueue's BestEffortFIFO ClusterQueues, one per team, in one
  cohort that lends unused nominal quota;
* :class:`EasyBackfill` (``easy``) — Slurm-like EASY backfill: a reservation for the first job that
  does not fit, later jobs backfilled around it using estimates;
* :class:`TiresiasLike` (``tiresias``, in :mod:`~placement.bench.cycles.peers_tiresias`) — Tiresias'
  discretised 2D-LAS with preemption.

Node choice is best fit everywhere (:func:`~placement.bench.cycles.peers_common.best_fit`): each pod
goes to the node with the fewest free GPUs that holds it, so whole nodes stay free for big gangs
(Volcano's binpack, Slurm's best-fit node selection). Every policy copies ``free``; none modifies its
arguments.
"""

from __future__ import annotations

import math

import numpy as np

from placement.bench.cycles.peers_common import Packer, best_fit, by_priority, dense, team_of
from placement.bench.cycles.peers_tiresias import TiresiasLike
from placement.bench.cycles.state import Decision, Running, TraceJob, pods_of

__all__ = ["EasyBackfill", "KueueLike", "StrictFifo", "TiresiasLike", "VolcanoLike"]

DAY = 86400.0


class StrictFifo:
    """Strict FIFO: in arrival order, start jobs until the first one that does not fit, then stop.

    Head-of-line blocking, as a single FIFO queue without backfill (e.g. Kueue's StrictFIFO with one
    queue, or Slurm with backfill off). Priorities are ignored; nodes are chosen best fit."""

    name = "fifo"

    def cycle(self, now_s: float, queue: list[TraceJob], running: list[Running], free: np.ndarray,
              gpus_per_node: int) -> Decision:
        packer = Packer(free, gpus_per_node)
        starts = []
        for job in queue:
            place = packer.place(job.gpus)
            if place is None:
                break
            starts.append((job, place))
        return Decision(starts=starts)


class VolcanoLike:
    """Volcano's ``allocate`` action with the gang and binpack plugins, without reservation.

    Jobs are taken in Volcano's job order (higher priority first, then creation time, i.e. arrival);
    each gang is placed all-or-nothing (gang plugin: minAvailable = all pods) and started if all its
    pods fit now, else skipped, so small jobs pass a big blocked one ("every gang that fits"). Nodes are
    chosen by binpack: each pod on the fitting node with the fewest free GPUs. Not modelled: the
    ``enqueue`` action's overcommit gate, queues/proportion (one queue), and preemption/reclaim."""

    name = "volcano"

    def cycle(self, now_s: float, queue: list[TraceJob], running: list[Running], free: np.ndarray,
              gpus_per_node: int) -> Decision:
        packer = Packer(free, gpus_per_node)
        starts = []
        for job in by_priority(queue):
            if packer.total == 0:
                break
            place = packer.place(job.gpus)
            if place is not None:
                starts.append((job, place))
        return Decision(starts=starts)


class KueueLike:
    """Kueue with one BestEffortFIFO ClusterQueue per team, all in one cohort that lends unused quota.

    Each team's ClusterQueue has a nominal quota of GPUs (``nominal``); a workload is admitted when it
    fits the cohort's unused quota (sum of the nominal quotas minus what the cohort uses): within its
    team's nominal, or borrowing the others' unused nominal (no borrowing or lending limit, Kueue's
    default). Each round of a scheduling cycle takes the head of every ClusterQueue (ordered by higher
    priority, then arrival: BestEffortFIFO) and admits them in Kueue's entry order: workloads that fit
    their team's nominal before those that borrow, then higher priority, then earlier arrival. A head
    that cannot be admitted is set aside and the next one of its queue is tried in the next round
    (BestEffortFIFO, not head-of-line). Rounds repeat until every queue is exhausted, as Kueue's
    scheduling cycles repeat within one simulator cycle.

    ``nominal``: team -> GPUs; a team missing from it has nominal 0 (it can only borrow). None: the
    cluster's GPUs (all nodes × ``gpus_per_node``) split evenly among the teams seen so far in the
    queue and among running jobs (the remainder one GPU each to the first teams by name), recomputed as
    teams appear. Jobs without a team are team ``"default"``; with no teams in a trace this is one
    ClusterQueue owning the whole cluster.

    Kueue admits on quota alone and leaves pods to kube-scheduler; here a workload is admitted only if
    its pods also fit now (best fit, as :class:`VolcanoLike`), as with topology-aware scheduling, since
    the simulator only starts gangs that fit. No preemption (ClusterQueue's default ``Never``)."""

    name = "kueue"

    def __init__(self, nominal: dict[str, int] | None = None) -> None:
        self.nominal = None if nominal is None else dict(nominal)
        self.teams: set[str] = set()

    def quotas(self, cluster_gpus: int) -> dict[str, int]:
        """Nominal GPUs per team (configured, or the even split of ``cluster_gpus``)."""
        if self.nominal is not None:
            return dict(self.nominal)
        teams = sorted(self.teams)
        if not teams:
            return {}
        base, extra = divmod(cluster_gpus, len(teams))
        return {t: base + (i < extra) for i, t in enumerate(teams)}

    def cycle(self, now_s: float, queue: list[TraceJob], running: list[Running], free: np.ndarray,
              gpus_per_node: int) -> Decision:
        self.teams.update(team_of(j) for j in queue)
        self.teams.update(team_of(r.job) for r in running)
        if not queue:
            return Decision()
        nominal = self.quotas(len(free) * gpus_per_node)
        cohort = sum(nominal.values())
        used: dict[str, int] = {}
        for r in running:
            t = team_of(r.job)
            used[t] = used.get(t, 0) + r.job.gpus
        cohort_used = sum(used.values())
        arrival = {j.name: i for i, j in enumerate(queue)}
        queues: dict[str, list[TraceJob]] = {}
        for job in by_priority(queue):
            queues.setdefault(team_of(job), []).append(job)
        next_of = dict.fromkeys(queues, 0)
        packer = Packer(free, gpus_per_node)
        starts = []
        while True:
            heads = []
            for t, jobs in queues.items():
                if next_of[t] < len(jobs):
                    heads.append((t, jobs[next_of[t]]))
                    next_of[t] += 1
            if not heads:
                break
            heads.sort(key=lambda e: (used.get(e[0], 0) + e[1].gpus > nominal.get(e[0], 0), -e[1].priority,
                                      e[1].submit_s, arrival[e[1].name]))
            for t, job in heads:
                if cohort_used + job.gpus > cohort:
                    continue
                place = packer.place(job.gpus)
                if place is None:
                    continue
                starts.append((job, place))
                used[t] = used.get(t, 0) + job.gpus
                cohort_used += job.gpus
        return Decision(starts=starts)


class EasyBackfill:
    """Slurm-like EASY backfill: one reservation, for the first job that does not fit.

    In queue order (higher priority first, then arrival; Slurm's priority order with equal factors) jobs
    start while they fit. The first one that does not fit, the head, gets a reservation: the running
    jobs (and those just started) are assumed to end at their estimated end, ``start_s + estimate_s −
    done_s`` (the estimate, never the true duration); a job past that end is assumed to end one cycle
    from now (``overdue_s``), and a job without estimate at ``start_s + no_estimate_s``, as Slurm uses the
    time limit and a partition's default MaxTime is UNLIMITED. The shadow time is the first such end
    at which the head's pods fit on the GPUs free by then; the head's nodes at that time are chosen best
    fit (among equals, nodes busy now first, so GPUs free now stay backfillable), and what else is free
    then is the extra capacity. Every later job that fits now is then
    started if it is estimated to end (now + estimate − done) by the shadow time, or if it only uses
    GPUs of the extra capacity (which it then takes). Jobs without estimate backfill only into the extra
    capacity. A head that cannot fit even once every running job has ended (more GPUs than the nodes up)
    gets no reservation and is passed over. Nodes are chosen best fit."""

    name = "easy"

    def __init__(self, overdue_s: float = 60.0, no_estimate_s: float = 365 * DAY) -> None:
        self.overdue_s = overdue_s
        self.no_estimate_s = no_estimate_s

    def end_of(self, job: TraceJob, start_s: float, now_s: float) -> float:
        """Estimated end of ``job`` if it (re)started at ``start_s``."""
        est = self.no_estimate_s if job.estimate_s is None else job.estimate_s - job.done_s
        end = start_s + est
        return end if end > now_s else now_s + self.overdue_s

    def cycle(self, now_s: float, queue: list[TraceJob], running: list[Running], free: np.ndarray,
              gpus_per_node: int) -> Decision:
        if not queue:
            return Decision()
        packer = Packer(free, gpus_per_node)
        releases = [(self.end_of(r.job, r.start_s, now_s), r.nodes) for r in running]
        starts: list[tuple[TraceJob, dict[int, int]]] = []
        order = by_priority(queue)
        reservation = None
        i = 0
        while i < len(order):
            job = order[i]
            i += 1
            place = packer.place(job.gpus)
            if place is not None:
                starts.append((job, place))
                releases.append((self.end_of(job, now_s, now_s), place))
                continue
            reservation = self.reserve(job, packer.free, releases, gpus_per_node)
            if reservation is not None:
                break
        if reservation is None:
            return Decision(starts=starts)
        shadow, extra = reservation
        extra_fails: dict[int, int] = {}  # pod size -> fewest pods that did not fit the extra capacity
        for job in order[i:]:
            if packer.total == 0:
                break
            if not packer.can(job.gpus):
                continue
            if job.estimate_s is not None and self.end_of(job, now_s, now_s) <= shadow:
                place = packer.place(job.gpus)  # done before the head can start: any free GPUs
            else:  # still running at the shadow time: only GPUs the head does not need then
                pods = pods_of(job.gpus, gpus_per_node)
                if len(pods) >= extra_fails.get(pods[0], math.inf):
                    continue
                place = best_fit(np.minimum(packer.free, extra), job.gpus, gpus_per_node)
                if place is None:
                    extra_fails[pods[0]] = len(pods)
                    continue
                packer.take(place)
                extra = extra - dense(place, len(extra))
            assert place is not None
            starts.append((job, place))
        return Decision(starts=starts)

    def reserve(self, head: TraceJob, free_now: np.ndarray, releases: list[tuple[float, dict[int, int]]],
                gpus_per_node: int) -> tuple[float, np.ndarray] | None:
        """(shadow time, extra GPUs per node at that time) for ``head``, or None when it can never fit."""
        future = free_now.copy()
        releases = sorted(releases, key=lambda e: e[0])
        k = 0
        while k < len(releases):
            t = releases[k][0]
            while k < len(releases) and releases[k][0] == t:
                for n, g in releases[k][1].items():
                    future[n] += g
                k += 1
            place = best_fit(future, head.gpus, gpus_per_node, prefer=free_now)
            if place is not None:
                return t, future - dense(place, len(future))
        return None


