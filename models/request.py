"""The v1 request: cluster state, pending jobs and policy (DESIGN.md §2).

Fields of concerns that have no solver module yet are declared so that a caller who sends them
gets a clear "not supported yet" error at the right path, instead of a plan that silently
ignores what they asked for.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from models.errors import ErrorList

API_VERSION = "placement/v1"

#: Fields that later modules will honour: field name -> the concern that brings them.
_LATER = {
    "mig": "MIG (GPU sharing module)",
    "sharing": "time-slicing/MPS (GPU sharing module)",
    "mig_profile": "MIG (GPU sharing module)",
    "gpu_share": "fractional GPUs (GPU sharing module)",
    "topology": "topology requirements (topology module)",
    "gpu_hour_price": "prices (cost module)",
    "reclaim_rate_per_h": "spot reclaim (cost module)",
    "provisionable": "provisioning (cost module)",
    "spot_ok": "spot placement (cost module)",
    "checkpoint_interval_h": "checkpoints (cost module)",
    "expected_runtime_h": "runtime estimates (cost module)",
    "deferrable": "off-peak deferral (cost module)",
    "quota": "quotas (teams module)",
    "previous_plan": "plan stability (previous_plan)",
}


def _not_yet(value: Any, field: str, default: Any = None) -> Any:
    if value is None or value == default or value == {} or value == []:
        return default
    raise ValueError(f"not supported yet: {_LATER[field]}; remove '{field}' or leave it empty")


class Strict(BaseModel):
    """Unknown fields are errors: a misspelt field must not be silently dropped."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Pool(Strict):
    name: str = Field(min_length=1)
    capacity_type: Literal["on-demand", "spot", "reserved"] = "on-demand"
    gpu_hour_price: float | None = None
    reclaim_rate_per_h: float | None = None
    provisionable: Any = None

    @field_validator("capacity_type")
    @classmethod
    def _no_spot_yet(cls, v: str) -> str:
        if v == "spot":
            raise ValueError(
                "not supported yet: spot pools need the cost module (which jobs may run on spot); "
                "use 'on-demand' or 'reserved'"
            )
        return v

    @field_validator("gpu_hour_price", "reclaim_rate_per_h", "provisionable", mode="before")
    @classmethod
    def _later(cls, v: Any, info: Any) -> Any:
        return _not_yet(v, info.field_name)


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
    nvlink_domain: str | None = None
    rack: str | None = None
    block: str | None = None


class Node(Strict):
    name: str = Field(min_length=1)
    pool: str | None = None
    gpu_model: str | None = None
    gpus: int = Field(0, ge=0, le=128)
    cpu: float = Field(ge=0)
    memory_gib: float = Field(ge=0)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    topology: NodeTopology = Field(default_factory=NodeTopology)
    mig: Any = None
    sharing: Any = None
    unhealthy_gpus: list[int] = Field(default_factory=list)


    @field_validator("mig", "sharing", mode="before")
    @classmethod
    def _later(cls, v: Any, info: Any) -> Any:
        return _not_yet(v, info.field_name)

    @model_validator(mode="after")
    def _check(self) -> Node:
        errors = ErrorList("Node")
        if self.gpus > 0 and not self.gpu_model:
            errors.add(("gpu_model",), "required when the node has GPUs", None, "missing")
        for i, g in enumerate(self.unhealthy_gpus):
            if not 0 <= g < self.gpus:
                errors.add(("unhealthy_gpus", i), f"GPU index {g} out of range 0..{self.gpus - 1}", g)
        if len(set(self.unhealthy_gpus)) != len(self.unhealthy_gpus):
            errors.add(("unhealthy_gpus",), "duplicate GPU index", self.unhealthy_gpus)
        errors.raise_if_any()
        return self


class RunningPod(Strict):
    task: str = Field(min_length=1)
    node: str = Field(min_length=1)
    gpus: list[int] = Field(default_factory=list)
    cpu: float = Field(0.0, ge=0)
    memory_gib: float = Field(0.0, ge=0)
    mig: Any = None
    gpu_share: Any = None


    @field_validator("mig", "gpu_share", mode="before")
    @classmethod
    def _later(cls, v: Any, info: Any) -> Any:
        return _not_yet(v, info.field_name)


class RunningJob(Strict):
    """Work already bound to nodes: it holds capacity. (Preemption arrives with the teams module.)"""

    job: str = Field(min_length=1)
    team: str | None = None
    priority: int = 0
    preemptible: bool = False
    pods: list[RunningPod] = Field(min_length=1)
    started_at: datetime | None = None


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
    mig_profile: Any = None
    gpu_share: Any = None


    @field_validator("mig_profile", "gpu_share", mode="before")
    @classmethod
    def _later(cls, v: Any, info: Any) -> Any:
        return _not_yet(v, info.field_name)

    @model_validator(mode="after")
    def _check(self) -> Task:
        if self.gpu_memory_gib is not None and self.gpus == 0:
            errors = ErrorList("Task")
            errors.add(("gpu_memory_gib",), "set only for tasks that ask for GPUs (gpus > 0)", self.gpu_memory_gib)
            errors.raise_if_any()
        return self


class Job(Strict):
    name: str = Field(min_length=1)
    team: str | None = None
    priority: int = Field(0, ge=-(2**31), le=2**31)
    submitted_at: datetime | None = None
    preemptible: bool = False
    min_available: int | None = Field(None, ge=1)
    tasks: list[Task] = Field(min_length=1)
    topology: Any = None
    spot_ok: Any = None
    checkpoint_interval_h: Any = None
    expected_runtime_h: Any = None
    deferrable: Any = None

    @field_validator("topology", "checkpoint_interval_h", "expected_runtime_h", mode="before")
    @classmethod
    def _later(cls, v: Any, info: Any) -> Any:
        return _not_yet(v, info.field_name)

    @field_validator("spot_ok", "deferrable", mode="before")
    @classmethod
    def _later_flag(cls, v: Any, info: Any) -> Any:
        return _not_yet(v, info.field_name, default=False) if v is not False else False

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
        errors.raise_if_any()
        return self


class Team(Strict):
    name: str = Field(min_length=1)
    weight: float = Field(1.0, gt=0)
    usage_gpu_h: float = Field(0.0, ge=0)
    quota: Any = None

    @field_validator("quota", mode="before")
    @classmethod
    def _later(cls, v: Any, info: Any) -> Any:
        return _not_yet(v, info.field_name)


class Weights(Strict):
    """Objective weights, in GPU-equivalents: 1.0 = the value of placing one lowest-priority GPU."""

    priority: float = Field(1.0, ge=0)
    fragmentation: float = Field(0.1, ge=0)



class Policy(Strict):
    time_limit_s: float = Field(10.0, gt=0, le=3600)
    workers: int = Field(2, ge=1, le=64)
    seed: int = Field(0, ge=0, le=2**31 - 1)
    deterministic: bool = False
    relative_gap_limit: float = Field(0.0, ge=0, le=1)
    weights: Weights = Field(default_factory=Weights)
    previous_plan: Any = None


    @field_validator("previous_plan", mode="before")
    @classmethod
    def _later(cls, v: Any, info: Any) -> Any:
        return _not_yet(v, info.field_name)


class Cluster(Strict):
    pools: list[Pool] = Field(default_factory=list)
    nodes: list[Node] = Field(min_length=1)
    running: list[RunningJob] = Field(default_factory=list)


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
        if self.teams:
            errors.add(("teams",), "not supported yet: team weights and quotas arrive with the teams module; "
                       "leave 'teams' empty (a job's 'team' label is accepted)", None)
        errors.raise_if_any()
        return self


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
