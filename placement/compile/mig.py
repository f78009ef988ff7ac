"""MIG: each pod of a MIG task takes a free instance of its profile; layouts may change when allowed.

Pods of one profile on one node are interchangeable, and so are instances of that profile: all a
node's pods need is *enough free instances of each profile*. So per node, the free-instance
supply of each wanted profile bounds the pods placed there:

    Σ_{t wants p on n} x[t,n]  ≤  supply_p(n)

Without `policy.allow_mig_changes` the supply is a constant (the free instances in the current
layouts) and no variable is added. With it, the GPUs of a node are grouped into classes of identical
situation (same instances held by running pods, same free ones; idle whole GPUs form one class),
and an integer per (class, configuration) counts the GPUs of the class that take that configuration
(devices.configs: the current layout, the whole GPU, or one of the Pareto-maximal legal re-layouts
keeping every occupied instance where it is). This is exact (docs/hardware.md §1.3: no shared memory
slice, legal starts, capped counts, one media instance) and aggregates identical GPUs instead of
giving CP-SAT eight interchangeable copies to permute (docs/solver.md §3).

Each GPU that changes costs `weights.mig_reconfigure` (term `mig.reconfigure`);
`policy.max_mig_changes` caps their number. Whole-GPU pods may use only GPUs that stay (or become)
whole: one more row per node where that depends on the chosen configurations.

New shared MIG instances (compile/mig_sharing.py's open slots, `ctx.new_instances`) draw on the same
supply as whole-instance pods, and only on GPUs whose layout changes (the wire format says an
instance is shared in its GPU's layout, so sharing one is a MIG change):

    Σ_{t wants p on n} x[t,n] + Σ open slots_p(n)  ≤  supply_p(n)
    Σ open slots_p(n)  ≤  Σ_{changed configurations} count · supply_p

exact per profile, as slots may take any changed GPU's instances and whole pods the rest. A class
with free instances of a slot's profile gets one more configuration for that: its current layout,
counted as changed (free instances shared, none moved).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from placement import devices
from placement.compile import fragmentation, priority, terms
from placement.compile.context import BY_MIG, ModelContext
from placement.devices import Config, Layout
from placement.solution import Placement

NAME = terms.MIG_RECONFIGURE


@dataclass
class GpuClass:
    """GPUs of one node in the same situation, and the configurations they may take."""

    gpus: list[int]  # GPU indices
    occupied: Layout
    free: Layout | None  # None: whole (plain) GPUs
    configs: tuple[Config, ...]
    counts: list[cp_model.IntVar] = field(default_factory=list)  # per config; empty when fixed


@dataclass
class NodeTable:
    relevant: tuple[str, ...]
    classes: list[GpuClass]


def apply(ctx: ModelContext) -> None:
    problem = ctx.problem
    view = problem.devices
    if view is None:
        return
    wants: dict[int, list[tuple[cp_model.IntVar, str]]] = {}
    pods_on: dict[int, list[tuple[cp_model.IntVar, int, int]]] = {}  # node -> (x, upper bound, task)
    for t, cand in enumerate(ctx.candidates):
        spec = problem.tasks[t].spec
        if not devices.is_mig(spec):
            continue
        for var, n, ub in zip(ctx.x[t], cand.tolist(), ctx.upper[t], strict=True):
            p = devices.profile_for(spec, view.geometry(n))
            assert p is not None, "candidate filtering keeps only nodes offering the profile"
            wants.setdefault(n, []).append((var, p.name))
            pods_on.setdefault(n, []).append((var, ub, t))
    slots: dict[int, list[tuple[cp_model.IntVar, str]]] = {}
    for n, entries in ctx.new_instances.items():
        for profile, opened, tasks in entries:
            wants.setdefault(n, []).append((opened, profile))
            slots.setdefault(n, []).append((opened, profile))
            pods_on.setdefault(n, []).extend((opened, 1, t) for t in tasks)
    demands = ctx.demands
    whole = {n: [(v, demands[t][0]) for v, t, _ in pairs if demands[t][0] > 0]
             for n, pairs in enumerate(ctx.node_terms())}
    nodes = set(wants)
    if view.changes:
        nodes |= {n for n, gpus in enumerate(view.mig) if whole[n] and any(g.idle for g in gpus)}
    tables: dict[int, NodeTable] = {}
    changed: list[cp_model.IntVar] = []
    for n in sorted(nodes):
        table = _node_table(ctx, n, wants.get(n, []), bool(whole[n]), slots.get(n, []))
        tables[n] = table
        changed += [v for c in table.classes for v, cfg in zip(c.counts, c.configs, strict=False) if cfg.changed]
        ctx.partitioned[n] = [(v, len(c.gpus)) for c in table.classes if c.free is None
                              for v, cfg in zip(c.counts, c.configs, strict=False) if not cfg.whole]
        _whole_row(ctx, n, table, whole[n])
    if view.changes:
        _breaks_whole_nodes(ctx, tables, pods_on)
    if changed:
        ctx.objective.add(NAME, changed, [-1.0] * len(changed), problem.request.policy.weights.mig_reconfigure)
        if view.max_changes is not None:
            ctx.model.add(cp_model.LinearExpr.sum(changed) <= view.max_changes)
    ctx.on_hint(lambda c, placement, values: _hint(tables, c, placement, values))
    ctx.on_read(lambda c, values, placement: _read(tables, c, values, placement))


def _node_table(ctx: ModelContext, n: int, wants: list[tuple[cp_model.IntVar, str]], whole_ok: bool,
                slots: list[tuple[cp_model.IntVar, str]]) -> NodeTable:
    view = ctx.problem.devices
    assert view is not None
    model = view.models[n]
    assert model is not None
    relevant = tuple(sorted({p for _, p in wants}))
    groups: dict[tuple[Layout, Layout | None], list[int]] = {}
    for g in view.mig[n]:
        groups.setdefault((g.occupied, g.free), []).append(g.gpu)
    if view.changes and relevant and view.plain[n]:
        groups[(), None] = list(view.plain[n])
    classes = []
    for (occupied, free), gpus in groups.items():
        configs = devices.configs(model, occupied, free, relevant, view.changes, whole_ok)
        if slots and free is not None and any(configs[0].supply[relevant.index(p)] for _, p in slots):
            configs = (*configs, Config(configs[0].layout, configs[0].supply, True))  # free instances shared
        cls = GpuClass(gpus=gpus, occupied=occupied, free=free, configs=configs)
        if len(configs) > 1:
            cls.counts = [ctx.model.new_int_var(0, len(gpus), f"mig[{n},{gpus[0]},{k}]") for k in range(len(configs))]
            ctx.model.add(cp_model.LinearExpr.sum(cls.counts) == len(gpus))
        classes.append(cls)
    table = NodeTable(relevant=relevant, classes=classes)
    for r, name in enumerate(relevant):
        pods = [v for v, p in wants if p == name]
        fixed = sum(len(c.gpus) * c.configs[0].supply[r] for c in classes if not c.counts)
        terms = [(v, cfg.supply[r]) for c in classes for v, cfg in zip(c.counts, c.configs, strict=False)
                 if cfg.supply[r]]
        ctx.model.add(cp_model.LinearExpr.sum(pods)
                      <= fixed + cp_model.LinearExpr.weighted_sum([v for v, _ in terms], [k for _, k in terms]))
        opens = [v for v, p in slots if p == name]
        if opens:
            changed = [(v, cfg.supply[r]) for c in classes for v, cfg in zip(c.counts, c.configs, strict=False)
                       if cfg.changed and cfg.supply[r]]
            ctx.model.add(cp_model.LinearExpr.sum(opens)
                          <= cp_model.LinearExpr.weighted_sum([v for v, _ in changed], [k for _, k in changed]))
    return table


def _breaks_whole_nodes(ctx: ModelContext, tables: dict[int, NodeTable],
                        pods_on: dict[int, list[tuple[cp_model.IntVar, int, int]]]) -> None:
    """With re-partitioning on, a MIG pod or a new layout on a whole free node breaks it for big gangs: such a
    node's GPUs are all plain or idle partitioned ones counted in whole-GPU capacity, so either takes a GPU
    out of it. As for sharing (compile/sharing.py) the charge steers where, never whether: at most half
    of what the smallest MIG pod that may go there earns net of `mig_reconfigure` (a 1g pod is worth
    0.125; the full 0.1 on top of the 0.1 re-layout would leave it waiting beside idle GPUs).
    Its own flag per node (`ModelContext.break_flag`, kind BY_MIG, hinted by compile/fragmentation.py), under
    the `fragmentation` term."""
    problem = ctx.problem
    cost = problem.request.policy.weights.mig_reconfigure
    empty = ctx.whole_free
    levels = priority.class_weights(problem)
    for n, table in tables.items():
        pods = pods_on.get(n, [])
        if not empty[n] or not pods:
            continue
        b = fragmentation.partial_break(ctx, n, levels, [t for _, _, t in pods], cost, BY_MIG)
        if b is None:
            continue
        ctx.model.add(cp_model.LinearExpr.sum([v for v, _, _ in pods]) <= sum(ub for _, ub, _ in pods) * b)
        relayouts = [(v, len(c.gpus)) for c in table.classes for v, cfg in zip(c.counts, c.configs, strict=False)
                     if cfg.changed and not cfg.whole]
        if relayouts:
            ctx.model.add(cp_model.LinearExpr.sum([v for v, _ in relayouts]) <= sum(k for _, k in relayouts) * b)


def _whole_row(ctx: ModelContext, n: int, table: NodeTable, pods: list[tuple[cp_model.IntVar, int]]) -> None:
    """Whole-GPU pods take only GPUs that are whole after the plan (capacity.py's row counts every candidate)."""
    view = ctx.problem.devices
    assert view is not None
    variable = [(v, 1) for c in table.classes for v, cfg in zip(c.counts, c.configs, strict=False) if cfg.whole]
    if not variable:
        return
    in_classes = {g for c in table.classes for g in c.gpus}
    fixed = sum(1 for g in view.plain[n] if g not in in_classes)
    fixed += sum(len(c.gpus) for c in table.classes if not c.counts and c.configs[0].whole)
    ctx.whole_after[n] = (fixed, [v for v, _ in variable])  # GPUs the plan shares come out of these too
    if not pods:
        return
    released = [(var, int(use[0])) for var, use in ctx.released(n) if use[0]]
    lhs = cp_model.LinearExpr.weighted_sum([v for v, _ in pods] + [v for v, _ in released],
                                           [k for _, k in pods] + [-k for _, k in released])
    ctx.model.add(lhs <= fixed + cp_model.LinearExpr.sum([v for v, _ in variable]))


def _hint(tables: dict[int, NodeTable], ctx: ModelContext, placement: Placement, values: dict[int, int]) -> None:
    """Each GPU's configuration in the placement: unchanged -> current; changed -> a configuration whose
    supply of every wanted profile is at least the new layout's (one exists: the Pareto front covers all)."""
    for n, table in tables.items():
        for cls in table.classes:
            if not cls.counts:
                continue
            picked = [0] * len(cls.configs)
            for gpu in cls.gpus:
                picked[_config_of(placement, n, gpu, cls, table.relevant)] += 1
            for var, k in zip(cls.counts, picked, strict=True):
                values[var.index] = k


def _config_of(placement: Placement, n: int, gpu: int, cls: GpuClass, relevant: tuple[str, ...]) -> int:
    if (n, gpu) not in placement.mig_layouts:
        return 0  # unchanged: the current configuration
    layout = placement.mig_layouts[n, gpu]
    if layout is None:
        return next((k for k, c in enumerate(cls.configs) if c.whole and c.changed), 0)
    busy = {s for _, s in cls.occupied}
    supply = tuple(sum(1 for name, s in layout if name == r and s not in busy) for r in relevant)
    return next((k for k, c in enumerate(cls.configs)
                 if c.changed and not c.whole and all(a <= b for a, b in zip(supply, c.supply, strict=True))), 0)


def _read(tables: dict[int, NodeTable], ctx: ModelContext, values: dict[int, int], placement: Placement) -> None:
    """Give each GPU of a class one of the configurations the solver counted; changed ones become mig_layouts.

    Plain GPUs partitioned take the highest indices, so whole-GPU pods keep the low ones.
    """
    for n, table in tables.items():
        for cls in table.classes:
            if not cls.counts:
                continue
            order = sorted(cls.gpus, reverse=cls.free is None)
            changed = [cfg for var, cfg in zip(cls.counts, cls.configs, strict=True) if cfg.changed
                       for _ in range(values.get(var.index, 0))]
            for gpu, cfg in zip(order, changed, strict=False):
                placement.mig_layouts[n, gpu] = cfg.layout
