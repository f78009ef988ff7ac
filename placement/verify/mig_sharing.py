"""Shared MIG instances: a MIG instance the device plugin offers `replicas` times (time-slicing or MPS on MIG).

Recomputed from the request and the plan alone, like every rule: which instances are shared after
the plan (a layout entry's `sharing`, the node's or a MIG change's), who holds a share of each (running
pods not evicted, placed pods) and whether each stays within its replicas, one instance's worth of
shares and the instance's memory. A whole-instance pod never sits on a shared instance, a share
never on a whole one, and an instance running pods share stays shared. An instance shared before keeps
its setting; one the plan makes shared (a free instance, or one its re-partition creates) gets
policy.sharing_default's, as a GPU the plan shares does, and is none a running pod holds whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from placement_models import GpuSharing, MigInstance, Node

from placement.catalog import lookup
from placement.verify.context import EPS, Context, Resolved, num, pod_name

#: (node, GPU index, start slot) of a MIG instance
Key = tuple[str, int, int]


@dataclass
class Shares:
    """What the instances shared after the plan carry: their setting, and each holder's share and GiB."""

    spec: dict[Key, GpuSharing] = field(default_factory=dict)
    profile: dict[Key, str] = field(default_factory=dict)
    load: dict[Key, list[tuple[str, float, float]]] = field(default_factory=dict)  # holder, share, GiB


def shared_after(ctx: Context) -> Shares:
    """The shared instances after the plan: the nodes' layouts, with every GPU a MIG change names replaced by
    its new layout; the running pods (not evicted) that hold a share of one are loaded on it."""
    out = Shares()
    layouts: dict[tuple[str, int], list[MigInstance]] = {
        (n.name, g): list(layout) for n in ctx.nodes.values() for g, layout in n.mig.items()}
    for m in ctx.plan.mig_changes:
        layouts[m.node, m.gpu] = list(m.layout) if m.mig_enabled else []
    for (name, g), layout in layouts.items():
        for i in layout:
            if i.sharing is not None:
                out.spec[name, g, i.start] = i.sharing
                out.profile[name, g, i.start] = i.profile
    for rj in ctx.request.cluster.running:
        if rj.job in ctx.evicted:
            continue
        for pod in rj.pods:
            if pod.mig is not None and pod.gpu_share is not None:
                node = ctx.nodes.get(pod.node)
                gib = _memory(node, pod.mig.profile, pod.gpu_share, pod.gpu_memory_gib)
                out.load.setdefault((pod.node, pod.mig.gpu, pod.mig.start), []).append(
                    (f"running job {rj.job}", pod.gpu_share, gib))
    return out


def running_kept(ctx: Context, shares: Shares) -> list[str]:
    """Every instance running pods (not evicted) share is still a shared instance after the plan."""
    return [f"mig: instance {key[0]} GPU {key[1]} slot {key[2]} held in shares by {holders[0][0]} is not shared "
            "after the plan (its layout entry lost 'sharing')"
            for key, holders in shares.load.items() if key not in shares.spec]


def created(ctx: Context, shares: Shares) -> list[str]:
    """Instances shared after the plan: one shared before (same GPU, start and profile) keeps its setting, one
    the plan makes shared has policy.sharing_default's; none is an instance a kept running pod holds whole."""
    default = ctx.request.policy.sharing_default
    before: dict[Key, tuple[str, GpuSharing]] = {
        (n.name, g, i.start): (i.profile, i.sharing) for n in ctx.nodes.values() for g, layout in n.mig.items()
        for i in layout if i.sharing is not None}
    whole = {(pod.node, pod.mig.gpu, pod.mig.start): rj.job for rj in ctx.request.cluster.running
             if rj.job not in ctx.evicted for pod in rj.pods if pod.mig is not None and pod.gpu_share is None}
    out = []
    for key, spec in shares.spec.items():
        where = f"MIG instance {shares.profile[key]}@{key[2]} of node {key[0]} GPU {key[1]}"
        if key in whole:
            out.append(f"mig: {where} is held whole by running job {whole[key]} and cannot become shared")
        old = before.get(key)
        if old is not None and _same(ctx.nodes.get(key[0]), old[0], shares.profile[key]):
            if (spec.mode, spec.replicas) != (old[1].mode, old[1].replicas):
                out.append(f"mig: {where} is shared as {old[1].mode} with {old[1].replicas} replicas; the plan "
                           f"gives it {spec.mode} with {spec.replicas}")
        elif (spec.mode, spec.replicas) != (default.mode, default.replicas):
            out.append(f"mig: {where} is made shared as {spec.mode} with {spec.replicas} replicas; "
                       f"policy.sharing_default says {default.mode} with {default.replicas}")
    return out


def _same(node: Node | None, a: str, b: str) -> bool:
    """Do two names spell one MIG profile of the node's GPU model?"""
    model = lookup(node.gpu_model) if node is not None and node.gpu_model else None
    geo = model.mig if model is not None else None
    if geo is None:
        return a.lower() == b.lower()
    found = geo.profile(a)
    return found is not None and found == geo.profile(b)


def placed_pod(r: Resolved, shares: Shares) -> list[str]:
    """A placed MIG pod against the instance it names: a share only on a shared instance, with its task's
    share; a whole-instance pod never on a shared one. Loads the share for `within_limits`."""
    a, task = r.a, r.task
    assert a.mig is not None
    key = (r.node.name, a.mig.gpu, a.mig.start)
    where = f"{pod_name(a)} on node {r.node.name} GPU {a.mig.gpu}"
    if key not in shares.spec:
        if task.gpu_share is not None or a.gpu_share is not None:
            return [f"mig: {where}: instance {a.mig.profile}@{a.mig.start} is not shared, but the pod takes a "
                    "share of it"]
        return []
    if task.gpu_share is None:
        return [f"mig: {where}: instance {a.mig.profile}@{a.mig.start} is shared "
                f"({shares.spec[key].mode}); a pod that asks for a whole instance cannot take it"]
    out = []
    if a.gpu_share is None or abs(a.gpu_share - task.gpu_share) > EPS:
        out.append(f"mig: {where} takes share {a.gpu_share} of its instance; its task asks {num(task.gpu_share)}")
    if a.gpus:
        out.append(f"mig: {where} holds a share of a MIG instance and GPUs {a.gpus}")
    gib = _memory(r.node, a.mig.profile, task.gpu_share, task.gpu_memory_gib)
    shares.load.setdefault(key, []).append((pod_name(a), task.gpu_share, gib))
    return out


def within_limits(ctx: Context, shares: Shares) -> list[str]:
    """Per shared instance: at most `replicas` holders, shares summing to at most one instance, and GPU memory
    at most the instance's (time-slicing isolates no memory)."""
    out = []
    for key, holders in shares.load.items():
        spec = shares.spec.get(key)
        if spec is None:
            continue  # running_kept reports it
        name, g, start = key
        where = f"shared MIG instance {shares.profile[key]}@{start} of node {name} GPU {g}"
        if len(holders) > spec.replicas:
            out.append(f"mig: {where} has {len(holders)} pods, more than its {spec.replicas} replicas")
        total = sum(s for _, s, _ in holders)
        if total > 1 + EPS:
            out.append(f"mig: {where} is given {num(total)} of the instance")
        memory = _instance_gib(ctx.nodes.get(name), shares.profile[key])
        used = sum(m for _, _, m in holders)
        if memory is not None and used > memory + EPS:
            out.append(f"mig: {where} is given {num(used)} GiB of GPU memory, more than its {num(memory)} GiB")
    return out


def _instance_gib(node: Node | None, profile: str) -> float | None:
    """GiB of GPU memory of one instance of `profile` on the node's GPU model (None: unknown to the catalog)."""
    model = lookup(node.gpu_model) if node is not None and node.gpu_model else None
    found = model.mig.profile(profile) if model is not None and model.mig is not None else None
    return found.memory_gib if found is not None else None


def _memory(node: Node | None, profile: str, share: float, gib: float | None) -> float:
    """A share's GPU memory: as declared, else its share of the instance's memory."""
    if gib is not None:
        return gib
    return share * (_instance_gib(node, profile) or 0.0)
