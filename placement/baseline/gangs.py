"""The greedy gang planner: priority, then size, descending; best-fit nodes.

It runs before every solve. Its plan is CP-SAT's complete hint (so a feasible solution exists
from the first millisecond) and the fallback when the solver finds nothing better in time, so a
returned plan is never worse than greedy. It is also the peer that benchmarks compare against:
this is roughly what Volcano's or Kueue's one-gang-at-a-time admission does.
"""

from __future__ import annotations

from datetime import datetime, timezone
from functools import partial

import numpy as np

from placement.baseline import topology
from placement.baseline.devices import GreedyDevices
from placement.baseline.fit import Room, best_node, pods_at
from placement.holdings import use_of
from placement.problem import Problem
from placement.rightsize import gang_minimums, pairs
from placement.solution import Placement
from placement.teams import QuotaLedger
from placement.timeline import Hold

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def job_order(problem: Problem) -> list[int]:
    """Higher priority first, then bigger gangs (hardest to fit later), then older, then by name."""

    peak = problem.request.in_peak
    first = {name: i for i, name in enumerate(problem.schedule.must_start)}

    def key(j: int) -> tuple[int, int, int, int, float, str]:
        job = problem.jobs[j]
        submitted = job.submitted_at or _EPOCH
        if submitted.tzinfo is None:
            submitted = submitted.replace(tzinfo=timezone.utc)
        # Deferrable jobs wait behind their priority level during peak and go first off-peak (placement.pricing).
        deferral = (1 if peak else -1) if job.deferrable else 0
        # Starved jobs that fit start before anything else (policy.max_wait_h; placement.reservation).
        starved = first.get(job.name, len(first))
        return (starved, -job.priority, deferral, -problem.job_gpus(j), submitted.timestamp(), job.name)

    # a running job's twin (placement.migration) is no job to start: a move needs its eviction, which the model makes
    return sorted((j for j in range(len(problem.jobs)) if j not in problem.twins), key=key)


def greedy(problem: Problem, free: np.ndarray | None = None, order: list[int] | None = None) -> Placement:
    """Place whole gangs one at a time on the tightest nodes that fit; roll back a gang that does not.

    Never preempts, and never breaks a team quota (placement.teams): a gang over its team's
    quota is rolled back like one that does not fit. With nominal quotas it goes twice through the
    order, as Kueue admits: first the gangs that keep their team within its nominal GPUs (and starved
    jobs), then the rest, which borrow. `order` overrides `job_order` and is taken in one pass (benchmarks).
    """
    free = (problem.free if free is None else free).copy()
    plan = Placement()
    ledger = QuotaLedger(problem.teams) if problem.teams is not None and problem.teams.all_scopes else None
    ledger_devices = GreedyDevices(problem) if problem.needs_device_ledger() else None  # MIG and shared GPUs
    now = problem.request.planning_time()
    jobs = job_order(problem) if order is None else order
    # A best-fit index pays for itself over many gangs, not over the one a reservation check tries.
    room = Room(problem, free, indexed=ledger_devices is None and len(jobs) >= INDEXED_FROM)
    long_used: dict[tuple[int, int], int] = {}  # (hold, node) -> GPUs taken by work that outlasts the hold
    nominal = order is None and ledger is not None and any(s.nominal.any() for s in ledger.index.scopes)
    starved = set(problem.schedule.must_start)
    left = jobs
    for within in (True, False) if nominal else (False,):
        waiting: list[int] = []
        for j in left:
            job = problem.jobs[j]
            bound = [(h, hold) for h, hold in enumerate(problem.schedule.holds) if hold.binds(job, now)]
            rule = _Quota(ledger, within and job.name not in starved)
            if job.topology is None and ledger_devices is None:
                counts = _in_place(problem, j, room, bound, long_used, rule)
            else:
                counts = _on_trial(problem, j, room, bound, long_used, rule, ledger_devices)
            if counts is None:
                waiting.append(j)
            for (t, n), k in (counts or {}).items():
                plan.add(t, n, k)
        left = waiting
    if ledger_devices is not None:
        ledger_devices.finish(plan)
    return one_choice_per_pod(problem, plan)


#: Gangs from which the greedy keeps a best-fit index (placement.baseline.fit) rather than scanning every node:
#: building it costs about a hundred scans (19 ms against 0.17 ms at 12,500 nodes), answering one next to nothing.
INDEXED_FROM = 100


class _Quota:
    """The quota check of one gang: the ledger (None: no quotas), and whether the gang must keep its team
    within its nominal GPUs (the greedy's first pass)."""

    def __init__(self, ledger: QuotaLedger | None, within: bool) -> None:
        self.ledger, self.within = ledger, within


def _quota_ok(problem: Problem, j: int, counts: dict[tuple[int, int], int], rule: _Quota) -> bool:
    """Does gang j fit its team's quotas with `counts` (and take them if so)?"""
    ledger = rule.ledger
    if ledger is None or problem.job_team[j] < 0:
        return True
    add = ledger.index.scope_use(use_of(problem, counts))  # GPU-equivalents, CPU, memory per scope
    team = problem.job_team[j]
    if rule.within and not ledger.within_nominal(team, add):
        return False
    if ledger.blocker(team, add) is not None:
        return False
    ledger.take(team, add)
    return True


def _in_place(problem: Problem, j: int, room: Room, bound: list[tuple[int, Hold]],
              long_used: dict[tuple[int, int], int], rule: _Quota) -> dict[tuple[int, int], int] | None:
    """Gang j without topology or devices, tried on `room` itself and undone unless it is kept (copying
    every node's row twice per gang cost more than placing most gangs). Returns its pods if kept."""
    clipped: list[tuple[int, int]] = []
    for h, hold in bound:  # work that outlasts a reservation keeps off its GPUs, for this gang only
        for n, left in hold.long_room.items():
            cut = int(room.free[n, 0]) - min(int(room.free[n, 0]), max(0, left - long_used.get((h, n), 0)))
            if cut:
                room.add(n, (-cut, 0, 0))
                clipped.append((n, cut))
    counts: dict[tuple[int, int], int] = {}
    placed = topology.fill_gang(problem, j, partial(_place_in, room, counts))
    kept = placed >= problem.jobs[j].needed and _quota_ok(problem, j, counts, rule)
    if not kept:
        for (t, n), k in counts.items():
            d = problem.tasks[t].demand
            room.add(n, (int(d[0]) * k, int(d[1]) * k, int(d[2]) * k))
    for n, cut in clipped:
        room.add(n, (cut, 0, 0))
    if not kept:
        return None
    if bound:
        gpus: dict[int, int] = {}
        for (t, n), k in counts.items():
            gpus[n] = gpus.get(n, 0) + int(problem.tasks[t].demand[0]) * k
        for h, hold in bound:
            for n in hold.long_room:
                long_used[h, n] = long_used.get((h, n), 0) + gpus.get(n, 0)
    return counts


def _place_in(room: Room, counts: dict[tuple[int, int], int], t: int, most: int) -> int:
    return room.place(t, counts, most)


def _on_trial(problem: Problem, j: int, room: Room, bound: list[tuple[int, Hold]],
              long_used: dict[tuple[int, int], int], rule: _Quota,
              ledger_devices: GreedyDevices | None) -> dict[tuple[int, int], int] | None:
    """Gang j with a topology or among MIG/shared devices, tried on a copy of the free capacity (the topology
    scopes and the device ledger work on whole arrays). Returns its pods if kept."""
    free = room.free
    trial = free.copy()
    for h, hold in bound:  # work that outlasts a reservation keeps off its GPUs
        for n, left in hold.long_room.items():
            trial[n, 0] = min(trial[n, 0], max(0, left - long_used.get((h, n), 0)))
    before = trial.copy()
    trial_devices = ledger_devices.trial() if ledger_devices is not None else None
    place = trial_devices.placer(place_task) if trial_devices is not None else place_task
    counts: dict[tuple[int, int], int] = {}
    job = problem.jobs[j]
    if job.topology is not None:  # whole domains first, Kueue's BestFit (placement.baseline.topology)
        placed = topology.place_job(problem, j, trial, counts, place)
    else:  # each task's minimum first, then the extra pods of elastic tasks
        placed = topology.fill_gang(problem, j, partial(_place_some, place, problem, trial, counts))
    if placed < job.needed:
        return None
    if trial_devices is not None and not trial_devices.settle(counts):
        return None  # would exceed policy.max_mig_changes
    if not _quota_ok(problem, j, counts, rule):
        return None
    use = before - trial  # what the gang took, devices included (the trial started clipped)
    changed = np.flatnonzero(use.any(axis=1))
    free[changed] -= use[changed]
    room.refresh(changed)
    for h, hold in bound:
        for n in hold.long_room:
            long_used[h, n] = long_used.get((h, n), 0) + int(use[n, 0])
    if ledger_devices is not None and trial_devices is not None:
        ledger_devices.commit(trial_devices)
    return counts


def _place_some(place: topology.PlaceTask, problem: Problem, free: np.ndarray, counts: dict[tuple[int, int], int],
                t: int, most: int) -> int:
    return place(problem, t, free, counts, None, most)


def place_task(problem: Problem, t: int, free: np.ndarray, counts: dict[tuple[int, int], int],
                allowed: np.ndarray | None = None, limit: int | None = None) -> int:
    """Best fit, pod by pod: the candidate left with the fewest free GPUs (CPU-only pods: GPU-less nodes first;
    the whole rule is `placement.baseline.fit.best_node`).

    `allowed` (a bool per node) and `limit` (pods) confine it to one topology domain or one slice.
    """
    task = problem.tasks[t]
    cand = task.candidates if allowed is None else task.candidates[allowed[task.candidates]]
    want = task.replicas if limit is None else min(limit, task.replicas)
    if cand.size == 0:
        return 0
    d = task.demand
    demand = (int(d[0]), int(d[1]), int(d[2]))
    placed = 0
    while placed < want:
        n = best_node(problem, cand, free, d)
        if n is None:
            break
        # Several pods on the same best node at once: identical pods, identical score.
        k = pods_at(free[n], demand, want - placed)
        free[n] -= d * k
        counts[t, n] = counts.get((t, n), 0) + k
        placed += k
    return placed


def one_choice_per_pod(problem: Problem, placement: Placement) -> Placement:
    """One choice per pod where a task has a right-size alternative (`placement.rightsize`): the gang loop
    fills both tasks of a pair, so drop the surplus whole-GPU pods (keeping the instances, the saving); a
    gang left short (in total or below a task's minimum) is dropped whole."""
    found = pairs(problem)
    if not found:
        return placement
    for p in found:
        surplus = placement.task_pods(p.task) + placement.task_pods(p.alternative) - problem.tasks[p.task].replicas
        for key in sorted((k for k in placement.counts if k[0] == p.task), reverse=True):
            if surplus <= 0:
                break
            take = min(surplus, placement.counts[key])
            placement.counts[key] -= take
            surplus -= take
            if not placement.counts[key]:
                del placement.counts[key]
    for j in {p.job for p in found}:
        tasks = set(problem.job_tasks[j])
        placed = sum(k for (t, _), k in placement.counts.items() if t in tasks)
        short = any(sum(placement.task_pods(t) for t in members) < minimum
                    for members, minimum in gang_minimums(problem, j))
        if placed and (placed < problem.jobs[j].needed or short):
            for key in [k for k in placement.counts if k[0] in tasks]:
                del placement.counts[key]
    return placement
