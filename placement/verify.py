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

from models import API_VERSION, Assignment, Job, Node, PlacementRequest, Plan, Task
from placement.catalog import lookup

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

    @classmethod
    def build(cls, request: PlacementRequest, plan: Plan) -> _Context:
        held: dict[tuple[str, int], str] = {}
        cpu: dict[str, float] = {}
        mem: dict[str, float] = {}
        for rj in request.cluster.running:
            for pod in rj.pods:
                for g in pod.gpus:
                    held.setdefault((pod.node, g), rj.job)
                cpu[pod.node] = cpu.get(pod.node, 0.0) + pod.cpu
                mem[pod.node] = mem.get(pod.node, 0.0) + pod.memory_gib
        ctx = cls(
            request=request,
            plan=plan,
            nodes={n.name: n for n in request.cluster.nodes},
            pending_jobs={j.name: j for j in request.jobs},
            running_jobs={rj.job for rj in request.cluster.running},
            held=held,
            running_cpu=cpu,
            running_mem=mem,
        )
        for i, a in enumerate(plan.assignments):
            job = ctx.pending_jobs.get(a.job)
            task = _task(job, a.task) if job else None
            node = ctx.nodes.get(a.node)
            if job and task and node:
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
    for node in ctx.request.cluster.nodes:  # request order: deterministic
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


def _objective(ctx: _Context) -> list[str]:
    obj = ctx.plan.objective
    terms = sum(obj.terms.values())
    # Written as "not <=" so that a NaN total or term is reported, not silently accepted.
    if not abs(obj.total - terms) <= EPS * max(1.0, abs(obj.total)):
        return [f"objective: total {obj.total!r} differs from the sum of its terms {terms!r}"]
    return []


def _preemption(ctx: _Context) -> list[str]:
    return [
        f"preemption: job {p.job} is preempted: not supported yet (preemption arrives with the teams module)"
        for p in ctx.plan.preemptions
    ]


def _mig(ctx: _Context) -> list[str]:
    return [
        f"mig: node {m.node} GPU {m.gpu} is re-partitioned: not supported yet (MIG arrives with the GPU sharing module)"
        for m in ctx.plan.mig_changes
    ]


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
    ("pending", _pending),
    ("objective", _objective),
    ("preemption", _preemption),
    ("mig", _mig),
)

#: Every rule name a violation can start with, in report order.
RULES: tuple[str, ...] = tuple(name for name, _ in _CHECKS)
