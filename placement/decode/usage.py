"""The usage concern in the plan: right-sized pods back in the request's own names, with the saving.

The model sees a right-size offer as a MIG task beside its declared twin (`placement.rightsize`);
a user asked for one task, so an alternative's pods become the declared task's next pods,
pending reasons name the declared task, and each offer taken is listed with the GPUs it saved.
"""

from __future__ import annotations

from placement_models import Plan, RightSized

from placement import catalog
from placement.problem import Problem
from placement.rightsize import Pair, pairs


def fold(problem: Problem, plan: Plan) -> Plan:
    """The plan in the request's names: an alternative's pods become the declared task's next pods,
    pending reasons name the declared task, and each offer taken is listed with its saving."""
    found = pairs(problem)
    if not found:
        return plan
    rename = {(p.offer.job, p.offer.alternative): p.offer for p in found}
    used = {}
    for a in plan.assignments:
        if (a.job, a.task) not in rename:
            used[a.job, a.task] = used.get((a.job, a.task), 0) + 1
    nodes = {n.name: n for n in problem.nodes}
    moved: dict[tuple[str, str], list[tuple[str, float]]] = {}
    assignments = []
    for a in plan.assignments:
        offer = rename.get((a.job, a.task))
        if offer is None or a.mig is None:
            assignments.append(a)
            continue
        base = used.get((a.job, offer.task), 0)
        assignments.append(a.model_copy(update={"task": offer.task, "pod": base + a.pod}))
        geo = catalog.mig_geometry(nodes[a.node].gpu_model)
        profile = geo.profile(a.mig.profile) if geo is not None else None
        share = profile.memory_slices / geo.memory_slices if geo is not None and profile is not None else 1.0
        moved.setdefault((a.job, offer.task), []).append((a.mig.profile, share))
    right_sized = []
    for p in found:
        got = moved.get((p.offer.job, p.offer.task))
        if got:
            right_sized.append(RightSized(
                job=p.offer.job, task=p.offer.task, pods=len(got), profiles=sorted({name for name, _ in got}),
                observed_gpu_memory_gib=p.offer.observed_gib, needs_gib=round(p.offer.needs_gib, 6),
                gpus_saved=round(sum(1.0 - share for _, share in got), 6)))
    pending = [q.model_copy(update={"reason": _renamed(q.reason, found)}) for q in plan.pending]
    return plan.model_copy(update={"assignments": assignments, "pending": pending, "right_sized": right_sized})


def _renamed(reason: str, found: list[Pair]) -> str:
    for p in found:
        reason = reason.replace(p.offer.alternative, f"{p.offer.task} (right-sized)")
    return reason
