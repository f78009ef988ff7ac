"""The plan's team report: per team the GPU-equivalents it holds, was placed, lost and still waits for,
against its fair entitlement, and Jain's index of held over entitled."""

from __future__ import annotations

import numpy as np
from placement_models import TeamReport

from placement.holdings import job_milli, pod_milli, problem_entitlements, running_use
from placement.problem import Problem
from placement.solution import Placement
from placement.teams import MILLI, jain


def team_reports(problem: Problem, placement: Placement) -> tuple[list[TeamReport], float | None]:
    """Per team after the plan (GPU-equivalents held, entitlement, dominant share), and Jain's index of
    held/entitlement. A MIG pod counts its instance's fraction of its GPU, a shared pod its share."""
    index = problem.teams
    if index is None:
        return [], None
    entitled = problem_entitlements(problem)
    held = np.zeros((index.size, 3))  # milli-GPU, milli-CPU, MiB
    preempted = np.zeros(index.size, dtype=np.int64)
    placed = np.zeros(index.size, dtype=np.int64)
    for r in problem.running:
        if r.team < 0:
            continue
        use = running_use(problem, r.index).sum(axis=0)
        if r.index in placement.evicted:
            preempted[r.team] += int(use[0])
        else:
            held[r.team] += use
    for (t, n), k in placement.counts.items():
        team = problem.job_team[problem.tasks[t].job]
        if team >= 0 and k:
            milli = pod_milli(problem, t, n) * k
            held[team] += (milli, int(problem.tasks[t].demand[1]) * k, int(problem.tasks[t].demand[2]) * k)
            placed[team] += milli
    waiting = np.zeros(index.size, dtype=np.int64)
    done = placement.placed_jobs(problem)
    for j, team in enumerate(problem.job_team):
        if team >= 0 and j not in done:
            waiting[team] += job_milli(problem, j)
    total = np.maximum(problem.capacity.sum(axis=0) * (MILLI, 1, 1), 1)
    cluster_wide = next((s for s in index.scopes if s.mask.all() and s.label == ""), None)
    reports = []
    for i, name in enumerate(index.names):
        gpus = _gpus(held[i, 0])
        share = gpus / entitled[i] if entitled[i] > 1e-9 else None
        reports.append(TeamReport(
            team=name, weight=float(index.weights[i]), gpus_held=gpus, gpus_placed=_gpus(placed[i]),
            gpus_preempted=_gpus(preempted[i]), gpus_pending=_gpus(waiting[i]),
            entitlement=round(float(entitled[i]), 4),
            nominal=None if cluster_wide is None else float(cluster_wide.nominal[i]) / MILLI,
            dominant_share=round(float((held[i] / total).max()), 6),
            share_of_entitlement=None if share is None else round(share, 6),
        ))
    index_value = jain([r.share_of_entitlement for r in reports if r.share_of_entitlement is not None])
    return reports, None if index_value is None else round(index_value, 6)


def _gpus(milli: float) -> float:
    return round(float(milli) / MILLI, 3)
