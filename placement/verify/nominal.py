"""The `quota` term, recomputed: work counted within its team's nominal GPU quota, as Kueue admits it.

Per team holding a nominal GPU quota somewhere, its placed jobs are taken highest class first (then in
the request's order), each counted while the team, with its kept running work and the jobs counted so
far, stays within its nominal in every GPU scope the job touches (placement.verify.quota's scopes). A
counted job earns its class's within-nominal bonus (placement.verify.priority) × weights.priority per
GPU-equivalent it places, floored to the fair-share quantum (placement.verify.fairness) for jobs whose
GPUs are not fixed (elastic, MIG, shares): a rigid job's flag weighs its whole GPUs at once, an elastic job's
credit one quantum a unit, each coefficient in model units (`Tally`). The planner counts the same way from
the plan it returns, with the team's kept running work (preempted jobs gone). Derived where every pending
pod takes whole GPUs (placement.verify.fairness's `whole_gpu_work`).
"""

from __future__ import annotations

from placement.verify.context import Context, Expected, Tally
from placement.verify.fairness import MILLI, quantum, whole_gpu_work
from placement.verify.priority import nominal_teams, tiers
from placement.verify.quota import assigned_gpus, quota_scopes, team_gpus


def check_quota_term(ctx: Context) -> list[Expected] | None:
    weight = ctx.request.policy.weights.priority
    holders = nominal_teams(ctx)
    declared = {t.name for t in ctx.request.teams}
    found = tiers(ctx)
    if not holders or not weight:
        return [Expected.exact(0.0)]
    if found is None or not whole_gpu_work(ctx):
        return None
    step = quantum(ctx)
    scopes = quota_scopes(ctx)
    use: dict[str, list[float]] = {}  # job -> milli-GPU per scope
    total: dict[str, float] = {}
    for r in ctx.resolved:
        milli = assigned_gpus(r) * MILLI
        row = use.setdefault(r.job.name, [0.0] * len(scopes))
        total[r.job.name] = total.get(r.job.name, 0.0) + milli
        for s, scope in enumerate(scopes):
            if r.node.name in scope.nodes:
                row[s] += milli
    room: list[dict[str, float]] = []
    for s, scope in enumerate(scopes):
        _, after = team_gpus(ctx, scope)
        placed: dict[str, float] = {}
        for name, row in use.items():
            team = ctx.pending_jobs[name].team
            if team is not None:
                placed[team] = placed.get(team, 0.0) + row[s]
        room.append({t: scope.nominal.get(t, 0.0) * MILLI - (after.get(t, 0.0) * MILLI - placed.get(t, 0.0))
                     for t in declared})
    out = []
    for tier in found:
        order = {job.name: i for i, job in enumerate(tier.jobs)}
        left = [dict(r) for r in room]
        value = Tally()
        for job in sorted((j for j in tier.jobs if j.name in total), key=lambda j: (-j.priority, order[j.name])):
            if job.team not in holders or tier.bonus.get(job.priority, 0.0) <= 0 or total[job.name] <= 0:
                continue
            row = use[job.name]
            if all(left[s][job.team] + 1e-6 >= m for s, m in enumerate(row) if m > 0):
                for s, m in enumerate(row):
                    left[s][job.team] -= m
                each = tier.bonus[job.priority] * weight / MILLI
                if job.elastic:
                    value.add(each * step, round(total[job.name]) // step)
                else:  # rigid: its whole GPUs, placed whole
                    value.add(each * round(total[job.name]))
        out.append(value.expected())
    return out
