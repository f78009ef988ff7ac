"""An immutable, indexed view of one request: what is free where, and where each task may go.

Everything the model needs is computed here once, in integers (milli-CPU, MiB) and numpy arrays,
and every (task, node) pair that cannot host even one pod is filtered out *before* a variable
exists: presolve should never have to discover that a taint blocks a node.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Generic, TypeVar

import numpy as np
from placement_models import ErrorList, Job, Node, PlacementRequest, PreemptionRules, RunningJob, Task

from placement import catalog, devices, migration, pricing, provision, topology
from placement.devices import DeviceView
from placement.speeds import Speeds
from placement.speeds import resolve as resolve_speeds
from placement.teams import TeamIndex, build_index
from placement.timeline import Schedule

#: Resource dimensions in integer units: GPUs, milli-CPU, MiB of RAM.
DIMS = ("gpus", "cpu", "memory")


def cpu_units(cores: float, demand: bool) -> int:
    """Milli-CPU; demands round up and capacities round down, so integer packing is never optimistic."""
    x = cores * 1000.0
    return int(math.ceil(x - 1e-6)) if demand else int(math.floor(x + 1e-6))


def mem_units(gib: float, demand: bool) -> int:
    x = gib * 1024.0
    return int(math.ceil(x - 1e-6)) if demand else int(math.floor(x + 1e-6))


def effective_labels(node: Node, model_name: str | None) -> dict[str, str]:
    """The node's labels plus implicit ones a selector may use; explicit labels win."""
    labels = {"kubernetes.io/hostname": node.name}
    if node.pool:
        labels["placement/pool"] = node.pool
    if model_name:
        labels["placement/gpu-model"] = model_name
    labels.update(node.labels)
    return labels


@dataclass(frozen=True)
class TaskInfo:
    """One task of one pending job, with its demand and the nodes that can take at least one pod."""

    index: int
    job: int
    spec: Task
    demand: np.ndarray  # (3,) int64: GPUs, milli-CPU, MiB
    candidates: np.ndarray  # node indices, ascending
    max_per_node: np.ndarray  # aligned with candidates: pods that fit on the free node alone
    #: why nodes were filtered: stage name -> nodes left after that stage (for pending reasons)
    funnel: tuple[tuple[str, int], ...]
    #: nodes that pass every filter and could take a pod if emptied (for "fits if ... were preempted")
    eligible: np.ndarray | None = None

    @property
    def replicas(self) -> int:
        return self.spec.replicas

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class RunningInfo:
    """One running job, indexed for the teams modules: what it holds where, and whether it may go.

    `evictable` says only that the job may be preempted at all (policy.preemption on, `preemptible`,
    past policy.min_runtime_s); which pending job may preempt it, by which rule, is `Problem.eviction_rules`;
    whether a plan does also depends on what takes its place (compile/preemption.py).
    """

    index: int
    spec: RunningJob
    nodes: np.ndarray  # node indices it has pods on, ascending
    use: np.ndarray  # (len(nodes), 3) int64: healthy GPUs, milli-CPU, MiB it holds on each
    gpu_ids: tuple[tuple[int, ...], ...]  # healthy GPU indices it holds on each of `nodes`
    team: int  # index into Problem.teams, -1 when no teams are declared
    evictable: bool
    lost_gpu_h: float  # GPU-hours a preemption now would lose (since the last checkpoint, else start)
    #: its team held more than its nominal before the plan in a quota scope where this job runs: a GPU scope
    #: holding one of its nodes, or the CPU or memory scope of a resource it holds (`_over_nominal`)
    over_nominal: bool
    #: `preemptible` and past policy.min_runtime_s, whether or not policy.preemption is on (for hints)
    ripe: bool = False

    @property
    def priority(self) -> int:
        return self.spec.priority

    @property
    def gpus(self) -> int:
        return int(self.use[:, 0].sum())

    def size(self, victim_gpus: float) -> float:
        """What evicting this job weighs, in victims: 1 + `weights.victim_gpus` × the GPUs its gang holds."""
        return 1.0 + victim_gpus * self.gpus

    def order(self, victim_gpus: float = 0.0) -> tuple[int, float, float, float, str]:
        """Preference among victims, least regretted first: lowest priority, smallest (`size`, as
        compile/preemption.py weighs a victim), least work lost, newest (latest `started_at`; unknown
        counts as oldest)."""
        started = self.spec.started_at.timestamp() if self.spec.started_at is not None else float("-inf")
        return (self.priority, self.size(victim_gpus), self.lost_gpu_h, -started, self.spec.job)


def allowed_rules(rules: PreemptionRules | None, priority: int, submitted_at: datetime | None, team: int,
                  victim: RunningInfo, together: bool = True) -> tuple[str, ...]:
    """The rules (`within_team`, `reclaim_within_cohort`, `borrow_within_cohort`, in that order) under which a
    pending job of this priority, submission time and team (-1: no teams declared) may preempt `victim`, before
    the quota conditions only the plan decides: reclaim needs the job's team to end within its nominal, and both
    cohort rules need the victim's team above its nominal where the job lands (`over_nominal` is the cheap test:
    somewhere it runs)."""
    if rules is None or not victim.evictable:
        return ()
    out: list[str] = []
    lower = priority > victim.priority
    if team == victim.team:  # also when no teams are declared: one team, cluster-wide
        newer = (rules.within_team == "lower_or_newer_equal_priority" and priority == victim.priority
                 and submitted_at is not None and victim.spec.started_at is not None
                 and submitted_at < victim.spec.started_at)
        if rules.within_team != "never" and (lower or newer):
            out.append("within_team")
    elif team >= 0 and victim.team >= 0 and victim.over_nominal and together:  # together: one cohort tree
        if rules.reclaim_within_cohort == "any" or (rules.reclaim_within_cohort == "lower_priority" and lower):
            out.append("reclaim_within_cohort")
        borrow = rules.borrow_within_cohort
        if borrow.policy == "lower_priority" and lower and (
                borrow.max_priority_threshold is None or victim.priority <= borrow.max_priority_threshold):
            out.append("borrow_within_cohort")
    return tuple(out)


T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class Slot(Generic[T]):
    """A typed key for a fact that a module above this layer keeps for a problem's lifetime (the problem
    layer cannot name those modules' types without importing upward). Each owner declares its slot once,
    as a module constant; `per_view` slots are answered only for the first problem that asks: views made
    with `replace(problem, ...)` share `Problem.facts` but not their devices, candidates or schedule, so
    they get a fresh value on every call instead."""

    name: str
    per_view: bool = False


@dataclass
class Facts:
    """What is derived from a problem once and kept for its lifetime, one field per fact, each built on first
    use (a plan that never explains a MIG job never builds the MIG tables). Views made with
    `replace(problem, ...)` share this object (a dataclass field is copied by reference), as they share the
    request, nodes and running jobs these facts are read from."""

    #: Domains per level and in-node GPU graphs (`Problem.topology`; built in `build`, which rejects bad
    #: topology input with its path).
    topology: topology.ClusterTopology | None = None
    #: What the preemption rules read of pending and running jobs (`Problem.rule_kind`, `eviction_rules`).
    rule_kinds: RuleKinds | None = None
    #: Does the greedy need the device ledger (`Problem.needs_device_ledger`); explain asks once per job.
    devices_needed: bool | None = None
    #: Set by `placement.screen`: the problem before screening and the indices of the jobs dropped from it.
    screened: tuple[Problem, list[int]] | None = None
    #: Milli-GPU per unit of the soft terms' variables (`placement.compile.quota.quantum`).
    quota_quantum: int | None = None
    #: Class weights and the nominal bonus per priority level (`placement.compile.priority`).
    class_tiers: tuple[dict[int, float], dict[int, float]] | None = None
    #: Per pending job, the alignment term's charge per GPU (`placement.compile.alignment`; dominance asks
    #: for every job).
    alignment_charges: dict[int, float] | None = None
    #: (N,) milli-GPU of a MIG instance per node, per (profile, gpu_memory_gib) (`placement.holdings`).
    mig_milli: dict[tuple[str | None, float | None], np.ndarray] = field(default_factory=dict)
    #: What each running job holds on its nodes, keyed by the identity of the running tuple it was built for
    #: (`placement.holdings.running_use`).
    running_use: dict[int, tuple[np.ndarray, ...]] = field(default_factory=dict)
    #: Facts of modules above this layer, under their own typed `Slot`s (with the problem that owns each).
    slots: dict[Slot[Any], tuple[object, Any]] = field(default_factory=dict)

    def slot(self, key: Slot[T], owner: object, make: Callable[[], T]) -> T:
        """The fact under `key`, made by `make` on first use; a `per_view` slot answers only its `owner`
        (the first problem that asked), every other view gets a fresh `make()`."""
        hit = self.slots.get(key)
        if hit is None:
            value = make()
            self.slots[key] = (owner, value)
            return value
        if key.per_view and hit[0] is not owner:
            return make()
        found: T = hit[1]
        return found

    def put(self, key: Slot[T], owner: object, value: T) -> None:
        """Keep `value` under `key`, replacing what was there."""
        self.slots[key] = (owner, value)


@dataclass(frozen=True)
class Problem:
    request: PlacementRequest
    nodes: tuple[Node, ...]
    node_index: dict[str, int]
    gpu_models: tuple[str | None, ...]  # canonical catalog names
    capacity: np.ndarray  # (N, 3) healthy capacity
    free: np.ndarray  # (N, 3) after running pods
    free_gpu_ids: tuple[tuple[int, ...], ...]  # healthy, unused GPU indices per node
    jobs: tuple[Job, ...]
    tasks: tuple[TaskInfo, ...]
    job_tasks: tuple[tuple[int, ...], ...]
    #: facts derived once and kept for the problem's lifetime, shared by `replace` views (`Facts`)
    facts: Facts = field(default_factory=Facts)
    # --- teams ---
    running: tuple[RunningInfo, ...] = ()
    teams: TeamIndex | None = None
    job_team: tuple[int, ...] = ()  # team index per pending job, -1 when no teams are declared
    #: MIG-partitioned and shared GPUs, per node (placement.devices)
    devices: DeviceView | None = None
    #: starved jobs that must start now and reservations for those that cannot (placement.reservation)
    schedule: Schedule = field(default_factory=Schedule)
    #: each job's speed per GPU model, under catalog names (placement.speeds)
    speeds: Speeds = field(default_factory=Speeds)
    #: pending job index -> running job index: the twins of running jobs that may move (placement.migration)
    twins: dict[int, int] = field(default_factory=dict)

    def eviction_rules(self, j: int, r: int) -> tuple[str, ...]:
        """The rules of job j's team's `preemption` (else policy.preemption) under which placing it may preempt
        running job r (`allowed_rules`; the quota conditions are the plan's: compile/preemption.py). A twin
        (placement.migration) preempts nobody."""
        if j in self.twins:
            return ()
        return self._kinds().rules(self.jobs[j], self.job_team[j] if self.job_team else -1, self.running[r])

    def may_evict(self, j: int, r: int) -> bool:
        """Could placing pending job j justify preempting running job r under some rule of policy.preemption?"""
        return bool(self.eviction_rules(j, r))

    def preemptable(self) -> list[int]:
        """Running jobs some pending job may preempt under a rule (exact, over the distinct kinds of pending job)."""
        kinds = {self.rule_kind(j): j for j in range(len(self.jobs)) if j not in self.twins}
        return [r.index for r in self.running
                if r.evictable and any(self.may_evict(j, r.index) for j in kinds.values())]

    def rule_kind(self, j: int) -> tuple[object, ...]:
        """What the rules read of a pending job (`RuleKinds.kind`): jobs of one kind may preempt the same jobs."""
        return self._kinds().kind(self.jobs[j], self.job_team[j] if self.job_team else -1)

    def _kinds(self) -> RuleKinds:
        if self.facts.rule_kinds is None:
            self.facts.rule_kinds = RuleKinds(self.request, self.running)
        return self.facts.rule_kinds

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    def gpu_empty(self) -> np.ndarray:
        """Nodes whose every healthy GPU is free: the whole nodes big gangs need."""
        return (self.capacity[:, 0] > 0) & (self.free[:, 0] == self.capacity[:, 0])

    def job_gpus(self, j: int) -> int:
        return sum(int(self.tasks[t].demand[0]) * self.tasks[t].replicas for t in self.job_tasks[j])

    def topology(self) -> topology.ClusterTopology:
        """Domains per level and in-node GPU graphs, built once in `build` (nodes include added ones)."""
        if self.facts.topology is None:
            self.facts.topology = topology.cluster_topology(self.request, self.nodes)
        return self.facts.topology

    def device_view(self) -> DeviceView:
        """The device view (every built problem has one; a hand-made one for a test may not)."""
        assert self.devices is not None, "problem built without a device view"
        return self.devices

    def gpu_value(self, t: int) -> float:
        """A pod of task t in GPU-equivalents: whole GPUs, its share, or its MIG instance's fraction of a GPU."""
        task = self.tasks[t]
        return devices.gpu_value(task.spec, self.devices, task.candidates)

    def needs_device_ledger(self) -> bool:
        """Does the greedy need the device ledger? (MIG/shared pods, or idle partitioned GPUs it may make whole)"""
        if self.facts.devices_needed is None:  # asked once per pending job by explain: answer from the first look
            view = self.devices
            self.facts.devices_needed = view is not None and (any(devices.uses_devices(t.spec) for t in self.tasks)
                                                              or bool(view.changes and any(g.idle for gpus in view.mig
                                                                                           for g in gpus)))
        return self.facts.devices_needed


def _on_devices(info: TaskInfo, view: DeviceView) -> TaskInfo:
    """Keep only nodes that can take one MIG/shared pod of the task; cap pods per node by device room."""
    if not devices.uses_devices(info.spec):
        return info
    fits, room, stages = devices.room(info.spec, view, info.candidates)
    keep = fits & (room > 0)
    funnel = (*info.funnel, (stages[0], int(fits.sum())), (stages[1], int(keep.sum())))
    return replace(info, candidates=info.candidates[keep].astype(np.int64),
                   max_per_node=np.minimum(info.max_per_node[keep], room[keep]).astype(np.int64), funnel=funnel)


def build(request: PlacementRequest) -> Problem:
    """Index the request; unknown GPU models are reported with the list of known ones. With policy.migration,
    the running jobs that could move join the pending jobs as twins (placement.migration)."""
    # Nodes pools may add (provisioning) follow the real ones: index >= len(request.cluster.nodes).
    nodes = tuple(request.cluster.nodes) + provision.added_nodes(request)
    node_index = {n.name: i for i, n in enumerate(nodes)}
    errors = ErrorList("PlacementRequest")
    models: list[str | None] = []
    memory = np.zeros(len(nodes))
    for i, n in enumerate(nodes):
        if n.gpu_model is None:
            models.append(None)
            continue
        found = catalog.lookup(n.gpu_model)
        if found is None:
            errors.add(provision.field_path(request, i, "gpu_model"),
                       f"unknown GPU model '{n.gpu_model}' (known: {', '.join(catalog.known_models())})",
                       n.gpu_model)
            models.append(None)
        else:
            models.append(found.name)
            memory[i] = found.memory_gib
    errors.raise_if_any()
    request = migration.with_twins(request, {m for n, m in zip(nodes, models, strict=True) if n.gpus > 0})

    capacity = np.array(
        [[n.gpus - len(n.unhealthy_gpus), cpu_units(n.cpu, False), mem_units(n.memory_gib, False)] for n in nodes],
        dtype=np.int64,
    ).reshape(len(nodes), 3)
    # What running pods take, summed in one pass (a numpy update per pod cost 0.1 s at 12,500 nodes).
    where: list[int] = []
    taken: list[tuple[int, int, int]] = []
    for job in request.cluster.running:
        for pod in job.pods:
            i = node_index[pod.node]
            gpus = 0 if pod.gpu_share is not None else sum(g not in nodes[i].unhealthy_gpus for g in pod.gpus)
            where.append(i)
            taken.append((gpus, cpu_units(pod.cpu, True), mem_units(pod.memory_gib, True)))
    used = np.zeros_like(capacity)
    np.add.at(used, np.array(where, dtype=np.intp), np.array(taken, dtype=np.int64).reshape(len(taken), 3))
    free = np.maximum(capacity - used, 0)
    view = devices.build(request, nodes, tuple(models))
    free[:, 0] = view.whole_free  # partitioned and shared GPUs are never given whole (placement.devices)
    free_ids = view.plain  # healthy GPUs no running pod holds, neither partitioned nor shared

    filters = _NodeFilters(nodes, [effective_labels(n, m) for n, m in zip(nodes, models, strict=True)])
    spot = pricing.node_prices(request.cluster.pools, nodes).spot
    running, teams, job_team = _teams(request, nodes, node_index, tuple(models))
    speeds = resolve_speeds(request, frozenset(m for n, m in zip(nodes, models, strict=True) if n.gpus > 0),
                            [[models[n] for n in r.nodes.tolist() if nodes[n].gpus > 0] for r in running])
    kinds = RuleKinds(request, running)
    twins = migration.twins(request)
    room = _room(free, running, kinds, job_team, twins)
    tasks: list[TaskInfo] = []
    job_tasks: list[tuple[int, ...]] = []
    # Thousands of tasks share a shape: their filtered arrays are computed once per signature and shared
    # (read-only), as each costs a few vector passes over every node (2.9 s for 6,181 tasks at 4,096 nodes).
    shapes: dict[tuple[object, ...], TaskInfo] = {}
    for j, job in enumerate(request.jobs):
        ids = []
        slower = migration.too_slow(speeds, twins[j], models, capacity) if j in twins else None
        for spec in job.tasks:
            key = (*_signature(spec), job.spot_ok, j if j in twins else -1)
            shape = shapes.get(key)
            if shape is None:
                info = _task_info(len(tasks), j, spec, nodes, filters, memory, room, capacity)
                info = _on_devices(info, view)
                info = info if job.spot_ok else _without(info, spot, "spot")
                shape = shapes[key] = _frozen(info if slower is None else _without(info, slower, "faster_gpus"))
            ids.append(len(tasks))
            tasks.append(TaskInfo(index=len(tasks), job=j, spec=spec, demand=shape.demand, candidates=shape.candidates,
                                  max_per_node=shape.max_per_node, funnel=shape.funnel, eligible=shape.eligible))
        job_tasks.append(tuple(ids))
    return Problem(
        request=request, nodes=nodes, node_index=node_index, gpu_models=tuple(models), capacity=capacity,
        free=free, free_gpu_ids=free_ids, jobs=tuple(request.jobs), tasks=tuple(tasks),
        job_tasks=tuple(job_tasks), running=running, teams=teams, job_team=job_team, devices=view, speeds=speeds,
        # domains per level and in-node GPU graphs; bad topology input is rejected here, with its path
        facts=Facts(topology=topology.cluster_topology(request, nodes), rule_kinds=kinds), twins=twins,
    )



def _teams(request: PlacementRequest, nodes: tuple[Node, ...], node_index: dict[str, int],
           models: tuple[str | None, ...]) -> tuple[tuple[RunningInfo, ...], TeamIndex | None, tuple[int, ...]]:
    """Running jobs and teams, indexed for teams and quotas: who holds what, who may be preempted, quota scopes."""
    team_of = {t.name: i for i, t in enumerate(request.teams)}
    now = request.planning_time()
    policy = request.policy
    held: list[dict[int, list[int]]] = []
    use: list[dict[int, list[int]]] = []  # running job -> node -> [healthy GPUs, milli-CPU, MiB] it holds there
    for rj in request.cluster.running:
        ids: dict[int, list[int]] = {}
        amount: dict[int, list[int]] = {}
        for pod in rj.pods:
            i = node_index[pod.node]
            healthy = [g for g in pod.gpus if g not in nodes[i].unhealthy_gpus and pod.gpu_share is None]
            ids.setdefault(i, []).extend(healthy)
            total = amount.setdefault(i, [0, 0, 0])
            total[0] += len(healthy)
            total[1] += cpu_units(pod.cpu, True)
            total[2] += mem_units(pod.memory_gib, True)
        held.append(ids)
        use.append(amount)
    running_team = [team_of.get(rj.team, -1) if rj.team else -1 for rj in request.cluster.running]
    index = build_index(request, nodes, models, running_team,
                        [{n: int(a[0]) for n, a in u.items()} for u in use] if request.teams else None)
    out = []
    for r, rj in enumerate(request.cluster.running):
        where = sorted(use[r])
        since = rj.checkpointed_at or rj.started_at
        if rj.started_at is not None and since is not None and since < rj.started_at:
            since = rj.started_at
        ran_s = None if rj.started_at is None else (now - rj.started_at).total_seconds()
        old_enough = policy.min_runtime_s == 0 or (ran_s is not None and ran_s >= policy.min_runtime_s)
        gpus = sum(int(use[r][n][0]) for n in where)
        lost = 0.0 if since is None else gpus * max(0.0, (now - since).total_seconds()) / 3600.0
        over = index is not None and running_team[r] >= 0 and _over_nominal(index, running_team[r], use[r])
        out.append(RunningInfo(
            index=r, spec=rj, nodes=np.array(where, dtype=np.int64),
            use=np.array([use[r][n] for n in where], dtype=np.int64).reshape(len(where), 3),
            gpu_ids=tuple(tuple(sorted(held[r][n])) for n in where), team=running_team[r],
            evictable=request.may_preempt and rj.preemptible and old_enough, lost_gpu_h=lost,
            over_nominal=bool(over), ripe=rj.preemptible and old_enough,
        ))
    job_team = tuple(team_of.get(j.team, -1) if j.team else -1 for j in request.jobs)
    return tuple(out), index, job_team


def _over_nominal(index: TeamIndex, team: int, use: dict[int, list[int]]) -> bool:
    """Does `team` hold more GPUs than its nominal, before the plan, in a GPU quota scope holding one of the
    running job's nodes (`use`: node -> healthy GPUs, milli-CPU, MiB)? Reclaim is judged on GPU quotas only,
    in the model, the warm start and the verifier alike: a team borrowing only CPU or memory is not reclaimed."""
    for scope in index.all_scopes:
        if scope.resource != 0 or scope.before[team] <= scope.nominal[team]:
            continue
        if any(scope.mask[n] for n in use):
            return True
    return False


class RuleKinds:
    """What the preemption rules read of pending jobs, once per job, and their answer once per kind and victim.

    A queue of a thousand jobs against hundreds of running ones asks `allowed_rules` for every pair; jobs of
    one kind get the same answers. The kind: priority, team and, when `lower_or_newer_equal_priority` compares
    its submission with victims' starts, how many evictable running jobs started no later than it was
    submitted (the same count: the same victims)."""

    def __init__(self, request: PlacementRequest, running: tuple[RunningInfo, ...]) -> None:
        self.request = request
        self.starts = sorted(r.spec.started_at.timestamp() for r in running
                             if r.evictable and r.spec.started_at is not None)
        self._kinds: dict[int, tuple[Job, tuple[object, ...]]] = {}  # id(job) -> (job, kind); holds the job
        self._rules: dict[tuple[object, ...], tuple[str, ...]] = {}

    def kind(self, job: Job, team: int) -> tuple[object, ...]:
        found = self._kinds.get(id(job))
        if found is None or found[0] is not job:
            rules = self.request.preemption_rules_for(job.team)
            newer = rules is not None and rules.within_team == "lower_or_newer_equal_priority"
            before = (None if not newer or job.submitted_at is None
                      else bisect.bisect_right(self.starts, job.submitted_at.timestamp()))
            found = self._kinds[id(job)] = (job, (job.priority, team, job.team, before))
        return found[1]

    def rules(self, job: Job, team: int, victim: RunningInfo) -> tuple[str, ...]:
        kind = self.kind(job, team)
        found = self._rules.get((kind, victim.index))
        if found is None:
            found = self._rules[kind, victim.index] = allowed_rules(
                self.request.preemption_rules_for(job.team), job.priority, job.submitted_at, team, victim,
                self.request.share_cohort(job.team, victim.spec.team))
        return found


def _room(free: np.ndarray, running: tuple[RunningInfo, ...], kinds: RuleKinds, job_team: tuple[int, ...],
          twins: dict[int, int]) -> np.ndarray:
    """The room every pending job may count on: free capacity, what any pending job could justify preempting
    and what running jobs that may move hold (placement.migration). What a preemption frees is free for the
    whole plan, not only for the job it is made for: were it not, a job of another team (which could not
    preempt) would wait while lower classes fill the GPUs a team's own preemption freed."""
    distinct = {kinds.kind(job, job_team[j]): (job, job_team[j]) for j, job in enumerate(kinds.request.jobs)
                if j not in twins}
    moving = set(twins.values())
    freed = [r for r in running if r.index in moving
             or (r.evictable and any(kinds.rules(job, team, r) for job, team in distinct.values()))]
    room = free.copy() if freed else free
    for r in freed:
        room[r.nodes] += r.use
    return room


def _task_info(index: int, job: int, spec: Task, nodes: tuple[Node, ...], filters: _NodeFilters,
               memory: np.ndarray, free: np.ndarray, capacity: np.ndarray) -> TaskInfo:
    demand = np.array([spec.gpus, cpu_units(spec.cpu, True), mem_units(spec.memory_gib, True)], dtype=np.int64)
    n = len(nodes)
    funnel: list[tuple[str, int]] = [("nodes", n)]
    ok = np.ones(n, dtype=bool)
    if spec.node_selector:
        ok &= filters.selected(spec.node_selector)
        funnel.append(("node_selector", int(ok.sum())))
    ok &= filters.tolerated(spec)
    funnel.append(("taints", int(ok.sum())))
    if spec.gpus > 0:
        ok &= filters.has_gpus
        funnel.append(("has_gpus", int(ok.sum())))
        if spec.gpu_memory_gib is not None:
            ok &= memory >= spec.gpu_memory_gib - 1e-9
            funnel.append(("gpu_memory", int(ok.sum())))
    # Column by column: whole-row reductions over (N, 3) arrays cost several times more.
    big = ok & (capacity[:, 0] >= demand[0]) & (capacity[:, 1] >= demand[1]) & (capacity[:, 2] >= demand[2])
    eligible = np.flatnonzero(big)
    fit = np.full(n, spec.replicas, dtype=np.int64)  # pods that fit the free node alone, at most every replica
    for dim in np.flatnonzero(demand > 0).tolist():
        np.minimum(fit, free[:, dim] // demand[dim], out=fit)
    ok &= fit >= 1
    funnel.append(("free_capacity", int(ok.sum())))
    cand = np.flatnonzero(ok)
    return TaskInfo(index=index, job=job, spec=spec, demand=demand, candidates=cand,
                    max_per_node=fit[cand].astype(np.int64), funnel=tuple(funnel), eligible=eligible)


def _signature(spec: Task) -> tuple[object, ...]:
    """Everything of a task its candidate arrays depend on: every field but its name and `min_replicas`
    (`spot_ok` is the job's and joins the key in `build`, as does a twin's index: placement.migration trims
    its nodes)."""
    return (spec.replicas, spec.gpus, spec.gpu_memory_gib, spec.cpu, spec.memory_gib,
            tuple(spec.node_selector.items()), tuple(t.model_dump_json() for t in spec.tolerations),
            spec.mig_profile, spec.gpu_share)


def _frozen(info: TaskInfo) -> TaskInfo:
    """`info` with its arrays read-only: tasks of one signature share them, so a write would change them all."""
    for arr in (info.demand, info.candidates, info.max_per_node, info.eligible):
        if arr is not None:
            arr.flags.writeable = False
    return info


def _without(info: TaskInfo, blocked: np.ndarray, stage: str) -> TaskInfo:
    """Drop blocked nodes from a task's candidates (a job without spot_ok never sees a spot node)."""
    if not blocked.any():
        return info
    keep = ~blocked[info.candidates]
    left = int(keep.sum())
    return replace(info, candidates=info.candidates[keep], max_per_node=info.max_per_node[keep],
                   funnel=(*info.funnel, (stage, left)),
                   eligible=None if info.eligible is None else info.eligible[~blocked[info.eligible]])


class _NodeFilters:
    """Selector and taint masks over all nodes, computed once per distinct label pair or toleration
    set: a thousand tasks over a thousand nodes must not cost a million Python-level checks."""

    def __init__(self, nodes: tuple[Node, ...], labels: list[dict[str, str]]) -> None:
        self.nodes = nodes
        self.labels = labels
        self.has_gpus = np.array([node.gpus > 0 for node in nodes], dtype=bool)
        self.tainted = [i for i, node in enumerate(nodes)
                        if any(t.effect != "PreferNoSchedule" for t in node.taints)]
        self._label: dict[tuple[str, str], np.ndarray] = {}
        self._toleration: dict[tuple[object, ...], np.ndarray] = {}

    def selected(self, selector: dict[str, str]) -> np.ndarray:
        mask = np.ones(len(self.nodes), dtype=bool)
        for pair in selector.items():
            if pair not in self._label:
                self._label[pair] = np.array([lab.get(pair[0]) == pair[1] for lab in self.labels], dtype=bool)
            mask &= self._label[pair]
        return mask

    def tolerated(self, spec: Task) -> np.ndarray:
        key = tuple(t.model_dump_json() for t in spec.tolerations)
        if key not in self._toleration:
            mask = np.ones(len(self.nodes), dtype=bool)
            for i in self.tainted:
                mask[i] = _tolerated(spec, self.nodes[i])
            self._toleration[key] = mask
        return self._toleration[key]


def _tolerated(spec: Task, node: Node) -> bool:
    """NoSchedule and NoExecute taints block unless tolerated; PreferNoSchedule only prefers."""
    return all(
        taint.effect == "PreferNoSchedule" or any(t.tolerates(taint) for t in spec.tolerations)
        for taint in node.taints
    )
