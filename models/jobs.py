"""Pending work: jobs, their tasks (identical pods) and their topology needs.

A job is a gang: it runs when each task has at least its `min_replicas` pods placed and the job at
least `min_available` pods in all (by default every pod: all or nothing). An elastic gang runs with
anything between its minimum and every pod.
"""

from __future__ import annotations

import re
from datetime import datetime

from placement_models.base import (
    MAX_CPU,
    MAX_GPU_MEMORY_GIB,
    MAX_HOURS,
    MAX_LABELS,
    MAX_MEMORY_GIB,
    MAX_TAINTS,
    MAX_TASKS,
    MAX_WORD,
    SPACE,
    Name,
    Strict,
    Word,
    as_utc,
    bounded_dict,
    bounded_list,
    cross_field,
    either,
    given,
    holds,
    unset,
)
from placement_models.cluster import Toleration
from placement_models.errors import ErrorList
from placement_models.speeds import SpeedTable
from pydantic import Field, field_validator, model_validator

#: "auto" as `mig_profile` accepts: any case, with whitespace around (the rule in Task's schema reads it too)
MIG_AUTO_PATTERN = f"^[{SPACE}]*[aA][uU][tT][oO][{SPACE}]*$"
_MIG_AUTO = re.compile(MIG_AUTO_PATTERN)


class Task(Strict):
    """A set of identical pods; the solver decides how many go to each node, not which."""

    model_config = cross_field(
        either(unset("gpu_memory_gib"), given("gpus", {"minimum": 1}), given("mig_profile"),
               given("gpu_share")),
        either(unset("mig_profile"), unset("gpu_share"),
               holds("mig_profile", {"not": {"type": "string", "pattern": MIG_AUTO_PATTERN}})),
        either(holds("gpus", {"maximum": 0}), {"allOf": [unset("mig_profile"), unset("gpu_share")]}),
        either(given("gpu_memory_gib"),
               holds("mig_profile", {"not": {"type": "string", "pattern": MIG_AUTO_PATTERN}})),
    )

    name: Name
    replicas: int = Field(1, ge=1, le=100_000)
    gpus: int = Field(0, ge=0, le=128)
    gpu_memory_gib: float | None = Field(None, ge=0, le=MAX_GPU_MEMORY_GIB)
    cpu: float = Field(0.0, ge=0, le=MAX_CPU)
    memory_gib: float = Field(0.0, ge=0, le=MAX_MEMORY_GIB)
    node_selector: bounded_dict(Word, Word, MAX_LABELS) = Field(default_factory=dict)
    tolerations: bounded_list(Toleration, MAX_TAINTS) = Field(default_factory=list)
    #: each pod takes one MIG instance of this profile ("1g.10gb"), or "auto": the smallest profile
    #: with at least gpu_memory_gib on whichever MIG model the pod lands
    mig_profile: str | None = Field(None, min_length=1, max_length=MAX_WORD)
    #: each pod takes this fraction of one time-sliced/MPS GPU (openb's gpu_milli / 1000); with `mig_profile`,
    #: this fraction of one shared MIG instance of that profile (a layout entry with `sharing`)
    gpu_share: float | None = Field(None, gt=0, le=1)
    #: pods of this task that must be placed for the job to run (an elastic task runs with min_replicas to
    #: replicas pods). Unset: every replica, or 0 when the job sets min_available (then only its total counts)
    min_replicas: int | None = Field(None, ge=0, le=100_000)
    #: the Kubernetes pods behind pod indices 0, 1, ... (`placement kube import` writes them), so a plan exported
    #: from the request alone binds the real pods; fewer than `replicas`: the rest are yet to be created
    pod_names: bounded_list(Name, 100_000) | None = None

    @model_validator(mode="after")
    def _check(self) -> Task:
        errors = ErrorList("Task")
        if self.min_replicas is not None and self.min_replicas > self.replicas:
            errors.add(("min_replicas",), f"{self.min_replicas} exceeds the task's {self.replicas} replicas",
                       self.min_replicas)
        fractional = self.mig_profile is not None or self.gpu_share is not None
        if self.gpu_memory_gib is not None and self.gpus == 0 and not fractional:
            errors.add(("gpu_memory_gib",), "set only for tasks that ask for GPUs (gpus > 0, mig_profile or "
                       "gpu_share)", self.gpu_memory_gib)
        if self.mig_auto and self.gpu_share is not None:
            errors.add(("mig_profile",), "a share of a MIG instance names the instance's profile; 'auto' picks "
                       "whole instances only", self.mig_profile)
        if fractional and self.gpus:
            field = "mig_profile" if self.mig_profile is not None else "gpu_share"
            errors.add((field,), "a pod asks for whole GPUs or a part of one; leave 'gpus' at 0", self.gpus)
        if self.pod_names is not None and len(self.pod_names) > self.replicas:
            errors.add(("pod_names",), f"{len(self.pod_names)} names for the task's {self.replicas} replicas",
                       len(self.pod_names))
        if self.mig_auto and self.gpu_memory_gib is None:
            errors.add(("gpu_memory_gib",), "mig_profile 'auto' picks the smallest profile with this much GPU "
                       "memory: set it", None, "missing")
        errors.raise_if_any()
        return self

    @property
    def mig_auto(self) -> bool:
        """`mig_profile` is "auto" (any case, spaces around): read with the schema's MIG_AUTO_PATTERN."""
        return self.mig_profile is not None and _MIG_AUTO.search(self.mig_profile) is not None


class TopologySlice(Strict):
    """Sub-groups of a gang: each `size` consecutive pods of a GPU task inside one `required` domain.

    Tensor-parallel groups inside an NVLink domain, data-parallel across (Kueue's
    podset-slice-required-topology). Only whole groups are placed, so every GPU task's replicas
    must be a multiple of `size`; CPU-only tasks (launchers) are not sliced.
    """

    size: int = Field(ge=1, le=100_000)
    required: str = Field(min_length=1, max_length=MAX_WORD)


class JobTopology(Strict):
    """A job's topology needs, by level name (`cluster.topology_levels`, or `node`).

    `required`: every pod in one domain of that level (hard). `preferred`: fewer domains of that
    level is better (soft, `topology.spread`). `slice`: see TopologySlice.
    """

    required: str | None = Field(None, min_length=1, max_length=MAX_WORD)
    preferred: str | None = Field(None, min_length=1, max_length=MAX_WORD)
    slice: TopologySlice | None = None


class Job(Strict):
    """A gang of tasks, pending; the request's validator checks what crosses jobs (names, teams, levels)."""

    model_config = cross_field(
        either(holds("right_size", {"const": False}), holds("tasks", {"contains": given("gpus", {"const": 1})})),
        either(holds("right_size", {"const": False}), unset("topology")),
        # a slice groups GPU tasks' pods: checked with the request, stated here where the job's schema can say it
        either(unset("topology"), holds("topology", unset("slice")),
               holds("tasks", {"contains": given("gpus", {"minimum": 1})})),
    )

    name: Name
    team: Name | None = None
    priority: int = Field(0, ge=-(2**31), le=2**31)
    submitted_at: datetime | None = None
    _tz = field_validator("submitted_at")(as_utc)
    preemptible: bool = False
    #: the Kubernetes namespace of the job's pods (`placement kube import` writes it; unset: the part of `name`
    #: before a slash, else `default`)
    namespace: Name | None = None
    #: pods that must be placed in all (default: the sum of the tasks' min_replicas, which is every pod when no
    #: task sets one); at least that sum when both are given
    min_available: int | None = Field(None, ge=1, le=10_000_000)
    tasks: bounded_list(Task, MAX_TASKS) = Field(min_length=1)
    #: where the gang's pods may sit in the cluster hierarchy (compile/topology.py)
    topology: JobTopology | None = None
    #: may run on spot nodes (which can be reclaimed at any time); false keeps it off spot entirely
    spot_ok: bool = False
    #: hours between checkpoints: a reclaim loses half of one interval on average (unset = no checkpoints)
    checkpoint_interval_h: float | None = Field(None, gt=0, le=MAX_HOURS)
    #: expected hours of running; prices a placement (unset: costed as one hour)
    expected_runtime_h: float | None = Field(None, gt=0, le=1_000_000)
    #: GPU model -> throughput relative to the model `expected_runtime_h` is for (placement_models.speeds): the
    #: plan places by work done, and runtimes scale with the slowest GPU a placement picks (unset: alike everywhere)
    speeds: SpeedTable | None = None
    #: the name of a `workloads` entry whose speed table the job has (instead of `speeds`)
    workload: Name | None = None
    #: GPU-hours it has run so far, over all its runs (a requeued or preempted job's): `preset: las` ranks by it
    attained_gpu_h: float | None = Field(None, ge=0, le=1e12)
    #: hours the job may run once started (reported as overdue past it; unset: its team's, else no limit)
    max_runtime_h: float | None = Field(None, gt=0, le=1_000_000)
    #: may wait for off-peak hours (policy.peak) rather than run now
    deferrable: bool = False
    #: peak GPU memory one of the job's GPUs (or MIG instances) held over the last metrics window
    #: (`placement usage annotate` writes it from DCGM); below a task's gpu_memory_gib it costs
    #: `usage.over_declared`, and it sizes the MIG instance a `right_size` job may be moved to
    observed_gpu_memory_gib: float | None = Field(None, ge=0, le=MAX_GPU_MEMORY_GIB)
    #: mean utilisation of the job's GPUs over that window, 0..1 (DCGM_FI_DEV_GPU_UTIL / 100); a right-sized
    #: pod's instance has at least this × policy.right_size_headroom of the GPU's SMs
    observed_sm_util: float | None = Field(None, ge=0, le=1)
    #: opt in: one-GPU pods may take a MIG instance with observed_gpu_memory_gib × policy.right_size_headroom
    #: instead (compile/usage.py); no observation, no offer
    right_size: bool = False

    @property
    def pods(self) -> int:
        return sum(t.replicas for t in self.tasks)

    def task_minimum(self, task: Task) -> int:
        """Pods of `task` (one of this job's) that must be placed for the job to run: its min_replicas, else
        every replica, or 0 when the job sets min_available (the job's total is then the only minimum)."""
        if task.min_replicas is not None:
            return task.min_replicas
        return 0 if self.min_available is not None else task.replicas

    @property
    def needed(self) -> int:
        """Pods that must be placed for the gang to run: max(min_available, Σ task minimums), at least one
        (every pod when neither min_available nor any min_replicas is set)."""
        floor = sum(self.task_minimum(t) for t in self.tasks)
        return max(1, floor, self.min_available or 0)

    @property
    def elastic(self) -> bool:
        """May run with fewer than all of its pods."""
        return self.needed < self.pods

    @model_validator(mode="after")
    def _check(self) -> Job:
        errors = ErrorList("Job")
        seen: set[str] = set()
        for i, t in enumerate(self.tasks):
            if t.name in seen:
                errors.add(("tasks", i, "name"), f"duplicate task name '{t.name}'", t.name)
            seen.add(t.name)
        pods: set[str] = set()
        for i, t in enumerate(self.tasks):
            for k, pod in enumerate(t.pod_names or ()):
                if pod in pods:
                    errors.add(("tasks", i, "pod_names", k), f"pod '{pod}' is named twice in the job", pod)
                pods.add(pod)
        if self.min_available is not None and self.min_available > self.pods:
            errors.add(
                ("min_available",),
                f"{self.min_available} exceeds the job's {self.pods} pods",
                self.min_available,
            )
        minimums = sum(t.min_replicas or 0 for t in self.tasks)
        if self.min_available is not None and minimums > self.min_available:
            errors.add(
                ("min_available",),
                f"{self.min_available} is below the {minimums} pods the tasks' min_replicas require; raise it to "
                f"at least {minimums} or leave it unset (the job's minimum is then that sum)",
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
