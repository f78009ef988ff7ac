"""How to plan: solver limits, objective weights, the previous plan, and what the plan may change.

Everything here tunes the solve; none of it describes the cluster or the work.
"""

from __future__ import annotations

from datetime import datetime

from placement_models.base import Strict, as_utc
from placement_models.cluster import GpuSharing
from pydantic import BaseModel, ConfigDict, Field, field_validator


class Weights(Strict):
    """Objective weights, in GPU-equivalents: 1.0 = the value of placing one lowest-priority GPU."""

    priority: float = Field(1.0, ge=0)
    fragmentation: float = Field(0.1, ge=0)
    #: GPU-equivalents per currency unit of expected cost: 0.01 = $100 weighs as much as placing
    #: one lowest-priority GPU (compile/cost.py explains the conversion; on existing nodes only the
    #: premium over a task's cheapest node counts, so cost steers where work runs, not whether)
    cost: float = Field(0.01, ge=0)
    #: per GPU a team holds below its fair entitlement, most for its first quarter (compile/fairness.py)
    fairness: float = Field(1.0, ge=0)
    #: per GPU of a placed job, per day it has waited since `submitted_at` (capped at 30 days)
    aging: float = Field(0.1, ge=0)
    #: per GPU-hour of work a preemption loses since the victim's last checkpoint (compile/preemption.py)
    preemption: float = Field(0.1, ge=0)
    #: scales the topology terms (compile/topology.py): per extra domain of a `preferred` level, per
    #: empty multi-node domain broken into, and the in-node bandwidth shortfall of each pod
    topology: float = Field(0.5, ge=0)
    #: per GPU whose MIG layout the plan changes (compile/mig.py): creating and destroying instances
    mig_reconfigure: float = Field(0.1, ge=0)
    #: per idle whole GPU the plan turns into a shared GPU (compile/sharing.py): below what the smallest
    #: share pod earns (openb's 0.05 of a GPU at the lowest priority), so converting a GPU to place pods
    #: pays, while a pod on an already shared GPU costs nothing and is preferred
    sharing_change: float = Field(0.01, ge=0)
    #: per GPU of a placed pod whose declared gpu_memory_gib goes unused (observed_gpu_memory_gib),
    #: times the unused fraction: declared 32 GiB, used 8 -> 0.75 of this (compile/usage.py)
    over_declared: float = Field(0.5, ge=0)
    #: per GPU a right-sized pod saves by taking a MIG instance instead of a whole GPU (0.25: a 1g pod
    #: saving 7/8 of a GPU outweighs one MIG re-layout at the default mig_reconfigure)
    right_size: float = Field(0.25, ge=0)
    #: per GPU of a pending pod that stays on the node the previous plan gave it (compile/stability.py)
    stability: float = Field(0.2, ge=0)


class PreviousAssignment(BaseModel):
    """One assignment of the previous cycle's plan; the rest of that plan's fields are not read."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    job: str
    task: str
    node: str


class PreviousPlan(BaseModel):
    """The plan this caller received last cycle, passed back as it came (extra fields ignored on
    purpose: a scheduler should not have to edit it). Jobs that have since started or vanished
    are simply not pending any more, so their entries have nothing to keep."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    assignments: list[PreviousAssignment] = Field(default_factory=list)


class Policy(Strict):
    time_limit_s: float = Field(10.0, gt=0, le=3600)
    workers: int = Field(2, ge=1, le=64)
    seed: int = Field(0, ge=0, le=2**31 - 1)
    deterministic: bool = False
    relative_gap_limit: float = Field(0.0, ge=0, le=1)
    weights: Weights = Field(default_factory=Weights)
    #: last cycle's plan: pending pods that keep their node earn weights.stability, so plans do not
    #: flip-flop between cycles while a job waits for its bind
    previous_plan: PreviousPlan | None = None
    #: this cycle is in peak hours: `reserve` is held back and deferrable jobs may wait
    peak: bool = False
    #: pool -> GPUs of its nodes left free during peak (e.g. for inference); released off-peak
    reserve: dict[str, int] = Field(default_factory=dict)
    #: the time of this plan (ages, minimum runtimes, usage decay); unset: the latest time the request
    #: mentions, so the same request always gives the same plan (PlacementRequest.planning_time)
    now: datetime | None = None
    #: a running job is never preempted before it has run this long (Slurm's PreemptExemptTime)
    min_runtime_s: float = Field(0.0, ge=0)
    #: may the plan preempt running jobs marked `preemptible`? Off by default, like Kueue's `Never`
    preemption: bool = False
    #: may the plan change MIG layouts? Free instances may be destroyed and new ones created; instances
    #: running pods hold never move; an idle GPU may be partitioned, an idle partitioned GPU made whole
    allow_mig_changes: bool = False
    #: at most this many GPUs change MIG layout in one plan (unset: no cap)
    max_mig_changes: int | None = Field(None, ge=0)
    #: may the plan turn idle whole GPUs into shared GPUs for gpu_share pods, as HAMi, KAI and the openb
    #: cluster share any GPU on demand? Off: share pods go only onto GPUs listed in a node's `sharing`
    allow_sharing_changes: bool = False
    #: the time-slicing/MPS setting a converted GPU gets (its shares and GPU memory are capped as on any
    #: shared GPU; replicas caps its pods)
    sharing_default: GpuSharing = Field(default_factory=lambda: GpuSharing(mode="time-slicing", replicas=8))
    #: at most this many GPUs turned into shared GPUs in one plan (unset: no cap)
    max_sharing_changes: int | None = Field(None, ge=0)
    #: a right-sized pod's MIG instance holds at least observed_gpu_memory_gib × this
    right_size_headroom: float = Field(1.25, ge=1, le=4)

    _tz = field_validator("now")(as_utc)
