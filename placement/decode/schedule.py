"""Time in the plan: reservations held for starved jobs, their estimated starts, and overdue running jobs.

A held job stays pending; its entry says where and when it will start (`estimated_start`) beside
the explainer's reason, and the plan lists the hold (`Plan.reservations`) so the scheduler that
applies the plan can keep the nodes, and the verifier can check that nothing placed outlasts it.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from placement_models import Overdue, Pending, Plan, Preemption, Reservation, ReservedNode

from placement import timeline
from placement.problem import Problem
from placement.reservation import End, Releases, earliest_fit, usage_of
from placement.screen import screened
from placement.solution import Placement

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def reservations(problem: Problem, placed: set[str]) -> list[Reservation]:
    """The holds of jobs this plan leaves pending (a held job the plan places after all needs none)."""
    out = []
    policy = problem.request.policy
    named = (("reserve_after_h", policy.reserve_after_h), ("max_wait_h", policy.max_wait_h))
    limits = [f"policy.{name} ({value:g} h)" for name, value in named if value is not None]
    for hold in problem.schedule.holds:
        if hold.job in placed:
            continue
        nodes = [ReservedNode(node=problem.nodes[n].name, gpus=g) for n, g in sorted(hold.gpus.items())]
        when = ("it fits on these nodes when running jobs are expected to end" if hold.start is not None else
                "no running job there has a known end, so nothing new may take its GPUs until it fits (drain)")
        out.append(Reservation(job=hold.job, earliest_start=hold.start, nodes=nodes,
                               reason=f"blocked past {' or '.join(limits)}; {when}"))
    return out


def annotate(problem: Problem, placement: Placement, pending: list[Pending]) -> list[Pending]:
    """Pending entries with their estimated start (`estimates`), the reservation of a held job, why a
    starved job holds nothing, and which reservation kept a job off the GPUs it could use."""
    schedule = problem.schedule
    starts = estimates(problem, placement, pending)
    now = problem.request.planning_time()
    index = {job.name: j for j, job in enumerate(problem.jobs)}
    out = []
    for entry in pending:
        if entry.job in starts:
            entry = entry.model_copy(update={"estimated_start": starts[entry.job]})
        hold = schedule.held(entry.job)
        if hold is not None:
            nodes = ", ".join(problem.nodes[n].name for n in sorted(hold.gpus))
            entry = entry.model_copy(update={
                "reason": f"{entry.reason}; reserved: starts at {_at(hold.start)} on {nodes}"})
        elif entry.job in schedule.unheld:
            entry = entry.model_copy(update={"reason": f"{entry.reason}; starved but holds nothing: "
                                                       f"{schedule.unheld[entry.job]}"})
        elif entry.constraint in _ROOM and entry.job in index:
            entry = _kept_off(problem, index[entry.job], entry, now)
        out.append(entry)
    return out


def estimates(problem: Problem, placement: Placement, pending: list[Pending]) -> dict[str, datetime]:
    """Estimated starts of the first `policy.estimate_starts` pending jobs (highest class, then oldest): the
    first expected end of a running or newly placed job after which the job fits in what this plan leaves,
    ignoring the other pending jobs (they may start first). Jobs whose start no known end gives are left out."""
    limit = problem.request.policy.estimate_starts
    found = screened(problem)
    whole = found[0] if found is not None else problem  # jobs screened out now are the ones that most need it
    names = {p.job for p in pending}
    order = sorted((j for j, job in enumerate(whole.jobs) if job.name in names and not problem.schedule.held(
        job.name)), key=lambda j: (-whole.jobs[j].priority, whole.jobs[j].submitted_at or _EPOCH, whole.jobs[j].name))
    if not limit or not order:
        return {}
    now = problem.request.planning_time()
    limits = timeline.enforced(problem.request)
    ends: list[End] = []
    for run in problem.running:
        end = timeline.expected_end(run.spec, now, limits, problem.speeds.running_pace[run.index])
        if end is not None and run.index not in placement.evicted:  # a preempted job's GPUs are in `free` below
            ends.append((end, run.nodes, run.use))
    # Placed jobs free their pods at their expected ends; jobs of one runtime end together, so their pods are
    # one `End` (per job, two arrays each for thousands of jobs).
    ending: dict[int, datetime | None] = {}  # placed job -> its expected end
    by_end: dict[datetime, dict[tuple[int, int], int]] = {}  # expected end -> pods per (task, node) ending then
    for (t, n), k in placement.counts.items():
        if k:
            j = problem.tasks[t].job
            if j not in ending:
                runtime = timeline.runtime_h(problem.jobs[j], limits)
                ending[j] = None if runtime is None else now + timedelta(hours=runtime)
            end = ending[j]
            if end is not None:
                by_end.setdefault(end, {})[t, n] = k
    ends += [(end, *usage_of(problem, counts)) for end, counts in by_end.items()]
    free = problem.free - placement.usage(problem) + placement.freed(problem)
    releases = Releases(ends, free.shape)  # shared: the jobs' bisections look at the same moments
    out: dict[str, datetime] = {}
    for j in order[:limit]:
        fit = earliest_fit(whole, j, free, releases)
        if fit is not None:
            out[whole.jobs[j].name] = fit.start
    for hold in problem.schedule.holds:
        if hold.start is not None and hold.job in names:
            out[hold.job] = hold.start
    return out


#: Constraints a reservation may be behind: the room went elsewhere, and the held GPUs were off limits.
_ROOM = ("capacity", "objective", "priority", "fairness")


def _kept_off(problem: Problem, j: int, entry: Pending, now: datetime) -> Pending:
    """A job that would outlast a hold on nodes it could use: the reservation kept it off them."""
    job = problem.jobs[j]
    holds = problem.schedule.limits(job, now)
    if not holds:  # the usual case: no reservation binds it, so no pass over its candidates
        return entry
    usable = {int(n) for t in problem.job_tasks[j] for n in problem.tasks[t].candidates.tolist()}
    for hold in holds:
        held = sorted(set(hold.long_room) & usable)
        if held:
            names = ", ".join(problem.nodes[n].name for n in held[:3]) + (" …" if len(held) > 3 else "")
            return entry.model_copy(update={
                "constraint": "reservation",
                "reason": f"{entry.reason}; it would run past the reservation of {hold.job} (from "
                          f"{_at(hold.start)}) on {names}, where only work ending by then may use the "
                          f"held GPUs"})
    return entry


def _at(moment: datetime | None) -> str:
    return moment.isoformat() if moment is not None else "once its nodes drain"


def overdue(problem: Problem) -> list[Overdue]:
    return [Overdue(job=late.job, started_at=late.started_at, running_h=late.running_h,
                    max_runtime_h=late.max_runtime_h) for late in timeline.overdue(problem.request)]


def with_evicted(plan: Plan, evicted: list[timeline.Late]) -> Plan:
    """The plan of a request whose overdue jobs were taken out (`timeline.without_overdue`): those jobs listed as
    overdue and as preempted, rule max_runtime."""
    if not evicted:
        return plan
    stopped = [Preemption(job=late.job, rule="max_runtime", reason=f"ran {late.running_h:g} h, past its "
                          f"max_runtime_h {late.max_runtime_h:g} (policy.overdue: evict)") for late in evicted]
    listed = [Overdue(job=late.job, started_at=late.started_at, running_h=late.running_h,
                      max_runtime_h=late.max_runtime_h) for late in evicted]
    return plan.model_copy(update={"preemptions": stopped + plan.preemptions, "overdue": listed + plan.overdue})
