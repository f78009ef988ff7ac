"""Sharing: pods with `gpu_share` go onto time-sliced or MPS GPUs, never over-committing one.

A shared GPU (node.sharing) takes at most its `replicas` pods; their shares sum to at most one GPU
and their GPU memory to at most the GPU's (hard: time-slicing has no memory isolation, one OOM
kills every pod on the GPU). Shares and memory of different sizes on several GPUs are a bin
packing, so unlike MIG instances they cannot be checked per node: per (task, node) pair with
several shared GPUs, an integer per GPU says how many of the pair's pods go there. A pair with
one shared GPU with room uses its pod count directly.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from placement import devices
from placement.compile.context import ModelContext
from placement.solution import Placement

#: (task, node) -> [(gpu, variable)]: which shared GPU takes how many of the pair's pods
Split = dict[tuple[int, int], list[tuple[int, cp_model.IntVar]]]


def apply(ctx: ModelContext) -> None:
    problem = ctx.problem
    view = problem.devices
    if view is None:
        return
    split: Split = {}
    load: dict[tuple[int, int], list[tuple[cp_model.IntVar, int, int, int]]] = {}  # (node, gpu) -> (v, milli, mib, ub)
    for t, cand in enumerate(ctx.candidates):
        spec = problem.tasks[t].spec
        if not devices.is_shared(spec):
            continue
        for var, n, ub in zip(ctx.x[t], cand.tolist(), ctx.upper[t], strict=True):
            gpus = [(g, devices.share_room(spec, g)) for g in view.shared[n]]
            gpus = [(g, room) for g, room in gpus if room > 0]
            if len(gpus) == 1:
                parts = [(gpus[0][0].gpu, var)]
            else:
                parts = [(g.gpu, ctx.model.new_int_var(0, min(ub, room), f"share[{t},{n},{g.gpu}]"))
                         for g, room in gpus]
                ctx.model.add(cp_model.LinearExpr.sum([v for _, v in parts]) == var)
            split[t, n] = parts
            for (gpu, v), (g, room) in zip(parts, gpus, strict=True):
                milli, mib = devices.share_demand(spec, g)
                load.setdefault((n, gpu), []).append((v, milli, mib, min(ub, room)))
    for n, gpus in enumerate(view.shared):
        for g in gpus:
            terms = load.get((n, g.gpu), [])
            for limit, k in ((g.pods_left, None), (g.milli_left, 1), (g.mib_left, 2)):
                coefs = [1 if k is None else (milli if k == 1 else mib) for _, milli, mib, _ in terms]
                if sum(c * ub for c, (_, _, _, ub) in zip(coefs, terms, strict=True)) > limit:
                    ctx.model.add(cp_model.LinearExpr.weighted_sum([v for v, _, _, _ in terms], coefs) <= limit)

    def hint(ctx: ModelContext, placement: Placement, values: dict[int, int]) -> None:
        for key, parts in split.items():
            picks = placement.shares.get(key, [])
            for gpu, var in parts:
                values[var.index] = picks.count(gpu)

    def read(ctx: ModelContext, values: dict[int, int], placement: Placement) -> None:
        for key, parts in split.items():
            picks = [gpu for gpu, var in parts for _ in range(values.get(var.index, 0))]
            if picks:
                placement.shares[key] = picks

    ctx.on_hint(hint)
    ctx.on_read(read)
