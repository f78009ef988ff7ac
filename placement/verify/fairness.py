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
decimals) and not derived again; the verifier checks the utility, and that the teams in it hold what
the plan says. Derived only where no team has running work, nothing is preempted and every pod takes
whole GPUs (`simple_teams`): there a team that places nothing holds nothing. One unit per quantum filled.
"""

from __future__ import annotations

import math

from placement.verify.context import Context, Expected, Tally
from placement.verify.priority import pod_values, tiers
from placement.verify.quota import GPUS, Scope, mig_fraction, running_pod_gpus, team_gpus

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
    for r in ctx.resolved:
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


def simple_teams(ctx: Context) -> bool:
    """Is the request one whose team terms the verifier derives: no running job of a team, no preemption, only
    whole-GPU pods? (Running holdings, evictions and the planner's device picks enter the team totals in ways
    the verifier does not rebuild; elsewhere these terms are not checked.)"""
    return (not any(rj.team for rj in ctx.request.cluster.running) and not ctx.plan.preemptions
            and all(t.mig_profile is None and t.gpu_share is None for j in ctx.request.jobs for t in j.tasks))


def segments(entitlement: float) -> list[int]:
    points = [round(entitlement * k / len(SLOPES)) for k in range(len(SLOPES) + 1)]
    return [b - a for a, b in zip(points, points[1:], strict=False)]


#: Half a unit of the fourth decimal, to which the plan rounds each team's entitlement.
ENTITLEMENT_ROUNDING = 5e-5


def check_fairness_term(ctx: Context) -> list[Expected] | None:
    weight = ctx.request.policy.weights.fairness
    if not ctx.request.teams or weight == 0:
        return [Expected.exact(0.0)]
    if simple_teams(ctx) is False:
        return None
    step = quantum(ctx)
    per_quantum = step / MILLI
    everywhere = Scope("cluster", set(ctx.nodes), {}, {}, {}, GPUS)
    _, after = team_gpus(ctx, everywhere)
    entitled = {t.team: t.entitlement for t in ctx.plan.teams}
    movable = {r.job.team for r in ctx.resolved}  # with no running team work, a team placing nothing holds 0
    # The plan reports entitlements to four decimals; the planner's exact share may sit on the other side of a
    # quantum boundary, so the term is bounded by the entitlements half a unit of the last decimal either way.
    totals, units = [], 0
    for slack in (-ENTITLEMENT_ROUNDING, ENTITLEMENT_ROUNDING):
        total, units = 0.0, 0
        for team in ctx.request.teams:
            if team.name not in movable or team.name not in entitled:
                continue
            widths = segments(max(0.0, entitled[team.name] + slack) / per_quantum)
            held = round(after.get(team.name, 0.0) * MILLI) // step
            for slope, width in zip(SLOPES, widths, strict=True):
                take = max(0, min(width, held))
                held -= take
                total += weight * slope * per_quantum * take
                units += take
        totals.append(total)
    return [Expected(min(totals), max(totals), units)]
