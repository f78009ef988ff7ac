"""Fragmentation, recomputed: −weights.fragmentation for each node whose healthy GPUs were all free and whole
before the plan and on which the plan puts a pod that takes whole GPUs; a smaller charge where only MIG or
shared pods break such a node.

"Free and whole before the plan" is the planner's whole free node (placement.verify.candidates): no healthy
GPU held by a running job (preempted ones included: the planner decides on the cluster as it runs; jobs it
stops for running past their `max_runtime_h` are gone first), none shared, partitioned ones only where
MIG layouts may change and no running pod holds an instance on them, at least one healthy GPU. A node the
plan adds is one.

**Partial charges.** Where MIG layouts may change, a whole free node that gets a MIG pod or a new layout
(a `mig_changes` entry that enables MIG) pays once for that; where GPUs may become shared, one whose GPU the plan shares
(a `sharing_changes` entry) pays once for that, whole-GPU pods there or not. The charge is the weight, but
at most half of what the smallest pod of that kind that could go there earns (its class weight ×
GPU-equivalents × weights.priority) net of the change it also pays (weights.mig_reconfigure or
weights.sharing_change), and nothing below zero. Which pods could go there follows the planner's
candidates: every task with a pod on the node could; another one of that kind could where its selectors,
taints, spot, its instance on the node's GPU model and the free CPU and memory allow, unless the model was
trimmed or evictions could add room (placement.verify.candidates), where the charge lies between the ones
the two sets give. A job the planner screened out (no plan could place it: placement.verify.screen) offers
nothing; one it may have screened out, maybe. Each flag's coefficient in model units (`Tally`).
"""

from __future__ import annotations

from placement_models import Job, Node, Task

from placement.verify.candidates import class_of, cpu_units, may_grow, mem_units, offers, restricted, rooms, signature
from placement.verify.candidates import whole_free as is_whole_free
from placement.verify.context import FLOAT_SUM, SUMMED, Context, Expected, Tally
from placement.verify.priority import mig_fraction_on, pod_values, tiers
from placement.verify.screen import screened


def whole_free_nodes(ctx: Context) -> set[str]:
    """Nodes whose every healthy GPU is free and whole before the plan (the module docstring's sense)."""
    return {n.name for n in ctx.nodes.values() if is_whole_free(ctx, n)}


def check_fragmentation_term(ctx: Context) -> list[Expected] | None:
    policy = ctx.request.policy
    weight = policy.weights.fragmentation
    if weight == 0:
        return [Expected.exact(0.0)]
    free = whole_free_nodes(ctx)
    whole = {r.node.name for r in ctx.resolved if r.node.name in free and r.task.gpus > 0
             and r.task.mig_profile is None and r.task.gpu_share is None}
    base = Tally()
    base.add(-1.0, len(whole), weight)
    broken: list[tuple[str, bool]] = []  # (node, MIG?) broken by partial-GPU pods or changes
    if policy.allow_mig_changes:
        mig = {r.node.name for r in ctx.resolved if r.task.mig_profile is not None}
        mig |= {c.node for c in ctx.plan.mig_changes if c.mig_enabled}  # a GPU made whole again breaks nothing
        broken += [(n, True) for n in sorted(mig & free)]
    if policy.allow_sharing_changes and policy.max_sharing_changes != 0:
        shared = {c.node for c in ctx.plan.sharing_changes if c.node in ctx.nodes
                  and c.gpu not in ctx.nodes[c.node].sharing}
        broken += [(n, False) for n in sorted(shared & free)]
    if not broken:
        return [base.expected()]
    found = tiers(ctx)
    values = pod_values(ctx)
    if found is None or values is None:  # the charges are not derived: each between nothing and the weight
        value = base.value()
        return [Expected(value - weight * len(broken), value, 2 * base.unsure + len(broken))]
    out = []
    for tier in found:
        total = Tally(base.units, base.unsure)
        low = high = 0.0
        for node, is_mig in broken:
            least, most = _charges(ctx, ctx.nodes[node], is_mig, tier.weights, values)
            if least == most:
                total.add(-1.0, 1, least)
            else:
                low -= most
                high -= least
        value = total.value()
        loose = low != high
        out.append(Expected(value + low, value + high, 2 * total.unsure + (len(broken) if loose else 0),
                            SUMMED if not loose else FLOAT_SUM))
    return out


def _charges(ctx: Context, node: Node, is_mig: bool, classes: dict[int, float],
             values: dict[tuple[str, str], float]) -> tuple[float, float]:
    """(least, most) charge for breaking `node` with pods of one kind (module docstring)."""
    weights = ctx.request.policy.weights
    change = weights.mig_reconfigure if is_mig else weights.sharing_change
    sure: list[float] = []
    maybe: list[float] = []
    here = {(r.job.name, r.task.name) for r in ctx.resolved if r.node.name == node.name}
    gone, unsure = screened(ctx)  # a job no plan could place is not in the planner's model: it offers nothing
    for job in ctx.request.jobs:
        if job.name in gone:
            continue
        for task in job.tasks:
            if not _kind(task, is_mig):
                continue
            earns = classes.get(job.priority, 0.0) * values[job.name, task.name]
            if (job.name, task.name) in here:
                sure.append(earns)
                continue
            found = _may_go(ctx, job, task, node, is_mig)
            if found and job.name in unsure:
                found = None
            if found is not False:
                (sure if found else maybe).append(earns)

    def charge(floor: float) -> float:
        return max(0.0, min(weights.fragmentation, 0.5 * (floor * weights.priority - change)))

    everyone = sure + maybe
    least = charge(min(everyone)) if everyone else 0.0
    most = charge(min(sure)) if sure else (weights.fragmentation if maybe else 0.0)
    return min(least, most), max(least, most)


def _kind(task: Task, is_mig: bool) -> bool:
    """Does the task's pod break a node the way `is_mig` says (a MIG instance, or a share of a whole GPU)?"""
    return task.mig_profile is not None if is_mig else task.gpu_share is not None and task.mig_profile is None


def _may_go(ctx: Context, job: Job, task: Task, node: Node, is_mig: bool) -> bool | None:
    """Could the planner have offered the whole free `node` to a MIG or share task? None: maybe. Once per task
    signature and node class."""
    where = class_of(ctx, node.name)
    key = ("breaks", *signature(job, task), id(where))
    if key not in ctx.memo:
        found: bool | None = False
        if any(c is where for c, _, _ in offers(ctx, job, task)):
            room = rooms(ctx)[node.name]
            if is_mig and not mig_fraction_on(task, node):
                found = False
            elif room.cpu < cpu_units(task.cpu, True) or room.memory < mem_units(task.memory_gib, True):
                found = None if may_grow(ctx) else False
            elif restricted(ctx) or not is_mig or ctx.request.policy.max_mig_changes == 0:
                found = None  # a trimmed model, the share's own room, or no change allowed: not derived
            else:
                found = True
        ctx.memo[key] = found
    return ctx.memo[key]  # type: ignore[no-any-return]
