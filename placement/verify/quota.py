"""Quota, recomputed from the request: Kueue-style nominal, borrowing and lending per team.

For every scope (the whole cluster when any team declares quota.gpus; one per flavor, (pool, GPU
model), any team declares) and team T, with A_T its healthy GPUs after the plan (running jobs not
preempted + placed pods on the scope's nodes) and B_T the same before it:

    A_T ≤ max(nominal + borrowing_limit, B_T)
    Σ_T max(0, A_T − guaranteed_T) ≤ max(Σ_T lendable_T, Σ_T max(0, B_T − guaranteed_T))

with lendable = min(lending_limit, nominal) (nominal when unset) and guaranteed = nominal − lendable;
a team without a quota in a scope others declare has nominal 0 and unlimited borrowing there.
"""

from __future__ import annotations

from dataclasses import dataclass

from placement.catalog import lookup
from placement.verify.context import Context


@dataclass
class Scope:
    label: str
    nodes: set[str]
    nominal: dict[str, int]
    limit: dict[str, int | None]
    lendable: dict[str, int]


def _canonical(model: str | None) -> str | None:
    found = lookup(model) if model else None
    return found.name if found is not None else model


def quota_scopes(ctx: Context) -> list[Scope]:
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
        scope = Scope(f"pool={pool} gpu_model={model}" if (pool or model) else "cluster", nodes, {}, {}, {})
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


def _healthy(ctx: Context, node: str, gpus: list[int]) -> int:
    n = ctx.nodes.get(node)
    return len({g for g in gpus if n is None or g not in n.unhealthy_gpus})


def team_gpus(ctx: Context, scope: Scope) -> tuple[dict[str, int], dict[str, int]]:
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


def check_quota(ctx: Context) -> list[str]:
    out: list[str] = []
    for scope in quota_scopes(ctx):
        before, after = team_gpus(ctx, scope)
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
