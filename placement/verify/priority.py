"""Priority, recomputed: the class weights, the `priority` term, and what strict classes guarantee.

**Pod values.** A pod is worth its GPU-equivalents: its whole GPUs, its `gpu_share`, or its MIG
instance's memory slices over its GPU's, the smallest over the nodes its selectors and taints allow
(so its value does not depend on where it lands), times its `gpu_share` for a share of a MIG instance
(0.25 of a 1g instance of an 8-slice GPU: 1/32); a CPU-only pod 0.01, so it is placed when free.

**Class weights** (per GPU-equivalent, before `weights.priority`), over the jobs the planner weighed:

* `weighted`: the distinct levels weigh 1 (lowest) to 10 (highest), evenly spaced; the within-nominal
  bonus (the `quota` term, placement.verify.nominal) is 10 for every level.
* `strict` (the default): tiers, lowest first — every level by itself, then, for teams holding a nominal
  GPU quota somewhere, their GPUs within nominal level by level. With G the GPU-equivalents a tier asks
  (Σ pod value × replicas), v its smallest pod value, B what the tiers below add at their weights
  (Σ weight × G) and M = ΣG × (1 + fairness + 30 × aging + topology [+ throughput where a weighed job
  loses speed on some GPU model: placement.verify.throughput]) + jobs × turnaround (the most
  every other term values those GPUs at), the lowest tier weighs 1 and each next one (B + M) / v, but at
  most 1e9 / max(G, 1) (the weights are then *capped*); a within-nominal tier's bonus is its weight less
  its level's own.

**Which jobs the planner weighed.** It drops a job no plan could ever place before it weighs the
classes (such a job changes nothing), and the plan lists it as pending with a reason about the job
alone. placement.verify.screen runs the planner's tests again: the jobs that fail them for certain are
dropped; for those it cannot decide (evictions, MIG or shared devices decide their room), the weights are
derived for every subset of them taken as dropped (a dropped job is pending with the reason the unscreened
problem gives, so its constraint says nothing), up to `MAX_DROPPED` such jobs (beyond, the weights are not
derived); a term must match one of them.

Not derived here (the checker says nothing, and the terms that read the weights too): requests with a
`right_size` job (the usage stage offers MIG twins the weights count), and MIG tasks whose profile is
worth different fractions on the nodes allowed to them (the planner's value follows its own filter).

**Strict classes.** The weights above are the strictness: in `strict` mode the term is checked against
them, so a plan whose value per class is not the one the tiers give is rejected. Whether some other plan
would have placed a higher class instead of lower ones is not checked here: the search holds a plan
that is only feasible to the greedy plan's tiers (placement.search.strategy), which the verifier
cannot rebuild.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from placement_models import Job, Node, Task

from placement.catalog import mig_geometry
from placement.verify.candidates import classes
from placement.verify.context import Context, Expected, Tally
from placement.verify.quota import quota_scopes
from placement.verify.screen import screened
from placement.verify.selectors import allowed
from placement.verify.speeds import loses

CPU_POD_VALUE = 0.01
TOP_WEIGHT = 10.0
STRICT_CAP = 1e9
#: The most pending jobs whose subsets are tried as the dropped ones (2^this job sets).
MAX_DROPPED = 6


@dataclass(frozen=True)
class Tiers:
    """Per priority level, its weight per GPU-equivalent and its within-nominal bonus; capped: a cap bound."""

    jobs: tuple[Job, ...]
    weights: dict[int, float]
    bonus: dict[int, float]
    capped: bool = False


def mig_fraction_on(task: Task, node: Node) -> float | None:
    """The part of a GPU the task's MIG instance takes on the node's model (None: no such instance there)."""
    geo = mig_geometry(node.gpu_model) if node.gpu_model else None
    if geo is None:
        return None
    found = (geo.smallest_fitting(task.gpu_memory_gib or 0.0) if task.mig_profile == "auto"
             else geo.profile(task.mig_profile or ""))
    return found.memory_slices / geo.memory_slices if found is not None else None


def task_value(ctx: Context, task: Task) -> float | None:
    """One pod's GPU-equivalents (module docstring); None when a MIG profile's worth differs by node."""
    if task.gpu_share is not None and task.mig_profile is None:
        return float(task.gpu_share)
    if task.mig_profile is None:
        return float(task.gpus)
    key = ("mig_fractions", task.mig_profile, task.gpu_memory_gib, tuple(sorted(task.node_selector.items())),
           tuple(t.model_dump_json() for t in task.tolerations))
    if key not in ctx.memo:  # once per profile and filter, over the request's nodes by class
        ctx.memo[key] = {f for c in classes(ctx) if not c.added and allowed(task, c.node)
                         for f in [mig_fraction_on(task, c.node)] if f is not None}
    fractions = set(ctx.memo[key])
    if len(fractions) > 1:
        return None
    return (fractions.pop() if fractions else 0.0) * (task.gpu_share if task.gpu_share is not None else 1.0)


def pod_value(gpus: float) -> float:
    return gpus if gpus > 0 else CPU_POD_VALUE


def nominal_teams(ctx: Context) -> set[str]:
    """Teams holding a nominal GPU quota in some GPU scope: their work may rank in the within-nominal tiers."""
    return {team for scope in quota_scopes(ctx) for team, q in scope.nominal.items() if q > 0}


def tiers(ctx: Context) -> list[Tiers] | None:
    """The class weights over each job set the planner may have weighed (module docstring); None: not derived.
    Computed once per check: most terms read them."""
    if "tiers" not in ctx.memo:
        ctx.memo["tiers"] = _all_tiers(ctx)
    return ctx.memo["tiers"]  # type: ignore[no-any-return]


def _all_tiers(ctx: Context) -> list[Tiers] | None:
    request = ctx.request
    if any(job.right_size for job in request.jobs):
        return None
    gone, unsure = screened(ctx)
    dropped = sorted(unsure)  # its pending reason is the unscreened problem's: any constraint may name it
    if len(dropped) > MAX_DROPPED:
        return None
    sets = [tuple(job for job in request.jobs if job.name not in gone | set(more))
            for k in range(len(dropped) + 1) for more in combinations(dropped, k)]
    out = []
    for jobs in sets:
        found = _tiers(ctx, jobs)
        if found is None:
            return None
        out.append(found)
    return out


def _tiers(ctx: Context, jobs: tuple[Job, ...]) -> Tiers | None:
    policy = ctx.request.policy
    if policy.priority_mode == "weighted":
        levels = sorted({job.priority for job in jobs})
        spread = {p: 1.0 + (TOP_WEIGHT - 1.0) * i / (len(levels) - 1) for i, p in enumerate(levels)} \
            if len(levels) > 1 else dict.fromkeys(levels, 1.0)
        return Tiers(jobs, spread, dict.fromkeys(levels, TOP_WEIGHT))
    declared = {t.name for t in ctx.request.teams}
    holders = nominal_teams(ctx)
    asked: dict[int, float] = {}
    inside: dict[int, float] = {}
    least: dict[int, float] = {}
    least_in: dict[int, float] = {}
    for job in jobs:
        asked.setdefault(job.priority, 0.0)
        for task in job.tasks:
            gpus = task_value(ctx, task)
            if gpus is None:
                return None
            value = pod_value(gpus)
            asked[job.priority] += value * task.replicas
            least[job.priority] = min(least.get(job.priority, value), value)
            if job.team in declared and job.team in holders and gpus > 0:
                inside[job.priority] = inside.get(job.priority, 0.0) + value * task.replicas
                least_in[job.priority] = min(least_in.get(job.priority, value), value)
    knobs = policy.weights
    paced = knobs.throughput if any(loses(ctx, job) for job in jobs) else 0.0
    margin = sum(asked.values()) * (1.0 + knobs.fairness + 30.0 * knobs.aging + knobs.topology + paced) \
        + len(jobs) * knobs.turnaround
    weights: dict[int, float] = {}
    bonus = dict.fromkeys(asked, 0.0)
    below, top, capped = 0.0, 0.0, False
    for within, level in [(False, p) for p in sorted(asked)] + [(True, p) for p in sorted(inside)]:
        size = inside[level] if within else asked[level]
        w = 1.0 if top == 0.0 else (below + margin) / (least_in if within else least).get(level, 1.0)
        if w > STRICT_CAP / max(size, 1.0):
            w, capped = max(STRICT_CAP / max(size, 1.0), top), True
        top = max(top, w)
        if within:
            bonus[level] = w - weights[level]
            below += bonus[level] * size
        else:
            weights[level] = w
            below += w * size
    return Tiers(jobs, weights, bonus, capped)


def pod_values(ctx: Context) -> dict[tuple[str, str], float] | None:
    """(job, task) -> one pod's value for every task of a pending job; None when some value is not derived.
    Computed once per check."""
    if "pod_values" in ctx.memo:
        return ctx.memo["pod_values"]  # type: ignore[no-any-return]
    out: dict[tuple[str, str], float] | None = {}
    for job in ctx.request.jobs:
        for task in job.tasks:
            gpus = task_value(ctx, task)
            if gpus is None:
                out = None
                break
            out[job.name, task.name] = pod_value(gpus)
        if out is None:
            break
    ctx.memo["pod_values"] = out
    return out


def check_priority_term(ctx: Context) -> list[Expected] | None:
    """`priority`: weights.priority × Σ over placed pods of their class weight × their value, each pod's
    coefficient rounded to model units as the model holds it (`Tally`)."""
    found = tiers(ctx)
    values = pod_values(ctx)
    if found is None or values is None:
        return None
    weight = ctx.request.policy.weights.priority
    out = []
    for tier in found:
        total = Tally()
        for r in ctx.new_work():
            total.add(tier.weights.get(r.job.priority, 0.0) * values[r.job.name, r.task.name], 1, weight)
        out.append(total.expected())
    return out
