"""Migration, checked: a running job the plan moves (a preemption with rule `migrate`) is placed again, whole, as
itself, on GPUs where it keeps at least three quarters of its speed, and the `migration` term is what the moves
are worth.

A move is allowed when `policy.migration` is on, the job is `preemptible`, has run `policy.min_runtime_s`, has a
speed table (its `speeds`, else its `workload`'s) giving it different speeds over the cluster's GPU models,
every pod holds whole GPUs (pods of one task as many each), no team or cohort declares a quota, and `for_job`
names the job itself. The plan's assignments place it again as a pending job of its own shape: one task per task
of its pods, as many pods, each with the GPUs, CPU and memory its pod holds now, its team, priority and table
(`Context.moved`; every other rule checks those pods as any pending job's, and no pod of a moved job goes to a
spot node). Its speed on its slowest GPU after the move is at least `KEPT_SPEED` of its speed before
(placement.migration's bound on a slowdown, written again here).

Term `migration`, per move: weights.throughput × G × (1 − s_now / s_best) − weights.migration × (G + lost), G
the job's GPUs, s_now its speed on its slowest GPU node now, s_best its best over the GPU models of the
cluster's GPU nodes, lost the GPU-hours since its last checkpoint (else its start; 0 without either) at the
planning time.
"""

from __future__ import annotations

from placement_models import RunningJob

from placement.verify.context import Context, Expected, Tally
from placement.verify.speeds import best, gpu_models, pace, running_speed, table_of

#: The least share of its speed a moved job keeps on its slowest GPU
KEPT_SPEED = 0.75


def check_migration(ctx: Context) -> list[str]:
    out: list[str] = []
    request = ctx.request
    running = {rj.job: rj for rj in request.cluster.running}
    spot = {p.name for p in request.cluster.pools if p.capacity_type == "spot"}
    placed = ctx.job_nodes()
    for p in ctx.plan.preemptions:
        if p.rule != "migrate":
            continue
        rj = running.get(p.job)
        if rj is None:
            continue  # the preemption rule reports it
        why = _not_movable(ctx, rj)
        if why:
            out.append(f"migration: job {rj.job} moves but {why}")
            continue
        if p.for_job != rj.job:
            out.append(f"migration: job {rj.job} moves, yet its for_job is '{p.for_job}', not itself")
        pods = placed.get(rj.job, [])
        if not pods:
            out.append(f"migration: job {rj.job} moves but is not placed again")
            continue
        if any(r.node.pool in spot for r in pods):
            out.append(f"migration: job {rj.job} moves onto a spot node")
        before = running_speed(ctx, rj)
        after = min((pace(ctx, r.job, r.node) for r in pods if r.task.gpus > 0), default=before)
        if after < before * KEPT_SPEED - 1e-9:
            out.append(f"migration: job {rj.job} moves from speed {before:g} to {after:g}, less than "
                       f"{KEPT_SPEED:g} of it")
    return out


def _not_movable(ctx: Context, rj: RunningJob) -> str | None:
    policy = ctx.request.policy
    if not policy.migration:
        return "policy.migration is off"
    if not rj.preemptible:
        return "it is not preemptible"
    table = table_of(ctx, rj)
    if table is None:
        return "it has no speed table (speeds, workload)"
    if len({table.get(m, 1.0) if m is not None else 1.0 for m in gpu_models(ctx)}) < 2:
        return "its table gives it one speed on every GPU model of the cluster"
    if any(t.quota is not None for t in ctx.request.teams) or any(c.quota is not None for c in ctx.request.cohorts):
        return "teams or cohorts declare quotas"
    if policy.min_runtime_s > 0:
        ran = None if rj.started_at is None else (ctx.request.planning_time() - rj.started_at).total_seconds()
        if ran is None or ran < policy.min_runtime_s:
            return f"it has not run min_runtime_s {policy.min_runtime_s:g}"
    shape: dict[str, tuple[int, float, float]] = {}
    for pod in rj.pods:
        if pod.mig is not None or pod.gpu_share is not None or not pod.gpus:
            return "a pod holds no whole GPUs (a MIG instance, a shared GPU or none)"
        if shape.setdefault(pod.task, (len(pod.gpus), pod.cpu, pod.memory_gib)) != (len(pod.gpus), pod.cpu,
                                                                                     pod.memory_gib):
            return f"pods of task {pod.task} differ in shape"
    if rj.job not in ctx.moved:
        return "its pods make no job's shape"
    return None


def check_migration_term(ctx: Context) -> list[Expected] | None:
    if not ctx.moved:
        return [Expected.exact(0.0)]
    weights = ctx.request.policy.weights
    models = gpu_models(ctx)
    running = {rj.job: rj for rj in ctx.request.cluster.running}
    now = ctx.request.planning_time()
    total = Tally()
    for name in ctx.moved:
        rj = running[name]
        table = table_of(ctx, rj)
        if table is None:
            return None
        gpus = sum(len(pod.gpus) for pod in rj.pods)
        healthy = sum(1 for pod in rj.pods for g in pod.gpus
                      if pod.node not in ctx.nodes or g not in ctx.nodes[pod.node].unhealthy_gpus)
        since = rj.checkpointed_at or rj.started_at
        if since is not None and rj.started_at is not None and since < rj.started_at:
            since = rj.started_at
        lost = 0.0 if since is None else healthy * max(0.0, (now - since).total_seconds()) / 3600.0
        loss = 1.0 - running_speed(ctx, rj) / best(table, models)
        total.add(weights.throughput * gpus * loss - weights.migration * (gpus + lost))
    return [total.expected()]
