"""How to plan: solver limits, objective weights, the previous plan, and what the plan may change.

Everything here tunes the solve; none of it describes the cluster or the work.
"""

from __future__ import annotations

import re
from datetime import datetime, time
from functools import cache
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, available_timezones

from placement_models.base import (
    JSON_INT,
    MAX_COUNT,
    MAX_HOURS,
    MAX_NAME,
    MAX_POOLS,
    MAX_PREVIOUS_ASSIGNMENTS,
    MAX_SECONDS,
    MAX_WEIGHT,
    MAX_WORD,
    Priority,
    Strict,
    as_utc,
    bounded_dict,
    cross_field,
    either,
    holds,
    unset,
)
from placement_models.cluster import GpuSharing
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError


class Weights(Strict):
    """Objective weights, in GPU-equivalents: 1.0 = the value of placing one lowest-priority GPU."""

    priority: float = Field(1.0, ge=0, le=MAX_WEIGHT)
    fragmentation: float = Field(0.1, ge=0, le=MAX_WEIGHT)
    #: GPU-equivalents per currency unit of expected cost: 0.01 = $100 weighs as much as placing
    #: one lowest-priority GPU (compile/cost.py explains the conversion; on existing nodes only the
    #: premium over a task's cheapest node counts, so cost steers where work runs, not whether)
    cost: float = Field(0.01, ge=0, le=MAX_WEIGHT)
    #: per GPU a team holds below its fair entitlement, most for its first quarter (compile/fairness.py)
    fairness: float = Field(1.0, ge=0, le=MAX_WEIGHT)
    #: per GPU of a placed job, per day it has waited since `submitted_at` (capped at 30 days)
    aging: float = Field(0.1, ge=0, le=MAX_WEIGHT)
    #: the most the victims on one node may cost together, in GPUs of the cheapest priority class that may
    #: preempt them; below 1 a job that fits by evicting allowed victims always beats keeping them. Within it,
    #: victims are chosen lowest priority first, then fewest, least work lost, newest (compile/preemption.py)
    preemption: float = Field(0.5, ge=0, le=MAX_WEIGHT)
    #: how much each whole GPU of a victim (its gang's, on every node) adds to its cost, in victims: 0 = the
    #: fewest victims, as kube-scheduler; 0.5 = one 8-GPU victim weighs as five 1-GPU ones (compile/preemption.py)
    victim_gpus: float = Field(0.0, ge=0, le=MAX_WEIGHT)
    #: scales the topology terms (compile/topology.py): per extra domain of a `preferred` level, per
    #: empty multi-node domain broken into, and the in-node bandwidth shortfall of each pod
    topology: float = Field(0.5, ge=0, le=MAX_WEIGHT)
    #: per GPU whose MIG layout the plan changes (compile/mig.py): creating and destroying instances
    mig_reconfigure: float = Field(0.1, ge=0, le=MAX_WEIGHT)
    #: per idle whole GPU the plan turns into a shared GPU (compile/sharing.py): below what the smallest
    #: share pod earns (openb's 0.05 of a GPU at the lowest priority), so converting a GPU to place pods
    #: pays, while a pod on an already shared GPU costs nothing and is preferred
    sharing_change: float = Field(0.01, ge=0, le=MAX_WEIGHT)
    #: per GPU of a placed pod whose declared gpu_memory_gib goes unused (observed_gpu_memory_gib),
    #: times the unused fraction: declared 32 GiB, used 8 -> 0.75 of this (compile/usage.py)
    over_declared: float = Field(0.5, ge=0, le=MAX_WEIGHT)
    #: per GPU a right-sized pod saves by taking a MIG instance instead of a whole GPU (0.25: a 1g pod
    #: saving 7/8 of a GPU outweighs one MIG re-layout at the default mig_reconfigure)
    right_size: float = Field(0.25, ge=0, le=MAX_WEIGHT)
    #: per GPU of a pending pod that stays on the node the previous plan gave it (compile/stability.py)
    stability: float = Field(0.2, ge=0, le=MAX_WEIGHT)
    #: per placed job × 1 / (1 + expected_runtime_h): at equal GPUs, more and shorter jobs start, so the mean
    #: wait over many cycles falls; a plan may leave fewer GPUs idle than this × the jobs it places (compile/waiting.py)
    turnaround: float = Field(0.0, ge=0, le=1000)
    #: per whole GPU of a pod expected to run past the work already on its node, per day of the difference
    #: (at most one day): short work fills holes beside long work, so nodes free whole (compile/alignment.py)
    alignment: float = Field(0.0, ge=0, le=MAX_WEIGHT)
    #: per GPU-equivalent of a job with a speed table (`speeds`, `workload`), times the share of its best speed
    #: in the cluster its slowest GPU loses: a placement is worth the work it does (compile/throughput.py)
    throughput: float = Field(1.0, ge=0, le=MAX_WEIGHT)
    #: per move under policy.migration, times the job's GPU-equivalents plus the GPU-hours it loses since its last
    #: checkpoint (else its start): a job moves only when the throughput it gains is worth more (compile/migration.py)
    migration: float = Field(0.1, ge=0, le=MAX_WEIGHT)


#: a name in a previous plan (added nodes are named `pool/new-k`, a little longer than a name)
_Ref = Annotated[str, Field(max_length=MAX_WORD)]


class PreviousAssignment(BaseModel):
    """One assignment of the previous cycle's plan; the rest of that plan's fields are not read."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    job: _Ref
    task: _Ref
    node: _Ref


class PreviousReservation(BaseModel):
    """One reservation of the previous cycle's plan; only the job is read."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    job: _Ref


class PreviousPlan(BaseModel):
    """The plan this caller received last cycle, passed back as it came (extra fields ignored on
    purpose: a scheduler should not have to edit it). Jobs that have since started or vanished
    are simply not pending any more, so their entries have nothing to keep."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    assignments: list[PreviousAssignment] = Field(default_factory=list, max_length=MAX_PREVIOUS_ASSIGNMENTS)
    #: the reservations it held: a job reserved last cycle that fits now starts now (its reservation is kept)
    reservations: list[PreviousReservation] = Field(default_factory=list, max_length=10_000)


_BOOL = TypeAdapter(bool, config=ConfigDict(strict=True))

Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
_WEEKDAYS: tuple[Weekday, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


#: A wall-clock time of day, "HH:MM", "HH:MM:SS" or with fractions of a second: no UTC offset, as the window's
#: zone is `OffPeak.timezone` (an offset would compare an aware time with the zone's naive wall clock).
CLOCK_PATTERN = r"^([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?$"
_CLOCK = re.compile(CLOCK_PATTERN)


def _wall_clock(value: Any) -> Any:
    if isinstance(value, str) and _CLOCK.search(value) is None:
        raise PydanticCustomError("time_parsing", "a wall-clock time such as \"22:00\" or \"06:30:00\", without a UTC "
                                  "offset (the window's zone is off_peak.timezone)")
    if isinstance(value, str) and value.endswith("\n"):  # `$` allows one before the end, as in every Python reader
        return value[:-1]
    if isinstance(value, time) and value.tzinfo is not None:
        raise PydanticCustomError("time_parsing", "a wall-clock time without a UTC offset (the window's zone is "
                                  "off_peak.timezone)")
    return value


#: the schema's pattern in place of `format: time`, RFC 3339's full-time, which requires the offset refused here
ClockTime = Annotated[time, BeforeValidator(_wall_clock), WithJsonSchema({"type": "string", "pattern": CLOCK_PATTERN})]


class OffPeakWindow(Strict):
    """Off-peak hours that begin on the listed days at `start` and last until `end` (past midnight when `end`
    is not after `start`: 22:00-06:00 is a night; equal times are a whole day)."""

    start: ClockTime
    end: ClockTime
    days: list[Weekday] = Field(default_factory=lambda: list(_WEEKDAYS), min_length=1, max_length=7)

    def contains(self, local: datetime) -> bool:
        """Is this local (naive, wall-clock) moment inside the window?"""
        moment = local.time()
        today = _WEEKDAYS[local.weekday()]
        yesterday = _WEEKDAYS[(local.weekday() - 1) % 7]
        if self.start < self.end:
            return today in self.days and self.start <= moment < self.end
        # wraps past midnight (or a whole day): the part after start belongs to today's window, the part
        # before end to yesterday's
        return (today in self.days and moment >= self.start) or (yesterday in self.days and moment < self.end)


@cache
def time_zones() -> frozenset[str]:
    """The zone names a request may give: a set, not whatever ZoneInfo happens to open, so the schema can
    list them (ZoneInfo also opens names no listing shows, such as 'posixrules'). Read once: ~30 ms."""
    return frozenset(available_timezones())


class OffPeak(Strict):
    """When electricity, spot capacity and interactive demand make batch work cheap: time-of-day windows in one
    time zone. With it, a plan is in peak hours exactly when `policy.now` (the planning time) is in no window."""

    #: one of the IANA names this server's time zone database lists (the schema's enum: the same list)
    timezone: str = Field("UTC", min_length=1, max_length=64,
                          json_schema_extra=lambda schema: schema.update(enum=sorted(time_zones())))
    windows: list[OffPeakWindow] = Field(min_length=1, max_length=64)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, name: str) -> str:
        if name not in time_zones():
            raise ValueError(f"unknown time zone '{name}' (an IANA name such as 'Europe/Berlin' or 'UTC')")
        return name

    def contains(self, moment: datetime) -> bool:
        local = moment.astimezone(ZoneInfo(self.timezone)).replace(tzinfo=None)
        return any(w.contains(local) for w in self.windows)


class BorrowWithinCohort(Strict):
    """Kueue's `borrowWithinCohort`: may a job that ends above its team's nominal (it borrows) preempt jobs of
    other teams that borrow too? Only jobs of lower priority, and at most `max_priority_threshold` when set."""

    policy: Literal["never", "lower_priority"] = "never"
    max_priority_threshold: Priority | None = None


class PreemptionRules(Strict):
    """Which running jobs a pending job may preempt: one rule per relation between the two jobs' teams.

    A victim is always `preemptible` and has run `policy.min_runtime_s`, and the job it makes room for is placed
    with a pod on one of its nodes. Without teams every job is in one team, so `within_team` is cluster-wide.

    * `within_team` (Kueue `withinClusterQueue`, Volcano `preempt`): a job of the same team, of lower priority;
      `lower_or_newer_equal_priority` also one of equal priority that started after the job was submitted.
    * `reclaim_within_cohort` (Kueue `reclaimWithinCohort`, Volcano `reclaim`): a job of another team that holds
      more than its nominal quota where the victim runs, when the job's own team ends the plan within its
      nominal there; `lower_priority` only victims of lower priority, `any` any priority.
    * `borrow_within_cohort` (Kueue `borrowWithinCohort`): as reclaim, but the job's team may end above its
      nominal (it borrows), and only victims of lower priority (at most `max_priority_threshold`).
    """

    model_config = cross_field(either(holds("reclaim_within_cohort", {"enum": ["lower_priority", "any"]}),
                                      holds("borrow_within_cohort", holds("policy", {"const": "never"}))))

    within_team: Literal["never", "lower_priority", "lower_or_newer_equal_priority"] = "lower_priority"
    reclaim_within_cohort: Literal["never", "lower_priority", "any"] = "any"
    borrow_within_cohort: BorrowWithinCohort = Field(default_factory=BorrowWithinCohort)

    @model_validator(mode="after")
    def _check(self) -> PreemptionRules:
        if self.reclaim_within_cohort == "never" and self.borrow_within_cohort.policy != "never":
            raise ValueError("borrow_within_cohort needs reclaim_within_cohort other than 'never' (as Kueue "
                             "rejects reclaimWithinCohort=Never with borrowWithinCohort.policy!=Never)")
        return self


#: what `preemption: true` stands for (frozen, so one instance serves every request)
_DEFAULT_RULES = PreemptionRules()


#: a preset's name (placement_models.presets): what the plan is for, in one word
Preset = Literal["auto", "one-shot", "completion", "las", "bounded-wait"]


class Las(Strict):
    """Least attained service (Tiresias's discretised LAS), for `preset: las`: a job's class is its priority,
    then how little it has run: below the first threshold it ranks above every job of its priority that has
    run more, and so on. Fresh work starts at once by preempting work that has run long."""

    #: GPU-hours of attained service (`attained_gpu_h`) that end each queue, ascending: [1] is two queues
    thresholds_gpu_h: list[Annotated[float, Field(gt=0, le=MAX_HOURS)]] = Field(
        default_factory=lambda: [1.0], min_length=1, max_length=8)
    #: a running job is not preempted in its first this many seconds (`min_runtime_s` where unset)
    lease_s: float = Field(600.0, ge=0, le=MAX_SECONDS)

    @field_validator("thresholds_gpu_h")
    @classmethod
    def _ascending(cls, value: list[float]) -> list[float]:
        if any(b <= a for a, b in zip(value, value[1:], strict=False)):
            raise ValueError("thresholds must ascend strictly, as [1, 10]")
        return value


class Policy(Strict):
    """How to plan: the solver's limits, the objective, what the plan may change, and the planning time."""

    # peak or off_peak, not both: checked with the request, stated in the policy's schema
    model_config = cross_field(either(holds("peak", {"const": False}), unset("off_peak")))

    #: what the plan is for (placement_models.presets): `one-shot` (the weights as given, today's meaning for a
    #: one-off or what-if plan); `completion` (a scheduler loop: shorter and more jobs first, ends aligned per
    #: node); `las` (completion, plus Tiresias's least-attained-service queues from `attained_gpu_h`, preemption
    #: of running work with a lease); `bounded-wait` (completion, plus a reservation for a job blocked
    #: `reserve_after_h`, 6 h unless set). `auto` (default): `completion` when the call carries time (`now` and
    #: a pending job's `submitted_at`), else `one-shot`. Fields set in the request always win over a preset
    preset: Preset = "auto"
    #: the queues of `preset: las`
    las: Las = Field(default_factory=Las)
    time_limit_s: float = Field(10.0, gt=0, le=3600)
    workers: int = Field(2, ge=1, le=64)
    seed: int = Field(0, ge=0, le=2**31 - 1)
    deterministic: bool = False
    #: `strict` (default): priority classes as Kubernetes PriorityClasses — no pending job could run on
    #: what a lower class's newly placed jobs hold; within a class the joint objective decides.
    #: `weighted`: each priority level weighs 1 to 10 per GPU, so a big low gang may outweigh a small high job
    priority_mode: Literal["strict", "weighted"] = "strict"
    #: what the fairness term counts a team holding: `gpus` (default: GPU-equivalents) or `work`: each GPU times
    #: its job's speed there over the job's best in the cluster (jobs' `speeds`), Gavel's max-min fairness over
    #: normalised throughput: a team whose work runs on slow GPUs holds less and is served first
    fair_share: Literal["gpus", "work"] = "gpus"
    #: move preemptible running jobs with a speed table (`speeds`, `workload`) to other GPUs, evicted and placed
    #: again in one plan (rule `migrate`): to faster ones when weights.throughput × the speed they gain outweighs
    #: weights.migration, or to ones that keep 3/4 of their speed when that frees faster GPUs for a job that gains
    #: more (Gavel's migrations between GPU types). The `las` preset turns it on; `completion` does not

    migration: bool = False
    relative_gap_limit: float = Field(0.0, ge=0, le=1)
    weights: Weights = Field(default_factory=Weights)
    #: last cycle's plan: pending pods that keep their node earn weights.stability, so plans do not
    #: flip-flop between cycles while a job waits for its bind
    previous_plan: PreviousPlan | None = None
    #: this cycle is in peak hours: `reserve` is held back and deferrable jobs may wait
    peak: bool = False
    #: off-peak windows: when set, `peak` is derived from them at the planning time (set one or the other)
    off_peak: OffPeak | None = None
    #: pool -> GPUs of its nodes left free during peak (e.g. for inference); released off-peak
    reserve: bounded_dict(Annotated[str, Field(max_length=MAX_NAME)],
                          Annotated[int, Field(ge=0, le=MAX_COUNT), JSON_INT], MAX_POOLS) = Field(default_factory=dict)
    #: the time of this plan (ages, minimum runtimes, usage decay); unset: the latest time the request
    #: mentions, so the same request always gives the same plan (PlacementRequest.planning_time)
    now: datetime | None = None
    #: a running job is never preempted before it has run this long (Slurm's PreemptExemptTime)
    min_runtime_s: float = Field(0.0, ge=0, le=MAX_SECONDS)
    #: a pending job that has waited this long (since `submitted_at`) is starved: the first such jobs in
    #: reservation order (highest class, then submission), up to `max_reservations`, start now when they fit,
    #: else hold a reservation — the nodes where they fit first as running jobs end (`expected_runtime_h`) —
    #: that this plan backfills only with work ending before it (EASY backfill). Unset: no reservations
    max_wait_h: float | None = Field(None, ge=0, le=1_000_000)
    #: a pending job that cannot fit now and has waited this long holds a reservation as a starved job does, so
    #: that gangs blocked by a stream of smaller work get nodes before `max_wait_h` (unset: max_wait_h)
    reserve_after_h: float | None = Field(None, ge=0, le=1_000_000)
    #: running jobs past their max_runtime_h (their own, else their team's): `report` lists them in `Plan.overdue`;
    #: `evict` also stops them, so their GPUs count as free for this plan (`Plan.preemptions`, rule max_runtime),
    #: and, since no job then runs past its limit, reservations and start estimates count on the limit as a
    #: job's longest runtime (as Slurm's backfill plans with time limits) where it gives no shorter estimate
    overdue: Literal["report", "evict"] = "report"
    #: how many blocked jobs hold a reservation at once (in reservation order: class, then submission)
    max_reservations: int = Field(1, ge=0, le=64)
    #: pending jobs (highest class, then oldest first) whose `estimated_start` the plan computes from the running
    #: and newly placed jobs' expected ends (a few milliseconds each; reserved jobs always have theirs)
    estimate_starts: int = Field(16, ge=0, le=10_000)
    #: pending jobs (highest class, then oldest first) whose reason names who holds the room they need (the
    #: jobs of this plan, running work a rule would let go); the others get the cheap reason only, so that
    #: explaining thousands of pending jobs never eats the call (about 3 ms each at 12,500 nodes)
    explain_top: int = Field(100, ge=0, le=100_000)
    #: may the plan preempt running jobs marked `preemptible`, and by which rules (Kueue's ClusterQueue
    #: `preemption`, Volcano's preempt and reclaim actions): `false` (default, like Kueue's `Never`), `true`
    #: (PreemptionRules' defaults: within_team lower_priority, reclaim_within_cohort any,
    #: borrow_within_cohort never), or a PreemptionRules object; `policy.preemption_rules` resolves it
    preemption: bool | PreemptionRules = False
    #: may the plan change MIG layouts? Free instances may be destroyed and new ones created; instances
    #: running pods hold, and shared ones, never move; an idle GPU may be partitioned, an idle partitioned GPU
    #: made whole; for pods asking a share of a MIG instance, free or new instances may become shared
    #: (sharing_default), each GPU so changed a MIG change
    allow_mig_changes: bool = False
    #: at most this many GPUs change MIG layout in one plan (unset: no cap)
    max_mig_changes: int | None = Field(None, ge=0, le=MAX_COUNT)
    #: may the plan turn idle whole GPUs into shared GPUs for gpu_share pods, as HAMi, KAI and the openb
    #: cluster share any GPU on demand? Off: share pods go only onto GPUs listed in a node's `sharing`
    allow_sharing_changes: bool = False
    #: the time-slicing/MPS setting a converted GPU gets, or a MIG instance the plan shares (its shares and GPU
    #: memory are capped as on any shared GPU or instance; replicas caps its pods)
    sharing_default: GpuSharing = Field(default_factory=lambda: GpuSharing(mode="time-slicing", replicas=8))
    #: at most this many GPUs turned into shared GPUs in one plan (unset: no cap)
    max_sharing_changes: int | None = Field(None, ge=0, le=MAX_COUNT)
    #: a right-sized pod's MIG instance holds at least observed_gpu_memory_gib × this
    right_size_headroom: float = Field(1.25, ge=1, le=4)

    _tz = field_validator("now")(as_utc)

    @field_validator("preemption", mode="wrap")
    @classmethod
    def _rules_or_bool(cls, value: object, handler: ValidatorFunctionWrapHandler) -> bool | PreemptionRules:
        return rules_or_bool(value)

    @property
    def preemption_rules(self) -> PreemptionRules | None:
        """The rules `preemption` stands for: None when off, the defaults for `true`."""
        return resolve_rules(self.preemption)


def rules_or_bool(value: object) -> bool | PreemptionRules:
    """A `preemption` value: an object is PreemptionRules, anything else a bool (errors name the rule's own
    path, not the union's)."""
    if isinstance(value, dict | PreemptionRules):
        return PreemptionRules.model_validate(value)
    return _BOOL.validate_python(value)


def resolve_rules(value: bool | PreemptionRules) -> PreemptionRules | None:
    """The rules a `preemption` value stands for: None when off, the defaults for `true`."""
    if value is True:
        return _DEFAULT_RULES
    return value or None
