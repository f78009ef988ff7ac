"""Objective: every term the plan reports, recomputed from the request and the plan, and their sum.

`TERMS` is the registry: each term the planner may report, by its name in `plan.objective.terms`,
and the checker (in the verify module of its concern) that derives it again without the compiler.
A checker returns the values the term may take (`Expected`: usually one value, with the tolerance
the model's integer coefficients leave, see `placement.verify.context.Expected`; more than one where
the wire format leaves a planner's choice open, its module says which), or None where it does not
derive the term for this request (its module says when). A term absent from the plan counts as 0,
so a plan cannot hide a term by leaving it out; a plan that reports no term at all (total 0, as a
hand-written plan for another rule's sake) claims no score, and only the sum is checked. A name the
registry does not know is rejected.

Messages: ``objective: term '<name>' is <reported>, recomputed <value> (tolerance <t>)``.
"""

from __future__ import annotations

from collections.abc import Callable

from placement.verify import (
    alignment,
    bandwidth,
    cost,
    fairness,
    fragmentation,
    mig,
    migration,
    nominal,
    preemption,
    priority,
    sharing,
    stability,
    throughput,
    topology,
    turnaround,
    usage,
)
from placement.verify.context import EPS, Context, Expected

Checker = Callable[[Context], "list[Expected] | None"]

#: Term name -> its checker, in the order the compiler's modules add them.
TERMS: dict[str, Checker] = {
    "priority": priority.check_priority_term,
    "migration": migration.check_migration_term,
    "fragmentation": fragmentation.check_fragmentation_term,
    "quota": nominal.check_quota_term,
    "fairness": fairness.check_fairness_term,
    "aging": fairness.check_aging_term,
    "preemption": preemption.check_preemption_term,
    "topology.spread": topology.check_spread_term,
    "topology.keep_whole": topology.check_keep_whole_term,
    "topology.bandwidth": bandwidth.check_bandwidth_term,
    "mig.reconfigure": mig.check_reconfigure_term,
    "sharing_change": sharing.check_sharing_change_term,
    "cost.compute": cost.check_compute_term,
    "cost.reclaim_risk": cost.check_reclaim_risk_term,
    "deferral": cost.check_deferral_term,
    "cost.provisioning": cost.check_provisioning_term,
    "usage.over_declared": usage.check_over_declared_term,
    "usage.right_size": usage.check_right_size_term,
    "stability": stability.check_stability_term,
    "turnaround": turnaround.check_turnaround_term,
    "alignment": alignment.check_alignment_term,
    "throughput": throughput.check_throughput_term,
}


def check_objective(ctx: Context) -> list[str]:
    obj = ctx.plan.objective
    out: list[str] = []
    terms = sum(obj.terms.values())
    # Written as "not <=" so that a NaN total or term is reported, not silently accepted.
    if not abs(obj.total - terms) <= EPS * max(1.0, abs(obj.total)):
        out.append(f"objective: total {obj.total!r} differs from the sum of its terms {terms!r}")
    out += [f"objective: term '{name}' is not one the planner reports ({', '.join(TERMS)})"
            for name in obj.terms if name not in TERMS]
    if not obj.terms and obj.total == 0:
        return out  # no score claimed
    for name, checker in TERMS.items():
        found = checker(ctx)
        if not found:
            continue
        reported = obj.terms.get(name, 0.0)
        if not any(e.admits(reported) for e in found):
            want = " or ".join(e.shown() for e in found)
            tol = max(e.tolerance() for e in found)
            out.append(f"objective: term '{name}' is {reported!r}, recomputed {want} (tolerance {tol:.6g})")
    return out
