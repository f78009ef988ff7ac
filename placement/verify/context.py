"""The indexes every rule reads, built once from the request and the plan.

Each rule is a plain function of a `Context`: the request, the plan, and lookups derived from them
here (nodes by name, including those the plan adds; GPUs held by running jobs; assignments whose
job, task and node exist). The small helpers below keep messages uniform across rules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from placement_models import Assignment, Job, Node, PlacementRequest, Plan, RunningJob, Task

#: Tolerance for float resources: request values are decimal, sums of them are not exact.
EPS = 1e-6


@dataclass
class Resolved:
    """An assignment whose job, task and node exist; only these can be checked against resources."""

    index: int
    a: Assignment
    job: Job
    task: Task
    node: Node
    #: a one-GPU pod of a `right_size` job on a MIG instance: `task` is the MIG task it became
    right_sized: bool = False


@dataclass
class Context:
    """The request and plan, indexed: what every rule reads."""

    request: PlacementRequest
    plan: Plan
    nodes: dict[str, Node]
    pending_jobs: dict[str, Job]
    running_jobs: set[str]
    # (node, gpu index) -> running job that holds the GPU.
    held: dict[tuple[str, int], str]
    running_cpu: dict[str, float]
    running_mem: dict[str, float]
    resolved: list[Resolved] = field(default_factory=list)
    #: running jobs the plan preempts: their GPUs, CPU and memory are free for the plan's pods
    evicted: set[str] = field(default_factory=set)
    #: of those, the jobs stopped for running past their limit: gone before the planner looks at the cluster
    stopped: frozenset[str] = frozenset()
    #: views several rules read, each computed once per check; `topology.domains_of` fills the first
    domain_cache: dict[str, dict[str, str]] | None = field(default=None, repr=False)
    #: derived views other modules compute once per check, by name (placement.verify.candidates' node rooms,
    #: node classes and task offers, placement.verify.priority's tiers)
    memo: dict[str, Any] = field(default_factory=dict, repr=False)
    _job_nodes: dict[str, list[Resolved]] | None = field(default=None, repr=False)
    #: running jobs the plan moves (rule `migrate`), as the pending jobs they are placed again as
    #: (placement.verify.migration): their pods are checked as any pending job's, and earn no new work's terms
    moved: dict[str, Job] = field(default_factory=dict)

    def new_work(self) -> list[Resolved]:
        """The resolved assignments of pending jobs, not of running jobs moving: what the class, aging, turnaround,
        alignment, cost and stability terms weigh."""
        if not self.moved:
            return self.resolved
        return [r for r in self.resolved if r.job.name not in self.moved]

    def job_nodes(self) -> dict[str, list[Resolved]]:
        """Per job, its resolved assignments."""
        if self._job_nodes is None:
            self._job_nodes = {}
            for r in self.resolved:
                self._job_nodes.setdefault(r.job.name, []).append(r)
        return self._job_nodes

    @classmethod
    def build(cls, request: PlacementRequest, plan: Plan) -> Context:
        held: dict[tuple[str, int], str] = {}
        cpu: dict[str, float] = {}
        mem: dict[str, float] = {}
        evicted = {p.job for p in plan.preemptions}
        for rj in request.cluster.running:
            if rj.job in evicted:
                continue
            for pod in rj.pods:
                for g in [] if pod.gpu_share is not None else pod.gpus:  # shared GPUs: the sharing rule
                    held.setdefault((pod.node, g), rj.job)
                cpu[pod.node] = cpu.get(pod.node, 0.0) + pod.cpu
                mem[pod.node] = mem.get(pod.node, 0.0) + pod.memory_gib
        ctx = cls(
            request=request,
            plan=plan,
            nodes={**{n.name: n for n in request.cluster.nodes}, **_added_nodes(request, plan)},
            pending_jobs={j.name: j for j in request.jobs},
            running_jobs={rj.job for rj in request.cluster.running},
            held=held,
            running_cpu=cpu,
            running_mem=mem,
            evicted=evicted & {rj.job for rj in request.cluster.running},
            stopped=frozenset(p.job for p in plan.preemptions if p.rule == "max_runtime"),
            moved=moved_jobs(request, plan),
        )
        ctx.pending_jobs.update(ctx.moved)
        for i, a in enumerate(plan.assignments):
            job = ctx.pending_jobs.get(a.job)
            task = find_task(job, a.task) if job else None
            node = ctx.nodes.get(a.node)
            if job and task and node:
                if job.right_size and task.gpus == 1 and a.mig is not None:
                    # Checked as the MIG task it became; the right_size rule checks it may and is big enough.
                    moved = task.model_copy(update={"gpus": 0, "mig_profile": a.mig.profile, "gpu_memory_gib": None})
                    ctx.resolved.append(Resolved(i, a, job, moved, node, right_sized=True))
                else:
                    ctx.resolved.append(Resolved(i, a, job, task, node))
        return ctx


def moved_jobs(request: PlacementRequest, plan: Plan) -> dict[str, Job]:
    """Job name -> the pending job a moved running job is placed again as, for each `migrate` preemption."""
    running = {rj.job: rj for rj in request.cluster.running}
    out: dict[str, Job] = {}
    for p in plan.preemptions:
        rj = running.get(p.job)
        if p.rule != "migrate" or rj is None or not rj.pods:
            continue
        tasks: dict[str, dict[str, object]] = {}
        for pod in rj.pods:
            entry = tasks.setdefault(pod.task, {"name": pod.task, "replicas": 0, "gpus": len(pod.gpus),
                                                "cpu": pod.cpu, "memory_gib": pod.memory_gib})
            entry["replicas"] = int(entry["replicas"]) + 1  # type: ignore[call-overload]
        try:
            out[rj.job] = Job.model_validate({
                "name": rj.job, "team": rj.team, "namespace": rj.namespace, "priority": rj.priority,
                "submitted_at": rj.started_at, "expected_runtime_h": rj.expected_runtime_h,
                "max_runtime_h": rj.max_runtime_h, "speeds": rj.speeds, "workload": rj.workload,
                "attained_gpu_h": rj.attained_gpu_h, "tasks": list(tasks.values())})
        except ValueError:
            continue  # a shape no pending job could have: check_migration says why
    return out


def max_runtime(request: PlacementRequest, job: Job | RunningJob) -> float | None:
    """A job's limit: its own `max_runtime_h`, else its team's; None when neither is set."""
    if job.max_runtime_h is not None or job.team is None:
        return job.max_runtime_h
    return next((t.max_runtime_h for t in request.teams if t.name == job.team), None)


def find_task(job: Job, name: str) -> Task | None:
    return next((t for t in job.tasks if t.name == name), None)


def pod_name(a: Assignment) -> str:
    return f"pod {a.job}/{a.task}/{a.pod}"


def num(x: float) -> str:
    return f"{x:g}"


def _added_nodes(request: PlacementRequest, plan: Plan) -> dict[str, Node]:
    """Nodes the plan says it adds, built from their pool's template, when the name is one the pool offers."""
    pools = {p.name: p for p in request.cluster.pools}
    out: dict[str, Node] = {}
    for entry in plan.provisioned:
        pool = pools.get(entry.pool)
        if pool is None or pool.provisionable is None:
            continue
        offered = pool.provisionable.node_names(pool.name)
        for name in entry.nodes:
            if name in offered and name not in out:
                out[name] = pool.provisionable.materialise(pool.name, offered.index(name))
    return out


#: The model's objective unit: coefficients are integers per 1/SCALE GPU-equivalent (each rounded once), so a
#: term the model reports is off its exact value by at most half a unit per unit of each variable.
SCALE = 1000
#: Relative slack of a term whose model units the verifier adds up itself (`Tally`): the plan's value is that
#: integer sum over SCALE rounded to six decimals, so only the last bits of a large double can differ.
SUMMED = 1e-14
#: Relative slack of any other term: float sums of large terms.
FLOAT_SUM = 1e-9


@dataclass(frozen=True)
class Expected:
    """An objective term recomputed from the request and the plan, and how far the reported value may lie.

    The reported value must fall in [low − tolerance, high + tolerance], tolerance = units × 0.5/SCALE +
    1e-6 + rel × |value|: `units` counts the half model units the verifier cannot pin down (for a sum of
    exact values: the variable units the model rounded a coefficient for, pods, flags, segments, each off by
    at most half a model unit; for a `Tally`: two per unit whose coefficient lies on a rounding tie); 1e-6
    is the plan's rounding of a term to six decimals; `rel` covers float sums of large terms (`FLOAT_SUM`), or
    only the last bits of a double where the verifier summed the model's integers itself (`SUMMED`). `low` <
    `high` only where the verifier cannot pin a fact down from the wire format (its docstring says which),
    never by default.
    """

    low: float
    high: float
    units: float = 0.0
    rel: float = FLOAT_SUM

    @classmethod
    def exact(cls, value: float, units: float = 0.0) -> Expected:
        return cls(value, value, units)

    def tolerance(self) -> float:
        return self.units * 0.5 / SCALE + 1e-6 + self.rel * max(abs(self.low), abs(self.high))

    def admits(self, reported: float) -> bool:
        # "not outside" so that a NaN reported value is rejected
        tol = self.tolerance()
        return self.low - tol <= reported <= self.high + tol

    def __add__(self, other: Expected) -> Expected:
        return Expected(self.low + other.low, self.high + other.high, self.units + other.units,
                        max(self.rel, other.rel))

    def shown(self) -> str:
        if self.low == self.high:
            return f"{self.low:.6f}"
        return f"between {self.low:.6f} and {self.high:.6f}"


#: How near a half model unit a scaled coefficient may lie and still be rounded the other way by the planner,
#: whose float arithmetic may differ from the verifier's in the last bits (absolute, and relative to it).
TIE = 1e-9
TIE_REL = 1e-13


@dataclass
class Tally:
    """A term summed as the model sums it: each coefficient rounded once to whole model units (Python's
    `round` of coefficient × weight × SCALE, ties to even), times its variable's value, added as integers.

    The planner's term is exactly such a sum over SCALE, so where the verifier knows every coefficient and
    every variable's value the two agree to the unit. A coefficient within `TIE` of a half unit may round
    the other way in the planner's floats: each of its units may then be one model unit off (`unsure`).
    """

    units: int = 0
    unsure: int = 0

    def add(self, coef: float, count: int = 1, weight: float = 1.0) -> None:
        """Add `count` units of a variable whose coefficient is `coef` × `weight` (GPU-equivalents)."""
        if not count:
            return
        scaled = float(coef) * weight * SCALE
        self.units += round(scaled) * count
        if abs(abs(scaled - math.floor(scaled)) - 0.5) <= TIE + TIE_REL * abs(scaled):
            self.unsure += abs(count)

    def value(self) -> float:
        return self.units / SCALE

    def expected(self) -> Expected:
        return Expected(self.value(), self.value(), 2 * self.unsure, SUMMED)
