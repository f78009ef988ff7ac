"""The plan's team report: per team what it holds, was placed, lost and still waits for,
against its fair entitlement, and Jain's index of held over entitled."""

from __future__ import annotations

import numpy as np
from placement_models import TeamReport

from placement.holdings import problem_entitlements
from placement.problem import Problem
from placement.solution import Placement
from placement.teams import jain


def team_reports(problem: Problem, placement: Placement) -> tuple[list[TeamReport], float | None]:
    """Per team after the plan (GPUs held, entitlement, dominant share), and Jain's index of held/entitlement."""
    index = problem.teams
    if index is None:
        return [], None
    entitled = problem_entitlements(problem)
    held = np.zeros((index.size, 3))
    preempted = np.zeros(index.size, dtype=np.int64)
    placed = np.zeros(index.size, dtype=np.int64)
    for r in problem.running:
        if r.team < 0:
            continue
        if r.index in placement.evicted:
            preempted[r.team] += r.gpus
        else:
            held[r.team] += r.use.sum(axis=0)
    for (t, _), k in placement.counts.items():
        team = problem.job_team[problem.tasks[t].job]
        if team >= 0 and k:
            held[team] += problem.tasks[t].demand * k
            placed[team] += int(problem.tasks[t].demand[0]) * k
    waiting = np.zeros(index.size, dtype=np.int64)
    done = placement.placed_jobs(problem)
    for j, team in enumerate(problem.job_team):
        if team >= 0 and j not in done:
            waiting[team] += problem.job_gpus(j)
    total = np.maximum(problem.capacity.sum(axis=0), 1)
    cluster_wide = next((s for s in index.scopes if s.mask.all() and s.label == ""), None)
    reports = []
    for i, name in enumerate(index.names):
        gpus = int(held[i, 0])
        share = gpus / entitled[i] if entitled[i] > 1e-9 else None
        reports.append(TeamReport(
            team=name, weight=float(index.weights[i]), gpus_held=gpus, gpus_placed=int(placed[i]),
            gpus_preempted=int(preempted[i]), gpus_pending=int(waiting[i]), entitlement=round(float(entitled[i]), 4),
            nominal=None if cluster_wide is None else float(cluster_wide.nominal[i]),
            dominant_share=round(float((held[i] / total).max()), 6),
            share_of_entitlement=None if share is None else round(share, 6),
        ))
    index_value = jain([r.share_of_entitlement for r in reports if r.share_of_entitlement is not None])
    return reports, None if index_value is None else round(index_value, 6)
