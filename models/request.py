"""The v1 request: cluster state, pending jobs and policy (DESIGN.md §2).

Fields of concerns that have no solver module yet are declared so that a caller who sends them
gets a clear "not supported yet" error at the right path, instead of a plan that silently
ignores what they asked for.
"""

from __future__ import annotations

from datetime import datetime, timezone
from functools import cached_property
from typing import Literal

from placement_models.errors import ErrorList
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

API_VERSION = "placement/v1"

class Strict(BaseModel):
    """Unknown fields are errors: a misspelt field must not be silently dropped."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)




def _utc(v: datetime | None) -> datetime | None:
    """Timestamps without a zone are UTC, so every comparison between them is defined."""
    if v is not None and v.tzinfo is None:
        return v.replace(tzinfo=timezone.utc)
    return v


class Taint(Strict):
    key: str = Field(min_length=1)
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class Toleration(Strict):
    """Kubernetes semantics: an empty key with operator Exists tolerates every taint."""

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None

    def tolerates(self, taint: Taint) -> bool:
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return self.key in ("", taint.key)
        return self.key == taint.key and self.value == taint.value


class NodeTopology(Strict):
    """Where the node sits; facts only (the topology module adds requirements on them)."""

    nvlink: Literal["nvswitch", "hybrid-cube-mesh", "pcie-pairs", "pcie"] | None = None
    #: `nvidia-smi topo -m` text of this node, or the name of a `cluster.topo_matrices` entry shared
    #: by a class of identical nodes; overrides `nvlink` when set (placement/topology.py parses it)
    topo_matrix: str | None = Field(None, min_length=1)
    #: multi-node NVLink partition (GB200 NVL72); unset: the GFD label `nvidia.com/gpu.clique`
    nvlink_domain: str | None = None
    rack: str | None = None
    block: str | None = None


class MigInstance(Strict):
    """One GPU instance of a MIG layout: a profile name and its first memory slice (as `nvidia-smi mig -lgipp`)."""

    profile: str = Field(min_length=1)
    start: int = Field(ge=0, le=7)


class MigSlot(Strict):
    """The MIG instance a pod holds: GPU index, profile and start slot (placement/catalog checks legality)."""

    gpu: int = Field(ge=0)
    profile: str = Field(min_length=1)
    start: int = Field(ge=0, le=7)


class GpuSharing(Strict):
    """One GPU shared by up to `replicas` pods, by time-slicing (no memory isolation) or MPS.

    Either way the solver never over-commits: the pods' shares sum to at most 1 and their GPU
    memory to at most the GPU's (one OOM on a time-sliced GPU kills every pod on it).
    """

    mode: Literal["time-slicing", "mps"]
    replicas: int = Field(ge=1, le=128)


class NodeTemplate(Strict):
    """The shape of a node a pool can add on demand: a Node without name, pool or history."""

    gpu_model: str | None = None
    gpus: int = Field(0, ge=0, le=128)
    cpu: float = Field(ge=0)
    memory_gib: float = Field(ge=0)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    topology: NodeTopology = Field(default_factory=NodeTopology)

    @model_validator(mode="after")
    def _check(self) -> NodeTemplate:
        if self.gpus > 0 and not self.gpu_model:
            errors = ErrorList("NodeTemplate")
            errors.add(("gpu_model",), "required when the node has GPUs", None, "missing")
            errors.raise_if_any()
        return self


class Node(NodeTemplate):
    """A node of the cluster: the shape of a NodeTemplate plus its name, pool and GPU state."""

    name: str = Field(min_length=1)
    pool: str | None = None
    #: GPU index -> its MIG layout (a listed GPU is partitioned, even with no instances, and never given whole)
    mig: dict[int, list[MigInstance]] = Field(default_factory=dict)
    #: GPU index -> time-slicing/MPS setting (a listed GPU takes only pods with gpu_share)
    sharing: dict[int, GpuSharing] = Field(default_factory=dict)
    unhealthy_gpus: list[int] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check_gpus(self) -> Node:
        errors = ErrorList("Node")
        for what, gpus in (("mig", self.mig), ("sharing", self.sharing)):
            for g in gpus:
                if not 0 <= g < self.gpus:
                    errors.add((what, g), f"GPU index {g} out of range 0..{self.gpus - 1}", g)
        for g in sorted(set(self.mig) & set(self.sharing)):
            errors.add(("sharing", g), f"GPU {g} is also MIG-partitioned; share a GPU one way only", g)
        for i, g in enumerate(self.unhealthy_gpus):
            if not 0 <= g < self.gpus:
                errors.add(("unhealthy_gpus", i), f"GPU index {g} out of range 0..{self.gpus - 1}", g)
        if len(set(self.unhealthy_gpus)) != len(self.unhealthy_gpus):
            errors.add(("unhealthy_gpus",), "duplicate GPU index", self.unhealthy_gpus)
        errors.raise_if_any()
        return self


class Provisionable(Strict):
    """Nodes a pool may add (cloud capacity): the solver decides how many, up to `max_nodes`.

    An added node is billed whole, for at least `min_billing_h` hours, at the pool's price: that
    charge is what makes the solver add capacity only when placing pending work is worth it.
    """

    max_nodes: int = Field(ge=1, le=256)
    node: NodeTemplate
    min_billing_h: float = Field(1.0, ge=0)

    @staticmethod
    def node_name(pool: str, k: int) -> str:
        """Name of the k-th node a pool may add; '/' keeps it apart from real (Kubernetes) node names."""
        return f"{pool}/new-{k}"

    def node_names(self, pool: str) -> list[str]:
        return [self.node_name(pool, k) for k in range(self.max_nodes)]

    def materialise(self, pool: str, k: int) -> Node:
        return Node(name=self.node_name(pool, k), pool=pool, **self.node.model_dump())


class Pool(Strict):
    """A group of nodes with one price and capacity type; spot nodes may be reclaimed at any time."""

    name: str = Field(min_length=1)
    capacity_type: Literal["on-demand", "spot", "reserved"] = "on-demand"
    gpu_hour_price: float | None = Field(None, ge=0, description="currency per GPU-hour; unset = unpriced")
    reclaim_rate_per_h: float | None = Field(None, ge=0, description="spot only: expected reclaims per node-hour")
    provisionable: Provisionable | None = None

    @model_validator(mode="after")
    def _check(self) -> Pool:
        if self.reclaim_rate_per_h is not None and self.capacity_type != "spot":
            errors = ErrorList("Pool")
            errors.add(("reclaim_rate_per_h",), f"only spot pools are reclaimed; this pool is "
                       f"'{self.capacity_type}'", self.reclaim_rate_per_h)
            errors.raise_if_any()
        return self


class RunningPod(Strict):
    task: str = Field(min_length=1)
    node: str = Field(min_length=1)
    gpus: list[int] = Field(default_factory=list)
    cpu: float = Field(0.0, ge=0)
    memory_gib: float = Field(0.0, ge=0)
    #: the MIG instance the pod holds (then `gpus` stays empty)
    mig: MigSlot | None = None
    #: fraction of the one GPU in `gpus`, a GPU listed in the node's `sharing`
    gpu_share: float | None = Field(None, gt=0, le=1)
    #: GPU memory the shared pod may use (default: its share of the GPU's memory)
    gpu_memory_gib: float | None = Field(None, ge=0)


    @model_validator(mode="after")
    def _check_devices(self) -> RunningPod:
        errors = ErrorList("RunningPod")
        if self.mig is not None and self.gpus:
            errors.add(("gpus",), "a pod on a MIG instance holds no whole GPUs; leave 'gpus' empty", self.gpus)
        if self.mig is not None and self.gpu_share is not None:
            errors.add(("gpu_share",), "a pod holds a MIG instance or a GPU share, not both", self.gpu_share)
        if self.gpu_share is not None and len(self.gpus) != 1:
            errors.add(("gpus",), "a pod with gpu_share names exactly one (shared) GPU", self.gpus)
        if self.gpu_memory_gib is not None and self.gpu_share is None:
            errors.add(("gpu_memory_gib",), "set only for pods with gpu_share", self.gpu_memory_gib)
        errors.raise_if_any()
        return self


class RunningJob(Strict):
    """Work already bound to nodes: it holds capacity, and is kept or preempted whole (compile/preemption.py)."""

    job: str = Field(min_length=1)
    team: str | None = None
    priority: int = 0
    preemptible: bool = False
    pods: list[RunningPod] = Field(min_length=1)
    started_at: datetime | None = None
    #: last checkpoint: a preemption loses the GPU-hours since then (since `started_at` when unset)
    checkpointed_at: datetime | None = None
    #: as on Job: what the metrics window saw (reported; a running job is not re-placed)
    observed_gpu_memory_gib: float | None = Field(None, ge=0)
    observed_sm_util: float | None = Field(None, ge=0, le=1)

    _tz = field_validator("started_at", "checkpointed_at")(_utc)


class Task(Strict):
    """A set of identical pods; the solver decides how many go to each node, not which."""

    name: str = Field(min_length=1)
    replicas: int = Field(1, ge=1, le=100_000)
    gpus: int = Field(0, ge=0, le=128)
    gpu_memory_gib: float | None = Field(None, ge=0)
    cpu: float = Field(0.0, ge=0)
    memory_gib: float = Field(0.0, ge=0)
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    #: each pod takes one MIG instance of this profile ("1g.10gb"), or "auto": the smallest profile
    #: with at least gpu_memory_gib on whichever MIG model the pod lands
    mig_profile: str | None = Field(None, min_length=1)
    #: each pod takes this fraction of one time-sliced/MPS GPU (openb's gpu_milli / 1000)
    gpu_share: float | None = Field(None, gt=0, le=1)


    @model_validator(mode="after")
    def _check(self) -> Task:
        errors = ErrorList("Task")
        fractional = self.mig_profile is not None or self.gpu_share is not None
        if self.gpu_memory_gib is not None and self.gpus == 0 and not fractional:
            errors.add(("gpu_memory_gib",), "set only for tasks that ask for GPUs (gpus > 0, mig_profile or "
                       "gpu_share)", self.gpu_memory_gib)
        if self.mig_profile is not None and self.gpu_share is not None:
            errors.add(("gpu_share",), "a pod takes a MIG instance or a GPU share, not both", self.gpu_share)
        if fractional and self.gpus:
            field = "mig_profile" if self.mig_profile is not None else "gpu_share"
            errors.add((field,), "a pod asks for whole GPUs or a part of one; leave 'gpus' at 0", self.gpus)
        if self.mig_profile is not None and self.mig_profile.strip().lower() == "auto" and self.gpu_memory_gib is None:
            errors.add(("gpu_memory_gib",), "mig_profile 'auto' picks the smallest profile with this much GPU "
                       "memory: set it", None, "missing")
        errors.raise_if_any()
        return self

    @property
    def mig_auto(self) -> bool:
        return self.mig_profile is not None and self.mig_profile.strip().lower() == "auto"


class TopologySlice(Strict):
    """Sub-groups of a gang: each `size` consecutive pods of a GPU task inside one `required` domain.

    Tensor-parallel groups inside an NVLink domain, data-parallel across (Kueue's
    podset-slice-required-topology). Only whole groups are placed, so every GPU task's replicas
    must be a multiple of `size`; CPU-only tasks (launchers) are not sliced.
    """

    size: int = Field(ge=1, le=100_000)
    required: str = Field(min_length=1)


class JobTopology(Strict):
    """A job's topology needs, by level name (`cluster.topology_levels`, or `node`).

    `required`: every pod in one domain of that level (hard). `preferred`: fewer domains of that
    level is better (soft, `topology.spread`). `slice`: see TopologySlice.
    """

    required: str | None = Field(None, min_length=1)
    preferred: str | None = Field(None, min_length=1)
    slice: TopologySlice | None = None


class Job(Strict):
    name: str = Field(min_length=1)
    team: str | None = None
    priority: int = Field(0, ge=-(2**31), le=2**31)
    submitted_at: datetime | None = None
    _tz = field_validator("submitted_at")(_utc)
    preemptible: bool = False
    min_available: int | None = Field(None, ge=1)
    tasks: list[Task] = Field(min_length=1)
    #: where the gang's pods may sit in the cluster hierarchy (compile/topology.py)
    topology: JobTopology | None = None
    #: may run on spot nodes (which can be reclaimed at any time); false keeps it off spot entirely
    spot_ok: bool = False
    #: hours between checkpoints: a reclaim loses half of one interval on average (unset = no checkpoints)
    checkpoint_interval_h: float | None = Field(None, gt=0)
    #: expected hours of running; prices a placement (unset: costed as one hour)
    expected_runtime_h: float | None = Field(None, gt=0)
    #: may wait for off-peak hours (policy.peak) rather than run now
    deferrable: bool = False
    #: peak GPU memory one of the job's GPUs (or MIG instances) held over the last metrics window
    #: (`placement usage annotate` writes it from DCGM); below a task's gpu_memory_gib it costs
    #: `usage.over_declared`, and it sizes the MIG instance a `right_size` job may be moved to
    observed_gpu_memory_gib: float | None = Field(None, ge=0)
    #: mean utilisation of the job's GPUs over that window, 0..1 (DCGM_FI_DEV_GPU_UTIL / 100); a right-sized
    #: pod's instance has at least this × policy.right_size_headroom of the GPU's SMs
    observed_sm_util: float | None = Field(None, ge=0, le=1)
    #: opt in: one-GPU pods may take a MIG instance with observed_gpu_memory_gib × policy.right_size_headroom
    #: instead (compile/usage.py); no observation, no offer
    right_size: bool = False

    @property
    def pods(self) -> int:
        return sum(t.replicas for t in self.tasks)

    @property
    def needed(self) -> int:
        """Pods that must be placed for the gang to run (min_available, default all)."""
        return self.min_available if self.min_available is not None else self.pods

    @model_validator(mode="after")
    def _check(self) -> Job:
        errors = ErrorList("Job")
        seen: set[str] = set()
        for i, t in enumerate(self.tasks):
            if t.name in seen:
                errors.add(("tasks", i, "name"), f"duplicate task name '{t.name}'", t.name)
            seen.add(t.name)
        if self.min_available is not None and self.min_available > self.pods:
            errors.add(
                ("min_available",),
                f"{self.min_available} exceeds the job's {self.pods} pods",
                self.min_available,
            )
        if self.right_size and not any(t.gpus == 1 for t in self.tasks):
            errors.add(("right_size",), "right-sizing moves one-GPU pods onto a MIG instance; this job has no "
                       "task with gpus: 1", True)
        if self.right_size and self.topology is not None:
            errors.add(("right_size",), "a job with topology needs is not right-sized (a MIG instance has no "
                       "NVLink peers); drop 'topology' or 'right_size'", True)
        errors.raise_if_any()
        return self


# --- teams (issue 5): quotas in the spirit of Kueue's ClusterQueue, one cohort per request -----


class GpuQuota(Strict):
    """A team's GPUs in one scope (the whole cluster, or one flavor), as Kueue counts them.

    `nominal` is the team's own share. It may hold up to `nominal + borrowing_limit` (no limit when
    unset) by borrowing what other teams' nominal leaves idle, and lends at most `lending_limit`
    of its own idle nominal (all of it when unset); the rest of its nominal is never lent. Whole
    GPUs: fractional GPUs (sharing) are not counted by quotas.
    """

    nominal: int = Field(ge=0, le=10_000_000)
    borrowing_limit: int | None = Field(None, ge=0, le=10_000_000)
    lending_limit: int | None = Field(None, ge=0, le=10_000_000)


class FlavorQuota(Strict):
    """Quota on one flavor of GPUs (Kueue's ResourceFlavor): the nodes of a pool, of a GPU model, or both."""

    pool: str | None = Field(None, min_length=1)
    gpu_model: str | None = Field(None, min_length=1)
    gpus: GpuQuota

    @model_validator(mode="after")
    def _check(self) -> FlavorQuota:
        if self.pool is None and self.gpu_model is None:
            errors = ErrorList("FlavorQuota")
            errors.add(("pool",), "a flavor names a pool, a gpu_model or both (the whole cluster is quota.gpus)",
                       None, "missing")
            errors.raise_if_any()
        return self


class Quota(Strict):
    """Per resource limits; only GPUs are counted (CPU and memory follow the GPUs they serve)."""

    gpus: GpuQuota | None = None
    flavors: list[FlavorQuota] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> Quota:
        errors = ErrorList("Quota")
        _unique_keys(errors, [(f.pool, f.gpu_model) for f in self.flavors])
        errors.raise_if_any()
        return self


def _unique_keys(errors: ErrorList, keys: list[tuple[str | None, str | None]]) -> None:
    seen: set[tuple[str | None, str | None]] = set()
    for i, key in enumerate(keys):
        if key in seen:
            errors.add(("flavors", i), f"duplicate flavor (pool={key[0]}, gpu_model={key[1]})", None)
        seen.add(key)


class Team(Strict):
    """A tenant: its weight in the fair share, its past usage, and its quota (all in one cohort)."""

    name: str = Field(min_length=1)
    weight: float = Field(1.0, gt=0)
    #: GPU-hours used in the past; decayed to `policy.now` with `usage_half_life_h` when `usage_at` is set
    usage_gpu_h: float = Field(0.0, ge=0)
    #: when `usage_gpu_h` was measured (unset: the caller already decayed it to now)
    usage_at: datetime | None = None
    usage_half_life_h: float | None = Field(None, gt=0)
    quota: Quota | None = None

    _tz = field_validator("usage_at")(_utc)


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

    _tz = field_validator("now")(_utc)


class Cluster(Strict):
    pools: list[Pool] = Field(default_factory=list)
    nodes: list[Node] = Field(min_length=1)
    running: list[RunningJob] = Field(default_factory=list)
    #: hierarchy levels, narrowest first (like Kueue's Topology levels): `nvlink_domain`, `rack` and
    #: `block` read node.topology; any other name reads that node label (e.g. a spine label)
    topology_levels: list[str] = Field(default_factory=lambda: ["nvlink_domain", "rack", "block"],
                                       min_length=1, max_length=16)
    #: named `nvidia-smi topo -m` texts that nodes of one class share via node.topology.topo_matrix
    topo_matrices: dict[str, str] = Field(default_factory=dict)


class PlacementRequest(Strict):
    api_version: Literal["placement/v1"] = API_VERSION
    cluster: Cluster
    jobs: list[Job] = Field(default_factory=list)
    teams: list[Team] = Field(default_factory=list)
    policy: Policy = Field(default_factory=Policy)

    @model_validator(mode="after")
    def _references(self) -> PlacementRequest:
        """Cross-references: names unique, pools and nodes exist, GPUs in range and not double-booked."""
        errors = ErrorList("PlacementRequest")
        _unique(errors, ("cluster", "pools"), [p.name for p in self.cluster.pools], "pool")
        _unique(errors, ("cluster", "nodes"), [n.name for n in self.cluster.nodes], "node")
        _unique(errors, ("teams",), [t.name for t in self.teams], "team")
        job_names = [j.job for j in self.cluster.running] + [j.name for j in self.jobs]
        locs: list[tuple[str | int, ...]] = [("cluster", "running", i, "job") for i in range(len(self.cluster.running))]
        locs += [("jobs", i, "name") for i in range(len(self.jobs))]
        seen: set[str] = set()
        for loc, name in zip(locs, job_names, strict=True):
            if name in seen:
                errors.add(loc, f"duplicate job name '{name}' (running and pending jobs share one namespace)", name)
            seen.add(name)

        pools = {p.name for p in self.cluster.pools}
        for i, n in enumerate(self.cluster.nodes):
            if n.pool is not None and n.pool not in pools:
                known = ", ".join(sorted(pools)) or "none declared"
                errors.add(("cluster", "nodes", i, "pool"), f"unknown pool '{n.pool}' (known: {known})", n.pool)
        _check_running(errors, self.cluster)
        _check_devices(errors, self.cluster)
        _check_cost(errors, self)
        _check_teams(errors, self)
        _check_topology(errors, self)
        errors.raise_if_any()
        return self

    def planning_time(self) -> datetime:
        """`policy.now`, else the latest time the request mentions (else the epoch): one answer everywhere.

        A default read from the wall clock would make the same request plan differently tomorrow;
        the latest mentioned time never lets a job look older than the request shows it.
        """
        return self.policy.now if self.policy.now is not None else self.latest_mentioned_time

    @cached_property
    def latest_mentioned_time(self) -> datetime:
        """Cached: modules ask for the planning time once per job, and the request is frozen."""
        times = [j.submitted_at for j in self.jobs] + [t.usage_at for t in self.teams]
        times += [t for r in self.cluster.running for t in (r.started_at, r.checkpointed_at)]
        return max((t for t in times if t is not None), default=datetime(1970, 1, 1, tzinfo=timezone.utc))


def _check_teams(errors: ErrorList, request: PlacementRequest) -> None:
    """With teams declared, every job (running or pending) names one; flavors name real pools."""
    teams = {t.name for t in request.teams}
    pools = {p.name for p in request.cluster.pools}
    if teams:
        declared = ", ".join(sorted(teams))
        named = [(("cluster", "running", i, "team"), r.team) for i, r in enumerate(request.cluster.running)]
        named += [(("jobs", i, "team"), j.team) for i, j in enumerate(request.jobs)]
        for loc, team in named:
            if team is None:
                errors.add(loc, f"required: teams are declared, so every job names one (declared: {declared})",
                           None, "missing")
            elif team not in teams:
                errors.add(loc, f"unknown team '{team}' (declared: {declared})", team)
    for i, team in enumerate(request.teams):
        if team.usage_half_life_h is not None and team.usage_at is None:
            errors.add(("teams", i, "usage_half_life_h"), "decaying usage needs usage_at (when usage_gpu_h was "
                       "measured); leave it unset if usage_gpu_h is already decayed", team.usage_half_life_h)
        if team.usage_at is not None and request.policy.now is not None and team.usage_at > request.policy.now:
            errors.add(("teams", i, "usage_at"), f"after policy.now ({request.policy.now.isoformat()})",
                       team.usage_at.isoformat())
        for k, flavor in enumerate(team.quota.flavors if team.quota else []):
            if flavor.pool is not None and flavor.pool not in pools:
                known = ", ".join(sorted(pools)) or "none declared"
                errors.add(("teams", i, "quota", "flavors", k, "pool"), f"unknown pool '{flavor.pool}' "
                           f"(known: {known})", flavor.pool)


def _unique(errors: ErrorList, base: tuple[str, ...], names: list[str], what: str) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            errors.add((*base, i, "name"), f"duplicate {what} name '{name}'", name)
        seen.add(name)


def _check_running(errors: ErrorList, cluster: Cluster) -> None:
    """Running pods must name real nodes and real, distinct GPUs, and fit their node."""
    nodes = {n.name: n for n in cluster.nodes}
    owner: dict[tuple[str, int], str] = {}
    used_cpu: dict[str, float] = {}
    used_mem: dict[str, float] = {}
    for ji, job in enumerate(cluster.running):
        for pi, pod in enumerate(job.pods):
            loc = ("cluster", "running", ji, "pods", pi)
            node = nodes.get(pod.node)
            if node is None:
                errors.add((*loc, "node"), f"unknown node '{pod.node}'", pod.node)
                continue
            for gi, g in enumerate(pod.gpus):
                if not 0 <= g < node.gpus:
                    errors.add((*loc, "gpus", gi), f"GPU index {g} out of range for node '{node.name}' "
                               f"with {node.gpus} GPUs", g)
                elif pod.gpu_share is not None:
                    continue  # shared GPUs: _check_devices sums the shares
                elif g in node.mig or g in node.sharing:
                    kind = "MIG-partitioned" if g in node.mig else "shared (sharing)"
                    errors.add((*loc, "gpus", gi), f"GPU {g} of node '{node.name}' is {kind}; a pod holding "
                               "whole GPUs cannot be on it", g)
                elif (node.name, g) in owner:
                    errors.add((*loc, "gpus", gi), f"GPU {g} of node '{node.name}' is already held by "
                               f"'{owner[node.name, g]}'", g)
                else:
                    owner[node.name, g] = job.job
            used_cpu[node.name] = used_cpu.get(node.name, 0.0) + pod.cpu
            used_mem[node.name] = used_mem.get(node.name, 0.0) + pod.memory_gib
    for ni, node in enumerate(cluster.nodes):
        if used_cpu.get(node.name, 0.0) > node.cpu + 1e-6:
            errors.add(("cluster", "nodes", ni, "cpu"), f"running pods use {used_cpu[node.name]:g} CPUs, "
                       f"more than the node's {node.cpu:g}", node.cpu)
        if used_mem.get(node.name, 0.0) > node.memory_gib + 1e-6:
            errors.add(("cluster", "nodes", ni, "memory_gib"), f"running pods use {used_mem[node.name]:g} GiB, "
                       f"more than the node's {node.memory_gib:g}", node.memory_gib)


def _check_devices(errors: ErrorList, cluster: Cluster) -> None:
    """Running pods on MIG instances name an instance of their node's layout, one pod each; pods on a
    shared GPU name a GPU listed in `sharing` and stay within its replicas and one whole GPU.

    Profile and start legality need the GPU catalog: problem.build checks them (placement/devices.py).
    """
    nodes = {n.name: n for n in cluster.nodes}
    taken: dict[tuple[str, int, int], str] = {}
    shares: dict[tuple[str, int], list[float]] = {}
    for ji, job in enumerate(cluster.running):
        for pi, pod in enumerate(job.pods):
            loc = ("cluster", "running", ji, "pods", pi)
            node = nodes.get(pod.node)
            if node is None:
                continue
            if pod.mig is not None:
                slot = pod.mig
                layout = node.mig.get(slot.gpu)
                if layout is None:
                    errors.add((*loc, "mig", "gpu"), f"GPU {slot.gpu} of node '{node.name}' is not MIG-partitioned "
                               "(not in the node's 'mig')", slot.gpu)
                elif not any(i.start == slot.start and i.profile.lower() == slot.profile.lower() for i in layout):
                    errors.add((*loc, "mig"), f"node '{node.name}' GPU {slot.gpu} has no {slot.profile} instance at "
                               f"start {slot.start}", slot.model_dump())
                elif (node.name, slot.gpu, slot.start) in taken:
                    errors.add((*loc, "mig"), f"instance {slot.profile}@{slot.start} of node '{node.name}' GPU "
                               f"{slot.gpu} is already held by '{taken[node.name, slot.gpu, slot.start]}'", None)
                else:
                    taken[node.name, slot.gpu, slot.start] = job.job
            if pod.gpu_share is not None and pod.gpus and 0 <= pod.gpus[0] < node.gpus:
                g = pod.gpus[0]
                if g not in node.sharing:
                    errors.add((*loc, "gpus", 0), f"GPU {g} of node '{node.name}' is not shared (not in the "
                               "node's 'sharing'); a pod with gpu_share needs a shared GPU", g)
                else:
                    shares.setdefault((node.name, g), []).append(pod.gpu_share)
    for ni, node in enumerate(cluster.nodes):
        for g, spec in node.sharing.items():
            held = shares.get((node.name, g), [])
            if len(held) > spec.replicas:
                errors.add(("cluster", "nodes", ni, "sharing", g, "replicas"), f"{len(held)} running pods share "
                           f"GPU {g}, more than its {spec.replicas} replicas", spec.replicas)
            if sum(held) > 1 + 1e-6:
                errors.add(("cluster", "nodes", ni, "sharing", g), f"running pods' gpu_share on GPU {g} sums to "
                           f"{sum(held):g}, more than one GPU", None)


def _check_cost(errors: ErrorList, request: PlacementRequest) -> None:
    """Reserve names real pools with non-negative GPU counts; added nodes' names are free."""
    pools = {p.name for p in request.cluster.pools}
    for pool, gpus in request.policy.reserve.items():
        if pool not in pools:
            known = ", ".join(sorted(pools)) or "none declared"
            errors.add(("policy", "reserve", pool), f"unknown pool '{pool}' (known: {known})", pool)
        elif gpus < 0:
            errors.add(("policy", "reserve", pool), "must be a non-negative number of GPUs", gpus)
    taken = {n.name for n in request.cluster.nodes}
    for i, pool in enumerate(request.cluster.pools):
        if pool.provisionable is None:
            continue
        clash = sorted(taken.intersection(pool.provisionable.node_names(pool.name)))
        if clash:
            errors.add(("cluster", "pools", i, "provisionable"), f"names of added nodes clash with existing "
                       f"nodes: {', '.join(clash[:3])}", None)


#: The level every request has implicitly below its named ones: one node.
NODE_LEVEL = "node"
_TOPOLOGY_FIELDS = ("nvlink_domain", "rack", "block")


def _check_topology(errors: ErrorList, request: PlacementRequest) -> None:
    """Levels are distinct names; jobs name known levels; slices cut GPU tasks into whole groups;
    node topo_matrix references exist (the matrix text itself is parsed by placement.topology)."""
    levels = request.cluster.topology_levels
    for i, level in enumerate(levels):
        if level in (NODE_LEVEL, "cluster") or not level.strip():
            errors.add(("cluster", "topology_levels", i), f"'{level}' is reserved or empty; name a domain "
                       f"level such as {', '.join(_TOPOLOGY_FIELDS)} or a node label key", level)
        elif level in levels[:i]:
            errors.add(("cluster", "topology_levels", i), f"level '{level}' is listed twice", level)
    known = [NODE_LEVEL, *levels]
    for ji, job in enumerate(request.jobs):
        spec = job.topology
        if spec is None:
            continue
        loc = ("jobs", ji, "topology")
        named = [(("required",), spec.required), (("preferred",), spec.preferred)]
        if spec.slice is not None:
            named.append((("slice", "required"), spec.slice.required))
        for sub, level in named:
            if level is not None and level not in known:
                errors.add((*loc, *sub), f"unknown topology level '{level}' (levels: {', '.join(known)})", level)
        if spec.slice is None:
            continue
        gpu_tasks = [t for t in job.tasks if t.gpus > 0]
        if not gpu_tasks:
            errors.add((*loc, "slice"), "a slice groups the pods of GPU tasks; this job has none", None)
        for t in gpu_tasks:
            if t.replicas % spec.slice.size:
                errors.add((*loc, "slice", "size"), f"task '{t.name}' has {t.replicas} replicas, not a multiple "
                           f"of the slice size {spec.slice.size}", spec.slice.size)
    matrices = request.cluster.topo_matrices
    for ni, node in enumerate(request.cluster.nodes):
        ref = node.topology.topo_matrix
        if ref is not None and "\n" not in ref and ref not in matrices:
            names = ", ".join(sorted(matrices)) or "none declared"
            errors.add(("cluster", "nodes", ni, "topology", "topo_matrix"), f"'{ref}' is neither "
                       f"`nvidia-smi topo -m` text nor a cluster.topo_matrices name (known: {names})", ref)
