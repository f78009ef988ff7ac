"""Quota, recomputed from the request: Kueue-style nominal, borrowing and lending per team, over
GPU-equivalents, CPU and memory.

For every scope (GPUs, CPU or memory on the whole cluster when any team declares quota.gpus,
quota.cpu or quota.memory_gib; the same on one flavor, (pool, GPU model), when any team declares
that resource in quota.flavors: a CPU-only flavor is no GPU scope) and team T, with A_T what it
holds after the plan (running jobs not preempted + placed pods on the scope's nodes) and B_T the
same before it:

    A_T ≤ max(nominal + borrowing_limit, B_T)
    Σ_T max(0, A_T − guaranteed_T) ≤ max(Σ_T lendable_T, Σ_T max(0, B_T − guaranteed_T))

with lendable = min(lending_limit, nominal) (nominal when unset) and guaranteed = nominal − lendable;
a team without a quota in a scope others declare has nominal 0 and unlimited borrowing there.

With cohorts (any team names one, or the request declares some), the second rule holds per cohort c
over its children x (its teams and child cohorts): Σ_x draw_x ≤ own nominal_c + Σ_x lendable_x, plus
c's borrowing limit when c has a parent (no limit when unset; a root borrows nothing), or what running
work already draws if more. A team draws max(0, A_T − guaranteed_T); a child cohort k, whose pool is
its own nominal plus its children's lendable and which lends lendable_k = min(lending_limit_k, pool_k),
draws max(0, Σ_{x of k} draw_x − pool_k + lendable_k). A team in no cohort holds at most its nominal.

GPUs count in GPU-equivalents, derived here from the catalog: a whole-GPU pod its healthy GPUs, a
MIG pod its instance's memory slices over its GPU model's (1g on an 8-slice GPU: 1/8), a pod on a
shared GPU its gpu_share, a pod on a shared MIG instance its gpu_share of its instance's part (a MIG
instance or share on an unhealthy GPU counts nothing, as an unhealthy whole GPU). CPU counts cores
and memory GiB, as pods request them.
"""

from __future__ import annotations

from dataclasses import dataclass

from placement_models import Node, Quota, RunningPod, Task

from placement.catalog import MigGeometry, lookup, mig_geometry
from placement.verify.context import EPS, Context, Resolved, num

#: Scope resources: GPU-equivalents, cores, GiB.
GPUS, CPU, MEMORY = "gpus", "cpu", "memory_gib"


@dataclass
class Scope:
    label: str
    nodes: set[str]
    nominal: dict[str, float]
    limit: dict[str, float | None]
    lendable: dict[str, float]
    resource: str = GPUS
    #: per cohort: (own nominal, lending limit, borrowing limit) here; None: one implicit cohort of all teams
    cohorts: dict[str, tuple[float, float | None, float | None]] | None = None


def _canonical(model: str | None) -> str | None:
    found = lookup(model) if model else None
    return found.name if found is not None else model


def quota_scopes(ctx: Context) -> list[Scope]:
    """The GPU scopes (cluster-wide, then flavors), in GPU-equivalents."""
    return _scopes(ctx, GPUS)


def resource_scopes(ctx: Context) -> list[Scope]:
    """The CPU scopes, then the memory scopes (cluster-wide, then flavors), in cores and GiB."""
    return _scopes(ctx, CPU) + _scopes(ctx, MEMORY)


def _scopes(ctx: Context, resource: str) -> list[Scope]:
    """One resource's scopes: the whole cluster when any team declares it there, then each flavor some team
    declares it on (a flavor that sets only other resources is no scope of this one)."""
    teams, cohorts = ctx.request.teams, ctx.request.cohorts
    tree = bool(cohorts) or any(t.cohort is not None for t in teams)
    keys: list[tuple[str | None, str | None]] = []
    if any(t.quota is not None and getattr(t.quota, resource) is not None for t in [*teams, *cohorts]):
        keys.append((None, None))
    for t in [*teams, *cohorts]:
        for f in t.quota.flavors if t.quota else []:
            if getattr(f, resource) is not None and (f.pool, _canonical(f.gpu_model)) not in keys:
                keys.append((f.pool, _canonical(f.gpu_model)))
    out = []
    for pool, model in keys:
        nodes = {n.name for n in ctx.nodes.values() if (pool is None or n.pool == pool)
                 and (model is None or _canonical(n.gpu_model) == model)}
        scope = Scope(f"pool={pool} gpu_model={model}" if (pool or model) else "cluster", nodes, {}, {}, {},
                      resource)
        for t in teams:
            _limits(scope, t.name, _quota(t.quota, resource, pool, model))
            if tree and t.cohort is None:  # in no cohort: borrows nothing, lends nothing
                scope.limit[t.name], scope.lendable[t.name] = scope.nominal[t.name], 0
        if tree:
            scope.cohorts = {}
            for c in cohorts:
                q = _quota(c.quota, resource, pool, model)
                scope.cohorts[c.name] = ((getattr(q, "nominal", 0), getattr(q, "lending_limit", None),
                                          getattr(q, "borrowing_limit", None)) if q is not None else (0, None, None))
        out.append(scope)
    return out


def _quota(quota: Quota | None, resource: str, pool: str | None, model: str | None) -> object | None:
    """A team's or cohort's quota of `resource` on the whole cluster (pool and model None) or one flavor."""
    if quota is None:
        return None
    if pool is None and model is None:
        return getattr(quota, resource)
    return next((getattr(f, resource) for f in quota.flavors
                 if (f.pool, _canonical(f.gpu_model)) == (pool, model)), None)


def _limits(scope: Scope, team: str, q: object | None) -> None:
    nominal = getattr(q, "nominal", 0) if q is not None else 0
    borrowing = getattr(q, "borrowing_limit", None) if q is not None else None
    lending = getattr(q, "lending_limit", None) if q is not None else None
    scope.nominal[team] = nominal
    scope.limit[team] = nominal + borrowing if q is not None and borrowing is not None else None
    scope.lendable[team] = (min(nominal, lending) if lending is not None else nominal) if q is not None else 0


def _geometry(node: Node | None) -> MigGeometry | None:
    return mig_geometry(node.gpu_model) if node is not None and node.gpu_model else None


def mig_fraction(node: Node | None, profile: str) -> float:
    """A MIG instance's part of its GPU: memory slices over the GPU's (0 when the model has no such profile)."""
    geo = _geometry(node)
    found = geo.profile(profile) if geo is not None else None
    return found.memory_slices / geo.memory_slices if geo is not None and found is not None else 0.0


def _healthy(ctx: Context, node: str, gpus: list[int]) -> int:
    n = ctx.nodes.get(node)
    return len({g for g in gpus if n is None or g not in n.unhealthy_gpus})


def running_pod_gpus(ctx: Context, pod: RunningPod) -> float:
    """GPU-equivalents a running pod holds."""
    node = ctx.nodes.get(pod.node)
    bad = set(node.unhealthy_gpus) if node is not None else set()
    if pod.mig is not None:
        share = pod.gpu_share if pod.gpu_share is not None else 1.0
        return 0.0 if pod.mig.gpu in bad else mig_fraction(node, pod.mig.profile) * share
    if pod.gpu_share is not None:
        return 0.0 if any(g in bad for g in pod.gpus) else float(pod.gpu_share)
    return float(_healthy(ctx, pod.node, pod.gpus))


def assigned_gpus(r: Resolved) -> float:
    """GPU-equivalents a placed pod takes: its task's GPUs, its share, or its MIG instance's part of its GPU
    (times its share, for a share of a MIG instance)."""
    task: Task = r.task
    if task.gpu_share is not None and task.mig_profile is None:
        return float(task.gpu_share)
    if task.mig_profile is None:
        return float(task.gpus)
    share = task.gpu_share if task.gpu_share is not None else 1.0
    if r.a.mig is not None:
        return mig_fraction(r.node, r.a.mig.profile) * share
    geo = _geometry(r.node)  # no instance named (the mig rule reports it): the task's own profile
    if geo is None:
        return 0.0
    found = (geo.smallest_fitting(task.gpu_memory_gib or 0.0) if task.mig_profile == "auto"
             else geo.profile(task.mig_profile))
    return found.memory_slices / geo.memory_slices * share if found is not None else 0.0


def _running_amount(ctx: Context, pod: RunningPod, resource: str) -> float:
    if resource == GPUS:
        return running_pod_gpus(ctx, pod)
    return float(pod.cpu if resource == CPU else pod.memory_gib)


def _placed_amount(r: Resolved, resource: str) -> float:
    if resource == GPUS:
        return assigned_gpus(r)
    return float(r.task.cpu if resource == CPU else r.task.memory_gib)


def team_gpus(ctx: Context, scope: Scope) -> tuple[dict[str, float], dict[str, float]]:
    """(before, after) per team in the scope: GPU-equivalents (or cores, GiB in a CPU or memory scope)."""
    before = {t.name: 0.0 for t in ctx.request.teams}
    after = dict(before)
    for rj in ctx.request.cluster.running:
        if rj.team not in before:
            continue
        here = sum(_running_amount(ctx, pod, scope.resource) for pod in rj.pods if pod.node in scope.nodes)
        before[rj.team] += here
        if rj.job not in ctx.evicted:
            after[rj.team] += here
    for r in ctx.resolved:
        if r.job.team in after and r.node.name in scope.nodes:
            after[r.job.team] += _placed_amount(r, scope.resource)
    return before, after


def _what(scope: Scope, value: float) -> str:
    if scope.resource == GPUS:
        return f"{num(round(value, 6))} GPUs"
    return f"cpu {num(round(value, 6))}" if scope.resource == CPU else f"memory {num(round(value, 6))} GiB"


def check_quota(ctx: Context) -> list[str]:
    out: list[str] = []
    for scope in quota_scopes(ctx) + resource_scopes(ctx):
        before, after = team_gpus(ctx, scope)
        guaranteed = {t: scope.nominal[t] - scope.lendable[t] for t in before}
        tol = EPS * max(1, len(ctx.resolved) + len(ctx.request.cluster.running))
        for team, held in after.items():
            limit = scope.limit[team]
            if limit is not None and held > max(limit, before[team]) + tol:
                out.append(f"quota: team {team} holds {_what(scope, held)} in scope {scope.label}, above nominal + "
                           f"borrowing_limit {num(limit)} (held {num(round(before[team], 6))} before the plan)")
        if scope.cohorts is not None:
            out += _check_cohorts(ctx, scope, before, after, guaranteed, tol)
            continue
        borrowed = sum(max(0.0, after[t] - guaranteed[t]) for t in after)
        pool = max(sum(scope.lendable.values()), sum(max(0.0, before[t] - guaranteed[t]) for t in before))
        if borrowed > pool + tol:
            out.append(f"quota: teams in scope {scope.label} draw {_what(scope, borrowed)} on the cohort's lendable "
                       f"nominal, more than its {num(pool)}")
    return out


def _cohort_draws(ctx: Context, scope: Scope, held: dict[str, float],
                  guaranteed: dict[str, float]) -> dict[str, tuple[float, float]]:
    """Per cohort, (what its children draw on it, the pool it has of its own: own nominal + children's lendable)."""
    assert scope.cohorts is not None
    out: dict[str, tuple[float, float]] = {}

    def settle(name: str) -> tuple[float, float]:  # (draw on the parent, lendable to it)
        nominal, lending, _ = scope.cohorts[name]  # type: ignore[index]
        pool = nominal + sum(scope.lendable[t.name] for t in ctx.request.teams if t.cohort == name)
        draw = sum(max(0.0, held[t.name] - guaranteed[t.name]) for t in ctx.request.teams if t.cohort == name)
        for child in ctx.request.cohorts:
            if child.parent == name:
                up, lent = settle(child.name)
                pool, draw = pool + lent, draw + up
        out[name] = (draw, pool)
        lend = pool if lending is None else min(lending, pool)
        return max(0.0, draw - pool + lend), lend

    for cohort in ctx.request.cohorts:
        if cohort.parent is None:
            settle(cohort.name)
    return out


def _check_cohorts(ctx: Context, scope: Scope, before: dict[str, float], after: dict[str, float],
                   guaranteed: dict[str, float], tol: float) -> list[str]:
    """Every cohort's children draw at most its pool plus what it may borrow (or what they drew before)."""
    assert scope.cohorts is not None
    parents = {c.name: c.parent for c in ctx.request.cohorts}
    was = _cohort_draws(ctx, scope, before, guaranteed)
    out = []
    for name, (draw, pool) in _cohort_draws(ctx, scope, after, guaranteed).items():
        borrowing = scope.cohorts[name][2]
        if parents[name] is not None and borrowing is None:
            continue  # borrows from its parent without limit: the parent's row bounds it
        extra = borrowing if parents[name] is not None and borrowing is not None else 0.0
        most = max(pool + extra, was[name][0])
        if draw > most + tol:
            out.append(f"quota: cohort {name} in scope {scope.label}: its members draw {_what(scope, draw)} beyond "
                       f"their guaranteed quota, more than the {num(round(most, 6))} it has (own nominal, members' "
                       "lendable quota and what it may borrow from its parent)")
    return out
