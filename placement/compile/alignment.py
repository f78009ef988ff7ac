"""End alignment (soft): put a job's pods where the work beside them ends no sooner than they do.

A node frees whole only when its last job ends. A one-hour job placed beside a ten-day one costs
nothing later; placed on a node that would have been empty in an hour, it keeps eight GPUs from
the next whole-node gang for its whole run. With runtimes known (`expected_runtime_h` of running
and pending jobs), each whole GPU a pod takes on node n costs `weights.alignment` ×

    min(1, max(0, end_job − end_n) / 1 day)         end_n: the latest expected end on n (now if idle)

so short work fills the holes beside long work and nodes drain together, the packing EASY backfill
gets from its reservations, without holding a GPU idle. The cost is per GPU and at most the
weight, and never more than half of what the GPU earns placed (its class's priority weight): it
steers where a job runs, never whether. A node with a running job of unknown end never frees as
far as the plan knows: nothing placed there delays it. A pending job without a runtime has no end to compare: no cost.
The term is linear in pods: two new jobs on one idle node each pay their own run, where the node
waits only for the longer; the over-count falls alike on every idle node, so it does not move them.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np

from placement import timeline
from placement.compile import terms
from placement.compile.context import SCALE, ModelContext
from placement.compile.priority import class_weights
from placement.problem import Problem

NAME = terms.ALIGNMENT
#: Delay past which the cost stops growing: a day, so a week-long job is not priced out of every node.
HORIZON_H = 24.0


def node_ends_h(problem: Problem, now: datetime, limits: timeline.Enforced) -> np.ndarray:
    """Per node, hours from now until its last running job is expected to end: 0 when nothing runs there,
    inf when some job there has no known end."""
    ends = np.zeros(problem.n_nodes)
    for run in problem.running:
        end = timeline.expected_end(run.spec, now, limits, problem.speeds.running_pace[run.index])
        h = np.inf if end is None else timeline.hours(end - now)
        ends[run.nodes] = np.maximum(ends[run.nodes], h)
    return ends


def delay_cost(problem: Problem, j: int, node_ends: np.ndarray, limits: timeline.Enforced) -> np.ndarray | None:
    """Per node, the cost per whole GPU (before the weight) of job j's pods there; None without a runtime."""
    runtime = timeline.runtime_h(problem.jobs[j], limits)
    if runtime is None:
        return None
    return np.minimum(1.0, np.maximum(0.0, runtime - node_ends) / HORIZON_H)


def gpu_charges(problem: Problem) -> dict[int, float]:
    """Per job, the most one of its whole GPUs pays (weighted): `weights.alignment`, but at most half of what
    the GPU earns when placed (its class's priority weight), so the term steers where a job runs, never
    whether."""
    weight = problem.request.policy.weights.alignment
    levels = class_weights(problem)
    earns = problem.request.policy.weights.priority
    return {j: min(weight, 0.5 * earns * levels[job.priority]) for j, job in enumerate(problem.jobs)}


def max_cost(problem: Problem, j: int) -> float:
    """The most job j's pods can pay this term anywhere (weighted): what dominance must allow for."""
    if problem.request.policy.weights.alignment == 0:
        return 0.0
    runtime = timeline.runtime_h(problem.jobs[j], timeline.enforced(problem.request))
    if runtime is None:
        return 0.0
    gpus = sum(int(problem.tasks[t].demand[0]) * problem.tasks[t].replicas for t in problem.job_tasks[j])
    return _charges(problem)[j] * gpus * min(1.0, runtime / HORIZON_H)


def _charges(problem: Problem) -> dict[int, float]:
    """`gpu_charges`, kept for the problem's lifetime (dominance asks for every job)."""
    if problem.facts.alignment_charges is None:
        problem.facts.alignment_charges = gpu_charges(problem)
    return problem.facts.alignment_charges


def apply(ctx: ModelContext) -> None:
    problem = ctx.problem
    if problem.request.policy.weights.alignment == 0:
        return
    now = problem.request.planning_time()
    limits = timeline.enforced(problem.request)
    node_ends = node_ends_h(problem, now, limits)
    charges = _charges(problem)
    for t, task in enumerate(problem.tasks):
        gpus = int(task.demand[0])
        if not gpus or not ctx.x[t] or task.job in problem.twins:
            continue
        cost = delay_cost(problem, task.job, node_ends, limits)
        if cost is None:
            continue
        coefs = -gpus * cost[ctx.candidates[t]]
        if np.any(coefs):
            ctx.objective.add(NAME, ctx.x[t], coefs, charges[task.job],
                              ceiling=float(-gpus * cost[task.candidates].min()))


def value(problem: Problem, counts: dict[tuple[int, int], int]) -> float:
    """The term's value for pods per (task, node), computed as the model computes it, each coefficient rounded
    to whole model units (for plans changed after the search, so they report what the model would)."""
    if problem.request.policy.weights.alignment == 0:
        return 0.0
    limits = timeline.enforced(problem.request)
    node_ends = node_ends_h(problem, problem.request.planning_time(), limits)
    charges = _charges(problem)
    costs: dict[int, np.ndarray | None] = {}
    units = 0
    for (t, n), k in counts.items():
        task = problem.tasks[t]
        if task.job not in costs:
            costs[task.job] = delay_cost(problem, task.job, node_ends, limits)
        cost = costs[task.job]
        if cost is not None:
            units += round(float(-int(task.demand[0]) * cost[n]) * charges[task.job] * SCALE) * k
    return units / SCALE
