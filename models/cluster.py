"""The cluster side of a request: nodes and their GPUs (MIG, sharing, taints), pools, running work.

What is already there and what may be added; the jobs, teams and policy modules build on these
shapes (a task's tolerations, the policy's default sharing), never the other way round.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from placement_models.base import (
    JSON_INT,
    MAX_CPU,
    MAX_GPU_MEMORY_GIB,
    MAX_GPUS,
    MAX_HOURS,
    MAX_LABELS,
    MAX_MEMORY_GIB,
    MAX_NAME,
    MAX_NODES,
    MAX_POOLS,
    MAX_PRICE,
    MAX_RUNNING_JOBS,
    MAX_RUNNING_PODS,
    MAX_RUNNING_PODS_TOTAL,
    MAX_TAINTS,
    MAX_TEXT,
    MAX_TOPOLOGY_MATRICES,
    MAX_WORD,
    NOT_BLANK,
    Name,
    Priority,
    Strict,
    Word,
    as_utc,
    bounded_dict,
    bounded_list,
    cross_field,
    either,
    given,
    gpu_dict,
    holds,
    unset,
)
from placement_models.errors import ErrorList
from placement_models.speeds import SpeedTable
from pydantic import AfterValidator, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

#: A GPU's index on its node (whether the node has that many GPUs is checked with the node).
GpuIndex = Annotated[int, Field(ge=0, lt=MAX_GPUS), JSON_INT]


class Taint(Strict):
    key: str = Field(min_length=1, max_length=MAX_WORD)
    value: Word = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class Toleration(Strict):
    """Kubernetes semantics: an empty key with operator Exists tolerates every taint."""

    key: Word = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: Word = ""
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
    topo_matrix: str | None = Field(None, min_length=1, max_length=MAX_TEXT)
    #: multi-node NVLink partition (GB200 NVL72); unset: the GFD label `nvidia.com/gpu.clique`
    nvlink_domain: Word | None = None
    rack: Word | None = None
    block: Word | None = None


class GpuSharing(Strict):
    """One GPU (or one MIG instance) shared by up to `replicas` pods, by time-slicing (no memory isolation) or MPS.

    Either way the solver never over-commits: the pods' shares sum to at most 1 and their GPU
    memory to at most the GPU's, or the instance's (one OOM on a time-sliced GPU kills every pod on it).
    """

    mode: Literal["time-slicing", "mps"]
    replicas: int = Field(ge=1, le=128)


class MigInstance(Strict):
    """One GPU instance of a MIG layout: a profile name and its first memory slice (as `nvidia-smi mig -lgipp`)."""

    profile: str = Field(min_length=1, max_length=MAX_WORD)
    start: int = Field(ge=0, le=7)
    #: the device plugin offers this instance `replicas` times (time-slicing or MPS on MIG: GFD's `-SHARED`
    #: products): it then takes only pods asking `mig_profile` with `gpu_share`, a share of this instance each
    sharing: GpuSharing | None = None


class MigSlot(Strict):
    """The MIG instance a pod holds: GPU index, profile and start slot (placement/catalog checks legality)."""

    gpu: int = Field(ge=0, lt=MAX_GPUS)
    profile: str = Field(min_length=1, max_length=MAX_WORD)
    start: int = Field(ge=0, le=7)


class NodeTemplate(Strict):
    """The shape of a node a pool can add on demand: a Node without name, pool or history."""

    model_config = cross_field(either(holds("gpus", {"maximum": 0}),
                                      given("gpu_model", {"type": "string", "minLength": 1})))

    gpu_model: Word | None = None
    gpus: int = Field(0, ge=0, le=MAX_GPUS)
    cpu: float = Field(ge=0, le=MAX_CPU)
    memory_gib: float = Field(ge=0, le=MAX_MEMORY_GIB)
    labels: bounded_dict(Word, Word, MAX_LABELS) = Field(default_factory=dict)
    taints: bounded_list(Taint, MAX_TAINTS) = Field(default_factory=list)
    topology: NodeTopology = Field(default_factory=NodeTopology)

    @model_validator(mode="after")
    def _check(self) -> NodeTemplate:
        if self.gpus > 0 and not self.gpu_model:  # null and "" are no model: the schema says so too
            errors = ErrorList("NodeTemplate")
            errors.add(("gpu_model",), "required when the node has GPUs", None, "missing")
            errors.raise_if_any()
        return self


class Node(NodeTemplate):
    """A node of the cluster: the shape of a NodeTemplate plus its name, pool and GPU state."""

    name: Name
    pool: Name | None = None
    #: GPU index -> its MIG layout (a listed GPU is partitioned, even with no instances, and never given whole;
    #: a GPU has at most 8 memory slices, so at most 8 instances)
    mig: gpu_dict(bounded_list(MigInstance, 8)) = Field(default_factory=dict)
    #: GPU index -> time-slicing/MPS setting (a listed GPU takes only pods with gpu_share)
    sharing: gpu_dict(GpuSharing) = Field(default_factory=dict)
    unhealthy_gpus: bounded_list(GpuIndex, MAX_GPUS, json_schema_extra={"uniqueItems": True}) = Field(
        default_factory=list)

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
    min_billing_h: float = Field(1.0, ge=0, le=MAX_HOURS)

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

    model_config = cross_field(either(unset("reclaim_rate_per_h"), given("capacity_type", {"const": "spot"})))

    name: Name
    capacity_type: Literal["on-demand", "spot", "reserved"] = "on-demand"
    gpu_hour_price: float | None = Field(None, ge=0, le=MAX_PRICE, description="currency per GPU-hour; unset = "
                                         "unpriced")
    reclaim_rate_per_h: float | None = Field(None, ge=0, le=1000,
                                             description="spot only: expected reclaims per node-hour")
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
    """A pod of a running job: the node, and the whole GPUs, MIG instance, GPU share or share of a MIG instance
    it holds."""

    model_config = cross_field(
        either(unset("mig"), holds("gpus", {"maxItems": 0})),
        either(unset("gpu_share"), given("gpus", {"minItems": 1, "maxItems": 1}), given("mig")),
        either(unset("gpu_memory_gib"), given("gpu_share")),
    )

    task: Name
    node: Name
    #: the Kubernetes pod (`placement kube import` writes it): a preemption's Eviction names it
    name: Name | None = None
    gpus: bounded_list(GpuIndex, MAX_GPUS) = Field(default_factory=list)
    cpu: float = Field(0.0, ge=0, le=MAX_CPU)
    memory_gib: float = Field(0.0, ge=0, le=MAX_MEMORY_GIB)
    #: the MIG instance the pod holds (then `gpus` stays empty)
    mig: MigSlot | None = None
    #: fraction of the one GPU in `gpus`, a GPU listed in the node's `sharing`; with `mig`, fraction of that
    #: MIG instance, one whose layout entry has `sharing`
    gpu_share: float | None = Field(None, gt=0, le=1)
    #: GPU memory the shared pod may use (default: its share of the GPU's, or the instance's, memory)
    gpu_memory_gib: float | None = Field(None, ge=0, le=MAX_GPU_MEMORY_GIB)


    @model_validator(mode="after")
    def _check_devices(self) -> RunningPod:
        errors = ErrorList("RunningPod")
        if self.mig is not None and self.gpus:
            errors.add(("gpus",), "a pod on a MIG instance holds no whole GPUs; leave 'gpus' empty", self.gpus)
        if self.gpu_share is not None and self.mig is None and len(self.gpus) != 1:
            errors.add(("gpus",), "a pod with gpu_share names exactly one (shared) GPU, or a shared MIG instance "
                       "in 'mig'", self.gpus)
        if self.gpu_memory_gib is not None and self.gpu_share is None:
            errors.add(("gpu_memory_gib",), "set only for pods with gpu_share", self.gpu_memory_gib)
        errors.raise_if_any()
        return self


class RunningJob(Strict):
    """Work already bound to nodes: it holds capacity, and is kept or preempted whole (compile/preemption.py)."""

    job: Name
    team: Name | None = None
    priority: Priority = 0
    preemptible: bool = False
    #: the Kubernetes namespace of its pods (as on Job)
    namespace: Name | None = None
    pods: bounded_list(RunningPod, MAX_RUNNING_PODS) = Field(min_length=1)
    started_at: datetime | None = None
    #: last checkpoint: a preemption loses the GPU-hours since then (since `started_at` when unset)
    checkpointed_at: datetime | None = None
    #: hours it is expected to run in all (its Job's expected_runtime_h): with `started_at`, when its GPUs free
    #: up, which reservations and estimated starts read (placement.timeline)
    expected_runtime_h: float | None = Field(None, gt=0, le=1_000_000)
    #: hours it may run before it is overdue (unset: its team's max_runtime_h, else no limit)
    max_runtime_h: float | None = Field(None, gt=0, le=1_000_000)
    #: GPU-hours it has run so far over all its runs, this one included (unset: its GPUs × the time since
    #: `started_at`): `preset: las` ranks by it
    attained_gpu_h: float | None = Field(None, ge=0, le=1e12)
    #: as on Job: its speed per GPU model, or a `workloads` entry's; its expected end scales with the slowest
    #: GPU it holds (placement.timeline)
    speeds: SpeedTable | None = None
    workload: Name | None = None
    #: as on Job: what the metrics window saw (reported; a running job is not re-placed)
    observed_gpu_memory_gib: float | None = Field(None, ge=0, le=MAX_GPU_MEMORY_GIB)
    observed_sm_util: float | None = Field(None, ge=0, le=1)

    _tz = field_validator("started_at", "checkpointed_at")(as_utc)


#: Level names every request has implicitly: one node, and the whole cluster.
RESERVED_LEVELS = ("node", "cluster")


def _level_name(level: str) -> str:
    if level in RESERVED_LEVELS or not level.strip():
        raise PydanticCustomError("invalid", "'{level}' is reserved or empty; name a domain level such as "
                                  "nvlink_domain, rack, block or a node label key", {"level": level})
    return level


#: A topology level: a name that is neither blank nor reserved (the schema says so as the check does).
Level = Annotated[str, Field(max_length=MAX_WORD, json_schema_extra={"pattern": NOT_BLANK,
                                                                      "not": {"enum": list(RESERVED_LEVELS)}}),
                  AfterValidator(_level_name)]


def _count_running_pods(value: Any) -> Any:
    """All running pods together, counted before any is validated (each job's list has its own cap)."""
    running = value.get("running") if isinstance(value, dict) else None
    if isinstance(running, list):
        total = sum(len(r["pods"]) for r in running if isinstance(r, dict) and isinstance(r.get("pods"), list))
        if total > MAX_RUNNING_PODS_TOTAL:
            raise PydanticCustomError("too_long", "at most {max} running pods in all, not {total}",
                                      {"max": MAX_RUNNING_PODS_TOTAL, "total": total})
    return value


class Cluster(Strict):
    pools: bounded_list(Pool, MAX_POOLS) = Field(default_factory=list)
    nodes: bounded_list(Node, MAX_NODES) = Field(min_length=1)
    running: bounded_list(RunningJob, MAX_RUNNING_JOBS) = Field(default_factory=list)
    #: hierarchy levels, narrowest first (like Kueue's Topology levels): `nvlink_domain`, `rack` and
    #: `block` read node.topology; any other name reads that node label (e.g. a spine label)
    topology_levels: list[Level] = Field(default_factory=lambda: ["nvlink_domain", "rack", "block"],
                                         min_length=1, max_length=16, json_schema_extra={"uniqueItems": True})
    #: named `nvidia-smi topo -m` texts that nodes of one class share via node.topology.topo_matrix
    topo_matrices: bounded_dict(Annotated[str, Field(max_length=MAX_NAME)],
                                Annotated[str, Field(max_length=MAX_TEXT)],
                                MAX_TOPOLOGY_MATRICES) = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _running_pods(cls, value: Any) -> Any:
        return _count_running_pods(value)
