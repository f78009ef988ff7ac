"""Turn a placement (pods per task per node) into the wire-format Plan.

Pod indices and GPU indices are chosen here, after the solve, by an exact and cheap step:
pods of a task are numbered node by node (consecutive ranks share a node), and each pod takes
the lowest free GPU indices of its node. (The topology module refines the GPU choice.)
"""

from __future__ import annotations

from models import Assignment, Objective, Pending, Plan, PlanStatus, SolverStats
from placement.explain import pending_reason
from placement.problem import Problem
from placement.solution import Placement


def assignments(problem: Problem, placement: Placement) -> list[Assignment]:
    free_ids = [list(ids) for ids in problem.free_gpu_ids]
    out: list[Assignment] = []
    for j, job in enumerate(problem.jobs):
        for t in problem.job_tasks[j]:
            task = problem.tasks[t]
            pod = 0
            for n in sorted(n for (tt, n), k in placement.counts.items() if tt == t and k):
                for _ in range(placement.counts[t, n]):
                    gpus, free_ids[n] = free_ids[n][: task.spec.gpus], free_ids[n][task.spec.gpus:]
                    out.append(Assignment(job=job.name, task=task.name, pod=pod, node=problem.nodes[n].name,
                                          gpus=gpus))
                    pod += 1
    return out


def decode(problem: Problem, placement: Placement, terms: dict[str, float], status: PlanStatus,
           stats: SolverStats) -> Plan:
    placed = placement.placed_jobs(problem)
    usage = placement.usage(problem)
    pending = [Pending(job=job.name, reason=pending_reason(problem, j, placement, usage))
               for j, job in enumerate(problem.jobs) if j not in placed]
    rounded = {name: round(value, 6) for name, value in terms.items()}
    return Plan(status=status, assignments=assignments(problem, placement), pending=pending,
                objective=Objective(total=round(sum(rounded.values()), 6), terms=rounded), solver=stats)
