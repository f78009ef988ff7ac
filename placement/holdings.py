"""What each team wants, is owed and holds once a placement is applied.

The quota, fairness and preemption terms, the greedy's quota ledger checks and the plan's team
report all count GPUs the same way: running jobs kept plus placed pods, per team, optionally on a
scope's nodes only.
"""

from __future__ import annotations

import numpy as np

from placement.problem import Problem
from placement.solution import Placement
from placement.teams import entitlements


def team_demand(problem: Problem) -> np.ndarray:
    """(T,) GPUs each team wants: what its running jobs hold plus what its pending jobs ask for."""
    assert problem.teams is not None
    out = np.zeros(problem.teams.size)
    for r in problem.running:
        if r.team >= 0:
            out[r.team] += r.gpus
    for j, team in enumerate(problem.job_team):
        if team >= 0:
            out[team] += problem.job_gpus(j)
    return out


def problem_entitlements(problem: Problem) -> np.ndarray:
    """(T,) fair GPUs per team over the cluster's healthy GPUs (see the module docstring)."""
    index = problem.teams
    assert index is not None
    return entitlements(float(problem.capacity[:, 0].sum()), team_demand(problem), index.nominal, index.limit,
                        index.weights, index.usage)


def held_after(problem: Problem, placement: Placement, mask: np.ndarray | None = None) -> np.ndarray:
    """(T,) GPUs each team holds once the placement is applied (kept running + placed), on `mask` nodes."""
    assert problem.teams is not None
    out = np.zeros(problem.teams.size, dtype=np.int64)
    for r in problem.running:
        if r.team >= 0 and r.index not in placement.evicted:
            keep = r.use[:, 0] if mask is None else r.use[:, 0] * mask[r.nodes]
            out[r.team] += int(keep.sum())
    for (t, n), k in placement.counts.items():
        team = problem.job_team[problem.tasks[t].job]
        if team >= 0 and k and (mask is None or mask[n]):
            out[team] += int(problem.tasks[t].demand[0]) * k
    return out
