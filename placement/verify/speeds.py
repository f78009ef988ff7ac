"""Speed tables, read again: each job's speed per GPU model under catalog names, and what it runs at.

The verifier's own reading of `speeds` / `workload` (placement_models.speeds): a model absent from a table, or a
GPU node without a model, runs at 1.0; a gang runs at its slowest member. The throughput term
(placement.verify.throughput), the strict weights' margin (placement.verify.priority) and running jobs'
expected ends (placement.verify.reservation, alignment) read it.
"""

from __future__ import annotations

from collections.abc import Mapping

from placement_models import Job, Node, RunningJob

from placement.catalog import lookup
from placement.verify.context import Context


def canonical(model: str | None) -> str | None:
    found = lookup(model) if model is not None else None
    return found.name if found is not None else model


def table_of(ctx: Context, job: Job | RunningJob) -> dict[str, float] | None:
    """The job's speed table under catalog names (its own, else its workload's); None without one."""
    speeds: Mapping[str, float] | None = job.speeds
    if speeds is None and job.workload is not None:
        speeds = next((w.speeds for w in ctx.request.workloads if w.name == job.workload), None)
    if speeds is None:
        return None
    return {str(canonical(m)): float(v) for m, v in speeds.items()}


def running_speed(ctx: Context, run: RunningJob) -> float:
    """The speed a running job runs at: its table's on the slowest GPU node it holds (1.0 without a table); its
    expected end is `started_at` + `expected_runtime_h` / this (placement.verify.reservation, alignment)."""
    table = table_of(ctx, run)
    if table is None:
        return 1.0
    models = {canonical(ctx.nodes[p.node].gpu_model) for p in run.pods
              if p.node in ctx.nodes and ctx.nodes[p.node].gpus > 0}
    return min((table.get(m, 1.0) if m is not None else 1.0 for m in models), default=1.0)


def gpu_models(ctx: Context) -> set[str | None]:
    """The GPU models of the request's GPU nodes and of the nodes its pools may add (read once per check)."""
    if "gpu_models" not in ctx.memo:
        models = {canonical(n.gpu_model) for n in ctx.request.cluster.nodes if n.gpus > 0}
        models |= {canonical(p.provisionable.node.gpu_model) for p in ctx.request.cluster.pools
                   if p.provisionable is not None and p.provisionable.max_nodes > 0
                   and p.provisionable.node.gpus > 0}
        ctx.memo["gpu_models"] = models
    return set(ctx.memo["gpu_models"])


def loses(ctx: Context, job: Job) -> bool:
    """Does the job run slower on some GPU model of the cluster than on its best (so the term may charge it)?"""
    table = table_of(ctx, job)
    if table is None:
        return False
    return len({table.get(m, 1.0) if m is not None else 1.0 for m in gpu_models(ctx)}) > 1


def pace(ctx: Context, job: Job, node: Node) -> float:
    """The job's speed on the node's GPUs (1.0 without a table, or on a node without a GPU model)."""
    key = ("speed_table", job.name)
    if key not in ctx.memo:
        ctx.memo[key] = table_of(ctx, job)
    table = ctx.memo[key]
    if table is None or node.gpu_model is None:
        return 1.0
    return float(table.get(str(canonical(node.gpu_model)), 1.0))


def best(table: Mapping[str, float], models: set[str | None]) -> float:
    """The job's best speed over these GPU models (1.0 with none)."""
    return max((table.get(m, 1.0) if m is not None else 1.0 for m in models), default=1.0)
