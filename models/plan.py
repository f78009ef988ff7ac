"""The v1 plan: what to bind where, what waits and why, and how good the plan is."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from placement_models.base import JSON_INT, JSON_NUMBER, json_types
from placement_models.request import MigInstance, MigSlot
from pydantic import BaseModel, ConfigDict, Field, model_validator

PlanStatus = Literal["optimal", "feasible", "infeasible", "no_solution_in_time", "invalid"]


class PlanModel(BaseModel):
    """A plan is read back too (`/v1/verify`, `placement verify`): as strict about JSON types as a request."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _json_types(cls, data: Any) -> Any:
        return json_types(cls, data)


class Assignment(PlanModel):
    job: str
    task: str
    pod: int = Field(ge=0)
    node: str
    gpus: list[Annotated[int, JSON_INT]] = Field(default_factory=list)
    #: the MIG instance the pod takes (MIG tasks)
    mig: MigSlot | None = None
    #: the fraction of the one GPU in `gpus` the pod takes (gpu_share tasks; the GPU is shared), or with `mig`
    #: of that shared MIG instance
    gpu_share: float | None = None


#: the rule of policy.preemption that allows a preemption, or `max_runtime`: the job ran past its max_runtime_h and
#: policy.overdue is `evict` (then `for_job` is empty), or `migrate`: policy.migration moves the job to other GPUs
#: (`for_job` is the job itself, whose new pods are among the plan's assignments)
PreemptionRule = Literal["within_team", "reclaim_within_cohort", "borrow_within_cohort", "max_runtime", "migrate"]


class Preemption(PlanModel):
    """A running job the plan evicts, whole, the placed job it makes room for and the rule of
    `policy.preemption` that allows it (placement always sets both; verify rejects an entry without them)."""

    job: str
    reason: str
    #: the placed job with a pod on one of the victim's nodes that the eviction makes room for
    for_job: str = ""
    rule: PreemptionRule | None = None


class MigChange(PlanModel):
    """A GPU whose MIG layout the plan changes: its full new layout (instances of running pods included).

    `mig_enabled: false` makes the GPU whole again (MIG mode off); an enabled GPU lists every instance.
    """

    node: str
    gpu: int
    mig_enabled: bool = True
    layout: list[MigInstance] = Field(default_factory=list)


class SharingChange(PlanModel):
    """An idle whole GPU the plan turns into a shared GPU (policy.allow_sharing_changes), with the
    time-slicing/MPS setting to give it before binding (policy.sharing_default); gpu_share pods name it."""

    node: str
    gpu: int
    mode: Literal["time-slicing", "mps"]
    replicas: int = Field(ge=1, le=128)


#: The constraint that keeps a pending job waiting (`Pending.constraint`), one name per kind of cause:
#:
#: * `filter` — no node passes a task's node_selector, tolerations, GPU model or memory, or spot rule;
#: * `mig` — no node offers its MIG profile, or re-partitioning that would is off or capped;
#: * `sharing` — no shared GPU has room for its share, and sharing idle GPUs that would is off or capped;
#: * `topology` — the gang fits without its required topology level or slices, not with them;
#: * `gang_size` — the gang cannot fit even if no other pending job were placed (beside running work);
#: * `quota` — its team's quota: nominal, borrowing and lending limits, or GPUs within a team's nominal,
#:   which rank above every priority class;
#: * `priority` — a higher priority class took the room it needs;
#: * `capacity` — jobs the objective preferred on value took the room (its own class; weighted levels);
#: * `fairness` — the room went to teams further below their fair share;
#: * `cost` — the peak reserve, its price, or deferral to off-peak kept it out;
#: * `preemption` — it would fit if running work were preempted, but preemption is off;
#: * `reservation` — it would run past a starved job's reservation (`Plan.reservations`), whose GPUs only work
#:   ending before it may use;
#: * `time_limit` — it fits in what the plan leaves, but the solver found no plan placing it in time;
#: * `objective` — it fits in what the plan leaves, and the plan is proved better without it.
PendingConstraint = Literal["filter", "mig", "sharing", "topology", "gang_size", "quota", "priority", "capacity",
                            "fairness", "cost", "preemption", "reservation", "time_limit", "objective"]


class Pending(PlanModel):
    """A job the plan leaves waiting: why, for people (`reason`, with numbers), and the name of the binding
    constraint, for programs (`constraint`; None only in plans written before it existed)."""

    job: str
    reason: str
    constraint: PendingConstraint | None = None
    #: the earliest time it could start from the running jobs' expected ends (a reservation's start, or where
    #: the GPUs it needs free up on nodes it may use, ignoring other pending work); None when unknown
    estimated_start: datetime | None = None


class ReservedNode(PlanModel):
    node: str
    gpus: int = Field(ge=0, description="GPUs the reserved job takes on this node at the reservation's start")


class Reservation(PlanModel):
    """Nodes held for a starved job (`policy.max_wait_h`) that cannot start now: it starts there at
    `earliest_start`, when running jobs are expected to end, and this plan places on those nodes only work
    expected to end by then, or that leaves the reserved GPUs free (EASY backfill)."""

    job: str
    #: None: no running job on its nodes has a known end; the nodes drain (nothing new may take its GPUs there)
    earliest_start: datetime | None
    nodes: list[ReservedNode] = Field(default_factory=list)
    reason: str = ""


class Overdue(PlanModel):
    """A running job past its max_runtime_h (its own, else its team's)."""

    job: str
    started_at: datetime
    running_h: float
    max_runtime_h: float


class Objective(PlanModel):
    """Recomputed from the placement, term by term, so the plan explains its own score."""

    total: float
    terms: dict[str, Annotated[float, JSON_NUMBER]] = Field(default_factory=dict)


Phase = Literal["problem", "greedy", "compile", "bound", "search", "decode", "verify"]


class SolverStats(PlanModel):
    status: str = Field(description="CP-SAT status, or SKIPPED when the model was not solved")
    objective: float | None = None
    bound: float | None = Field(None, description="an upper bound on the objective of every valid plan for the "
                                "whole request (bound_kind says which); None when none was computed")
    bound_kind: Literal["model", "relaxation", "none"] = Field(
        "none", description="model: CP-SAT's bound on the whole model (every task saw every node); relaxation: "
                            "the model relaxed over classes of nodes (placement.search.bound), for restricted "
                            "models and window searches")
    gap: float | None = Field(None, description="relative gap of the returned plan to the bound")
    wall_s: float = 0.0
    build_s: float = 0.0
    first_plan_s: float | None = Field(None, description="seconds until the first plan (the greedy one)")
    variables: int = 0
    constraints: int = 0
    workers: int = 1
    seed: int = 0
    mode: Literal["deterministic", "wall-clock"] = "wall-clock"
    winner: Literal["solver", "baseline"] = "baseline"
    baseline_objective: float | None = None
    search: Literal["model", "windows", "model+windows", "none"] = Field(
        "model", description="one whole CP-SAT model, LNS windows over it, windows after the model found nothing, "
                             "or none: the bound proved the greedy plan good enough, or no time was left")
    note: str | None = Field(None, max_length=300, description="why the search was skipped, said plainly")
    ended: Literal["optimal", "gap_limit", "trimmed_optimal", "time_limit", "stopped"] | None = Field(
        None, description="why the search took the time it took: optimal (the plan is proven optimal against the "
                          "bound), gap_limit (proven within policy.relative_gap_limit of the bound, so it ended "
                          "early, or the greedy plan already was and no search ran), trimmed_optimal (the model "
                          "was solved to optimality, but it was trimmed or the plan's reported terms score less "
                          "than its optimum; the gap to the bound remains), "
                          "time_limit (the search used the time it had, or none was left), stopped (the caller "
                          "stopped it)")
    rounds: int = Field(1, ge=1, le=100, description="trimmed models solved one after another, each around the "
                                                     "last one's plan (big clusters, time to spare)")
    phases: dict[Phase, Annotated[float, JSON_NUMBER]] = Field(
        default_factory=dict, description="seconds each phase of the call took (policy.time_limit_s bounds their sum)")
    restricted: bool = Field(
        False, description="large cluster: each task saw a subset of its nodes, so 'optimal' and the gap "
                           "refer to that subset and the plan status says feasible")


class JobCost(PlanModel):
    """Expected cost of one placed job, in the pools' currency."""

    job: str
    gpus: float = Field(description="GPU-equivalents the job holds (a MIG pod its instance's memory slices over "
                        "its GPU's, a shared pod its gpu_share)")
    spot_gpus: float = Field(0, description="of which on spot nodes")
    runtime_h: float = Field(description="expected runtime used for the price (1 h when the job gives none)")
    per_hour: float = Field(description="price of the GPUs it holds, per hour")
    compute: float = Field(description="per_hour × runtime_h")
    reclaim_risk: float = Field(0.0, description="expected work lost to spot reclaims, priced")
    total: float


class CostSummary(PlanModel):
    """What the plan is expected to cost (GPU-hours at each pool's gpu_hour_price); unpriced pools count 0."""

    total: float = Field(description="compute + reclaim_risk + provisioning")
    compute: float = 0.0
    reclaim_risk: float = 0.0
    provisioning: float = Field(0.0, description="minimum billing of added nodes beyond what their pods pay")
    per_hour: float = Field(0.0, description="price per hour of every GPU-equivalent the plan places")
    gpu_hours: float = Field(0.0, description="placed GPU-equivalents × their jobs' expected runtime")
    jobs: list[JobCost] = Field(default_factory=list)


class Provisioned(PlanModel):
    """Nodes the plan adds to a provisionable pool; assignments may name them."""

    pool: str
    nodes: list[str]


class TeamReport(PlanModel):
    """Where a team stands once the plan is applied (running work kept + new placements)."""

    team: str
    weight: float
    gpus_held: float = Field(description="GPU-equivalents the team holds after the plan: running jobs kept plus "
                             "placed jobs (a MIG pod its instance's fraction of its GPU, a shared pod its share)")
    gpus_placed: float = Field(0, description="of which placed by this plan")
    gpus_preempted: float = Field(0, description="GPU-equivalents of the team's running jobs this plan preempts")
    gpus_pending: float = Field(0, description="GPU-equivalents of the team's jobs left pending")
    entitlement: float = Field(description="weighted max-min fair share of the cluster's GPUs given the team's "
                               "demand, quota and past usage (placement/teams.py)")
    nominal: float | None = Field(None, description="the team's cluster-wide nominal GPU quota, if any")
    dominant_share: float = Field(description="largest share the team holds of any resource (GPUs, CPU, memory)")
    share_of_entitlement: float | None = Field(None, description="gpus_held / entitlement (None: no entitlement)")


class RightSized(PlanModel):
    """Pods of a `right_size` job the plan moves from a whole GPU to a MIG instance (compile/usage.py)."""

    job: str
    task: str
    pods: int = Field(ge=1, description="pods of the task that take a MIG instance instead of a GPU")
    profiles: list[str] = Field(description="the instances they take (one entry per distinct profile)")
    observed_gpu_memory_gib: float
    needs_gib: float = Field(description="observed × policy.right_size_headroom: each instance holds at least this")
    gpus_saved: float = Field(description="whole GPUs freed: pods − the GPU fractions (memory slices) they take")


class Plan(PlanModel):
    api_version: Literal["placement/v1"] = "placement/v1"
    status: PlanStatus
    assignments: list[Assignment] = Field(default_factory=list)
    preemptions: list[Preemption] = Field(default_factory=list)
    mig_changes: list[MigChange] = Field(default_factory=list)
    sharing_changes: list[SharingChange] = Field(default_factory=list, description=(
        "idle whole GPUs the plan turns into shared GPUs (policy.allow_sharing_changes)"))
    pending: list[Pending] = Field(default_factory=list)
    objective: Objective = Field(default_factory=lambda: Objective(total=0.0))
    solver: SolverStats = Field(default_factory=lambda: SolverStats(status="SKIPPED"))
    provisioned: list[Provisioned] = Field(default_factory=list)
    cost: CostSummary | None = Field(None, description="expected cost; set when any pool has a price")
    teams: list[TeamReport] = Field(default_factory=list, description="per declared team, after the plan")
    fairness_index: float | None = Field(None, description="Jain's index of the teams' share_of_entitlement "
                                         "(1 = every entitled team got the same fraction of its fair share)")
    right_sized: list[RightSized] = Field(default_factory=list, description="right-size offers the plan takes")
    reservations: list[Reservation] = Field(default_factory=list, description="nodes held for starved jobs "
                                            "(policy.max_wait_h)")
    overdue: list[Overdue] = Field(default_factory=list, description="running jobs past their max_runtime_h")
    speed_sources: dict[str, str] = Field(default_factory=dict, description=(
        "where the speed tables the plan used come from: per workload its `source` ('declared' where it gives "
        "none); jobs' own `speeds` under \"(jobs' own speeds)\", declared"))
