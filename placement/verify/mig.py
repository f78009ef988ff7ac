"""MIG: layouts the plan changes are legal for the GPU's catalog geometry, allowed by policy, and keep
every running instance in place; each MIG pod holds an instance of its profile that exists after the
plan and nobody else holds, or a share of a shared instance within its limits (mig_sharing); no
whole-GPU pod sits on a partitioned GPU.
"""

from __future__ import annotations

from collections import Counter

from placement.catalog import MigGeometry, lookup
from placement.verify import mig_sharing
from placement.verify.context import EPS, Context, Expected, Resolved, Tally, num, pod_name
from placement.verify.sharing import changed_gpu


def check_mig(ctx: Context) -> list[str]:
    """MIG: changed layouts are legal and allowed, keep every running pod's instance where it is; each MIG pod
    holds an instance of its profile that exists after the plan and nobody else holds; no whole-GPU pod sits
    on a GPU partitioned after the plan."""
    out: list[str] = []
    policy = ctx.request.policy
    holds: dict[tuple[str, int, int], tuple[str, str]] = {}  # (node, gpu, start) -> (profile, running job)
    whole: set[tuple[str, int, int]] = set()  # instances a running pod holds whole (not a share of)
    for rj in ctx.request.cluster.running:
        for pod in rj.pods:
            if pod.mig is not None and rj.job not in ctx.evicted:
                holds[pod.node, pod.mig.gpu, pod.mig.start] = (pod.mig.profile, rj.job)
                if pod.gpu_share is None:
                    whole.add((pod.node, pod.mig.gpu, pod.mig.start))
    final: dict[tuple[str, int], list[tuple[str, int]] | None] = {
        (n.name, g): [(i.profile, i.start) for i in layout] for n in ctx.nodes.values() for g, layout in n.mig.items()
    }
    changes = ctx.plan.mig_changes
    if changes and not policy.allow_mig_changes:
        out.append(f"mig: the plan changes {len(changes)} GPU layout(s) but policy.allow_mig_changes is off")
    if policy.max_mig_changes is not None and len(changes) > policy.max_mig_changes:
        out.append(f"mig: the plan changes {len(changes)} GPU layouts, more than policy.max_mig_changes "
                   f"{policy.max_mig_changes}")
    seen: set[tuple[str, int]] = set()
    for m in changes:
        where = f"node {m.node} GPU {m.gpu}"
        node = changed_gpu(ctx, out, "mig", m.node, m.gpu, seen, "changed")
        if node is None:
            continue
        model = lookup(node.gpu_model) if node.gpu_model else None
        if model is None or model.mig is None:
            out.append(f"mig: {where} is re-partitioned but GPU model {node.gpu_model} has no MIG")
            continue
        if m.gpu in node.unhealthy_gpus:
            out.append(f"mig: {where} is unhealthy and cannot be re-partitioned")
        if m.gpu in node.sharing:
            out.append(f"mig: {where} is a shared (time-slicing/MPS) GPU and cannot be partitioned")
        if (m.node, m.gpu) in ctx.held:
            out.append(f"mig: {where} is held whole by running job {ctx.held[m.node, m.gpu]}")
        layout = [(i.profile, i.start) for i in m.layout] if m.mig_enabled else None
        if not m.mig_enabled and m.layout:
            out.append(f"mig: {where} is made whole (mig_enabled false) but lists instances")
        out.extend(f"mig: {where}: {why}" for why in _layout_violations(model.mig, layout or []))
        for (hn, hg, start), (profile, job) in holds.items():
            if (hn, hg) != (m.node, m.gpu):
                continue
            kept = layout is not None and any(
                s == start and _same_profile(model.mig, name, profile) for name, s in layout)
            if not kept:
                out.append(f"mig: {where}: instance {profile}@{start} of running job {job} does not stay in place")
        final[m.node, m.gpu] = layout
    taken = {key: f"running job {job}" for key, (_, job) in holds.items() if key in whole}
    shares = mig_sharing.shared_after(ctx)
    out.extend(mig_sharing.running_kept(ctx, shares))
    out.extend(mig_sharing.created(ctx, shares))
    for r in ctx.resolved:
        out.extend(_mig_pod(r, final, taken, shares))
    out.extend(mig_sharing.within_limits(ctx, shares))
    return out


def _mig_pod(r: Resolved, final: dict[tuple[str, int], list[tuple[str, int]] | None],
             taken: dict[tuple[str, int, int], str], shares: mig_sharing.Shares) -> list[str]:
    a, task, node = r.a, r.task, r.node
    if task.mig_profile is None:
        if a.mig is not None:
            return [f"mig: {pod_name(a)} holds a MIG instance but its task asks for none"]
        return [f"mig: {pod_name(a)} takes GPU {g} of node {node.name} whole, but the GPU is MIG-partitioned"
                for g in dict.fromkeys(a.gpus) if final.get((node.name, g)) is not None]
    if a.mig is None:
        return [f"mig: {pod_name(a)} asks for a MIG instance ({task.mig_profile}) but holds none"]
    slot = a.mig
    where = f"{pod_name(a)} on node {node.name} GPU {slot.gpu}"
    model = lookup(node.gpu_model) if node.gpu_model else None
    if model is None or model.mig is None:
        return [f"mig: {where}: GPU model {node.gpu_model} has no MIG"]
    geo = model.mig
    layout = final.get((node.name, slot.gpu))
    if layout is None:
        return [f"mig: {where}: the GPU is not MIG-partitioned after the plan"]
    out: list[str] = []
    if a.gpus:
        out.append(f"mig: {pod_name(a)} holds a MIG instance and whole GPUs {a.gpus}")
    if slot.gpu in node.unhealthy_gpus:
        out.append(f"mig: {where}: the GPU is unhealthy")
    if not any(s == slot.start and _same_profile(geo, name, slot.profile) for name, s in layout):
        out.append(f"mig: {where}: no {slot.profile} instance at start {slot.start} after the plan")
    if task.mig_profile.strip().lower() == "auto":
        wanted = geo.smallest_fitting(task.gpu_memory_gib or 0.0)
    else:
        wanted = geo.profile(task.mig_profile)
    if wanted is None or not _same_profile(geo, wanted.name, slot.profile):
        out.append(f"mig: {where} holds {slot.profile}; its task wants "
                   f"{wanted.name if wanted else task.mig_profile + ' (not a profile of ' + geo.model + ')'}")
    got = geo.profile(slot.profile)
    if got is not None and task.gpu_memory_gib is not None and got.memory_gib < task.gpu_memory_gib - EPS:
        out.append(f"mig: {where}: {got.name} has {num(got.memory_gib)} GiB, task needs "
                   f"{num(task.gpu_memory_gib)}")
    key = (node.name, slot.gpu, slot.start)
    out.extend(mig_sharing.placed_pod(r, shares))
    if key in shares.spec:
        return out  # held in shares: mig_sharing.within_limits counts the holders
    if key in taken:
        out.append(f"mig: {where}: instance {slot.profile}@{slot.start} is already held by {taken[key]}")
    else:
        taken[key] = pod_name(a)
    return out


def _same_profile(geo: MigGeometry, a: str, b: str) -> bool:
    pa, pb = geo.profile(a), geo.profile(b)
    return pa is not None and pa == pb


def _layout_violations(geo: MigGeometry, layout: list[tuple[str, int]]) -> list[str]:
    """The catalog's MIG rules, recomputed: known profiles, legal starts, no shared memory slice, counts, one media."""
    out: list[str] = []
    owner: dict[int, str] = {}
    count: Counter[str] = Counter()
    media: list[str] = []
    for name, start in layout:
        p = geo.profile(name)
        if p is None:
            out.append(f"{geo.model} has no MIG profile {name}")
            continue
        if start not in p.starts:
            out.append(f"{p.name} may not start at memory slice {start} (legal: {list(p.starts)})")
            continue
        for m in range(start, start + p.memory_slices):
            if m in owner:
                out.append(f"{p.name}@{start} and {owner[m]} share memory slice {m}")
                break
        owner.update(dict.fromkeys(range(start, start + p.memory_slices), f"{p.name}@{start}"))
        count[p.name] += 1
        if count[p.name] == p.max_count + 1:
            out.append(f"more than {p.max_count} {p.name} instances")
        if p.media:
            media.append(f"{p.name}@{start}")
    if len(media) > 1:
        out.append(f"more than one media-engine instance ({', '.join(media)})")
    return out


def check_reconfigure_term(ctx: Context) -> list[Expected] | None:
    """`mig.reconfigure`: −weights.mig_reconfigure per GPU whose MIG layout the plan changes (its
    `mig_changes` entries, one a GPU: the mig rule checks they are real changes), in model units."""
    changed = {(c.node, c.gpu) for c in ctx.plan.mig_changes}
    total = Tally()
    total.add(-1.0, len(changed), ctx.request.policy.weights.mig_reconfigure)
    return [total.expected()]
