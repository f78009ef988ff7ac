"""Fairness and aging, recomputed.

**aging**: each placed pod earns weights.aging × its value (GPU-equivalents, 0.01 for a CPU-only pod:
placement.verify.priority) × the days its job has waited since `submitted_at` at the planning time,
capped at 30, rounded per pod to model units as the model holds it (`Tally`: a pod that would earn less
than half a unit earns nothing).

**fairness**: per declared team T, its GPU-equivalents after the plan, A_T (running jobs kept and pods
placed, in milli-GPU floored to the quantum q: the largest divisor of a GPU and of every pod's milli-GPU,
at least 25), fills four segments of its entitlement E_T (breakpoints round(E_T·k/4 / q) quanta), each
worth less per GPU: 1, ¾, ½, ¼ × weights.fairness. The entitlement (a weighted max-min share given
demand, quotas and decayed usage) is read from the plan's team report (`teams[].entitlement`, four
decimals) and not derived again: the term may take each value the entitlements' rounding leaves open
(`segment_choices`). The model gives segments only to teams with a variable, so a team holding running
work that places nothing may count or not (`may_hold_segments`). Derived where every pending pod takes
whole GPUs (`whole_gpu_work`); each quantum's coefficient in model units (`Tally`).

With `policy.fair_share: work`, A_T counts work (`team_work`): each placed pod's milli-GPU times its job's speed
on that node's GPU model over the job's best on the request's GPU models, rounded to milli-GPU per pod; a kept
running job its milli-GPU times its slowest GPU's speed over its best, rounded per job (placement.verify.speeds).
"""

from __future__ import annotations

import math

from placement.verify.context import SCALE, SUMMED, Context, Expected, Tally
from placement.verify.priority import pod_values, tiers
from placement.verify.quota import GPUS, Scope, assigned_gpus, mig_fraction, running_pod_gpus, team_gpus
from placement.verify.speeds import best, gpu_models, pace, running_speed, table_of

MAX_AGE_DAYS = 30.0
SLOPES = (1.0, 0.75, 0.5, 0.25)
#: Smallest quantum, milli-GPU.
QUANTUM = 25
MILLI = 1000


def waited_days(ctx: Context, submitted: object) -> float:
    if submitted is None:
        return 0.0
    now = ctx.request.planning_time()
    return min(MAX_AGE_DAYS, max(0.0, (now - submitted).total_seconds() / 86400.0))  # type: ignore[operator]


def check_aging_term(ctx: Context) -> list[Expected] | None:
    weight = ctx.request.policy.weights.aging
    values = pod_values(ctx)
    if values is None or tiers(ctx) is None:
        return None
    total = Tally()
    for r in ctx.new_work():
        total.add(values[r.job.name, r.task.name] * waited_days(ctx, r.job.submitted_at), 1, weight)
    return [total.expected()]


def quantum(ctx: Context) -> int:
    """Milli-GPU per unit of the fair-share segments (module docstring)."""
    step = MILLI
    for job in ctx.request.jobs:
        for task in job.tasks:
            if task.gpu_share is not None:
                step = math.gcd(step, round(task.gpu_share * MILLI))
            elif task.mig_profile is not None:
                for node in ctx.request.cluster.nodes:
                    fraction = mig_fraction(node, task.mig_profile) if task.mig_profile != "auto" else 0.0
                    if fraction:
                        step = math.gcd(step, round(fraction * MILLI))
    for rj in ctx.request.cluster.running:
        for pod in rj.pods:
            step = math.gcd(step, round(running_pod_gpus(ctx, pod) * MILLI))
    return max(step, QUANTUM)


def whole_gpu_work(ctx: Context) -> bool:
    """Does every pending task take whole GPUs (or none)? Only then are the team terms derived: a MIG or shared
    pod's part of a GPU follows the planner's device picks, which the verifier does not rebuild; so do the MIG
    twins the usage stage offers a `right_size` job (placement.rightsize)."""
    return all(not j.right_size and all(t.mig_profile is None and t.gpu_share is None for t in j.tasks)
               for j in ctx.request.jobs)


def segments(entitlement: float) -> list[int]:
    points = [round(entitlement * k / len(SLOPES)) for k in range(len(SLOPES) + 1)]
    return [b - a for a, b in zip(points, points[1:], strict=False)]


#: Half a unit of the fourth decimal, to which the plan rounds each team's entitlement.
ENTITLEMENT_ROUNDING = 5e-5
#: Most distinct values the fairness term is checked against; beyond, their range.
MAX_VALUES = 256


def segment_choices(entitlement: float, per_quantum: float) -> list[list[int]]:
    """The segment widths an entitlement reported to four decimals may stand for: the planner's exact share lies
    within half a unit of the last decimal, and a breakpoint round(E·k/4) may fall on either side within it."""
    low, high = max(0.0, entitlement - ENTITLEMENT_ROUNDING), entitlement + ENTITLEMENT_ROUNDING
    points = [low, high, entitlement]
    for k in range(1, len(SLOPES) + 1):
        scale = k / len(SLOPES) / per_quantum
        for m in range(math.floor(low * scale - 0.5), math.ceil(high * scale + 0.5) + 1):
            tie = (m + 0.5) / scale  # the entitlement at which breakpoint k sits on a half
            if low <= tie <= high:
                points += [max(low, math.nextafter(tie, -math.inf)), tie, min(high, math.nextafter(tie, math.inf))]
    out: list[list[int]] = []
    for e in points:
        widths = segments(e / per_quantum)
        if widths not in out:
            out.append(widths)
    return out


def may_hold_segments(ctx: Context, team: str) -> bool:
    """May the planner's model have given `team` fair-share segments though the plan places none of its pods?
    It gives them to every team with a variable: a pending GPU task with a candidate node, or a running job it
    may evict or move (policy.migration: one with a speed table); the verifier cannot tell which pending jobs
    kept a candidate (screened, interchangeable ones)."""
    running = ctx.request.cluster.running
    return any(j.team == team and any(t.gpus > 0 or t.mig_profile is not None or t.gpu_share is not None
                                      for t in j.tasks) for j in ctx.request.jobs) or (
        ctx.request.may_preempt and any(rj.team == team and rj.preemptible for rj in running)) or (
        ctx.request.policy.migration and any(rj.team == team and rj.preemptible and table_of(ctx, rj) is not None
                                             for rj in running))


def team_work(ctx: Context) -> dict[str, int]:
    """Per declared team, its normalised work after the plan in milli-GPU (module docstring)."""
    models = gpu_models(ctx)
    out = {t.name: 0 for t in ctx.request.teams}
    for rj in ctx.request.cluster.running:
        if rj.team not in out or rj.job in ctx.evicted:
            continue
        table = table_of(ctx, rj)
        ratio = 1.0 if table is None else running_speed(ctx, rj) / best(table, models)
        out[rj.team] += round(round(sum(running_pod_gpus(ctx, pod) for pod in rj.pods) * MILLI) * ratio)
    for r in ctx.resolved:
        if r.job.team in out:
            table = table_of(ctx, r.job)
            ratio = 1.0 if table is None else pace(ctx, r.job, r.node) / best(table, models)
            out[r.job.team] += round(round(assigned_gpus(r) * MILLI) * ratio)
    return out


def check_fairness_term(ctx: Context) -> list[Expected] | None:
    """`fairness` (module docstring): each team's GPU-equivalents after the plan, in quanta, fill its segments,
    each quantum's coefficient in model units (`Tally`). Teams the plan places pods for count; a team holding
    running work that places nothing counts or not (`may_hold_segments`); the values the entitlements' rounding
    and those teams leave open are each a value the term may take."""
    weight = ctx.request.policy.weights.fairness
    if not ctx.request.teams or weight == 0:
        return [Expected.exact(0.0)]
    if not whole_gpu_work(ctx):
        return None
    step = quantum(ctx)
    per_quantum = step / MILLI
    everywhere = Scope("cluster", set(ctx.nodes), {}, {}, {}, GPUS)
    if ctx.request.policy.fair_share == "work":
        after = {name: milli / MILLI for name, milli in team_work(ctx).items()}
    else:
        _, after = team_gpus(ctx, everywhere)
    entitled = {t.team: t.entitlement for t in ctx.plan.teams}
    placing = {r.job.team for r in ctx.resolved if assigned_gpus(r) > 0}  # CPU-only pods are no variable
    sums: dict[int, int] = {0: 0}  # model units -> unsure units
    for team in ctx.request.teams:
        held = round(after.get(team.name, 0.0) * MILLI) // step
        if team.name not in entitled or not held:
            continue
        if team.name not in placing and not may_hold_segments(ctx, team.name):
            continue
        options: dict[int, int] = {} if team.name in placing else {0: 0}
        for widths in segment_choices(entitled[team.name], per_quantum):
            left, tally = held, Tally()
            for slope, width in zip(SLOPES, widths, strict=True):
                take = max(0, min(width, left))
                left -= take
                tally.add(slope * per_quantum, take, weight)
            options[tally.units] = max(options.get(tally.units, 0), tally.unsure)
        sums = {a + b: max(sums.get(a + b, 0), u + v) for a, u in sums.items() for b, v in options.items()}
        if len(sums) > MAX_VALUES:  # too many combinations to list: their range
            return [Expected(min(sums) / SCALE, max(sums) / SCALE, 2 * max(sums.values()), SUMMED)]
    return [Expected(units / SCALE, units / SCALE, 2 * unsure, SUMMED) for units, unsure in sorted(sums.items())]
