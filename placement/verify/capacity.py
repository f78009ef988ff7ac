"""Capacity: each pod gets the GPUs its task asks for, healthy ones of its node that nobody else holds,
and no node's CPU, memory or per-GPU memory is overrun.
"""

from __future__ import annotations

from collections import Counter

from placement_models import Assignment

from placement.catalog import lookup
from placement.verify.context import EPS, Context, num, pod_name


def check_gpus(ctx: Context) -> list[str]:
    out: list[str] = []
    given: dict[tuple[str, int], Assignment] = {}
    for r in ctx.resolved:
        a, node, task = r.a, r.node, r.task
        if task.gpu_share is not None:
            continue  # one shared GPU among several pods: the sharing rule
        if len(a.gpus) != task.gpus:
            out.append(f"gpus: {pod_name(a)} on node {node.name} has {len(a.gpus)} GPUs, task asks for {task.gpus}")
        if len(set(a.gpus)) != len(a.gpus):  # counted only when some GPU repeats (19,070 pods at 12,500 nodes)
            dupes = sorted(g for g, c in Counter(a.gpus).items() if c > 1)
            out.append(f"gpus: {pod_name(a)} on node {node.name} lists GPU(s) {dupes} more than once")
        for g in dict.fromkeys(a.gpus):  # distinct, in the plan's order
            if not 0 <= g < node.gpus:
                out.append(f"gpus: {pod_name(a)} takes GPU {g} of node {node.name}, out of range 0..{node.gpus - 1}")
                continue
            if g in node.unhealthy_gpus:
                out.append(f"gpus: {pod_name(a)} takes unhealthy GPU {g} of node {node.name}")
            holder = ctx.held.get((node.name, g))
            if holder is not None:
                out.append(f"gpus: {pod_name(a)} takes GPU {g} of node {node.name}, held by running job {holder}")
            other = given.get((node.name, g))
            if other is not None:
                out.append(f"gpus: GPU {g} of node {node.name} is given to both {pod_name(other)} and {pod_name(a)}")
            else:
                given[node.name, g] = a
    return out


def _capacity(ctx: Context, rule: str, attr: str, running: dict[str, float], unit: str) -> list[str]:
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
            out.append(f"{rule}: node {node.name} uses {num(total)} {unit} of {num(limit)}")
    return out


def check_cpu(ctx: Context) -> list[str]:
    return _capacity(ctx, "capacity.cpu", "cpu", ctx.running_cpu, "CPUs")


def check_memory(ctx: Context) -> list[str]:
    return _capacity(ctx, "capacity.memory", "memory_gib", ctx.running_mem, "GiB")


def check_gpu_memory(ctx: Context) -> list[str]:
    out: list[str] = []
    for r in ctx.resolved:
        need = r.task.gpu_memory_gib
        if need is None:
            continue
        model_name = r.node.gpu_model
        if not model_name:
            out.append(f"gpu_memory: {pod_name(r.a)} needs {num(need)} GiB per GPU; node {r.node.name} "
                       "has no GPU model")
            continue
        model = lookup(model_name)
        if model is None:
            # Without the catalog's figure the requirement cannot be shown to hold.
            out.append(f"gpu_memory: {pod_name(r.a)} on node {r.node.name}: unknown GPU model {model_name}")
        elif need > model.memory_gib + EPS:
            out.append(
                f"gpu_memory: {pod_name(r.a)} needs {num(need)} GiB per GPU; node {r.node.name} has "
                f"{model.name} with {num(model.memory_gib)} GiB"
            )
    return out
