"""Sharing: pods with `gpu_share` go onto time-sliced or MPS GPUs, never over-committing one.

A shared GPU (node.sharing) takes at most its `replicas` pods; their shares sum to at most one GPU
and their GPU memory to at most the GPU's (hard: time-slicing has no memory isolation, one OOM
kills every pod on the GPU). Shares and memory of different sizes on several GPUs are a bin
packing, so unlike MIG instances they cannot be checked per node: per (task, node) pair with
several shared GPUs, an integer per GPU says how many of the pair's pods go there. A pair with
one shared GPU with room uses its pod count directly.

With `policy.allow_sharing_changes` an idle plain GPU may become a shared GPU too, as HAMi, KAI and
the openb cluster share any GPU on demand (the MIG analogue is re-partitioning, compile/mig.py).
Plain GPUs of a node are interchangeable, so a node gets anonymous *slots*, as many as it has plain
GPUs, pods that could come, and policy.max_sharing_changes allow, each with an `open` boolean
(opened in order, so CP-SAT does not permute them). A slot is a shared GPU with
`policy.sharing_default`'s replicas, a whole GPU's share parts and its memory, all times `open`. An opened
slot takes a plain GPU: with the ones MIG partitions at most the node's plain GPUs, with whole-GPU
pods at most the GPUs whole after the plan (ctx.whole_after), the peak reserve sees it go
(ctx.partitioned), and on a whole free node it breaks the node (the `fragmentation` term, at most
half the smallest share pod's net value there, so it steers where pods go, never whether).
Each costs `weights.sharing_change` (term `sharing_change`): a GPU is shared only for pods worth
more, and a declared shared GPU with room, costing nothing, comes first. Which plain GPU a slot is,
is decided after the solve: the highest indices MIG does not partition, so whole-GPU pods keep the
low ones.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from placement import devices
from placement.compile import fragmentation, priority, terms
from placement.compile.context import BY_SHARING, ModelContext
from placement.picks import shareable_gpus
from placement.solution import Placement

NAME = terms.SHARING_CHANGE

#: (task, node) -> [(gpu, variable)]: which shared GPU takes how many of the pair's pods; a negative
#: gpu -1-k is the node's slot k (a plain GPU the plan may share)
Split = dict[tuple[int, int], list[tuple[int, cp_model.IntVar]]]
#: (node, gpu) -> [(variable, share parts, memory parts, upper bound)] of the pods it may take (gpu as in Split)
Load = dict[tuple[int, int], list[tuple[cp_model.IntVar, int, int, int]]]


def apply(ctx: ModelContext) -> None:
    view = ctx.problem.devices
    if view is None:
        return
    slots = _slots(ctx)
    split, load = _split(ctx, slots)
    for n, gpus in enumerate(view.shared):
        for g in gpus:
            limit(ctx, load.get((n, g.gpu), []), (g.pods_left, g.parts_left, g.memory_left), None)
    for n, opens in slots.items():
        fresh = view.fresh_share(n)
        for k, opened in enumerate(opens):
            limit(ctx, load.get((n, -1 - k), []), (fresh.pods_left, fresh.parts_left, fresh.memory_left), opened)
        _takes_plain_gpus(ctx, n, opens)
    _breaks_whole_nodes(ctx, slots)
    _cost(ctx, [b for bs in slots.values() for b in bs])
    ctx.on_hint(lambda c, placement, values: _hint(slots, split, placement, values))
    ctx.on_read(lambda c, values, placement: _read(slots, split, c, values, placement))


def _split(ctx: ModelContext, slots: dict[int, list[cp_model.IntVar]]) -> tuple[Split, Load]:
    """Per (share task, node) pair, how many of its pods each shared GPU with room (and each slot) takes."""
    problem = ctx.problem
    view = problem.devices
    assert view is not None
    split: Split = {}
    load: Load = {}
    for t, cand in enumerate(ctx.candidates):
        spec = problem.tasks[t].spec
        if not devices.is_shared(spec):  # shares of MIG instances: compile/mig_sharing.py
            continue
        for var, n, ub in zip(ctx.x[t], cand.tolist(), ctx.upper[t], strict=True):
            gpus = [(g.gpu, devices.share_demand(spec, g), devices.share_room(spec, g)) for g in view.shared[n]]
            gpus = [x for x in gpus if x[2] > 0]
            if slots.get(n):
                fresh = view.fresh_share(n)
                room = devices.share_room(spec, fresh)
                if room > 0:
                    gpus += [(-1 - k, devices.share_demand(spec, fresh), room) for k in range(len(slots[n]))]
            if len(gpus) == 1:
                parts = [(gpus[0][0], var)]
                bounds = [ub]  # the pair's own count: its bound may exceed this GPU's room (the rows cap it)
            else:
                parts = [(gpu, ctx.model.new_int_var(0, min(ub, room), f"share[{t},{n},{gpu}]"))
                         for gpu, _, room in gpus]
                bounds = [min(ub, room) for _, _, room in gpus]
                ctx.model.add(cp_model.LinearExpr.sum([v for _, v in parts]) == var)
            split[t, n] = parts
            for (gpu, v), (_, (share, memory), _), bound in zip(parts, gpus, bounds, strict=True):
                load.setdefault((n, gpu), []).append((v, share, memory, bound))
    return split, load


def _cost(ctx: ModelContext, opens: list[cp_model.IntVar]) -> None:
    """Each GPU shared costs weights.sharing_change; policy.max_sharing_changes caps them."""
    view = ctx.problem.devices
    assert view is not None
    if not opens:
        return
    ctx.objective.add(NAME, opens, [-1.0] * len(opens), ctx.problem.request.policy.weights.sharing_change)
    cap = view.max_sharing_changes
    if cap is not None and len(opens) > cap:
        ctx.model.add(cp_model.LinearExpr.sum(opens) <= cap)


def _slots(ctx: ModelContext) -> dict[int, list[cp_model.IntVar]]:
    """Per node with plain GPUs some share pod could use: its slots' `open` booleans, opened in order.

    As many as the node's plain GPUs, the pods that could come (an opened slot without a pod only
    costs), and policy.max_sharing_changes allow; none without sharing changes.
    """
    problem = ctx.problem
    view = problem.devices
    if view is None or not view.sharing_changes:
        return {}
    pods: dict[int, int] = {}
    for t, cand in enumerate(ctx.candidates):
        spec = problem.tasks[t].spec
        if not devices.is_shared(spec):
            continue
        for n, ub in zip(cand.tolist(), ctx.upper[t], strict=True):
            if view.convertible(n) and devices.share_room(spec, view.fresh_share(n)) > 0:
                pods[n] = pods.get(n, 0) + ub
    out: dict[int, list[cp_model.IntVar]] = {}
    for n in sorted(pods):
        count = min(view.convertible(n), pods[n])
        if view.max_sharing_changes is not None:
            count = min(count, view.max_sharing_changes)
        opens = [ctx.model.new_bool_var(f"shared[{n},{k}]") for k in range(count)]
        for a, b in zip(opens, opens[1:], strict=False):
            ctx.model.add(a >= b)
        out[n] = opens
    return out


def limit(ctx: ModelContext, terms: list[tuple[cp_model.IntVar, int, int, int]], limits: tuple[int, int, int],
          opened: cp_model.IntVar | None) -> None:
    """Pods, share parts and memory parts on one shared GPU (or shared MIG instance: compile/mig_sharing.py) within its
    limits; for a slot, times its `open` (the pod row always: it is what keeps a closed slot empty)."""
    variables = [v for v, _, _, _ in terms]
    for d, limit in enumerate(limits):
        coefs = [(1, share, memory)[d] for _, share, memory, _ in terms]
        worst = sum(c * ub for c, (_, _, _, ub) in zip(coefs, terms, strict=True))
        if opened is None:
            if worst > limit:
                ctx.model.add(cp_model.LinearExpr.weighted_sum(variables, coefs) <= limit)
        elif d == 0 or worst > limit:
            ctx.model.add(cp_model.LinearExpr.weighted_sum(variables + [opened], coefs + [-limit]) <= 0)


def _takes_plain_gpus(ctx: ModelContext, n: int, opens: list[cp_model.IntVar]) -> None:
    """An opened slot is a plain GPU of node n: with the plain GPUs MIG partitions at most the node's plain GPUs,
    with whole-GPU pods (less what preemptions free) at most the GPUs whole after the plan."""
    problem = ctx.problem
    view = problem.devices
    assert view is not None
    if not opens:
        return
    partitioned = [v for v, _ in ctx.partitioned.get(n, [])]
    if partitioned:
        ctx.model.add(cp_model.LinearExpr.sum(opens + partitioned) <= len(view.plain[n]))
    fixed, more = ctx.whole_after.get(n, (int(problem.free[n, 0]), []))
    pods = [(v, int(problem.tasks[t].demand[0]), ub) for v, t, ub in ctx.node_terms()[n]
            if problem.tasks[t].demand[0] > 0]
    if more or sum(g * ub for _, g, ub in pods) + len(opens) > fixed:
        released = [(v, -int(use[0])) for v, use in ctx.released(n) if use[0]]
        terms = [(v, g) for v, g, _ in pods] + released + [(b, 1) for b in opens] + [(v, -1) for v in more]
        ctx.model.add(cp_model.LinearExpr.weighted_sum([v for v, _ in terms], [c for _, c in terms]) <= fixed)
    ctx.partitioned.setdefault(n, []).extend((b, 1) for b in opens)


def _breaks_whole_nodes(ctx: ModelContext, slots: dict[int, list[cp_model.IntVar]]) -> None:
    """Sharing a GPU of a whole free node breaks the node for big gangs, so GPUs are shared on nodes
    already in use first. The charge steers *where*, never *whether*: at most half of what the smallest
    share pod that could open the slot earns net of `sharing_change`, else a lone 0.05-GPU pod on an
    empty cluster would wait beside idle GPUs (0.05 < 0.01 + the 0.1 a whole-GPU pod pays). Its own
    flag per node (`ModelContext.break_flag`, kind BY_SHARING, hinted by compile/fragmentation.py), under the
    `fragmentation` term."""
    problem = ctx.problem
    cost = problem.request.policy.weights.sharing_change
    empty = ctx.whole_free
    levels = priority.class_weights(problem)
    tasks_on: dict[int, list[int]] = {}  # node -> the share tasks that may open a slot there
    for t, cand in enumerate(ctx.candidates):
        if devices.is_shared(problem.tasks[t].spec):
            for n in cand.tolist():
                tasks_on.setdefault(n, []).append(t)
    for n, opens in slots.items():
        if not opens or not empty[n]:
            continue
        b = fragmentation.partial_break(ctx, n, levels, tasks_on.get(n, []), cost, BY_SHARING)
        if b is None:
            continue
        ctx.model.add(opens[0] <= b)  # slots open in order: the first is open if any is


def _hint(slots: dict[int, list[cp_model.IntVar]], split: Split, placement: Placement, values: dict[int, int]) -> None:
    """The placement's shared GPUs: slot k of a node is the k-th GPU (ascending) the placement shares there."""
    opened = _opened_by_node(placement)
    for n, opens in slots.items():
        for k, b in enumerate(opens):
            values[b.index] = int(k < len(opened.get(n, [])))
    for (t, n), parts in split.items():
        picks = placement.shares.get((t, n), [])
        mine = opened.get(n, [])
        for gpu, var in parts:
            real = gpu if gpu >= 0 else (mine[-1 - gpu] if -1 - gpu < len(mine) else None)
            values[var.index] = picks.count(real) if real is not None else 0


def _opened_by_node(placement: Placement) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for n, gpu in sorted(placement.sharing_changes):
        out.setdefault(n, []).append(gpu)
    return out


def _read(slots: dict[int, list[cp_model.IntVar]], split: Split, ctx: ModelContext, values: dict[int, int],
          placement: Placement) -> None:
    """Shared GPUs' pods into `placement.shares`; each slot holding pods becomes a plain GPU the plan shares
    (an open slot left empty is no change): after MIG's read, so the GPUs it partitions are known."""
    used: dict[tuple[int, int], int] = {}
    for (_, n), parts in split.items():
        for gpu, var in parts:
            if gpu < 0:
                used[n, gpu] = used.get((n, gpu), 0) + values.get(var.index, 0)
    real: dict[tuple[int, int], int] = {}
    for n in slots:
        free = shareable_gpus(ctx.problem, placement, n)
        taken = [gpu for gpu in range(-1, -1 - len(slots[n]), -1) if used.get((n, gpu), 0)]
        for gpu, plain in zip(taken, free, strict=False):
            real[n, gpu] = plain
            placement.sharing_changes.add((n, plain))
    for (t, n), parts in split.items():
        picks = [gpu if gpu >= 0 else real[n, gpu] for gpu, var in parts for _ in range(values.get(var.index, 0))]
        if picks:
            placement.shares[t, n] = picks
