"""Pending reasons for gangs with a topology: which level binds, what one domain would need and the most
any one domain has."""

from __future__ import annotations

import numpy as np

from placement.baseline.topology import job_gpus_needed
from placement.problem import Problem
from placement.topology import ClusterTopology


def domain_reason(problem: Problem, j: int, free: np.ndarray, gang: str, view: ClusterTopology, after: bool) -> str:
    """Why no domain of job j's required level (or slice level) holds it in `free`, once explain has found
    that the level is what binds: the gang fits `free` without it, not with it.

    `after`: `free` is what the plan leaves (other jobs took room the domains needed), else the free cluster.
    Names the level, the GPUs one domain would need and the most any one domain has on the gang's nodes,
    e.g. "no rack with 32 free GPUs for the gang; the most in one rack is 24 (r1)". A gang without whole-GPU
    pods (MIG, shared, CPU) is counted in pods instead: GPUs would read 0.
    """
    spec = problem.jobs[j].topology
    assert spec is not None and (spec.required is not None or spec.slice is not None)
    level = spec.required if spec.required is not None else spec.slice.required  # type: ignore[union-attr]
    what = "a slice" if spec.required is None else "the gang"
    lvl = view.level(level)
    touched = np.zeros(lvl.count, dtype=bool)
    nodes = np.zeros(problem.n_nodes, dtype=bool)
    for t in problem.job_tasks[j]:
        touched[lvl.of_node[problem.tasks[t].candidates]] = True
        nodes[problem.tasks[t].candidates] = True
    when = " left after this plan" if after else ""
    need = job_gpus_needed(problem, j)
    if spec.required is None:
        need = spec.slice.size * max(int(problem.tasks[t].demand[0]) for t in problem.job_tasks[j])  # type: ignore[union-attr]
    if need > 0:
        # All free GPUs of the domains where some pod of the gang fits at all (other domains hold none of
        # its nodes: selector, taints, model); "too fragmented" covers the GPUs it cannot use.
        room = np.bincount(lvl.of_node, weights=free[:, 0], minlength=lvl.count).astype(np.int64)
        room[~touched] = -1
        best = int(room.argmax()) if touched.any() else -1
        if best < 0 or room[best] < need:
            most = f"; the most in one {level} is {int(room[best])} ({lvl.names[best]})" if best >= 0 else ""
            core = f"no {level} with {need} free GPUs{when} for {what}{most}"
        else:
            core = (f"no {level} can hold {what}{when}: those with {need} free GPUs are too fragmented for its "
                    "pods")
        total = int(free[nodes, 0].sum())
    else:
        pods = problem.jobs[j].needed if spec.required is not None else spec.slice.size  # type: ignore[union-attr]
        core = f"no {level} has room{when} for {what} ({pods} pods) on its matching nodes"
        total = 0
    spread = f"; its matching nodes have {total} free GPUs in all" if total and after else ""
    return f"topology: required {level}: {core}{spread}; gang of {gang}"
