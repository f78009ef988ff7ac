"""Turn a placement (pods per task per node) into the wire-format Plan.

Pod indices and GPU indices are chosen here, after the solve, by an exact and cheap step:
pods of a task are numbered node by node along the topology hierarchy (consecutive ranks share
a node, then an NVLink domain, a rack, a block; slices of K pods stay whole), and each pod takes
the best-connected free GPUs of its node's in-node graph (placement.topology.pick_gpus; the
lowest free indices when the node's graph is not described).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

import numpy as np
from placement_models import (
    Assignment,
    Objective,
    Pending,
    PlacementRequest,
    Plan,
    PlanStatus,
    Preemption,
    SolverStats,
)

from placement import picks, pricing, provision, speeds
from placement.compile import cost, dominance
from placement.compile import topology as topology_terms
from placement.decode import devices, schedule
from placement.decode.teams import team_reports
from placement.decode.topology import gpu_choice
from placement.decode.usage import fold
from placement.explain import Reason, pending_reason, preemption_reason, quota_after
from placement.holdings import pod_gpus
from placement.problem import Problem
from placement.screen import screened
from placement.solution import Placement
from placement.teams import QuotaLedger

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def assignments(problem: Problem, placement: Placement) -> list[Assignment]:
    free_ids = picks.whole_gpu_ids(problem, placement)  # after the plan's MIG and sharing changes
    for r in sorted(placement.evicted):  # a preempted job's GPUs are free for this plan's pods
        for n, ids in zip(problem.running[r].nodes.tolist(), problem.running[r].gpu_ids, strict=True):
            free_ids[n] = sorted(free_ids[n] + list(ids))
    chosen = gpu_choice(problem, placement.counts, free_ids)
    order = problem.topology().ordered
    nodes_of: dict[int, list[int]] = {}  # task -> its nodes, in one pass (a scan per task took 0.6 s at XL)
    for (t, n), k in placement.counts.items():
        if k:
            nodes_of.setdefault(t, []).append(n)
    out: list[Assignment] = []
    make = Assignment.model_construct  # fields from the indexed request, already valid: not validated again per pod
    for j, job in enumerate(problem.jobs):
        for t in problem.job_tasks[j]:
            task = problem.tasks[t]
            pod = 0
            for n in order(nodes_of.get(t, [])):
                for gpus in chosen[t, n]:
                    out.append(make(job=job.name, task=task.name, pod=pod, node=problem.nodes[n].name,
                                    gpus=[int(g) for g in gpus]))
                    pod += 1
    return devices.attach(problem, placement, out)  # MIG instances and shared GPUs


def gang_speeds(problem: Problem, placement: Placement) -> dict[str, float]:
    """Job name -> the speed its gang runs at in this placement: its table's on its slowest GPU pod's node
    (placement.speeds); only jobs with a table."""
    out: dict[str, float] = {}
    for (t, n), k in placement.counts.items():
        j = problem.tasks[t].job
        table = problem.speeds.pending[j] if problem.speeds.pending else None
        if k and table is not None and problem.gpu_value(t) > 0:
            name = problem.jobs[j].name
            out[name] = min(out.get(name, math.inf), speeds.speed(table, problem.gpu_models[n]))
    return out


#: `Plan.speed_sources`' entry for the tables jobs give themselves (`speeds`)
OWN_SPEEDS = "(jobs' own speeds)"


def speed_sources(request: PlacementRequest) -> dict[str, str]:
    """Per workload some job uses: its `source` (else 'declared'); one entry for jobs' own tables."""
    source = {w.name: w.source or "declared" for w in request.workloads}
    out: dict[str, str] = {}
    for job in [*request.cluster.running, *request.jobs]:
        if job.workload is not None and job.workload in source:
            out[job.workload] = source[job.workload]
        elif job.speeds is not None:
            out[OWN_SPEEDS] = "declared"
    return out


def decode(problem: Problem, placement: Placement, terms: dict[str, float], status: PlanStatus,
           stats: SolverStats) -> Plan:
    """The wire-format plan of `placement`, scored by `terms` (`draft`, then `finish`)."""
    return finish(problem, placement, draft(problem, placement, status == "optimal"), terms, status, stats)


def draft(problem: Problem, placement: Placement, optimal: bool) -> Plan:
    """The plan of `placement` but for what its score says: no status but `optimal` or not, no solver statistics,
    its objective only the terms the GPUs chosen here decide (the bandwidth terms), in the problem's names (not
    folded yet). A call may draft the plan while the model that scores it is still being built (placement.api);
    `finish` completes it."""
    placed = placement.placed_jobs(problem)
    used = {n for (_, n), k in placement.counts.items() if k}
    added = set(range(provision.first_added(problem.request), problem.n_nodes))
    pods = [(problem.jobs[problem.tasks[t].job], n, pod_gpus(problem, t, n))  # GPU-equivalents (MIG, shares)
            for (t, n), k in sorted(placement.counts.items()) for _ in range(k)]
    bound = assignments(problem, placement)
    moved = {r: j for j, r in problem.twins.items() if j in placed}
    paces = gang_speeds(problem, placement) if moved else {}
    ledger = quota_after(problem, placement)
    preempted = [_move(problem, r, moved[r], placement, paces) if r in moved else
                 Preemption(job=problem.running[r].spec.job,  # + the job it makes room for, the rule allowing it
                            **preemption_reason(problem, r, placement, ledger)._asdict())
                 for r in sorted(placement.evicted)]
    teams, fairness_index = team_reports(problem, placement)
    bandwidth = topology_terms.bandwidth_terms(problem, bound)  # computed from the GPUs chosen
    return Plan(status="optimal" if optimal else "feasible", assignments=bound,
                pending=pending_entries(problem, placement, optimal, ledger), preemptions=preempted, teams=teams,
                fairness_index=fairness_index, objective=Objective(total=0.0, terms=bandwidth),
                provisioned=provision.opened(problem.request, problem.nodes, used),
                cost=pricing.summary(problem.request, problem.nodes, pods, sorted(used & added),
                                     gang_speeds(problem, placement)),
                mig_changes=devices.mig_changes(problem, placement),
                sharing_changes=devices.sharing_changes(problem, placement),
                reservations=schedule.reservations(problem, {problem.jobs[j].name for j in placed}),
                speed_sources=speed_sources(problem.request),
                overdue=schedule.overdue(problem))


def finish(problem: Problem, placement: Placement, drafted: Plan, terms: dict[str, float], status: PlanStatus,
           stats: SolverStats) -> Plan:
    """`drafted` (`draft` of `placement`) scored: `terms` beside its own, `status`, `stats`, in the request's own
    names. A draft made before the plan was proved optimal (or the other way) explains its pending jobs again:
    a job left out of a proven optimum waits for the objective, not the time limit."""
    plan = drafted
    if (status == "optimal") != (drafted.status == "optimal"):
        plan = plan.model_copy(update={"pending": pending_entries(problem, placement, status == "optimal")})
    merged = {**terms, **drafted.objective.terms}
    rounded = {name: round(value, 6) for name, value in merged.items()}
    plan = plan.model_copy(update={"status": status, "solver": stats,
                                   "objective": Objective(total=round(sum(rounded.values()), 6), terms=rounded)})
    return fold(problem, plan)  # right-sized pods in the request's own names


def pending_entries(problem: Problem, placement: Placement, optimal: bool,
                    ledger: QuotaLedger | None = None) -> list[Pending]:
    """Every job `placement` leaves waiting, in the request's order, each with the constraint that binds it and
    when it may start (`optimal`: the plan is proved optimal; `ledger`: `quota_after` the plan, if known)."""
    placed = placement.placed_jobs(problem)
    usage = placement.usage(problem) - placement.freed(problem)  # net of what preemptions free
    ledger = quota_after(problem, placement) if ledger is None else ledger
    waiting = [j for j in range(len(problem.jobs)) if j not in placed and j not in problem.twins]
    top = problem.request.policy.explain_top  # who holds their room is named for these, highest class, oldest
    detailed = set(sorted(waiting, key=lambda j: (-problem.jobs[j].priority, problem.jobs[j].submitted_at or _EPOCH,
                                                  problem.jobs[j].name))[:top])
    # Interchangeable jobs explained without naming who holds their room get one and the same reason: every
    # input of it is their class's (placement.compile.dominance); thousands of queued classmates ask it once.
    class_of = {j: key for key, members in dominance.classes(problem).items() for j in members}
    shared: dict[object, Reason] = {}

    def reason(j: int) -> Reason:
        key = class_of.get(j) if j not in detailed else None
        if key is not None and key in shared:
            return shared[key]
        found = pending_reason(problem, j, placement, usage, ledger, optimal, j in detailed)
        if key is not None:
            shared[key] = found
        return found

    pending = [_pending(problem, j, placement, usage, reason(j)) for j in waiting]
    return schedule.annotate(problem, placement, _with_screened(problem, pending))


def _move(problem: Problem, r: int, j: int, placement: Placement, paces: dict[str, float]) -> Preemption:
    """The preemption entry of running job r moving (its twin j placed: placement.migration); `paces`: the
    placed jobs' speeds (`gang_speeds`)."""
    name = problem.running[r].spec.job
    now = problem.speeds.running_pace[r]
    after = paces.get(name, now)
    models = sorted({str(problem.gpu_models[n]) for (t, n), k in placement.counts.items()
                     if k and problem.tasks[t].job == j})
    return Preemption(job=name, for_job=name, rule="migrate",
                      reason=f"moves to {', '.join(models)}: speed {now:.3g} -> {after:.3g}")


def _with_screened(problem: Problem, pending: list[Pending]) -> list[Pending]:
    """Pending jobs in the request's order, with the jobs screened out before the model (they can never
    fit: placement.screen) explained on the problem they were screened from, as if nothing else were placed."""
    found = screened(problem)
    if found is None:
        return pending
    original, gone = found
    nothing = Placement()
    usage = np.zeros_like(original.free)
    reasons = {original.jobs[j].name: _pending(original, j, nothing, usage, pending_reason(original, j, nothing, usage))
               for j in gone if j not in original.twins}
    by_name = {p.job: p for p in pending}
    out = []
    for job in original.jobs:
        if job.name in reasons:
            out.append(reasons[job.name])
        elif job.name in by_name:
            out.append(by_name[job.name])
    return out


def _pending(problem: Problem, j: int, placement: Placement, usage: np.ndarray, generic: Reason) -> Pending:
    """Job j's entry: explain's reason (the binding constraint and its sentence), refined by the cost concern."""
    constraint, reason = cost.refine_pending(problem, j, placement, usage, generic.text, generic.constraint)
    return Pending(job=problem.jobs[j].name, reason=reason, constraint=constraint)  # type: ignore[arg-type]
