"""Jobs that can never fit leave the request before anything is built from it.

A job whose gang cannot be placed even on a cluster without any other pending job (counting what
preemptions any pending job could justify: the room they free is free for every job) only clutters
the model: its variables change CP-SAT's search, its priority level changes the class weights and its
demand the teams' fair shares, so adding it would change the plan of every other job. Operators expect
the opposite — a job that cannot fit changes nothing — so such jobs are dropped here, by tests that are
necessary for any plan (a sound screen never drops a job that some plan could place), and come back in
the plan as pending with the reason the original problem gives (`placement.decode`).

The tests, per job, on the problem's candidate nodes (filtered by selectors, taints, GPU model,
device room and free capacity plus what pending jobs could justify preempting):

* each task must place its minimum (`min_replicas`; every pod of an all-or-nothing gang): Σ over its
  candidates of the pods that fit there alone;
* the job must place `min_available` pods in all;
* with `topology.required`, one domain of that level must hold them.
"""

from __future__ import annotations

import numpy as np
from placement_models import PlacementRequest

from placement import rightsize
from placement.problem import Problem


def build_problem(request: PlacementRequest) -> Problem:
    """The problem of `request` without the jobs that can never fit (with right-size offers, as
    `placement.rightsize.build_problem` gives them)."""
    problem = rightsize.build_problem(request)
    hopeless = [j for j in range(len(problem.jobs)) if not could_fit(problem, j)]
    if not hopeless:
        return problem
    gone = {problem.jobs[j].name for j in hopeless}
    kept = request.model_copy(update={"jobs": [job for job in request.jobs if job.name not in gone]})
    screened = rightsize.build_problem(kept)
    screened.facts.screened = (problem, hopeless)
    return screened


def screened(problem: Problem) -> tuple[Problem, list[int]] | None:
    """(the problem before screening, the indices of the jobs dropped from it), or None."""
    return problem.facts.screened


def could_fit(problem: Problem, j: int) -> bool:
    """Necessary conditions for job j to be placed by any plan (module docstring)."""
    job = problem.jobs[j]
    if not problem.job_tasks[j]:
        return True
    most = {t: min(problem.tasks[t].replicas, int(problem.tasks[t].max_per_node.sum())) for t in problem.job_tasks[j]}
    for tasks, minimum in rightsize.gang_minimums(problem, j):  # a task, or a task and its right-size twin
        if sum(most[t] for t in tasks) < minimum:
            return False
    if sum(most.values()) < job.needed:
        return False
    level = job.topology.required if job.topology is not None else None
    if level is not None and level != "node":
        return _one_domain_holds(problem, j, level)
    return True


def _one_domain_holds(problem: Problem, j: int, level: str) -> bool:
    """Could one domain of `level` hold the job's pods (each task's pods that fit its nodes there)?"""
    lvl = problem.topology().level(level)
    job = problem.jobs[j]
    per_domain = np.zeros(lvl.count, dtype=np.int64)
    short = np.zeros(lvl.count, dtype=bool)
    room: dict[int, np.ndarray] = {}
    for t in problem.job_tasks[j]:
        info = problem.tasks[t]
        room[t] = np.zeros(lvl.count, dtype=np.int64)
        np.add.at(room[t], lvl.of_node[info.candidates], info.max_per_node)
        room[t] = np.minimum(room[t], info.replicas)
        per_domain += room[t]
    for tasks, minimum in rightsize.gang_minimums(problem, j):
        short |= sum((room[t] for t in tasks), np.zeros(lvl.count, dtype=np.int64)) < minimum
    return bool(np.any(~short & (per_domain >= job.needed)))
