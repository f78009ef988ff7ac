"""Time in the plan: reservations held for starved jobs, their estimated starts, and overdue running jobs.

A held job stays pending; its entry says where and when it will start (`estimated_start`) beside
the explainer's reason, and the plan lists the hold (`Plan.reservations`) so the scheduler that
applies the plan can keep the nodes, and the verifier can check that nothing placed outlasts it.
"""

from __future__ import annotations

from datetime import datetime

from placement_models import Overdue, Pending, Reservation, ReservedNode

from placement import timeline
from placement.problem import Problem


def reservations(problem: Problem, placed: set[str]) -> list[Reservation]:
    """The holds of jobs this plan leaves pending (a held job the plan places after all needs none)."""
    out = []
    limit = problem.request.policy.max_wait_h
    for hold in problem.schedule.holds:
        if hold.job in placed:
            continue
        nodes = [ReservedNode(node=problem.nodes[n].name, gpus=g) for n, g in sorted(hold.gpus.items())]
        out.append(Reservation(job=hold.job, earliest_start=hold.start, nodes=nodes,
                               reason=f"waited past policy.max_wait_h ({limit:g} h); it fits on these nodes when "
                                      f"running jobs are expected to end"))
    return out


def annotate(problem: Problem, pending: list[Pending]) -> list[Pending]:
    """Pending entries with the estimated start of held jobs, and why a starved job holds nothing."""
    schedule = problem.schedule
    if not schedule.holds and not schedule.unheld:
        return pending
    now = problem.request.planning_time()
    index = {job.name: j for j, job in enumerate(problem.jobs)}
    out = []
    for entry in pending:
        hold = schedule.held(entry.job)
        if hold is not None:
            nodes = ", ".join(problem.nodes[n].name for n in sorted(hold.gpus))
            entry = entry.model_copy(update={
                "estimated_start": hold.start,
                "reason": f"{entry.reason}; reserved: starts at {hold.start.isoformat()} on {nodes}"})
        elif entry.job in schedule.unheld:
            entry = entry.model_copy(update={"reason": f"{entry.reason}; starved but holds nothing: "
                                                       f"{schedule.unheld[entry.job]}"})
        elif entry.constraint in _ROOM and entry.job in index:
            entry = _kept_off(problem, index[entry.job], entry, now)
        out.append(entry)
    return out


#: Constraints a reservation may be behind: the room went elsewhere, and the held GPUs were off limits.
_ROOM = ("capacity", "objective", "priority", "fairness")


def _kept_off(problem: Problem, j: int, entry: Pending, now: datetime) -> Pending:
    """A job that would outlast a hold on nodes it could use: the reservation kept it off them."""
    job = problem.jobs[j]
    usable = {int(n) for t in problem.job_tasks[j] for n in problem.tasks[t].candidates.tolist()}
    for hold in problem.schedule.limits(job, now):
        held = sorted(set(hold.long_room) & usable)
        if held:
            names = ", ".join(problem.nodes[n].name for n in held[:3]) + (" …" if len(held) > 3 else "")
            return entry.model_copy(update={
                "constraint": "reservation",
                "reason": f"{entry.reason}; it would run past the reservation of {hold.job} (from "
                          f"{hold.start.isoformat()}) on {names}, where only work ending by then may use the "
                          f"held GPUs"})
    return entry


def overdue(problem: Problem) -> list[Overdue]:
    return [Overdue(job=late.job, started_at=late.started_at, running_h=late.running_h,
                    max_runtime_h=late.max_runtime_h) for late in timeline.overdue(problem.request)]
