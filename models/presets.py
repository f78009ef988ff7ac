"""Presets: what a plan is for, in one word, resolved into the fields the planner and the verifier read.

A scheduler that calls `plan` every cycle wants short work first and whole nodes freed together; an
operator asking a one-off or what-if question wants the weights as documented. `policy.preset` says
which, and `resolve` turns it into ordinary fields, so everything downstream (the compiler, the
greedy plan, the verifier) sees one request with no preset logic of its own:

* `one-shot`: the request as given.
* `completion`: `weights.turnaround` 2 (more and shorter jobs first: shortest job first where
  `expected_runtime_h` is sent, fewer GPUs first where it is not) and `weights.alignment` 0.5 (a job
  goes where the work beside it ends no sooner, so nodes free whole together), and `weights.throughput` 2
  (where jobs declare speeds: a job starts on GPUs that run it at less than half its best speed only when
  nothing better is worth more; in a loop a faster GPU frees soon, and on the fleet bench this cut the mean
  completion time by 5-37 % against weight 1 in every run).
* `las`: `completion`, plus Tiresias's discretised least-attained-service queues: every class is split
  by `attained_gpu_h` at `policy.las.thresholds_gpu_h` (less service ranks higher within the same
  priority), running jobs are preemptible unless they say otherwise, `policy.preemption` is on with a
  lease (`min_runtime_s` = `las.lease_s`), and victims are weighed by their GPUs (`weights.victim_gpus`
  0.5) so a fresh job evicts few GPUs rather than one wide gang. Needs no runtime estimates. Where jobs
  declare speeds, `policy.migration` is on and `weights.throughput` 1: a job preempted for a fresher one
  restarts wherever GPUs are free and moves back to faster ones as they free (Gavel's rounds, made of
  preemptions and moves; on the fleet bench this came within -8 % to +6 % of Gavel's mean completion time,
  where LAS without moves was up to twice as slow).
* `bounded-wait`: `completion`, plus a reservation for the first job blocked `reserve_after_h` (6 h).
* `auto` (the default): when the call carries time (`policy.now` and some job's `submitted_at` or `started_at`,
  as a scheduler's call does), `las` where some job declares speeds (`speeds`, `workload`) and the GPU nodes
  name more than one model (a mixed fleet: there LAS with moves beat `completion` in 9 of 9 fleet-bench runs,
  by 2-16 %), and `completion` elsewhere; else `one-shot`.

A field the request sets itself always wins over what a preset would set. LAS classes are dense:
the distinct priorities of the request, lowest first, times the number of queues, plus the queue
(a team's `max_priority_threshold` maps the same way), so they stay ordered and bounded.
"""

from __future__ import annotations

import bisect
from datetime import datetime
from functools import cached_property
from typing import Any

from placement_models.policy import Preset
from placement_models.request import PlacementRequest

#: Weights of `completion` (and of the presets built on it), where the request sets none.
COMPLETION_WEIGHTS = {"turnaround": 2.0, "alignment": 0.5, "throughput": 2.0}
#: `weights.victim_gpus` under `las`: one 8-GPU victim weighs as five 1-GPU ones.
LAS_VICTIM_GPUS = 0.5
#: `weights.throughput` under `las`: a preempted job may restart on slower GPUs and move back (policy.migration)
LAS_THROUGHPUT = 1.0
#: `policy.reserve_after_h` under `bounded-wait`, where unset.
BOUNDED_WAIT_RESERVE_AFTER_H = 6.0


def effective_preset(request: PlacementRequest) -> Preset:
    """The preset a request stands for: its own, or for `auto`, when it carries time, `las` where jobs declare
    speeds and the GPU nodes name more than one model (a mixed fleet's loop) and `completion` elsewhere;
    `one-shot` without time."""
    preset = request.policy.preset
    if preset != "auto":
        return preset
    carries_time = request.policy.now is not None and (any(j.submitted_at is not None for j in request.jobs) or any(
        r.started_at is not None for r in request.cluster.running))  # a loop's call with an empty queue too
    if not carries_time:
        return "one-shot"
    paced = any(j.speeds is not None or j.workload is not None for j in [*request.jobs, *request.cluster.running])
    mixed = len({n.gpu_model for n in request.cluster.nodes if n.gpus > 0}) > 1
    return "las" if paced and mixed else "completion"


def resolve(request: PlacementRequest) -> PlacementRequest:
    """The request with its preset spelled out as ordinary fields (the same object when there is nothing to
    spell out). Resolving a resolved request changes nothing."""
    preset = effective_preset(request)
    if preset == "one-shot":
        return request
    policy = request.policy
    given = policy.weights.model_fields_set
    weights = {k: v for k, v in COMPLETION_WEIGHTS.items() if k not in given}
    changes: dict[str, Any] = {"preset": "one-shot"}  # spelled out: a second resolve changes nothing
    update: dict[str, Any] = {}
    if preset == "bounded-wait" and "reserve_after_h" not in policy.model_fields_set:
        changes["reserve_after_h"] = BOUNDED_WAIT_RESERVE_AFTER_H
    if preset == "las":
        if "victim_gpus" not in given:
            weights["victim_gpus"] = LAS_VICTIM_GPUS
        if "throughput" not in given:
            weights["throughput"] = LAS_THROUGHPUT
        if "migration" not in policy.model_fields_set:
            changes["migration"] = True
        if "preemption" not in policy.model_fields_set:
            changes["preemption"] = True
        if "min_runtime_s" not in policy.model_fields_set:
            changes["min_runtime_s"] = policy.las.lease_s
        update = _las_classes(request)
        if "preemption" in changes:
            update.pop("preemption")
        else:
            changes["preemption"] = update.pop("preemption")
    if weights:
        changes["weights"] = policy.weights.model_copy(update=weights)
    update["policy"] = policy.model_copy(update=changes)
    return fresh(request.model_copy(update=update))


def fresh(request: PlacementRequest) -> PlacementRequest:
    """A copied request without the cached answers of the one it was copied from (they read changed fields)."""
    for name, attr in vars(PlacementRequest).items():
        if isinstance(attr, cached_property):
            request.__dict__.pop(name, None)
    return request


def attained_gpu_h(request: PlacementRequest) -> tuple[list[float], list[float]]:
    """GPU-hours of service each pending and each running job has had: `attained_gpu_h` where given; else 0
    for a pending job, and for a running one its GPUs (whole GPUs, shares, a MIG instance as 1/7) times the
    hours since `started_at` (0 without it)."""
    now = request.planning_time()
    pending = [j.attained_gpu_h or 0.0 for j in request.jobs]
    running = []
    for r in request.cluster.running:
        if r.attained_gpu_h is not None:
            running.append(r.attained_gpu_h)
            continue
        gpus = sum(p.gpu_share if p.gpu_share is not None else 1 / 7 if p.mig is not None else len(p.gpus)
                   for p in r.pods)
        running.append(gpus * _hours(r.started_at, now))
    return pending, running


def _hours(since: datetime | None, now: datetime) -> float:
    return 0.0 if since is None else max(0.0, (now - since).total_seconds() / 3600.0)


def _las_classes(request: PlacementRequest) -> dict[str, Any]:
    """The request's jobs, running jobs and teams with LAS classes in place of priorities."""
    thresholds = request.policy.las.thresholds_gpu_h
    queues = len(thresholds) + 1
    levels = sorted({j.priority for j in request.jobs} | {r.priority for r in request.cluster.running})
    rank = {p: i for i, p in enumerate(levels)}

    def cls(priority: int, attained: float) -> int:
        # queue 0 (the least service) ranks highest within its priority
        return rank[priority] * queues + (queues - 1 - bisect.bisect_right(thresholds, attained))

    pending, running = attained_gpu_h(request)
    jobs = [j.model_copy(update={"priority": cls(j.priority, a)}) for j, a in zip(request.jobs, pending, strict=True)]
    runs = []
    for r, a in zip(request.cluster.running, running, strict=True):
        update: dict[str, Any] = {"priority": cls(r.priority, a)}
        if "preemptible" not in r.model_fields_set:
            update["preemptible"] = True
        runs.append(r.model_copy(update=update))
    teams = [t.model_copy(update={"preemption": _rules_thresholds(t.preemption, levels, queues)})
             for t in request.teams]
    return {"jobs": jobs, "teams": teams, "cluster": request.cluster.model_copy(update={"running": runs}),
            "preemption": _rules_thresholds(request.policy.preemption, levels, queues)}


def _rules_thresholds(rules: Any, levels: list[int], queues: int) -> Any:
    """Preemption rules whose `borrow_within_cohort.max_priority_threshold` names a priority, with the highest
    class at or below it in its place (every queue of the highest priority at or below the threshold)."""
    borrow = getattr(rules, "borrow_within_cohort", None)
    threshold = getattr(borrow, "max_priority_threshold", None)
    if threshold is None:
        return rules
    below = bisect.bisect_right(levels, threshold)  # priorities at or below the threshold
    mapped = below * queues - 1  # -1 when none: no victim's class is that low
    borrow = borrow.model_copy(update={"max_priority_threshold": mapped})
    return rules.model_copy(update={"borrow_within_cohort": borrow})
