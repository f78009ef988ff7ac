"""Topology: gangs inside one domain (hard), slices (hard), and three soft terms.

Variables are one per (job, domain) the job may touch, never one per node pair, and every link
to the pod counts is one-sided (docs/solver.md §5): Σ_{n∈d} x ≤ min(P, cap_d)·use[d].

* `required: L` — `use[j,d]` per domain d of level L holding a candidate node of the job;
  Σ_d use[j,d] = placed[j]: a placed gang uses exactly one domain, and no pod of it lies outside.
  Domains that cannot hold the gang even alone (too few pod slots on their candidate nodes) get
  no variable; their pods are fixed to 0.
* `slice: {size: K, required: L}` — per GPU task t and domain d of L, an integer `groups[t,d]`
  with Σ_{n∈d} x[t,n] = K·groups[t,d]: each domain holds whole groups only. Decode numbers pods
  along the hierarchy, so every K consecutive pods then fall inside one domain.
* `topology.spread` (soft, `preferred: L`) — `near[j,d]` per domain of L the job touches;
  term −w·(Σ_d near[j,d] − m_j·placed[j]), where m_j (≥ 1) is a lower bound on the domains the
  gang needs: pod slots on its candidates over the largest domain's. The term is ≤ 0 and counts
  only domains beyond the minimum.
  A multi-pod GPU gang without `preferred` (and not already required inside one NVLink domain)
  gets the same term at `nvlink_domain`, at IMPLICIT_NVLINK (0.3) of the weight, when it may
  touch a multi-node NVLink domain: it still splits when that places more work, never for free.
* `topology.keep_whole` (soft, every job) — per multi-node domain of each named level whose
  GPUs are all free, a boolean `broken[d]` that any GPU pod placed there forces on; each costs
  w / (levels with such domains), so breaking into an empty NVL72 rack is avoided whenever a
  partly used one fits, and one break never costs more than w. Levels whose domains coincide
  (an NVL72 rack is one NVLink domain) count once.
* `topology.bandwidth` is NOT in this model: which GPUs of a node a pod gets is decided after
  the solve (decode, `placement.topology.pick_gpus`) and that term is computed from the choice.

w is `policy.weights.topology` (GPU-equivalents; 0.5 by default, below the value of one placed
GPU, so topology only ranks plans that place the same work unless the caller raises it).
"""

from __future__ import annotations

import math
from collections import defaultdict

from ortools.sat.python import cp_model
from placement_models import Assignment

from placement import topology
from placement.baseline.topology import fill_gang
from placement.compile import terms
from placement.compile.context import ModelContext
from placement.problem import Problem
from placement.solution import Placement

NVLINK = "nvlink_domain"
#: Share of the weight with which a gang that names no `preferred` level still prefers fewer
#: NVLink domains (clusters with multi-node NVLink only): no gratuitous splits across NVL72 racks.
IMPLICIT_NVLINK = 0.3

SPREAD = terms.TOPOLOGY_SPREAD
KEEP_WHOLE = terms.TOPOLOGY_KEEP_WHOLE
BANDWIDTH = terms.TOPOLOGY_BANDWIDTH

#: (variable, task, upper bound, node) of one job, grouped by domain index.
Pairs = dict[int, list[tuple[cp_model.IntVar, int, int, int]]]


def apply(ctx: ModelContext) -> None:
    view = ctx.problem.topology()
    weight = ctx.problem.request.policy.weights.topology
    for j, job in enumerate(ctx.problem.jobs):
        spec = job.topology
        if _implicit_nvlink(ctx, view, j) and weight > 0:
            _spread(ctx, view, j, NVLINK, weight * IMPLICIT_NVLINK)
        if spec is None:
            continue
        if spec.required is not None and job.pods > 1:
            _required(ctx, view, j, spec.required)
        if spec.slice is not None and spec.slice.size > 1:
            _slices(ctx, view, j, spec.slice.size, spec.slice.required)
        if spec.preferred is not None and job.pods > 1 and weight > 0 and (
                spec.required is None or view.height(spec.preferred) < view.height(spec.required)):
            _spread(ctx, view, j, spec.preferred, weight)
    if weight > 0:
        _keep_whole(ctx, view, weight)


def _implicit_nvlink(ctx: ModelContext, view: topology.ClusterTopology, j: int) -> bool:
    """A multi-pod GPU gang that names no narrower preference may touch a multi-node NVLink domain."""
    job = ctx.problem.jobs[j]
    spec = job.topology
    if NVLINK not in view.levels or job.pods < 2 or (spec is not None and spec.preferred is not None):
        return False
    if spec is not None and spec.required is not None and view.height(spec.required) <= view.height(NVLINK):
        return False
    tasks = [t for t in ctx.problem.job_tasks[j] if ctx.problem.tasks[t].demand[0] > 0]
    lvl = view.level(NVLINK)
    return bool(tasks) and any(lvl.members[int(lvl.of_node[n])].size > 1 for t in tasks for n in ctx.candidates[t])


def _pairs(ctx: ModelContext, view: topology.ClusterTopology, j: int, level: str,
           tasks: tuple[int, ...] | None = None) -> Pairs:
    of_node = view.level(level).of_node
    out: Pairs = defaultdict(list)
    for t in ctx.problem.job_tasks[j] if tasks is None else tasks:
        for var, n, ub in zip(ctx.x[t], ctx.candidates[t].tolist(), ctx.upper[t], strict=True):
            out[int(of_node[n])].append((var, t, ub, n))
    return dict(sorted(out.items()))


def _link(ctx: ModelContext, pairs: list[tuple[cp_model.IntVar, int, int, int]], pods: int,
          use: cp_model.IntVar) -> None:
    """No pod in the domain unless `use`: Σ x ≤ min(pods, Σ ub)·use (one row, docs/solver.md §5)."""
    cap = min(pods, sum(ub for _, _, ub, _ in pairs))
    ctx.model.add(cp_model.LinearExpr.sum([v for v, _, _, _ in pairs]) <= cap * use)


def _holds(ctx: ModelContext, j: int, pairs: list[tuple[cp_model.IntVar, int, int, int]]) -> bool:
    """Can this domain's candidate nodes hold the gang alone (counting pod slots per task)? As the gang rule
    counts it (`fill_gang`): each task's minimum (`min_replicas`), and `needed` pods in all."""
    slots: dict[int, int] = defaultdict(int)
    for _, t, ub, _ in pairs:
        slots[t] += ub

    def take(t: int, most: int) -> int:
        got = min(most, slots[t])
        slots[t] -= got
        return got

    return fill_gang(ctx.problem, j, take) > 0


def _required(ctx: ModelContext, view: topology.ClusterTopology, j: int, level: str) -> None:
    job = ctx.problem.jobs[j]
    use: dict[int, cp_model.IntVar] = {}
    for d, pairs in _pairs(ctx, view, j, level).items():
        if not _holds(ctx, j, pairs):
            ctx.model.add(cp_model.LinearExpr.sum([v for v, _, _, _ in pairs]) == 0)
            continue
        use[d] = ctx.model.new_bool_var(f"topo_required[{j},{d}]")
        _link(ctx, pairs, job.pods, use[d])
    ctx.model.add(cp_model.LinearExpr.sum(list(use.values())) == ctx.placed[j])
    _hint_domains(ctx, view, j, level, use)


def _spread(ctx: ModelContext, view: topology.ClusterTopology, j: int, level: str, weight: float) -> None:
    job = ctx.problem.jobs[j]
    groups = _pairs(ctx, view, j, level)
    near = {d: ctx.model.new_bool_var(f"topo_near[{j},{d}]") for d in groups}
    for d, pairs in groups.items():
        _link(ctx, pairs, job.pods, near[d])
    if not near:
        return
    biggest = max(sum(ub for _, _, ub, _ in pairs) for pairs in groups.values())
    minimum = max(1, math.ceil(job.needed / max(1, biggest)))
    ctx.objective.add(SPREAD, [*near.values(), ctx.placed[j]], [-1.0] * len(near) + [float(minimum)], weight)
    _hint_domains(ctx, view, j, level, near)


def _slices(ctx: ModelContext, view: topology.ClusterTopology, j: int, size: int, level: str) -> None:
    gpu_tasks = tuple(t for t in ctx.problem.job_tasks[j] if ctx.problem.tasks[t].demand[0] > 0)
    groups: dict[tuple[int, int], cp_model.IntVar] = {}
    for t in gpu_tasks:
        for d, pairs in _pairs(ctx, view, j, level, (t,)).items():
            most = min(ctx.problem.tasks[t].replicas, sum(ub for _, _, ub, _ in pairs)) // size
            g = ctx.model.new_int_var(0, most, f"topo_slices[{t},{d}]")
            ctx.model.add(cp_model.LinearExpr.sum([v for v, _, _, _ in pairs]) == size * g)
            groups[t, d] = g
    of_node = view.level(level).of_node

    def hint(ctx: ModelContext, placement: Placement, values: dict[int, int]) -> None:
        pods: dict[tuple[int, int], int] = defaultdict(int)
        for (t, n), k in placement.counts.items():
            if (t, int(of_node[n])) in groups:
                pods[t, int(of_node[n])] += k
        for key, g in groups.items():
            values[g.index] = pods.get(key, 0) // size

    ctx.on_hint(hint)


def _hint_domains(ctx: ModelContext, view: topology.ClusterTopology, j: int, level: str,
                  use: dict[int, cp_model.IntVar]) -> None:
    """A domain's boolean is on exactly when the placement puts a pod of job j there."""
    of_node = view.level(level).of_node
    tasks = set(ctx.problem.job_tasks[j])

    def hint(ctx: ModelContext, placement: Placement, values: dict[int, int]) -> None:
        touched = {int(of_node[n]) for (t, n), k in placement.counts.items() if k and t in tasks}
        for d, var in use.items():
            values[var.index] = int(d in touched)

    ctx.on_hint(hint)


def _keep_whole(ctx: ModelContext, view: topology.ClusterTopology, weight: float) -> None:
    problem = ctx.problem
    empty = problem.gpu_empty()
    per_node = ctx.node_terms()
    levels: list[tuple[topology.Level, dict[int, cp_model.IntVar]]] = []
    seen_counts: set[int] = set()
    for name in view.levels:
        lvl = view.level(name)
        if lvl.count in seen_counts:  # nested levels with as many domains are the same partition
            continue
        seen_counts.add(lvl.count)
        broken: dict[int, cp_model.IntVar] = {}
        for d, members in enumerate(lvl.members):
            if members.size < 2 or not empty[members].all():
                continue
            terms = [(v, int(problem.tasks[t].demand[0])) for n in members.tolist() for v, t, _ in per_node[n]
                     if problem.tasks[t].demand[0] > 0]
            if not terms:
                continue
            b = ctx.model.new_bool_var(f"topo_broken[{name},{d}]")
            gpus = int(problem.capacity[members, 0].sum())
            ctx.model.add(cp_model.LinearExpr.weighted_sum([v for v, _ in terms], [c for _, c in terms]) <= gpus * b)
            broken[d] = b
        if broken:
            levels.append((lvl, broken))
    for _, broken in levels:
        ctx.objective.add(KEEP_WHOLE, list(broken.values()), [-1.0 / len(levels)] * len(broken), weight)

    def hint(ctx: ModelContext, placement: Placement, values: dict[int, int]) -> None:
        gpus = placement.usage(ctx.problem)[:, 0]
        for lvl, broken in levels:
            for d, b in broken.items():
                values[b.index] = int(gpus[lvl.members[d]].sum() > 0)

    ctx.on_hint(hint)


def bandwidth_terms(problem: Problem, assignments: list[Assignment]) -> dict[str, float]:
    """`topology.bandwidth`, computed after the solve from the GPUs decode chose (not a model term).

    −w · Σ over pods of (1 − bandwidth of its GPU set / the best set of that size on the empty
    node): 0 when every multi-GPU pod got an ideal set. Reported only when some node has an
    in-node graph on which the choice can matter (not all pairs equally fast), so plans on
    NVSwitch-only or undescribed clusters carry no such term.
    """
    view = problem.topology()
    if not any(g is not None and not g.graph.get("uniform") for g in view.graphs):
        return {}
    weight = problem.request.policy.weights.topology
    loss = sum(topology.bandwidth_shortfall(view.graphs[problem.node_index[a.node]], a.gpus)
               for a in assignments if a.node in problem.node_index)
    return {BANDWIDTH: -weight * loss + 0.0}  # + 0.0: no negative zero in the plan
