"""The second opinion: every hard rule of a plan, recomputed from the request alone.

This module deliberately shares no code with the compiler, the solver, the decoder or the greedy
baseline, and never touches CP-SAT: it reads only the wire format (`models`) and the GPU catalog.
If the compiler mis-encodes a rule, the solver will happily satisfy the wrong model and the
decoder will faithfully report it; only a checker that derives the rules again, independently,
from the request can catch that. Keep it simple and obviously right rather than fast.

Each violation is one string, ``"<rule>: <what, naming the objects>"``, so callers can grep or
group by rule. Messages come out in a fixed rule order (see `RULES`) and, within a rule, in the
order of the request's and plan's own lists, so the same inputs always give the same report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from placement_models import API_VERSION, Assignment, Job, Node, PlacementRequest, Plan, RunningJob, SharingChange, Task

from placement.catalog import MigGeometry, lookup

#: Tolerance for float resources: request values are decimal, sums of them are not exact.
EPS = 1e-6

#: Taint effects that keep a pod off a node; PreferNoSchedule is only a preference.
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")

class PlanViolation(Exception):
    """A plan broke hard rules; `.violations` lists them so callers can show every one at once."""

    def __init__(self, violations: list[str]) -> None:
        self.violations = list(violations)
        shown = "\n".join(self.violations)
        super().__init__(f"plan violates {len(self.violations)} rule(s):\n{shown}")


def verify(request: PlacementRequest, plan: Plan) -> list[str]:
    """All violations of `plan` against `request`, one string each; an empty list means valid."""
    ctx = _Context.build(request, plan)
    out: list[str] = []
    for _rule, check_rule in _CHECKS:
        out.extend(check_rule(ctx))
    return out


def check(request: PlacementRequest, plan: Plan) -> None:
    """Raise `PlanViolation` unless `plan` is valid: the gate `placement.plan()` passes plans through."""
    violations = verify(request, plan)
    if violations:
        raise PlanViolation(violations)


# --------------------------------------------------------------------------------------------
# Indexes built once from the request; each rule below reads them and nothing else.


@dataclass
class _Resolved:
    """An assignment whose job, task and node exist; only these can be checked against resources."""

    index: int
    a: Assignment
    job: Job
    task: Task
    node: Node
    #: a one-GPU pod of a `right_size` job on a MIG instance: `task` is the MIG task it became
    right_sized: bool = False


@dataclass
class _Context:
    request: PlacementRequest
    plan: Plan
    nodes: dict[str, Node]
    pending_jobs: dict[str, Job]
    running_jobs: set[str]
    # (node, gpu index) -> running job that holds the GPU.
    held: dict[tuple[str, int], str]
    running_cpu: dict[str, float]
    running_mem: dict[str, float]
    resolved: list[_Resolved] = field(default_factory=list)
    #: running jobs the plan preempts: their GPUs, CPU and memory are free for the plan's pods
    evicted: set[str] = field(default_factory=set)
    #: views several rules read, each computed once per check
    _domains: dict[str, dict[str, str]] | None = field(default=None, repr=False)
    _job_nodes: dict[str, list[_Resolved]] | None = field(default=None, repr=False)

    def domains(self) -> dict[str, dict[str, str]]:
        """Per topology level, node -> its domain (topology_domains)."""
        if self._domains is None:
            self._domains = topology_domains(self.request, list(self.nodes.values()))
        return self._domains

    def job_nodes(self) -> dict[str, list[_Resolved]]:
        """Per job, its resolved assignments."""
        if self._job_nodes is None:
            self._job_nodes = {}
            for r in self.resolved:
                self._job_nodes.setdefault(r.job.name, []).append(r)
        return self._job_nodes

    @classmethod
    def build(cls, request: PlacementRequest, plan: Plan) -> _Context:
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
        )
        for i, a in enumerate(plan.assignments):
            job = ctx.pending_jobs.get(a.job)
            task = _task(job, a.task) if job else None
            node = ctx.nodes.get(a.node)
            if job and task and node:
                if job.right_size and task.gpus == 1 and a.mig is not None:
                    # Checked as the MIG task it became; the right_size rule checks it may and is big enough.
                    moved = task.model_copy(update={"gpus": 0, "mig_profile": a.mig.profile, "gpu_memory_gib": None})
                    ctx.resolved.append(_Resolved(i, a, job, moved, node, right_sized=True))
                else:
                    ctx.resolved.append(_Resolved(i, a, job, task, node))
        return ctx


def _task(job: Job, name: str) -> Task | None:
    return next((t for t in job.tasks if t.name == name), None)


def _pod(a: Assignment) -> str:
    return f"pod {a.job}/{a.task}/{a.pod}"


def _num(x: float) -> str:
    return f"{x:g}"


# --------------------------------------------------------------------------------------------
# One function per rule. Each yields messages prefixed with its rule name.


def _api_version(ctx: _Context) -> list[str]:
    # The Plan model pins the literal, but a plan built with model_construct or by a future
    # version of the decoder skips validation: check the value itself.
    if ctx.plan.api_version != API_VERSION:
        return [f"api_version: plan has '{ctx.plan.api_version}', expected '{API_VERSION}'"]
    return []


def _reference(ctx: _Context) -> list[str]:
    out: list[str] = []
    seen: dict[tuple[str, str, int], int] = {}
    for i, a in enumerate(ctx.plan.assignments):
        where = f"assignment {i} ({_pod(a)})"
        job = ctx.pending_jobs.get(a.job)
        if job is None:
            if a.job in ctx.running_jobs:
                out.append(f"reference: {where} names running job {a.job}, not a pending one")
            else:
                out.append(f"reference: {where} names unknown job {a.job}")
        else:
            task = _task(job, a.task)
            if task is None:
                out.append(f"reference: {where} names unknown task {a.task} of job {a.job}")
            elif not 0 <= a.pod < task.replicas:
                out.append(
                    f"reference: {where} pod index {a.pod} out of range 0..{task.replicas - 1} "
                    f"of task {a.job}/{a.task}"
                )
        if a.node not in ctx.nodes:
            out.append(f"reference: {where} names unknown node {a.node}")
        key = (a.job, a.task, a.pod)
        if key in seen:
            out.append(f"reference: {where} duplicates assignment {seen[key]}")
        else:
            seen[key] = i
    return out


def _gpus(ctx: _Context) -> list[str]:
    out: list[str] = []
    given: dict[tuple[str, int], Assignment] = {}
    for r in ctx.resolved:
        a, node, task = r.a, r.node, r.task
        if task.gpu_share is not None:
            continue  # one shared GPU among several pods: the sharing rule
        if len(a.gpus) != task.gpus:
            out.append(f"gpus: {_pod(a)} on node {node.name} has {len(a.gpus)} GPUs, task asks for {task.gpus}")
        dupes = sorted(g for g, c in Counter(a.gpus).items() if c > 1)
        if dupes:
            out.append(f"gpus: {_pod(a)} on node {node.name} lists GPU(s) {dupes} more than once")
        for g in dict.fromkeys(a.gpus):  # distinct, in the plan's order
            if not 0 <= g < node.gpus:
                out.append(f"gpus: {_pod(a)} takes GPU {g} of node {node.name}, out of range 0..{node.gpus - 1}")
                continue
            if g in node.unhealthy_gpus:
                out.append(f"gpus: {_pod(a)} takes unhealthy GPU {g} of node {node.name}")
            holder = ctx.held.get((node.name, g))
            if holder is not None:
                out.append(f"gpus: {_pod(a)} takes GPU {g} of node {node.name}, held by running job {holder}")
            other = given.get((node.name, g))
            if other is not None:
                out.append(f"gpus: GPU {g} of node {node.name} is given to both {_pod(other)} and {_pod(a)}")
            else:
                given[node.name, g] = a
    return out


def _capacity(ctx: _Context, rule: str, attr: str, running: dict[str, float], unit: str) -> list[str]:
    used: dict[str, float] = {}
    for r in ctx.resolved:
        used[r.node.name] = used.get(r.node.name, 0.0) + getattr(r.task, attr)
    out: list[str] = []
    for node in ctx.nodes.values():  # request order, then added nodes: deterministic
        if node.name not in used:
            continue  # the plan adds nothing here; the request itself was validated on intake
        total = running.get(node.name, 0.0) + used[node.name]
        limit = getattr(node, attr)
        if total > limit + EPS:
            out.append(f"{rule}: node {node.name} uses {_num(total)} {unit} of {_num(limit)}")
    return out


def _capacity_cpu(ctx: _Context) -> list[str]:
    return _capacity(ctx, "capacity.cpu", "cpu", ctx.running_cpu, "CPUs")


def _capacity_memory(ctx: _Context) -> list[str]:
    return _capacity(ctx, "capacity.memory", "memory_gib", ctx.running_mem, "GiB")


def _gpu_memory(ctx: _Context) -> list[str]:
    out: list[str] = []
    for r in ctx.resolved:
        need = r.task.gpu_memory_gib
        if need is None:
            continue
        model_name = r.node.gpu_model
        if not model_name:
            out.append(f"gpu_memory: {_pod(r.a)} needs {_num(need)} GiB per GPU; node {r.node.name} has no GPU model")
            continue
        model = lookup(model_name)
        if model is None:
            # Without the catalog's figure the requirement cannot be shown to hold.
            out.append(f"gpu_memory: {_pod(r.a)} on node {r.node.name}: unknown GPU model {model_name}")
        elif need > model.memory_gib + EPS:
            out.append(
                f"gpu_memory: {_pod(r.a)} needs {_num(need)} GiB per GPU; node {r.node.name} has "
                f"{model.name} with {_num(model.memory_gib)} GiB"
            )
    return out


def effective_labels(node: Node) -> dict[str, str]:
    """The labels a node selector matches: well-known ones derived from the node, then its own.

    Explicit labels are applied last so an operator can override a derived one (e.g. pin a
    different gpu-model spelling) exactly as Kubernetes lets a node's labels be edited.
    """
    labels = {"kubernetes.io/hostname": node.name}
    if node.pool:
        labels["placement/pool"] = node.pool
    if node.gpu_model:
        model = lookup(node.gpu_model)
        if model is not None:
            labels["placement/gpu-model"] = model.name
    labels.update(node.labels)
    return labels


def _selector(ctx: _Context) -> list[str]:
    out: list[str] = []
    for r in ctx.resolved:
        if not r.task.node_selector:
            continue
        labels = effective_labels(r.node)
        for key, want in r.task.node_selector.items():
            have = labels.get(key)
            if have != want:
                shown = "missing" if have is None else f"'{have}'"
                out.append(f"selector: {_pod(r.a)} requires {key}='{want}'; node {r.node.name} has {shown}")
    return out


def _taints(ctx: _Context) -> list[str]:
    out: list[str] = []
    for r in ctx.resolved:
        for taint in r.node.taints:
            if taint.effect not in BLOCKING_EFFECTS:
                continue
            if not any(tol.tolerates(taint) for tol in r.task.tolerations):
                out.append(
                    f"taints: {_pod(r.a)} does not tolerate taint {taint.key}={taint.value}:{taint.effect} "
                    f"of node {r.node.name}"
                )
    return out


def _gang(ctx: _Context) -> list[str]:
    # Count distinct, in-range pods so a duplicated assignment cannot inflate a gang into
    # looking complete; raw counts per task catch a task given more pods than it has.
    distinct: dict[str, set[tuple[str, int]]] = {}
    raw: dict[tuple[str, str], int] = {}
    for r in ctx.resolved:
        raw[r.a.job, r.a.task] = raw.get((r.a.job, r.a.task), 0) + 1
        if 0 <= r.a.pod < r.task.replicas:
            distinct.setdefault(r.a.job, set()).add((r.a.task, r.a.pod))
    assigned = {a.job for a in ctx.plan.assignments}
    out: list[str] = []
    for job in ctx.request.jobs:
        if job.name not in assigned:
            continue  # an unplaced job is the pending rule's business, not the gang's
        placed = len(distinct.get(job.name, ()))
        if placed < job.needed:
            out.append(f"gang: job {job.name} has {placed} of {job.needed} required pods")
        for task in job.tasks:
            n = raw.get((job.name, task.name), 0)
            if n > task.replicas:
                out.append(f"gang: task {job.name}/{task.name} has {n} pods assigned, more than its {task.replicas}")
    return out


def _pending(ctx: _Context) -> list[str]:
    out: list[str] = []
    placed = {a.job for a in ctx.plan.assignments}
    listed: dict[str, int] = {}
    for i, p in enumerate(ctx.plan.pending):
        where = f"entry {i} (job {p.job})"
        if p.job not in ctx.pending_jobs:
            kind = "running" if p.job in ctx.running_jobs else "unknown"
            out.append(f"pending: {where} names {kind} job {p.job}, not a pending one")
        if p.job in listed:
            out.append(f"pending: {where} duplicates entry {listed[p.job]}")
        else:
            listed[p.job] = i
        if not p.reason.strip():
            out.append(f"pending: {where} has an empty reason")
    for job in ctx.request.jobs:
        if job.name in placed and job.name in listed:
            out.append(f"pending: job {job.name} is both placed and listed as pending")
        elif job.name not in placed and job.name not in listed:
            out.append(f"pending: job {job.name} is neither placed nor listed as pending")
    return out


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


def _spot(ctx: _Context) -> list[str]:
    spot = {p.name for p in ctx.request.cluster.pools if p.capacity_type == "spot"}
    return [f"spot: {_pod(r.a)} of job {r.job.name} (not spot_ok) is on spot node {r.node.name} (pool {r.node.pool})"
            for r in ctx.resolved if r.node.pool in spot and not r.job.spot_ok]


def _reserve(ctx: _Context) -> list[str]:
    """During peak, new pods leave `reserve` GPUs of each pool's existing nodes free (or add none there)."""
    policy = ctx.request.policy
    if not policy.peak:
        return []
    out: list[str] = []
    # Whole GPUs only: a shared GPU is never free whole, nor a partitioned one unless the plan may make it
    # whole (no kept running pod holds an instance there). The plan takes one per GPU of a whole-GPU pod
    # and one per plain GPU it partitions for MIG pods (mig_changes) or shares (sharing_changes); shares
    # and instances take none.
    instances = {(pod.node, pod.mig.gpu) for rj in ctx.request.cluster.running if rj.job not in ctx.evicted
                 for pod in rj.pods if pod.mig is not None}

    def whole(n: Node, g: int) -> bool:
        if g in n.unhealthy_gpus or (n.name, g) in ctx.held or g in n.sharing:
            return False
        return g not in n.mig or (policy.allow_mig_changes and (n.name, g) not in instances)

    nodes = {n.name: n for n in ctx.request.cluster.nodes}
    partitioned = {(c.node, c.gpu) for c in ctx.plan.mig_changes if c.mig_enabled and c.node in nodes
                   and c.gpu not in nodes[c.node].mig and whole(nodes[c.node], c.gpu)}
    partitioned |= {(c.node, c.gpu) for c in ctx.plan.sharing_changes if c.node in nodes
                    and c.gpu not in nodes[c.node].mig and whole(nodes[c.node], c.gpu)}
    for pool, reserve in policy.reserve.items():
        members = [n for n in ctx.request.cluster.nodes if n.pool == pool]
        free = sum(1 for n in members for g in range(n.gpus) if whole(n, g))
        names = {n.name for n in members}
        taken = sum(len(set(r.a.gpus)) for r in ctx.resolved if r.node.name in names
                    and r.task.gpu_share is None and r.task.mig_profile is None)
        taken += sum(1 for node, _ in partitioned if node in names)
        if taken > max(0, free - reserve):
            out.append(f"reserve: pool {pool} has {free} free GPUs and must keep {reserve} during peak; "
                       f"the plan takes {taken}")
    return out


def _provisioning(ctx: _Context) -> list[str]:
    pools = {p.name: p for p in ctx.request.cluster.pools}
    out: list[str] = []
    seen: set[str] = set()
    for i, entry in enumerate(ctx.plan.provisioned):
        pool = pools.get(entry.pool)
        if pool is None or pool.provisionable is None:
            out.append(f"provisioning: entry {i} adds nodes to pool {entry.pool}, which is not provisionable")
            continue
        offered = set(pool.provisionable.node_names(pool.name))
        for name in entry.nodes:
            if name not in offered:
                out.append(f"provisioning: pool {entry.pool} offers no node named {name}")
            elif name in seen:
                out.append(f"provisioning: node {name} is added twice")
            seen.add(name)
        if len(set(entry.nodes)) > pool.provisionable.max_nodes:
            out.append(f"provisioning: pool {entry.pool} adds {len(set(entry.nodes))} nodes, more than its "
                       f"max_nodes {pool.provisionable.max_nodes}")
    return out


def _objective(ctx: _Context) -> list[str]:
    obj = ctx.plan.objective
    terms = sum(obj.terms.values())
    # Written as "not <=" so that a NaN total or term is reported, not silently accepted.
    if not abs(obj.total - terms) <= EPS * max(1.0, abs(obj.total)):
        return [f"objective: total {obj.total!r} differs from the sum of its terms {terms!r}"]
    return []


# --- teams (issue 5): quota and preemption, recomputed from the request --------------------
#
# Quota: for every scope (the whole cluster when any team declares quota.gpus; one per flavor,
# (pool, GPU model), any team declares) and team T, with A_T its healthy GPUs after the plan
# (running jobs not preempted + placed pods on the scope's nodes) and B_T the same before it:
#   A_T ≤ max(nominal + borrowing_limit, B_T)
#   Σ_T max(0, A_T − guaranteed_T) ≤ max(Σ_T lendable_T, Σ_T max(0, B_T − guaranteed_T))
# with lendable = min(lending_limit, nominal) (nominal when unset) and guaranteed = nominal − lendable;
# a team without a quota in a scope others declare has nominal 0 and unlimited borrowing there.


@dataclass
class _Scope:
    label: str
    nodes: set[str]
    nominal: dict[str, int]
    limit: dict[str, int | None]
    lendable: dict[str, int]


def _canonical(model: str | None) -> str | None:
    found = lookup(model) if model else None
    return found.name if found is not None else model


def _scopes(ctx: _Context) -> list[_Scope]:
    teams = ctx.request.teams
    keys: list[tuple[str | None, str | None]] = []
    if any(t.quota is not None and t.quota.gpus is not None for t in teams):
        keys.append((None, None))
    for t in teams:
        for f in t.quota.flavors if t.quota else []:
            if (f.pool, _canonical(f.gpu_model)) not in keys:
                keys.append((f.pool, _canonical(f.gpu_model)))
    out = []
    for pool, model in keys:
        nodes = {n.name for n in ctx.nodes.values() if (pool is None or n.pool == pool)
                 and (model is None or _canonical(n.gpu_model) == model)}
        scope = _Scope(f"pool={pool} gpu_model={model}" if (pool or model) else "cluster", nodes, {}, {}, {})
        for t in teams:
            q = None
            if t.quota is not None:
                q = t.quota.gpus if pool is None and model is None else next(
                    (f.gpus for f in t.quota.flavors if (f.pool, _canonical(f.gpu_model)) == (pool, model)), None)
            scope.nominal[t.name] = q.nominal if q else 0
            scope.limit[t.name] = (q.nominal + q.borrowing_limit) if q and q.borrowing_limit is not None else None
            scope.lendable[t.name] = (min(q.nominal, q.lending_limit) if q.lending_limit is not None
                                      else q.nominal) if q else 0
        out.append(scope)
    return out


def _healthy(ctx: _Context, node: str, gpus: list[int]) -> int:
    n = ctx.nodes.get(node)
    return len({g for g in gpus if n is None or g not in n.unhealthy_gpus})


def _team_gpus(ctx: _Context, scope: _Scope) -> tuple[dict[str, int], dict[str, int]]:
    """(before, after) GPUs per team in the scope."""
    before = {t.name: 0 for t in ctx.request.teams}
    after = dict(before)
    for rj in ctx.request.cluster.running:
        if rj.team not in before:
            continue
        # whole GPUs only: a pod's share of a time-sliced/MPS GPU is not counted by quotas (GpuQuota)
        here = sum(_healthy(ctx, pod.node, pod.gpus) for pod in rj.pods
                   if pod.node in scope.nodes and pod.gpu_share is None)
        before[rj.team] += here
        if rj.job not in ctx.evicted:
            after[rj.team] += here
    for r in ctx.resolved:
        if r.job.team in after and r.node.name in scope.nodes:
            after[r.job.team] += r.task.gpus
    return before, after


def _quota(ctx: _Context) -> list[str]:
    out: list[str] = []
    for scope in _scopes(ctx):
        before, after = _team_gpus(ctx, scope)
        guaranteed = {t: scope.nominal[t] - scope.lendable[t] for t in before}
        for team, held in after.items():
            limit = scope.limit[team]
            if limit is not None and held > max(limit, before[team]):
                out.append(f"quota: team {team} holds {held} GPUs in scope {scope.label}, above nominal + "
                           f"borrowing_limit {limit} (held {before[team]} before the plan)")
        borrowed = sum(max(0, after[t] - guaranteed[t]) for t in after)
        pool = max(sum(scope.lendable.values()), sum(max(0, before[t] - guaranteed[t]) for t in before))
        if borrowed > pool:
            out.append(f"quota: teams in scope {scope.label} draw {borrowed} GPUs on the cohort's lendable nominal, "
                       f"more than its {pool}")
    return out


def _preemption(ctx: _Context) -> list[str]:
    """Preempted whole, only preemptible jobs past min runtime, each justified by a job placed in its stead."""
    out: list[str] = []
    running = {rj.job: rj for rj in ctx.request.cluster.running}
    policy = ctx.request.policy
    now = ctx.request.planning_time()
    seen: set[str] = set()
    placed = {a.job for a in ctx.plan.assignments}
    scopes = _scopes(ctx) if ctx.plan.preemptions else []
    team_after = {id(s): _team_gpus(ctx, s) for s in scopes}
    for i, p in enumerate(ctx.plan.preemptions):
        where = f"entry {i} (job {p.job})"
        rj = running.get(p.job)
        if rj is None:
            kind = "pending" if p.job in ctx.pending_jobs else "unknown"
            out.append(f"preemption: {where} names {kind} job {p.job}, not a running one")
            continue
        if p.job in seen:
            out.append(f"preemption: {where} preempts job {p.job} twice")
        seen.add(p.job)
        if not p.reason.strip():
            out.append(f"preemption: {where} has an empty reason")
        if p.job in placed:
            out.append(f"preemption: job {p.job} is preempted and placed again in the same plan")
        if not policy.preemption:
            out.append(f"preemption: job {p.job} is preempted but policy.preemption is off")
        if not rj.preemptible:
            out.append(f"preemption: job {p.job} is preempted but not preemptible")
        if policy.min_runtime_s > 0:
            ran = None if rj.started_at is None else (now - rj.started_at).total_seconds()
            if ran is None or ran < policy.min_runtime_s:
                shown = "an unknown time" if ran is None else f"{ran:g} s"
                out.append(f"preemption: job {p.job} has run {shown}, less than min_runtime_s "
                           f"{policy.min_runtime_s:g}")
        if not _justified(ctx, rj, scopes, team_after):
            out.append(f"preemption: job {p.job} (priority {rj.priority}, team {rj.team}) is preempted but no job "
                       "placed on its nodes has a higher priority or reclaims quota its team borrows")
    return out


def _justified(ctx: _Context, rj: RunningJob, scopes: list[_Scope],
               team_after: dict[int, tuple[dict[str, int], dict[str, int]]]) -> bool:
    """Some job placed on one of rj's nodes outranks it, or reclaims (team within nominal, rj's team above)."""
    nodes = {pod.node for pod in rj.pods}
    for r in ctx.resolved:
        if r.node.name not in nodes:
            continue
        if r.job.priority > rj.priority:
            return True
        if r.job.team is None or rj.team is None or r.job.team == rj.team:
            continue
        for scope in scopes:
            before, after = team_after[id(scope)]
            if (r.node.name in scope.nodes and before.get(rj.team, 0) > scope.nominal.get(rj.team, 0)
                    and after.get(r.job.team, 0) <= scope.nominal.get(r.job.team, 0)):
                return True
    return False


def _mig(ctx: _Context) -> list[str]:
    """MIG: changed layouts are legal and allowed, keep every running pod's instance where it is; each MIG pod
    holds an instance of its profile that exists after the plan and nobody else holds; no whole-GPU pod sits
    on a GPU partitioned after the plan."""
    out: list[str] = []
    policy = ctx.request.policy
    holds: dict[tuple[str, int, int], tuple[str, str]] = {}  # (node, gpu, start) -> (profile, running job)
    for rj in ctx.request.cluster.running:
        for pod in rj.pods:
            if pod.mig is not None and rj.job not in ctx.evicted:
                holds[pod.node, pod.mig.gpu, pod.mig.start] = (pod.mig.profile, rj.job)
    final: dict[tuple[str, int], list[tuple[str, int]] | None] = {
        (n.name, g): [(i.profile, i.start) for i in layout] for n in ctx.nodes.values() for g, layout in n.mig.items()
    }
    changes = ctx.plan.mig_changes
    if changes and not policy.allow_mig_changes:
        out.append(f"mig: the plan changes {len(changes)} GPU layout(s) but policy.allow_mig_changes is off")
    if policy.max_mig_changes is not None and len(changes) > policy.max_mig_changes:
        out.append(f"mig: the plan changes {len(changes)} GPU layouts, more than policy.max_mig_changes "
                   f"{policy.max_mig_changes}")
    seen: set[tuple[str, int]] = set()
    for m in changes:
        where = f"node {m.node} GPU {m.gpu}"
        node = _changed_gpu(ctx, out, "mig", m.node, m.gpu, seen, "changed")
        if node is None:
            continue
        model = lookup(node.gpu_model) if node.gpu_model else None
        if model is None or model.mig is None:
            out.append(f"mig: {where} is re-partitioned but GPU model {node.gpu_model} has no MIG")
            continue
        if m.gpu in node.unhealthy_gpus:
            out.append(f"mig: {where} is unhealthy and cannot be re-partitioned")
        if m.gpu in node.sharing:
            out.append(f"mig: {where} is a shared (time-slicing/MPS) GPU and cannot be partitioned")
        if (m.node, m.gpu) in ctx.held:
            out.append(f"mig: {where} is held whole by running job {ctx.held[m.node, m.gpu]}")
        layout = [(i.profile, i.start) for i in m.layout] if m.mig_enabled else None
        if not m.mig_enabled and m.layout:
            out.append(f"mig: {where} is made whole (mig_enabled false) but lists instances")
        out.extend(f"mig: {where}: {why}" for why in _layout_violations(model.mig, layout or []))
        for (hn, hg, start), (profile, job) in holds.items():
            if (hn, hg) != (m.node, m.gpu):
                continue
            kept = layout is not None and any(
                s == start and _same_profile(model.mig, name, profile) for name, s in layout)
            if not kept:
                out.append(f"mig: {where}: instance {profile}@{start} of running job {job} does not stay in place")
        final[m.node, m.gpu] = layout
    taken = {key: f"running job {job}" for key, (_, job) in holds.items()}
    for r in ctx.resolved:
        out.extend(_mig_pod(r, final, taken))
    return out


def _mig_pod(r: _Resolved, final: dict[tuple[str, int], list[tuple[str, int]] | None],
             taken: dict[tuple[str, int, int], str]) -> list[str]:
    a, task, node = r.a, r.task, r.node
    if task.mig_profile is None:
        if a.mig is not None:
            return [f"mig: {_pod(a)} holds a MIG instance but its task asks for none"]
        return [f"mig: {_pod(a)} takes GPU {g} of node {node.name} whole, but the GPU is MIG-partitioned"
                for g in dict.fromkeys(a.gpus) if final.get((node.name, g)) is not None]
    if a.mig is None:
        return [f"mig: {_pod(a)} asks for a MIG instance ({task.mig_profile}) but holds none"]
    slot = a.mig
    where = f"{_pod(a)} on node {node.name} GPU {slot.gpu}"
    model = lookup(node.gpu_model) if node.gpu_model else None
    if model is None or model.mig is None:
        return [f"mig: {where}: GPU model {node.gpu_model} has no MIG"]
    geo = model.mig
    layout = final.get((node.name, slot.gpu))
    if layout is None:
        return [f"mig: {where}: the GPU is not MIG-partitioned after the plan"]
    out: list[str] = []
    if a.gpus:
        out.append(f"mig: {_pod(a)} holds a MIG instance and whole GPUs {a.gpus}")
    if slot.gpu in node.unhealthy_gpus:
        out.append(f"mig: {where}: the GPU is unhealthy")
    if not any(s == slot.start and _same_profile(geo, name, slot.profile) for name, s in layout):
        out.append(f"mig: {where}: no {slot.profile} instance at start {slot.start} after the plan")
    if task.mig_profile.strip().lower() == "auto":
        wanted = geo.smallest_fitting(task.gpu_memory_gib or 0.0)
    else:
        wanted = geo.profile(task.mig_profile)
    if wanted is None or not _same_profile(geo, wanted.name, slot.profile):
        out.append(f"mig: {where} holds {slot.profile}; its task wants "
                   f"{wanted.name if wanted else task.mig_profile + ' (not a profile of ' + geo.model + ')'}")
    got = geo.profile(slot.profile)
    if got is not None and task.gpu_memory_gib is not None and got.memory_gib < task.gpu_memory_gib - EPS:
        out.append(f"mig: {where}: {got.name} has {_num(got.memory_gib)} GiB, task needs "
                   f"{_num(task.gpu_memory_gib)}")
    key = (node.name, slot.gpu, slot.start)
    if key in taken:
        out.append(f"mig: {where}: instance {slot.profile}@{slot.start} is already held by {taken[key]}")
    else:
        taken[key] = _pod(a)
    return out


def _same_profile(geo: MigGeometry, a: str, b: str) -> bool:
    pa, pb = geo.profile(a), geo.profile(b)
    return pa is not None and pa == pb


def _layout_violations(geo: MigGeometry, layout: list[tuple[str, int]]) -> list[str]:
    """HARDWARE.md §1.3, recomputed: known profiles, legal starts, no shared memory slice, counts, one media."""
    out: list[str] = []
    owner: dict[int, str] = {}
    count: Counter[str] = Counter()
    media: list[str] = []
    for name, start in layout:
        p = geo.profile(name)
        if p is None:
            out.append(f"{geo.model} has no MIG profile {name}")
            continue
        if start not in p.starts:
            out.append(f"{p.name} may not start at memory slice {start} (legal: {list(p.starts)})")
            continue
        for m in range(start, start + p.memory_slices):
            if m in owner:
                out.append(f"{p.name}@{start} and {owner[m]} share memory slice {m}")
                break
        owner.update(dict.fromkeys(range(start, start + p.memory_slices), f"{p.name}@{start}"))
        count[p.name] += 1
        if count[p.name] == p.max_count + 1:
            out.append(f"more than {p.max_count} {p.name} instances")
        if p.media:
            media.append(f"{p.name}@{start}")
    if len(media) > 1:
        out.append(f"more than one media-engine instance ({', '.join(media)})")
    return out


def _sharing(ctx: _Context) -> list[str]:
    """Shared pods sit on a shared GPU, declared (node.sharing) or shared by the plan (sharing_changes); per GPU
    at most `replicas` pods, shares ≤ 1, GPU memory ≤ the GPU's; no whole-GPU pod on either."""
    out, changed = _sharing_changes(ctx)
    load: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for rj in ctx.request.cluster.running:
        for pod in rj.pods:
            if pod.gpu_share is not None and rj.job not in ctx.evicted and pod.gpus:
                node = ctx.nodes[pod.node]
                load.setdefault((pod.node, pod.gpus[0]), []).append(
                    (pod.gpu_share, _share_memory(node, pod.gpu_share, pod.gpu_memory_gib)))
    touched: list[tuple[str, int]] = []
    for r in ctx.resolved:
        a, task, node = r.a, r.task, r.node
        if task.gpu_share is None:
            if a.gpu_share is not None:
                out.append(f"sharing: {_pod(a)} takes a GPU share but its task asks for none")
            out.extend(f"sharing: {_pod(a)} takes shared GPU {g} of node {node.name} whole"
                       + ("" if g in node.sharing else " (the plan shares it)")
                       for g in dict.fromkeys(a.gpus) if g in node.sharing or (node.name, g) in changed)
            continue
        if a.gpu_share is None or abs(a.gpu_share - task.gpu_share) > EPS:
            out.append(f"sharing: {_pod(a)} takes share {a.gpu_share}; its task asks {_num(task.gpu_share)}")
        if len(a.gpus) != 1:
            out.append(f"sharing: {_pod(a)} names {len(a.gpus)} GPUs; a shared pod names exactly one")
            continue
        g = a.gpus[0]
        if g not in node.sharing and (node.name, g) not in changed:
            out.append(f"sharing: {_pod(a)} is on GPU {g} of node {node.name}, which is not shared (neither in "
                       "the node's sharing nor among the plan's sharing_changes)")
            continue
        if g in node.unhealthy_gpus:
            out.append(f"sharing: {_pod(a)} is on unhealthy GPU {g} of node {node.name}")
        if (node.name, g) not in touched:
            touched.append((node.name, g))
        load.setdefault((node.name, g), []).append(
            (task.gpu_share, _share_memory(node, task.gpu_share, task.gpu_memory_gib)))
    for name, g in touched:
        node = ctx.nodes[name]
        spec, pods = node.sharing.get(g) or changed[name, g], load[name, g]
        where = f"shared GPU {g} of node {name}"
        if len(pods) > spec.replicas:
            out.append(f"sharing: {where} has {len(pods)} pods, more than its {spec.replicas} replicas")
        if sum(s for s, _ in pods) > 1 + EPS:
            out.append(f"sharing: {where} is given {_num(sum(s for s, _ in pods))} of a GPU")
        model = lookup(node.gpu_model) if node.gpu_model else None
        memory = model.memory_gib if model else 0.0
        if sum(m for _, m in pods) > memory + EPS:
            out.append(f"sharing: {where} is given {_num(sum(m for _, m in pods))} GiB of GPU memory, "
                       f"more than its {_num(memory)} GiB (no memory isolation)")
    return out


def _changed_gpu(ctx: _Context, out: list[str], rule: str, node_name: str, gpu: int,
                 seen: set[tuple[str, int]], verb: str) -> Node | None:
    """The node of a GPU a plan's MIG or sharing change names, or None (the violation added to `out`)
    when the node is unknown, the index out of range, or the GPU already changed by an earlier entry.
    Records the GPU in `seen`."""
    where = f"node {node_name} GPU {gpu}"
    node = ctx.nodes.get(node_name)
    if node is None:
        out.append(f"{rule}: change of {where} names an unknown node")
        return None
    if not 0 <= gpu < node.gpus:
        out.append(f"{rule}: change of {where}: GPU index out of range 0..{node.gpus - 1}")
        return None
    if (node_name, gpu) in seen:
        out.append(f"{rule}: {where} is {verb} twice")
        return None
    seen.add((node_name, gpu))
    return node


def _sharing_changes(ctx: _Context) -> tuple[list[str], dict[tuple[str, int], SharingChange]]:
    """GPUs the plan shares: allowed and within the cap, each a healthy GPU of its node that is plain (neither
    partitioned, before or by the plan, nor shared already) and idle (no running pod holds it), with
    policy.sharing_default's setting. Returns the violations and the changes by (node, gpu)."""
    policy = ctx.request.policy
    changes = ctx.plan.sharing_changes
    out: list[str] = []
    if changes and not policy.allow_sharing_changes:
        out.append(f"sharing: the plan shares {len(changes)} idle GPU(s) but policy.allow_sharing_changes is off")
    if policy.max_sharing_changes is not None and len(changes) > policy.max_sharing_changes:
        out.append(f"sharing: the plan shares {len(changes)} GPUs, more than policy.max_sharing_changes "
                   f"{policy.max_sharing_changes}")
    running = {(pod.node, g): rj.job for rj in ctx.request.cluster.running for pod in rj.pods
               if pod.gpu_share is None for g in pod.gpus}
    repartitioned = {(m.node, m.gpu) for m in ctx.plan.mig_changes}
    default = policy.sharing_default
    changed: dict[tuple[str, int], SharingChange] = {}
    for c in changes:
        where = f"node {c.node} GPU {c.gpu}"
        node = _changed_gpu(ctx, out, "sharing", c.node, c.gpu, set(changed), "shared")
        if node is None:
            continue
        changed[c.node, c.gpu] = c
        if c.gpu in node.unhealthy_gpus:
            out.append(f"sharing: {where} is unhealthy and cannot be shared")
        if c.gpu in node.mig or (c.node, c.gpu) in repartitioned:
            out.append(f"sharing: {where} is MIG-partitioned (or re-partitioned by the plan); a GPU is shared one "
                       "way only")
        if c.gpu in node.sharing:
            out.append(f"sharing: {where} is already shared (the node's sharing); the plan shares plain GPUs only")
        if (c.node, c.gpu) in running:
            out.append(f"sharing: {where} is not idle: running job {running[c.node, c.gpu]} holds it")
        if (c.mode, c.replicas) != (default.mode, default.replicas):
            out.append(f"sharing: {where} is shared as {c.mode} with {c.replicas} replicas; policy.sharing_default "
                       f"says {default.mode} with {default.replicas}")
    return out, changed


def _right_size(ctx: _Context) -> list[str]:
    """A right-sized pod's instance holds at least the job's observed GPU memory × policy.right_size_headroom,
    and at least its observed utilisation × headroom of the GPU's SMs (compute slices)."""
    headroom = ctx.request.policy.right_size_headroom
    out: list[str] = []
    for r in ctx.resolved:
        if not r.right_sized or r.a.mig is None:
            continue
        seen = r.job.observed_gpu_memory_gib
        if seen is None:
            out.append(f"right_size: {_pod(r.a)} holds MIG {r.a.mig.profile} instead of a GPU, but job {r.job.name} "
                       "has no observed_gpu_memory_gib to size it by")
            continue
        model = lookup(r.node.gpu_model) if r.node.gpu_model else None
        got = model.mig.profile(r.a.mig.profile) if model is not None and model.mig is not None else None
        if got is None:
            continue  # not a profile of the node's GPU: the mig rule says so
        if got.memory_gib < seen * headroom - EPS:
            out.append(f"right_size: {_pod(r.a)} holds {got.name} ({_num(got.memory_gib)} GiB); job {r.job.name} "
                       f"needs observed {_num(seen)} GiB × headroom {_num(headroom)} = {_num(seen * headroom)} GiB")
        util = r.job.observed_sm_util
        total = model.mig.compute_slices if model is not None and model.mig is not None else 0
        if util is not None and total and got.compute_slices / total < util * headroom - EPS:
            out.append(f"right_size: {_pod(r.a)} holds {got.name} ({got.compute_slices}/{total} of the SMs); job "
                       f"{r.job.name} needs observed utilisation {_num(util)} × headroom {_num(headroom)} = "
                       f"{_num(util * headroom)} of them")
    return out


def _share_memory(node: Node, share: float, gib: float | None) -> float:
    """A shared pod's GPU memory: as declared, else its share of the GPU's memory."""
    if gib is not None:
        return gib
    model = lookup(node.gpu_model) if node.gpu_model else None
    return share * (model.memory_gib if model else 0.0)


# --------------------------------------------------------------------------------------------
# Topology (issue 3), re-derived from node labels alone: no code shared with placement.topology.

#: Levels read from node.topology; the NVLink domain falls back to GPU Feature Discovery's clique label.
_TOPOLOGY_FIELDS = ("nvlink_domain", "rack", "block")
_CLIQUE_LABEL = "nvidia.com/gpu.clique"


def _node_label(node: Node, level: str) -> str | None:
    if level in _TOPOLOGY_FIELDS:
        value = getattr(node.topology, level)
        if value is None and level == "nvlink_domain":
            value = node.labels.get(_CLIQUE_LABEL)
        return value or None
    return node.labels.get(level) or None


def topology_domains(request: PlacementRequest, nodes: list[Node] | None = None) -> dict[str, dict[str, str]]:
    """Level -> node name -> name of the node's domain at that level ("node" included).

    Walking up from the node: a domain of the level below lies in the one domain its nodes are
    labelled with at this level; if none of them carries a label, it is a domain of its own
    ("<…>", a name no label can have), so a required level is never met by guessing where an
    unlabelled node sits.
    """
    nodes = list(request.cluster.nodes) if nodes is None else nodes
    below = {n.name: n.name for n in nodes}
    out = {"node": dict(below)}
    for level in request.cluster.topology_levels:
        labels: dict[str, set[str]] = {}
        for n in nodes:
            label = _node_label(n, level)
            if label is not None:
                labels.setdefault(below[n.name], set()).add(label)
        here = {}
        for n in nodes:
            found = sorted(labels.get(below[n.name], ()))
            here[n.name] = "+".join(found) if found else f"<{below[n.name]}>"
        out[level] = here
        below = here
    return out


def _topology_required(ctx: _Context) -> list[str]:
    domains, per_job = ctx.domains(), ctx.job_nodes()
    out: list[str] = []
    for job in ctx.request.jobs:
        level = job.topology.required if job.topology is not None else None
        if level is None or job.name not in per_job:
            continue
        if level not in domains:
            out.append(f"topology.required: job {job.name} requires unknown level {level}")
            continue
        used = Counter(domains[level][r.node.name] for r in per_job[job.name])
        if len(used) > 1:
            shown = ", ".join(f"{d} ({k} pods)" for d, k in sorted(used.items()))
            out.append(f"topology.required: job {job.name} must sit in one {level} but uses {len(used)}: {shown}")
    return out


def _topology_slice(ctx: _Context) -> list[str]:
    domains, per_job = ctx.domains(), ctx.job_nodes()
    out: list[str] = []
    for job in ctx.request.jobs:
        spec = job.topology.slice if job.topology is not None else None
        if spec is None or job.name not in per_job or spec.required not in domains:
            continue
        size, where = spec.size, domains[spec.required]
        groups: dict[tuple[str, int], list[_Resolved]] = {}
        for r in per_job[job.name]:
            if r.task.gpus > 0:
                groups.setdefault((r.task.name, r.a.pod // size), []).append(r)
        for (task, g), members in sorted(groups.items()):
            pods = f"{job.name}/{task} pods {g * size}..{g * size + size - 1}"
            if len({m.a.pod for m in members}) != size:
                out.append(f"topology.slice: {pods} form a slice of {size} but {len(members)} are placed")
            used = sorted({where[m.node.name] for m in members})
            if len(used) > 1:
                out.append(f"topology.slice: {pods} must sit in one {spec.required} but use {', '.join(used)}")
    return out


def topology_report(request: PlacementRequest, plan: Plan) -> dict[str, object]:
    """Per-plan topology statistics, recomputed from the request and the plan's assignments.

    * `small_gangs`, `small_in_one_nvlink`, `small_in_one_nvlink_share`: placed jobs of 1-8 GPUs,
      and how many of them (share) sit inside one NVLink domain (a single node counts as one);
    * `multi_node_gangs`: placed jobs on two or more nodes; `domains_per_multi_node_gang`: per
      level, the mean number of that level's domains such a gang uses; `multi_node_in_one`: per
      level, how many such gangs sit inside one domain;
    * `empty_domains`: per level, multi-node domains whose healthy GPUs are all free after the
      plan (running pods minus preempted jobs, plus the plan's pods): room kept for big gangs.
    """
    ctx = _Context.build(request, plan)
    nodes = list(ctx.nodes.values())
    domains, per_job = ctx.domains(), ctx.job_nodes()
    levels = list(request.cluster.topology_levels)
    small = [rs for rs in per_job.values() if 0 < sum(len(r.a.gpus) for r in rs) <= 8]
    nvlink = domains.get("nvlink_domain", domains["node"])  # without that level: one node is the domain
    in_one = sum(1 for rs in small if len({nvlink[r.node.name] for r in rs}) == 1)
    multi = [rs for rs in per_job.values() if len({r.node.name for r in rs}) > 1]
    spread = {lv: [len({domains[lv][r.node.name] for r in rs}) for rs in multi] for lv in levels}
    gone = {p.job for p in plan.preemptions}
    busy = {node for (node, _), job in ctx.held.items() if job not in gone}
    busy |= {r.node.name for r in ctx.resolved if r.a.gpus}
    empty: dict[str, int] = {}
    for lv in levels:
        members: dict[str, list[Node]] = {}
        for n in nodes:
            members.setdefault(domains[lv][n.name], []).append(n)
        empty[lv] = sum(1 for ms in members.values() if len(ms) > 1 and not any(m.name in busy for m in ms)
                        and any(m.gpus > len(m.unhealthy_gpus) for m in ms))
    return {
        "small_gangs": len(small),
        "small_in_one_nvlink": in_one,
        "small_in_one_nvlink_share": round(in_one / len(small), 4) if small else None,
        "multi_node_gangs": len(multi),
        "domains_per_multi_node_gang": {lv: round(sum(v) / len(v), 4) if v else None for lv, v in spread.items()},
        "multi_node_in_one": {lv: sum(1 for k in v if k == 1) for lv, v in spread.items()},
        "empty_domains": empty,
    }


#: (rule name, checker) in the order messages are reported.
_CHECKS: tuple[tuple[str, Callable[[_Context], list[str]]], ...] = (
    ("api_version", _api_version),
    ("reference", _reference),
    ("gpus", _gpus),
    ("capacity.cpu", _capacity_cpu),
    ("capacity.memory", _capacity_memory),
    ("gpu_memory", _gpu_memory),
    ("selector", _selector),
    ("taints", _taints),
    ("gang", _gang),
    ("topology.required", _topology_required),
    ("topology.slice", _topology_slice),
    ("pending", _pending),
    ("spot", _spot),
    ("reserve", _reserve),
    ("provisioning", _provisioning),
    ("objective", _objective),
    ("quota", _quota),
    ("preemption", _preemption),
    ("mig", _mig),
    ("sharing", _sharing),
    ("right_size", _right_size),
)

#: Every rule name a violation can start with, in report order.
RULES: tuple[str, ...] = tuple(name for name, _ in _CHECKS)
