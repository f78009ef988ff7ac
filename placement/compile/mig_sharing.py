"""Shared MIG instances: pods with `mig_profile` and `gpu_share` take a share of a shared MIG instance of
their profile (time-slicing or MPS on MIG), never over-committing one.

A shared instance (a layout entry with `sharing`, as the device plugin offers `nvidia.com/mig-1g.10gb`
`replicas` times) takes at most its `replicas` pods; their shares sum to at most one instance and their GPU
memory to at most the instance's (time-slicing isolates no memory): compile/sharing.py's rows (`limit`),
per instance. Declared shared instances never move (the device view counts them occupied, so no whole-
instance pod takes one either). As on shared GPUs, shares of different sizes over several instances are a
bin packing: per (task, node) pair with several instances of its profile with room, an integer per
instance says how many of the pair's pods go there.

With `policy.allow_mig_changes` the plan may make new shared instances, with policy.sharing_default's
setting. Per node and profile, anonymous *slots*, opened in order (so CP-SAT does not permute them), as
many as the node's GPUs could offer instances of the profile and pods could come; each is an instance
with the default's replicas, a whole instance's share parts and its memory, all times `open`. An opened slot is
drawn from the node's instances of its profile on GPUs whose layout changes (compile/mig.py reads
`ctx.new_instances`): a free instance shared (its GPU then counts as changed, `mig.reconfigure`) or one a
re-partition creates. Which instance a slot is, is decided after the solve, once mig has read the new
layouts (`picks.shareable_instances`): a late read rule.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from placement import devices
from placement.compile.context import ModelContext
from placement.compile.sharing import limit
from placement.picks import final_layouts, shareable_instances
from placement.solution import Placement

#: (node, gpu, start, profile) of a declared shared instance; gpu -1-k, start -1: slot k of (node, profile)
Bin = tuple[int, int, int, str]
#: (task, node) -> [(bin, variable)]: how many of the pair's pods each instance (or slot) takes
Split = dict[tuple[int, int], list[tuple[Bin, cp_model.IntVar]]]
#: (node, profile) -> the slots' `open` booleans, opened in order
Slots = dict[tuple[int, str], list[cp_model.IntVar]]


def apply(ctx: ModelContext) -> None:
    view = ctx.problem.devices
    if view is None:
        return
    pairs = _pairs(ctx)
    if not pairs:
        return
    slots = _slots(ctx, pairs)
    load: dict[Bin, list[tuple[cp_model.IntVar, int, int, int]]] = {}
    split: Split = {}
    for (t, n), (var, ub, profile) in pairs.items():
        spec = ctx.problem.tasks[t].spec
        bins = [((n, i.gpu, i.start, profile), devices.share_demand(spec, i), devices.share_room(spec, i))
                for i in view.shared_instances(n) if i.profile == profile]
        bins = [b for b in bins if b[2] > 0]
        fresh = view.fresh_instance(n, profile)
        room = devices.share_room(spec, fresh)
        if room > 0:
            bins += [((n, -1 - k, -1, profile), devices.share_demand(spec, fresh), room)
                     for k in range(len(slots.get((n, profile), [])))]
        if len(bins) == 1:
            parts = [(bins[0][0], var)]
            bounds = [ub]
        else:
            parts = [(key, ctx.model.new_int_var(0, min(ub, r), f"ishare[{t},{n},{key[1]},{key[2]},{key[3]}]"))
                     for key, _, r in bins]
            bounds = [min(ub, r) for _, _, r in bins]
            ctx.model.add(cp_model.LinearExpr.sum([v for _, v in parts]) == var)
        split[t, n] = parts
        for (key, v), (_, (share, memory), _), bound in zip(parts, bins, bounds, strict=True):
            load.setdefault(key, []).append((v, share, memory, bound))
    for n in {n for _, n in pairs}:
        for i in view.shared_instances(n):
            limit(ctx, load.get((n, i.gpu, i.start, i.profile), []), (i.pods_left, i.parts_left, i.memory_left), None)
    for (n, profile), opens in slots.items():
        fresh = view.fresh_instance(n, profile)
        tasks = tuple(sorted({t for (t, m), (_, _, p) in pairs.items() if m == n and p == profile}))
        for k, opened in enumerate(opens):
            limit(ctx, load.get((n, -1 - k, -1, profile), []), (fresh.pods_left, fresh.parts_left, fresh.memory_left),
                  opened)
            ctx.new_instances.setdefault(n, []).append((profile, opened, tasks))
    ctx.on_hint(lambda c, placement, values: _hint(c, slots, split, placement, values))
    ctx.on_read(lambda c, values, placement: _read(c, slots, split, values, placement), late=True)


def _pairs(ctx: ModelContext) -> dict[tuple[int, int], tuple[cp_model.IntVar, int, str]]:
    """(task, node) -> (pods variable, its upper bound, the profile) of every pair of a task sharing MIG
    instances."""
    problem = ctx.problem
    view = problem.device_view()
    out: dict[tuple[int, int], tuple[cp_model.IntVar, int, str]] = {}
    for t, cand in enumerate(ctx.candidates):
        spec = problem.tasks[t].spec
        if not devices.is_instance_share(spec):
            continue
        for var, n, ub in zip(ctx.x[t], cand.tolist(), ctx.upper[t], strict=True):
            p = devices.profile_for(spec, view.geometry(n))
            assert p is not None, "candidate filtering keeps only nodes offering the profile"
            out[t, n] = (var, ub, p.name)
    return out


def _slots(ctx: ModelContext, pairs: dict[tuple[int, int], tuple[cp_model.IntVar, int, str]]) -> Slots:
    """Per (node, profile) some share pod could use with re-partitioning on: its slots' `open` booleans, as
    many as the node's GPUs could offer instances of the profile (`devices.mig_room`) and pods could come."""
    view = ctx.problem.device_view()
    if not view.changes:
        return {}
    pods: dict[tuple[int, str], int] = {}
    for (t, n), (_, ub, profile) in pairs.items():
        if devices.share_room(ctx.problem.tasks[t].spec, view.fresh_instance(n, profile)) > 0:
            pods[n, profile] = pods.get((n, profile), 0) + ub
    out: Slots = {}
    for (n, profile), count in sorted(pods.items()):
        geo = view.geometry(n)
        p = geo.profile(profile) if geo is not None else None
        assert p is not None
        count = min(count, devices.mig_room(view, n, p))
        opens = [ctx.model.new_bool_var(f"ishared[{n},{profile},{k}]") for k in range(count)]
        for a, b in zip(opens, opens[1:], strict=False):
            ctx.model.add(a >= b)
        if opens:
            out[n, profile] = opens
    return out


def _new_by_slot(ctx: ModelContext, placement: Placement) -> dict[tuple[int, str], list[tuple[int, int]]]:
    """(node, profile) -> the instances the placement makes shared there, (gpu, start) ascending: slot k is
    the k-th."""
    layouts = final_layouts(ctx.problem, placement)
    out: dict[tuple[int, str], list[tuple[int, int]]] = {}
    for n, gpu, start in sorted(placement.shared_instances):
        name = next((p for p, s in layouts.get((n, gpu)) or () if s == start), None)
        if name is not None:
            out.setdefault((n, name), []).append((gpu, start))
    return out


def _hint(ctx: ModelContext, slots: Slots, split: Split, placement: Placement, values: dict[int, int]) -> None:
    """The placement's shares: a declared instance by its (gpu, start), slot k of (node, profile) as the k-th
    instance of that profile the placement makes shared there."""
    made = _new_by_slot(ctx, placement)
    for (n, profile), opens in slots.items():
        for k, b in enumerate(opens):
            values[b.index] = int(k < len(made.get((n, profile), [])))
    for (t, n), parts in split.items():
        picks = placement.instance_shares.get((t, n), [])
        profile = devices.profile_for(ctx.problem.tasks[t].spec, ctx.problem.device_view().geometry(n))
        mine = made.get((n, profile.name if profile is not None else ""), [])
        for (_, gpu, start, _), var in parts:
            real = (gpu, start) if gpu >= 0 else (mine[-1 - gpu] if -1 - gpu < len(mine) else None)
            values[var.index] = picks.count(real) if real is not None else 0


def _read(ctx: ModelContext, slots: Slots, split: Split, values: dict[int, int], placement: Placement) -> None:
    """Shares into `placement.instance_shares`; each slot holding pods becomes an instance of its profile on a
    GPU mig re-partitioned (`placement.shared_instances`). A late rule: mig's layouts are read by then."""
    used: dict[tuple[int, str, int], int] = {}  # (node, profile, slot gpu) -> pods
    for (_, n), parts in split.items():
        for (_, gpu, _, profile), var in parts:
            if gpu < 0:
                used[n, profile, gpu] = used.get((n, profile, gpu), 0) + values.get(var.index, 0)
    real: dict[tuple[int, str, int], tuple[int, int]] = {}
    for (n, profile), opens in slots.items():
        free = shareable_instances(ctx.problem, placement, n, profile)
        taken = [gpu for gpu in range(-1, -1 - len(opens), -1) if used.get((n, profile, gpu), 0)]
        assert len(free) >= len(taken), "mig offers an instance for every open slot on a changed GPU"
        for gpu, instance in zip(taken, free, strict=False):
            real[n, profile, gpu] = instance
            placement.shared_instances.add((n, *instance))
    for (t, n), parts in split.items():
        picks = [(gpu, start) if gpu >= 0 else real[n, profile, gpu] for (_, gpu, start, profile), var in parts
                 for _ in range(values.get(var.index, 0))]
        if picks:
            placement.instance_shares[t, n] = picks
