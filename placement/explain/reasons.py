"""Why a job waits: a precise, human reason for every pending job of a plan.

Reasons go from the most basic to the most contextual: nothing matches the task at all (and
which filter emptied the list), the cluster is too small for the gang even when empty of new
work, or the capacity went to other jobs in this plan (and to which ones).
"""

from __future__ import annotations

import heapq
from dataclasses import replace
from typing import NamedTuple

import numpy as np
from placement_models.policy import PreemptionRules

from placement import devices
from placement.baseline import place_task
from placement.explain import devices as device_reasons
from placement.explain import topology as topology_reasons
from placement.holdings import held_in, job_use, use_of
from placement.problem import Problem, TaskInfo, allowed_rules
from placement.rightsize import gang_minimums
from placement.solution import Placement
from placement.teams import QuotaLedger, amount


def _demand_text(task: TaskInfo) -> str:
    spec = task.spec
    parts = []
    if spec.gpus:
        parts.append(f"{spec.gpus} GPU" + ("s" if spec.gpus != 1 else ""))
    if spec.mig_profile is not None:
        parts.append(f"MIG {spec.mig_profile}" + (f" ≥ {spec.gpu_memory_gib:g} GiB" if spec.mig_auto else ""))
    if spec.gpu_share is not None:
        parts.append(f"{spec.gpu_share:g} of a shared GPU")
    if spec.cpu:
        parts.append(f"{spec.cpu:g} CPU")
    if spec.memory_gib:
        parts.append(f"{spec.memory_gib:g} GiB")
    return ", ".join(parts) or "no resources"


def gang_text(problem: Problem, j: int) -> str:
    """"1×launcher (8 CPU) + 4..16×worker (8 GPUs)": with per-task minimums (`min_replicas`) an elastic task
    shows minimum..replicas, and a `min_available` above their sum is added; an all-or-nothing gang, or one
    with only `min_available`, reads as its tasks' replicas."""
    job = problem.jobs[j]
    minimums = {members[0]: minimum for members, minimum in gang_minimums(problem, j)}
    per_task = any(0 < m < problem.tasks[t].replicas for t, m in minimums.items()) or (
        job.min_available is not None and any(minimums.values()))
    parts = []
    for t in problem.job_tasks[j]:
        task = problem.tasks[t]
        least = minimums.get(t, task.replicas) if per_task else task.replicas
        count = f"{least}..{task.replicas}" if least < task.replicas else f"{task.replicas}"
        parts.append(f"{count}×{task.name} ({_demand_text(task)})")
    text = " + ".join(parts)
    if per_task and job.needed > sum(minimums.values()):
        pods = sum(problem.tasks[t].replicas for t in minimums)  # a right-size alternative is no pod of its own
        text += f", at least {job.needed} of its {pods} pods"
    return text


def _filter_reason(problem: Problem, task: TaskInfo) -> str:
    """Name the first filter stage that left no node for the task."""
    spec = task.spec
    emptied = next((stage for stage, left in task.funnel if left == 0), "free_capacity")
    if emptied in devices.STAGES:  # MIG instances, shared GPUs
        return device_reasons.filter_reason(problem, task, emptied)
    if emptied == "nodes":
        return "the cluster has no nodes"
    if emptied == "node_selector":
        return f"no node matches node_selector {dict(spec.node_selector)} of task '{spec.name}'"
    if emptied == "taints":
        taints = sorted({f"{t.key}={t.value}:{t.effect}" for n in problem.nodes for t in n.taints
                         if t.effect != "PreferNoSchedule"})
        return f"every node left for task '{spec.name}' has a taint it does not tolerate ({', '.join(taints[:3])})"
    if emptied == "has_gpus":
        return f"task '{spec.name}' needs GPUs but no matching node has any"
    if emptied == "gpu_memory":
        have = [problem.nodes[i].gpu_model for i in range(problem.n_nodes) if problem.gpu_models[i]]
        return (f"task '{spec.name}' needs {spec.gpu_memory_gib:g} GiB of GPU memory per GPU; no matching node's "
                f"GPU model has that much (models here: {', '.join(sorted(set(map(str, have))))})")
    most = int(problem.free[:, 0].max()) if problem.n_nodes else 0
    return (f"no matching node has room for one pod of task '{spec.name}' ({_demand_text(task)}) "
            f"beside running work; the most free GPUs on one node is {most}")


def _fits(problem: Problem, j: int, free: np.ndarray, placement: Placement | None = None) -> bool:
    if problem.needs_device_ledger():  # which GPU, which instance, which layout changes: the device ledger knows
        return device_reasons.job_fits(problem, j, free, placement, place_task)
    trial = free.copy()
    counts: dict[tuple[int, int], int] = {}
    got = {t: place_task(problem, t, trial, counts) for t in problem.job_tasks[j]}
    return sum(got.values()) >= problem.jobs[j].needed and all(
        sum(got[t] for t in members) >= minimum for members, minimum in gang_minimums(problem, j))


def _gpus_by_node(problem: Problem, placement: Placement) -> dict[int, dict[int, int]]:
    """node -> placed job -> GPUs, built once per plan: thousands of pending jobs each ask who
    took their nodes, and scanning every placement for each of them cost minutes at 6k jobs."""
    if "gpus_by_node" not in placement.memo:
        index: dict[int, dict[int, int]] = {}
        for (t, n), k in placement.counts.items():
            if k:
                jobs = index.setdefault(n, {})
                rival = problem.tasks[t].job
                jobs[rival] = jobs.get(rival, 0) + int(problem.tasks[t].demand[0]) * k
        placement.memo["gpus_by_node"] = index
    return placement.memo["gpus_by_node"]  # type: ignore[return-value]


def _rivals(problem: Problem, placement: Placement, nodes: list[int]) -> tuple[dict[int, int], list[int]]:
    """GPUs each placed job holds on these nodes, and the three that outrank the rest; cached per
    node set, since jobs of one shape share their candidate nodes."""
    cache: dict[bytes, tuple[dict[int, int], list[int]]] = placement.memo.setdefault("rivals", {})  # type: ignore[assignment]
    key = np.asarray(nodes, dtype=np.int64).tobytes()
    if key not in cache:
        rivals: dict[int, int] = {}
        by_node = _gpus_by_node(problem, placement)
        for n in nodes:
            for rival, gpus in by_node.get(n, {}).items():
                rivals[rival] = rivals.get(rival, 0) + gpus
        top = heapq.nsmallest(3, rivals, key=lambda r: (-problem.jobs[r].priority, -rivals[r], problem.jobs[r].name))
        cache[key] = (rivals, top)
    return cache[key]


def _too_big(problem: Problem, j: int) -> bool:
    """A proof, not a heuristic, that job j cannot fit in the free cluster: some task's pods exceed
    what its candidate nodes can hold one by one, or the gang's GPUs exceed all free GPUs it may use."""
    tasks = problem.job_tasks[j]
    if problem.jobs[j].needed < problem.jobs[j].pods:
        return False  # elastic: which pods are needed is open, so only the heuristic speaks
    if any(int(problem.tasks[t].max_per_node.sum()) < problem.tasks[t].replicas for t in tasks):
        return True
    nodes = sorted(set().union(*(problem.tasks[t].candidates.tolist() for t in tasks)))
    return problem.job_gpus(j) > int(problem.free[nodes, 0].sum()) if nodes else True


def pending_reason(problem: Problem, j: int, placement: Placement, usage: np.ndarray,
                   ledger: QuotaLedger | None = None, optimal: bool = False) -> str:
    """`usage`: what the plan takes net of what its preemptions free; `ledger`: quotas after the plan;
    `optimal`: the plan is proved optimal, so a job that would fit was left out by the objective."""
    ledger = ledger if ledger is not None else quota_after(problem, placement)
    for t in problem.job_tasks[j]:
        task = problem.tasks[t]
        if task.candidates.size == 0:
            emptied = next((stage for stage, left in task.funnel if left == 0), "free_capacity")
            if emptied != "free_capacity":
                return _filter_reason(problem, task)
            return ((quota_reason(problem, j, ledger) or _filter_reason(problem, task))
                    + preemption_hint(problem, j, placement, usage))
    gang = gang_text(problem, j)
    domain = topology_reasons.pending_reason(problem, j, problem.free - usage, gang, place_task)
    if domain:  # a required level or slice no domain can hold (placement/topology.py)
        return domain
    if _too_big(problem, j) and not _fits(problem, j, problem.free):  # physics before policy
        nodes = sorted(set().union(*(problem.tasks[t].candidates.tolist() for t in problem.job_tasks[j])))
        free = int(problem.free[nodes, 0].sum()) if nodes else 0
        return (f"does not fit even if no other job were placed: gang of {gang} needs {problem.job_gpus(j)} "
                f"GPUs; matching nodes have {free} free" + _sharing_hint(problem, j)
                + preemption_hint(problem, j, placement, usage))
    blocked = quota_reason(problem, j, ledger)
    if blocked:
        return blocked
    left = problem.free - usage
    if _fits(problem, j, left, placement):
        blocked = quota_reason(problem, j, ledger, _where(problem, j, left))
        if blocked:
            return blocked
        if optimal:
            return (f"left pending by the objective: the plan scores higher without it (placing it would cost "
                    f"more in other terms, such as breaking a whole node, than its value): gang of {gang}")
        return (f"fits in the capacity this plan leaves free, but the solver did not reach a plan placing it "
                f"within its time limit: gang of {gang}")
    nodes = sorted(set().union(*(problem.tasks[t].candidates.tolist() for t in problem.job_tasks[j])))
    rivals, top = _rivals(problem, placement, nodes)
    who = ", ".join(f"{problem.jobs[r].name} (priority {problem.jobs[r].priority}, {rivals[r]} GPUs)" for r in top)
    free_gpus = int(left[nodes, 0].sum()) if nodes else 0
    return (_outranked(problem, j, top) + f"capacity went to higher-value jobs: gang of {gang} does not fit in the "
            f"{free_gpus} GPUs left on matching nodes" + (f"; placed there instead: {who}" if who else "")
            + _sharing_hint(problem, j, placement, usage) + preemption_hint(problem, j, placement, usage))


def _sharing_hint(problem: Problem, j: int, placement: Placement | None = None, usage: np.ndarray | None = None) -> str:
    """Idle GPUs that could take the job's share pods, were sharing changes allowed (placement/devices.py)."""
    return next((hint for t in problem.job_tasks[j]
                 if (hint := device_reasons.sharing_hint(problem, problem.tasks[t], placement, usage))), "")


# --------------------------------------------------------------------------------------------
# Teams and quotas: quota reasons, who outranked a job, preemption reasons and one-change hints

#: Above this many (pending jobs × nodes) the "fits if ... were preempted" hint is skipped (it
#: re-runs the greedy fit a few times per pending job).
HINT_BUDGET = 400_000
#: Running jobs tried, lowest priority first, when looking for a set whose preemption would make room.
HINT_VICTIMS = 8


def quota_after(problem: Problem, placement: Placement) -> QuotaLedger | None:
    """What each team holds per quota scope (GPU-equivalents, CPU, memory) once the plan is applied
    (None without quota scopes)."""
    if problem.teams is None or not problem.teams.all_scopes:
        return None
    ledger = QuotaLedger(problem.teams)
    for s, scope in enumerate(problem.teams.all_scopes):
        ledger.alloc[s] = held_in(problem, placement, scope)
    return ledger


def _where(problem: Problem, j: int, free: np.ndarray) -> np.ndarray:
    """(N, 3) what the greedy fit would give job j in `free`, per node: milli-GPU, milli-CPU, MiB."""
    trial = free.copy()
    counts: dict[tuple[int, int], int] = {}
    for t in problem.job_tasks[j]:
        place_task(problem, t, trial, counts)
    return use_of(problem, counts)


def quota_reason(problem: Problem, j: int, ledger: QuotaLedger | None, use: np.ndarray | None = None) -> str | None:
    """"quota: research at 96/96 GPUs ..." when adding job j breaks its team's quota (GPU-equivalents: MIG
    and shared pods count their part of a GPU; CPU and memory quotas too).

    Without `use` (where the job would go, per node) only cluster-wide scopes can be judged.
    """
    team = problem.job_team[j] if problem.job_team else -1
    if ledger is None or team < 0:
        return None
    index = ledger.index
    if use is None:
        total = job_use(problem, j)
        add = np.array([total[s.resource] if s.mask.all() else 0 for s in index.all_scopes], dtype=np.int64)
    else:
        add = index.scope_use(use)
    if not add.any():
        return None
    return ledger.blocker(team, add)


def _outranked(problem: Problem, j: int, rivals: list[int]) -> str:
    """"outranked by jobs A, B (priority 100): " for the rivals of higher priority, else ""."""
    mine = problem.jobs[j].priority
    higher = [r for r in rivals if problem.jobs[r].priority > mine]
    if not higher:
        return ""
    levels = {problem.jobs[r].priority for r in higher}
    if len(levels) == 1:
        return f"outranked by jobs {', '.join(problem.jobs[r].name for r in higher)} (priority {levels.pop()}): "
    return "outranked by jobs " + ", ".join(f"{problem.jobs[r].name} (priority {problem.jobs[r].priority})"
                                            for r in higher) + ": "


class Justification(NamedTuple):
    """Why a running job is preempted: the placed job it makes room for, the rule of policy.preemption that
    allows it (placement_models.PreemptionRule; None only if no placed job explains it), and a sentence."""

    for_job: str
    rule: str | None
    reason: str


def preemption_reason(problem: Problem, r: int, placement: Placement, ledger: QuotaLedger | None) -> Justification:
    """Why running job r is preempted: a placed job with a pod on its nodes that a rule allows to take its place
    (`Problem.eviction_rules`, and for reclaim its team within nominal after the plan), `within_team` first,
    then `reclaim_within_cohort`, then `borrow_within_cohort`; the highest priority, then the name, first."""
    victim = problem.running[r]
    nodes = set(victim.nodes.tolist())
    stead: dict[int, set[int]] = {}
    for (t, n), k in placement.counts.items():
        if k and n in nodes:
            stead.setdefault(problem.tasks[t].job, set()).add(n)
    order = sorted(stead, key=lambda j: (-problem.jobs[j].priority, problem.jobs[j].name))
    rules = {j: problem.eviction_rules(j, r) for j in order}
    for j in order:
        if "within_team" in rules[j]:
            job = problem.jobs[j]
            if job.priority > victim.priority:
                return Justification(job.name, "within_team",
                                     f"priority {victim.priority} < {job.priority} ({job.name})")
            return Justification(job.name, "within_team",
                                 f"priority {victim.priority} = {job.priority} ({job.name}), started after it "
                                 "was submitted (lower_or_newer_equal_priority)")
    index = problem.teams
    for rule in ("reclaim_within_cohort", "borrow_within_cohort"):
        for s, scope in enumerate(index.scopes if index is not None and victim.team >= 0 else ()):
            if scope.before[victim.team] <= scope.nominal[victim.team]:
                continue
            held, nominal = amount(scope.before[victim.team]), amount(scope.nominal[victim.team])
            borrowing = f"team {index.names[victim.team]} borrowing above nominal ({held}/{nominal} GPUs{scope.label})"
            for j in order:
                team = problem.job_team[j]
                if rule not in rules[j] or not any(scope.mask[n] for n in stead[j]):
                    continue
                name = problem.jobs[j].name
                if rule == "borrow_within_cohort":
                    cap = problem.request.policy.preemption_rules.borrow_within_cohort.max_priority_threshold
                    limit = f", at most {cap}" if cap is not None else ""
                    return Justification(name, rule, f"{borrowing} and priority {victim.priority} < "
                                         f"{problem.jobs[j].priority}{limit}: preempted for {name}, which borrows "
                                         "(borrow_within_cohort)")
                if ledger is not None and ledger.alloc[s, team] <= scope.nominal[team]:
                    return Justification(name, rule, f"{borrowing} while {index.names[team]} below "
                                         f"({amount(ledger.alloc[s, team])}/{amount(scope.nominal[team])} after "
                                         f"this plan): reclaimed for {name}")
    return Justification("", None, "preempted to make room (no job placed in its stead is allowed to preempt it)")


def _hint_rules(problem: Problem, j: int, r: int) -> tuple[str, ...]:
    """The rules under which job j may preempt r; with preemption off, those `policy.preemption: true` would give."""
    if problem.request.policy.preemption_rules is not None:
        return problem.eviction_rules(j, r)
    job, victim = problem.jobs[j], problem.running[r]
    return allowed_rules(PreemptionRules(), job.priority, job.submitted_at, problem.job_team[j] if problem.job_team
                         else -1, replace(victim, evictable=victim.ripe))


def _why_kept(problem: Problem, j: int, r: int) -> str:
    if problem.request.policy.preemption_rules is None:
        return "preemption is off: policy.preemption"
    rule = _hint_rules(problem, j, r)[0]
    return f"{problem.running[r].spec.job} may be preempted for it ({rule}), but the plan keeps it"


def preemption_hint(problem: Problem, j: int, placement: Placement, usage: np.ndarray) -> str:
    """"; fits if 8 GPUs of team vision were preempted (preemption is off: policy.preemption)", or "" (none or too
    costly). Only victims a rule allows for job j are named (with preemption off: the rules `true` would give),
    in the model's order of preference (lowest priority, least work lost, newest); never a job that is not
    preemptible or has not run policy.min_runtime_s."""
    if not problem.running or len(problem.jobs) * problem.n_nodes > HINT_BUDGET:
        return ""
    tasks = problem.job_tasks[j]
    if any(problem.tasks[t].eligible is None or problem.tasks[t].eligible.size == 0 for t in tasks):
        return ""
    view = _eligible_view(problem, tasks)
    nodes = np.zeros(problem.n_nodes, dtype=bool)
    for t in tasks:
        nodes[problem.tasks[t].eligible] = True
    found = [r.index for r in problem.running if r.index not in placement.evicted and nodes[r.nodes].any()
             and _hint_rules(problem, j, r.index)]
    found.sort(key=lambda r: problem.running[r].order())
    room = problem.free - usage
    chosen: list[int] = []
    for r in found[:HINT_VICTIMS]:
        chosen.append(r)
        room = room.copy()
        room[problem.running[r].nodes] += problem.running[r].use
        if _fits(view, j, room):
            break
    else:
        return ""
    for r in list(reversed(chosen))[1:]:  # keep only victims the fit needs
        trial = room.copy()
        trial[problem.running[r].nodes] -= problem.running[r].use
        if _fits(view, j, trial):
            chosen.remove(r)
            room = trial
    why = "; ".join(dict.fromkeys(_why_kept(problem, j, r) for r in chosen))
    return f"; fits if {_victims_text(problem, chosen)} were preempted ({why})"


def _eligible_view(problem: Problem, tasks: tuple[int, ...]) -> Problem:
    """The problem with job j's tasks allowed on every node that passes their filters (free or not)."""
    swapped = list(problem.tasks)
    for t in tasks:
        swapped[t] = replace(problem.tasks[t], candidates=problem.tasks[t].eligible)
    return replace(problem, tasks=tuple(swapped))


def _victims_text(problem: Problem, chosen: list[int]) -> str:
    if problem.teams is None:
        return " and ".join(f"job {problem.running[r].spec.job} ({problem.running[r].gpus} GPUs)" for r in chosen)
    per_team: dict[str, int] = {}
    for r in chosen:
        team = problem.running[r].team
        name = problem.teams.names[team] if team >= 0 else "(none)"
        per_team[name] = per_team.get(name, 0) + problem.running[r].gpus
    parts = [f"{gpus} GPUs of team {team}" for team, gpus in per_team.items()]
    return " and ".join(parts)
