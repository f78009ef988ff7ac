"""Which nodes the planner offers a task before its model exists, derived again from the request.

Several objective terms weigh a pod against the other nodes its task could have used: `cost.compute`
charges the price above the cheapest of them, `topology.spread` counts the domains a gang needs at
least from their pod slots, `topology.keep_whole` counts the levels whose free domains a GPU pod could
enter, and the fragmentation charge of a MIG pod follows the cheapest class that could go to a node.
The planner filters those nodes before any variable exists (placement.problem): a node is a candidate
for a task when its selectors match, it tolerates the node's blocking taints, the job may use spot if the
node is spot, the node has GPUs and enough GPU memory for a GPU task, and one pod fits the node's free
room (whole GPUs no running pod holds, neither partitioned nor shared, plus idle partitioned ones where
MIG layouts may change, none of whose instances is shared; CPU in milli-cores and memory in MiB,
demands rounded up and capacities down).

Two limits, each stated where a term reads it:

* the room a job counts on includes running jobs a preemption rule lets it evict: where the request
  allows preemption and some running job is preemptible (`may_grow`), a node without free room may still
  be a candidate, so `fits` says "maybe" (None) there;
* a model trimmed to fewer nodes (the plan's `solver.restricted`) offers each task only part of its
  candidates (placement.candidates), which the verifier cannot rebuild (`restricted`).

MIG and shared tasks (their room is the device layouts') are not derived here (`fits` returns None).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from placement_models import Job, Node, Task

from placement.catalog import MigGeometry, MigProfile, lookup, mig_geometry
from placement.verify.context import Context
from placement.verify.selectors import allowed, effective_labels

#: The label every node carries with its own name.
HOSTNAME = "kubernetes.io/hostname"


def cpu_units(cores: float, demand: bool) -> int:
    """Milli-CPU: a demand rounds up, a capacity down (the planner never packs optimistically)."""
    x = cores * 1000.0
    return int(math.ceil(x - 1e-6)) if demand else int(math.floor(x + 1e-6))


def mem_units(gib: float, demand: bool) -> int:
    """MiB, rounded as `cpu_units`."""
    x = gib * 1024.0
    return int(math.ceil(x - 1e-6)) if demand else int(math.floor(x + 1e-6))


@dataclass(frozen=True)
class Room:
    """A node's free room before the plan: whole GPUs, milli-CPU, MiB."""

    gpus: int
    cpu: int
    memory: int


def all_nodes(ctx: Context) -> list[Node]:
    """The nodes the planner weighs: the request's, then every node a pool may add, pool by pool (whether or
    not the plan adds it)."""
    offered = [pool.provisionable.materialise(pool.name, k) for pool in ctx.request.cluster.pools
               if pool.provisionable is not None for k in range(pool.provisionable.max_nodes)]
    return [*ctx.request.cluster.nodes, *offered]


def rooms(ctx: Context) -> dict[str, Room]:
    """Free room of every node the planner weighs (`all_nodes`; nothing runs on the added ones)."""
    if "rooms" in ctx.memo:
        return ctx.memo["rooms"]  # type: ignore[no-any-return]
    held: dict[str, set[int]] = {}
    occupied: set[tuple[str, int]] = set()  # partitioned GPUs holding a running instance
    cpu: dict[str, int] = {}
    mem: dict[str, int] = {}
    for rj in ctx.request.cluster.running:
        if rj.job in ctx.stopped:
            continue
        for pod in rj.pods:
            if pod.mig is not None:
                occupied.add((pod.node, pod.mig.gpu))
            elif pod.gpu_share is None:
                held.setdefault(pod.node, set()).update(pod.gpus)
            cpu[pod.node] = cpu.get(pod.node, 0) + cpu_units(pod.cpu, True)
            mem[pod.node] = mem.get(pod.node, 0) + mem_units(pod.memory_gib, True)
    # a shared MIG instance never moves (the planner keeps its sharing), so its GPU is never made whole either
    occupied |= {(n.name, g) for n in ctx.nodes.values() for g, layout in n.mig.items()
                 if any(i.sharing is not None for i in layout)}
    changes = ctx.request.policy.allow_mig_changes
    out: dict[str, Room] = {}
    for n in all_nodes(ctx):
        taken = held.get(n.name, set()) | set(n.unhealthy_gpus)
        plain = sum(1 for g in range(n.gpus) if g not in taken and g not in n.mig and g not in n.sharing)
        idle = sum(1 for g in n.mig if g not in n.unhealthy_gpus and (n.name, g) not in occupied) if changes else 0
        out[n.name] = Room(plain + idle, max(0, cpu_units(n.cpu, False) - cpu.get(n.name, 0)),
                           max(0, mem_units(n.memory_gib, False) - mem.get(n.name, 0)))
    ctx.memo["rooms"] = out
    return out


def whole_free(ctx: Context, node: Node) -> bool:
    """Are all the node's healthy GPUs free and whole before the plan (the planner's whole free node)?"""
    healthy = node.gpus - len(set(node.unhealthy_gpus))
    return healthy > 0 and rooms(ctx)[node.name].gpus == healthy


def may_grow(ctx: Context) -> bool:
    """May a job count on more room than the free one (a preemption rule, a preemptible running job)? Once per
    check."""
    if "may_grow" not in ctx.memo:
        ctx.memo["may_grow"] = bool(grown_rooms(ctx)) and any(
            room != rooms(ctx)[name] for name, room in grown_rooms(ctx).items())
    return ctx.memo["may_grow"]  # type: ignore[no-any-return]


def grown_rooms(ctx: Context) -> dict[str, Room]:
    """The most room a pending job may count on per node: the free room plus all that running jobs hold which
    some rule could let it evict (preemption on somewhere, preemptible, past min_runtime_s), or that may move
    (policy.migration, with a speed table), as the planner adds it: healthy GPUs of pods that do not share
    theirs, CPU and memory. Empty where nothing may be."""
    if "grown" in ctx.memo:
        return ctx.memo["grown"]  # type: ignore[no-any-return]
    request = ctx.request
    out: dict[str, Room] = {}
    moving = request.policy.migration  # a job that may move to faster GPUs leaves its own to the plan
    if request.may_preempt or moving:
        now, least = request.planning_time(), request.policy.min_runtime_s
        extra: dict[str, list[int]] = {}
        for rj in request.cluster.running:
            old = least == 0 or (rj.started_at is not None and (now - rj.started_at).total_seconds() >= least)
            if rj.job in ctx.stopped or not rj.preemptible or not old:
                continue
            if not request.may_preempt and rj.speeds is None and rj.workload is None:
                continue
            for pod in rj.pods:
                node = ctx.nodes.get(pod.node)
                bad = set(node.unhealthy_gpus) if node is not None else set()
                add = extra.setdefault(pod.node, [0, 0, 0])
                add[0] += 0 if pod.gpu_share is not None else sum(1 for g in pod.gpus if g not in bad)
                add[1] += cpu_units(pod.cpu, True)
                add[2] += mem_units(pod.memory_gib, True)
        free = rooms(ctx)
        none = [0, 0, 0]
        out = {name: Room(r.gpus + e[0], r.cpu + e[1], r.memory + e[2])
               for name, r in free.items() for e in (extra.get(name, none),)}
    ctx.memo["grown"] = out
    return out


def restricted(ctx: Context) -> bool:
    """Did the planner trim some task's candidate nodes (the plan says so)? Then the model's candidates are a
    subset of those derived here."""
    return bool(ctx.plan.solver.restricted)


def statically_allowed(job: Job, task: Task, node: Node, spot: bool) -> bool:
    """The filters that do not depend on what runs: selectors, taints, spot, GPUs and GPU memory."""
    if not allowed(task, node) or (spot and not job.spot_ok):
        return False
    if task.gpus > 0 or task.mig_profile is not None or task.gpu_share is not None:
        if node.gpus <= 0:
            return False
        if task.gpu_memory_gib is not None:
            model = lookup(node.gpu_model) if node.gpu_model else None
            if model is None or model.memory_gib < task.gpu_memory_gib - 1e-9:
                return False
    return True


def slots(ctx: Context, task: Task, node: Node, grown: bool = False) -> int:
    """Pods of a whole-GPU or CPU task the node's free room (`grown`: with all it may gain from evictions,
    `grown_rooms`) takes, at most every replica."""
    room = (grown_rooms(ctx) or rooms(ctx))[node.name] if grown else rooms(ctx)[node.name]
    return _fit(room, task.replicas, _needs(task))


def _needs(task: Task) -> tuple[int, int, int]:
    """One pod's whole GPUs, milli-CPU and MiB, rounded up."""
    return task.gpus, cpu_units(task.cpu, True), mem_units(task.memory_gib, True)


def _fit(room: Room, replicas: int, needs: tuple[int, int, int]) -> int:
    """Pods of `needs` the room takes, at most `replicas`."""
    fit = replicas
    for have, need in zip((room.gpus, room.cpu, room.memory), needs, strict=True):
        if need > 0:
            fit = min(fit, have // need)
    return fit


def fits(ctx: Context, job: Job, task: Task, node: Node, spot: bool) -> bool | None:
    """Is the node a candidate of the task (module docstring)? None where the verifier cannot tell: a MIG or
    shared task, or a node without free room where evictions could make some (`may_grow`)."""
    if not statically_allowed(job, task, node, spot):
        return False
    if task.mig_profile is not None or task.gpu_share is not None:
        return None if _device_room(ctx, task, node) else False
    if slots(ctx, task, node) >= 1:
        return True
    return None if may_grow(ctx) and slots(ctx, task, node, grown=True) >= 1 else False


def _held_instances(ctx: Context) -> dict[str, set[tuple[int, int]]]:
    """Node name -> the MIG instances (gpu, start) running pods hold whole there, jobs the plan stops left out:
    one pass over the running pods per check (per node it would be nodes × pods)."""
    if "held_instances" not in ctx.memo:
        held: dict[str, set[tuple[int, int]]] = {}
        for rj in ctx.request.cluster.running:
            if rj.job in ctx.stopped:
                continue
            for pod in rj.pods:
                if pod.mig is not None and pod.gpu_share is None:
                    held.setdefault(pod.node, set()).add((pod.mig.gpu, pod.mig.start))
        ctx.memo["held_instances"] = held
    return ctx.memo["held_instances"]  # type: ignore[no-any-return]


def devices(ctx: Context, node: Node) -> tuple[frozenset[str], frozenset[str], bool]:
    """What MIG and shared pods may find on the node before the plan: the profiles of its free MIG instances
    (no running pod holds them; not offered as shares), those of its shared ones, and whether it shares a GPU."""
    key = ("devices", node.name)
    if key not in ctx.memo:
        held = _held_instances(ctx).get(node.name, set())
        whole: set[str] = set()
        shared: set[str] = set()
        for gpu, layout in node.mig.items():
            if gpu in node.unhealthy_gpus:
                continue
            for inst in layout:
                if inst.sharing is not None:
                    shared.add(inst.profile)
                elif (gpu, inst.start) not in held:
                    whole.add(inst.profile)
        ctx.memo[key] = (frozenset(whole), frozenset(shared), any(g not in node.unhealthy_gpus for g in node.sharing))
    return ctx.memo[key]  # type: ignore[no-any-return]


def _device_room(ctx: Context, task: Task, node: Node) -> bool:
    """May a MIG or shared pod of the task find room on the node (an upper bound on the planner's device room):
    its instance on the node's GPU model, free or made by a change where layouts may change; a shared GPU, or a
    plain one where GPUs may become shared."""
    policy = ctx.request.policy
    room = rooms(ctx)[node.name]
    if task.mig_profile is None:  # a share of a whole GPU
        return devices(ctx, node)[2] or (policy.allow_sharing_changes and policy.max_sharing_changes != 0
                                         and room.gpus > 0)
    geo, wanted = _instance(task, node)
    if wanted is None or geo is None:
        return False
    if policy.allow_mig_changes:
        return True
    free, shared, _ = devices(ctx, node)
    names = shared if task.gpu_share is not None else free
    return any(geo.profile(name) is wanted for name in names)


def _instance(task: Task, node: Node) -> tuple[MigGeometry | None, MigProfile | None]:
    """The node's MIG geometry and the profile the task's pod takes there (`auto`: the smallest that holds its
    GPU memory); None where there is none."""
    geo = mig_geometry(node.gpu_model) if node.gpu_model else None
    if geo is None or task.mig_profile is None:
        return geo, None
    return geo, (geo.smallest_fitting(task.gpu_memory_gib or 0.0) if task.mig_profile == "auto"
                 else geo.profile(task.mig_profile))


def _surely_mig(ctx: Context, task: Task, node: Node) -> bool:
    """Does the node surely take one pod of the MIG task: its instance holds the task's GPU memory, the free CPU
    and memory take the pod, and a free instance of it waits, or a whole idle GPU may be partitioned for it?"""
    policy = ctx.request.policy
    geo, wanted = _instance(task, node)
    room = rooms(ctx)[node.name]
    if geo is None or wanted is None or wanted.memory_gib < (task.gpu_memory_gib or 0.0) - 1e-9:
        return False
    if room.cpu < cpu_units(task.cpu, True) or room.memory < mem_units(task.memory_gib, True):
        return False
    if any(geo.profile(name) is wanted for name in devices(ctx, node)[0]):
        return True
    return policy.allow_mig_changes and policy.max_mig_changes != 0 and room.gpus > 0


@dataclass(frozen=True)
class NodeClass:
    """Nodes the filter cannot tell apart: the same labels (but their names), taints, pool, GPU model and count,
    free room, and all of the request or all added by a pool. `members` in the planner's node order."""

    members: tuple[Node, ...]
    spot: bool
    added: bool

    @property
    def node(self) -> Node:
        return self.members[0]


def classes(ctx: Context) -> list[NodeClass]:
    """Every node the planner weighs, in classes (a node is its own class where a selector names a node)."""
    if "classes" in ctx.memo:
        return ctx.memo["classes"]  # type: ignore[no-any-return]
    pools = {p.name: p for p in ctx.request.cluster.pools}
    by_name = any(HOSTNAME in t.node_selector for j in ctx.request.jobs for t in j.tasks)
    room, grown = rooms(ctx), grown_rooms(ctx)
    real = len(ctx.request.cluster.nodes)
    groups: dict[tuple[object, ...], list[Node]] = {}
    for i, n in enumerate(all_nodes(ctx)):
        labels = {k: v for k, v in effective_labels(n).items() if k != HOSTNAME or by_name}
        key = (tuple(sorted(labels.items())), tuple((t.key, t.value, t.effect) for t in n.taints), n.pool,
               n.gpu_model, n.gpus, room[n.name], grown.get(n.name), devices(ctx, n), i >= real)
        groups.setdefault(key, []).append(n)
    out = [NodeClass(tuple(ms), bool(ms[0].pool in pools and pools[ms[0].pool].capacity_type == "spot"),
                     key[-1] is True) for key, ms in groups.items()]
    ctx.memo["classes"] = out
    return out


#: (class, fits: True or None for maybe, pods one node of the class takes from its free room)
Offer = tuple[NodeClass, "bool | None", int]


def class_of(ctx: Context, name: str) -> NodeClass:
    """The class of a node the planner weighs, by name."""
    if "class_of" not in ctx.memo:
        ctx.memo["class_of"] = {n.name: c for c in classes(ctx) for n in c.members}
    return ctx.memo["class_of"][name]  # type: ignore[no-any-return]


def signature(job: Job, task: Task) -> tuple[object, ...]:
    """Everything of a task and its job the filter reads: tasks of one signature have the same candidates."""
    return (job.spot_ok, tuple(sorted(task.node_selector.items())),
            tuple(t.model_dump_json() for t in task.tolerations), task.gpus, task.cpu, task.memory_gib,
            task.gpu_memory_gib, task.mig_profile, task.gpu_share, task.replicas)


def _static_groups(ctx: Context) -> list[tuple[NodeClass, list[int]]]:
    """The classes by what `statically_allowed` reads of a node (labels, taints, GPU model and count, spot): a
    representative of each group and the indexes of its classes, so the static filters run once per group."""
    if "static_groups" not in ctx.memo:
        by_name = any(HOSTNAME in t.node_selector for j in ctx.request.jobs for t in j.tasks)
        groups: dict[tuple[object, ...], tuple[NodeClass, list[int]]] = {}
        for i, c in enumerate(classes(ctx)):
            n = c.node
            labels = {k: v for k, v in effective_labels(n).items() if k != HOSTNAME or by_name}
            key = (tuple(sorted(labels.items())), tuple((t.key, t.value, t.effect) for t in n.taints), n.gpu_model,
                   n.gpus > 0, c.spot)
            groups.setdefault(key, (c, []))[1].append(i)
        ctx.memo["static_groups"] = list(groups.values())
    return ctx.memo["static_groups"]  # type: ignore[no-any-return]


def offers(ctx: Context, job: Job, task: Task) -> list[Offer]:
    """The node classes that are or may be candidates of the task (`fits` not False), in class order, computed
    once per task signature: the static filters once per group of classes (`_static_groups`), the room per
    class (as `fits` and `slots` read it)."""
    key = ("offers", *signature(job, task))
    if key not in ctx.memo:
        every = classes(ctx)
        chosen = sorted(i for rep, members in _static_groups(ctx)
                        if statically_allowed(job, task, rep.node, rep.spot) for i in members)
        whole = task.mig_profile is None and task.gpu_share is None
        found: list[Offer] = []
        if not whole:
            found = [(every[i], None, 0) for i in chosen if _device_room(ctx, task, every[i].node)]
        else:
            free = _fits_all(_class_rooms(ctx, False), chosen, task)
            grown = _fits_all(_class_rooms(ctx, True), chosen, task) if may_grow(ctx) else [0] * len(chosen)
            for i, pods, more in zip(chosen, free, grown, strict=True):
                if pods >= 1:
                    found.append((every[i], True, pods))
                elif more >= 1:
                    found.append((every[i], None, 0))
        ctx.memo[key] = found
    return ctx.memo[key]  # type: ignore[no-any-return]


def _class_rooms(ctx: Context, grown: bool) -> list[tuple[int, int, int]]:
    """Per class, its node's free room (`grown`: with all it may gain, `grown_rooms`) as (GPUs, milli-CPU, MiB)."""
    key = ("class_rooms", grown)
    if key not in ctx.memo:
        room = (grown_rooms(ctx) or rooms(ctx)) if grown else rooms(ctx)
        ctx.memo[key] = [(r.gpus, r.cpu, r.memory) for c in classes(ctx) for r in (room[c.node.name],)]
    return ctx.memo[key]  # type: ignore[no-any-return]


def _fits_all(room: list[tuple[int, int, int]], chosen: list[int], task: Task) -> list[int]:
    """Pods of the task each chosen class's room takes, at most every replica (`slots`, over many classes)."""
    top = task.replicas
    ng, nc, nm = _needs(task)
    return [min(top, g // ng if ng > 0 else top, c // nc if nc > 0 else top, m // nm if nm > 0 else top)
            for g, c, m in (room[i] for i in chosen)]


def class_room(ctx: Context, job: Job, task: Task, exact: bool) -> list[tuple[NodeClass, int]]:
    """(class, the pods of the task each node of the class takes) over its candidates: `exact` the least, the
    sure candidates' free-room slots (whole-GPU and CPU pods; the planner's room is at least the free one), else
    the most each node that may be one takes (its room with every eviction, `grown_rooms`; every replica for MIG
    and shared pods). Once per task signature and kind."""
    key = ("class_room", exact, *signature(job, task))
    if key not in ctx.memo:
        whole = task.mig_profile is None and task.gpu_share is None
        out: list[tuple[NodeClass, int]] = []
        for c, found, pods in offers(ctx, job, task):
            if exact and not (found and whole):
                if not (task.gpu_share is None and _surely_mig(ctx, task, c.node)):
                    continue
                pods = 1  # an instance of its profile is free, or a whole GPU may be partitioned for one
            out.append((c, pods if exact else slots(ctx, task, c.node, grown=True) if whole else task.replicas))
        ctx.memo[key] = out
    return ctx.memo[key]  # type: ignore[no-any-return]


def pod_total(ctx: Context, job: Job, task: Task, exact: bool) -> int:
    """The pods of the task all its candidates take together (`class_room`), at most every replica."""
    return min(task.replicas, sum(pods * len(c.members) for c, pods in class_room(ctx, job, task, exact)))
