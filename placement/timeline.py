"""Time in a plan: how long jobs have waited, when running jobs are expected to end, which run too long.

A plan is a snapshot, but a scheduler that calls it every cycle cares about time: a job that has
waited past `policy.max_wait_h` is starved and gets a reservation (placement.reservation), and
a reservation is only as good as the running jobs' expected ends, read here from `started_at`
and `expected_runtime_h`. A running job past its expected end is taken to end now (it is due);
one with no expectation never ends as far as the plan knows. Where `policy.overdue: evict`
enforces max runtimes, a job's limit bounds its end too (`runtime_h`), as Slurm's backfill plans
with time limits: a team that sets limits rather than estimates still gets backfill.

Nothing here knows the Problem: node and job indices are plain integers, so the baseline, the
model, decode and the verifier all read the same `Hold`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from placement_models import PlacementRequest
from placement_models.cluster import RunningJob
from placement_models.jobs import Job


def hours(delta: timedelta) -> float:
    return delta.total_seconds() / 3600.0


def waited_h(job: Job, now: datetime) -> float:
    """Hours since `submitted_at` (0 when unknown or in the future)."""
    return 0.0 if job.submitted_at is None else max(0.0, hours(now - job.submitted_at))


#: Team max runtimes the plan may count on as ends (`enforced`); None when nothing enforces them.
Enforced = dict[str, float] | None


def enforced(request: PlacementRequest) -> Enforced:
    """Teams' max runtimes, by team name, when `policy.overdue: evict` enforces limits (a job past its limit is
    evicted, so it is gone by then); None otherwise: a limit that is only reported bounds nothing."""
    if request.policy.overdue != "evict":
        return None
    return {t.name: t.max_runtime_h for t in request.teams if t.max_runtime_h is not None}


def runtime_h(job: Job | RunningJob, limits: Enforced, speed: float = 1.0) -> float | None:
    """Hours the plan counts on `job` running in all: its `expected_runtime_h` at `speed` (its slowest GPU's, per
    its speed table: placement.speeds), no longer than its enforced max runtime (its own, else its team's;
    `limits` from `enforced`); None when neither is known."""
    expected = None if job.expected_runtime_h is None else job.expected_runtime_h / speed
    if limits is None:
        return expected
    limit = max_runtime(job, limits)
    if limit is None:
        return expected
    return limit if expected is None else min(expected, limit)


def expected_end(run: RunningJob, now: datetime, limits: Enforced = None, speed: float = 1.0) -> datetime | None:
    """When a running job's GPUs are expected to free up: start + `runtime_h` (at `speed`), no earlier than now."""
    runtime = runtime_h(run, limits, speed)
    if run.started_at is None or runtime is None:
        return None
    return max(now, run.started_at + timedelta(hours=runtime))


def ends_by(job: Job, now: datetime, moment: datetime | None, limits: Enforced = None) -> bool:
    """Would `job`, started now, be expected to end by `moment` (`runtime_h`)? (No runtime, or no moment: never.)"""
    runtime = runtime_h(job, limits)
    return runtime is not None and moment is not None and now + timedelta(hours=runtime) <= moment


def max_runtime(job: Job | RunningJob, team_limits: dict[str, float]) -> float | None:
    """A job's limit: its own `max_runtime_h`, else its team's."""
    if job.max_runtime_h is not None:
        return job.max_runtime_h
    return team_limits.get(job.team) if job.team is not None else None


@dataclass(frozen=True)
class Late:
    """A running job past its max runtime."""

    job: str
    started_at: datetime
    running_h: float
    max_runtime_h: float


def overdue(request: PlacementRequest) -> list[Late]:
    """Running jobs that have run longer than their max runtime at the planning time, most overdue first."""
    now = request.planning_time()
    limits = {t.name: t.max_runtime_h for t in request.teams if t.max_runtime_h is not None}
    out = []
    for run in request.cluster.running:
        limit = max_runtime(run, limits)
        if limit is None or run.started_at is None:
            continue
        ran = hours(now - run.started_at)
        if ran > limit:
            out.append(Late(run.job, run.started_at, round(ran, 4), limit))
    return sorted(out, key=lambda late: (late.max_runtime_h - late.running_h, late.job))


def reservation_key(job: Job) -> tuple:
    """The order in which starved jobs get reservations, first first: highest priority class, then the
    earliest submission, then the name (an exact arrival order: no rounding, no ties).

    Arrival order, as EASY's queue. Tried on ITP traces and left: holding first for the most GPU-hours
    waited, or early for gangs over one node only, lets the big gangs (there, most of the GPU-hours)
    overtake everything and triples the wait of single-node jobs."""
    submitted = job.submitted_at.timestamp() if job.submitted_at is not None else float("inf")
    return (-job.priority, submitted, job.name)


def starved(request: PlacementRequest, jobs: tuple[Job, ...]) -> list[int]:
    """Indices of `jobs` that waited at least `policy.max_wait_h` or `policy.reserve_after_h` (whichever is
    less), in reservation order (`reservation_key`)."""
    limits = [h for h in (request.policy.max_wait_h, request.policy.reserve_after_h) if h is not None]
    if not limits:
        return []
    now = request.planning_time()
    late = [j for j, job in enumerate(jobs) if job.submitted_at is not None and waited_h(job, now) >= min(limits)]
    return sorted(late, key=lambda j: reservation_key(jobs[j]))


def must_start(request: PlacementRequest, job: Job) -> bool:
    """Does `job` start as soon as it fits? When it has waited `policy.max_wait_h`, or held a reservation in
    the previous plan (`policy.previous_plan`): a reservation is kept by starting on it, not by giving the
    room it waited for to work that came later."""
    return job.name in starting(request, (job,))


def starting(request: PlacementRequest, jobs: tuple[Job, ...]) -> frozenset[str]:
    """The names of `jobs` that start as soon as they fit (`must_start`), found in one pass."""
    limit = request.policy.max_wait_h
    previous = request.policy.previous_plan
    reserved = {r.job for r in previous.reservations} if previous is not None else set()
    now = request.planning_time()
    return frozenset(job.name for job in jobs
                     if job.name in reserved or (limit is not None and waited_h(job, now) >= limit))


@dataclass(frozen=True)
class Hold:
    """Capacity held for the starved job named `job` from `start` (None: when its nodes have drained).

    `gpus[n]`: GPUs the job takes on node n at `start`. `long_room[n]`: GPUs that work still running at
    `start` may take on node n now — what is free now, plus what running jobs release there by `start`,
    minus `gpus[n]`. Work expected to end by `start` is not limited (EASY backfill's rule)."""

    job: str
    start: datetime | None
    gpus: dict[int, int] = field(default_factory=dict)
    long_room: dict[int, int] = field(default_factory=dict)
    #: the held job's priority: jobs of a higher class are never bound (a hold serves the highest class waiting)
    priority: int = 0
    #: jobs that start as soon as they fit (`starting`): starved past `max_wait_h` or reserved before, they
    #: come first and are never bound
    exempt: frozenset[str] = frozenset()
    #: enforced team max runtimes (`enforced`): a job that will be evicted by the start does not outlast it
    limits: Enforced = None

    def binds(self, job: Job, now: datetime) -> bool:
        """Must `job` keep off the held GPUs? When it would run past the hold's start — whether it was
        submitted before the held job or after: a hold is a promise of a start, and an older job that fits
        now was not blocked, so it may start now, but elsewhere or on what the hold leaves free (Slurm's
        backfill: nothing delays the reserved job). Never the held job, a job of a higher class, or one
        that must start as soon as it fits."""
        if job.name == self.job or job.priority > self.priority or job.name in self.exempt:
            return False
        return not ends_by(job, now, self.start, self.limits)


@dataclass(frozen=True)
class Schedule:
    """What time asks of one plan, by job name: starved jobs that must start now (they fit), and holds for
    those that do not; `unheld` are starved jobs that could not get a hold, with the reason (no running
    job is known to end where they would fit)."""

    must_start: tuple[str, ...] = ()
    holds: tuple[Hold, ...] = ()
    unheld: dict[str, str] = field(default_factory=dict)

    def held(self, name: str) -> Hold | None:
        return next((h for h in self.holds if h.job == name), None)

    def limits(self, job: Job, now: datetime) -> list[Hold]:
        """The holds that limit where `job` may go (`Hold.binds`)."""
        return [h for h in self.holds if h.binds(job, now)]


def without_overdue(request: PlacementRequest) -> tuple[PlacementRequest, list[Late]]:
    """With `policy.overdue: evict`, the request as the plan sees it — the overdue running jobs gone, their GPUs
    free — and those jobs; otherwise the request unchanged and no job."""
    if request.policy.overdue != "evict":
        return request, []
    late = overdue(request)
    if not late:
        return request, []
    gone = {x.job for x in late}
    cluster = request.cluster.model_copy(update={"running": [r for r in request.cluster.running if r.job not in gone]})
    return request.model_copy(update={"cluster": cluster}), late
