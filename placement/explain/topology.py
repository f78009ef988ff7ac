"""Pending reasons for gangs with a topology: which level binds, and why no domain holds the gang."""

from __future__ import annotations

import numpy as np

from placement.baseline.topology import PlaceTask, job_gpus_needed, place_job
from placement.problem import Problem


def pending_reason(problem: Problem, j: int, left: np.ndarray, gang: str, place_task: PlaceTask) -> str | None:
    """Why a gang with required topology waits, when its topology is the reason; else None.

    Checked on the free capacity before the plan (then nothing else is to blame) and on what the
    plan leaves (then other jobs took the room). The message names the level, the GPUs a domain
    would need and the most any one domain has, e.g. "no rack with 32 free GPUs".
    """
    spec = problem.jobs[j].topology
    if spec is None or (spec.required is None and spec.slice is None):
        return None
    view = problem.topology()
    for free, before in ((problem.free, True), (left, False)):
        trial, counts = free.copy(), {}
        if place_job(problem, j, trial, counts, place_task):
            continue
        level = spec.required if spec.required is not None else spec.slice.required  # type: ignore[union-attr]
        need = job_gpus_needed(problem, j)
        if spec.required is None:
            need = spec.slice.size * max(int(problem.tasks[t].demand[0]) for t in problem.job_tasks[j])  # type: ignore[union-attr]
        # All free GPUs of the domains where some pod of the gang fits at all (other domains hold
        # none of its nodes: selector, taints, model); "fragmented" covers the GPUs it cannot use.
        lvl = view.level(level)
        room = np.bincount(lvl.of_node, weights=free[:, 0], minlength=lvl.count).astype(np.int64)
        touched = np.zeros(lvl.count, dtype=bool)
        for t in problem.job_tasks[j]:
            touched[lvl.of_node[problem.tasks[t].candidates]] = True
        room[~touched] = -1
        best = int(room.argmax()) if touched.any() else -1
        most = f"the most in one {level} is {int(room[best])} ({lvl.names[best]})" if best >= 0 else ""
        what = "a slice" if spec.required is None else "the gang"
        if best < 0 or room[best] < need:
            core = f"no {level} with {need} free GPUs for {what}; {most}"
        else:
            core = f"no {level} can hold {what}: those with {need} free GPUs are too fragmented for its pods"
        prefix = "topology" if before else "topology: capacity went to higher-value jobs"
        return f"{prefix}: required {level}: {core}; gang of {gang}"
    return None
