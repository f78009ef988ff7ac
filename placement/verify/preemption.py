"""Preemption: only preemptible running jobs past policy.min_runtime_s are evicted, whole, and each for
a reason: a job placed on its nodes outranks it, or reclaims quota its team borrows.
"""

from __future__ import annotations

from placement_models import RunningJob

from placement.verify.context import Context
from placement.verify.quota import Scope, quota_scopes, team_gpus


def check_preemption(ctx: Context) -> list[str]:
    """Preempted whole, only preemptible jobs past min runtime, each justified by a job placed in its stead."""
    out: list[str] = []
    running = {rj.job: rj for rj in ctx.request.cluster.running}
    policy = ctx.request.policy
    now = ctx.request.planning_time()
    seen: set[str] = set()
    placed = {a.job for a in ctx.plan.assignments}
    scopes = quota_scopes(ctx) if ctx.plan.preemptions else []
    team_after = {id(s): team_gpus(ctx, s) for s in scopes}
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


def _justified(ctx: Context, rj: RunningJob, scopes: list[Scope],
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
