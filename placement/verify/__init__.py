"""The second opinion: every hard rule of a plan, recomputed from the request alone.

This package deliberately shares no code with the compiler, the solver, the decoder or the greedy
baseline, and never touches CP-SAT: its modules import only the standard library, the wire format
(`placement_models`), the GPU catalog (`placement.catalog`) and each other. If the compiler
mis-encodes a rule, the solver will happily satisfy the wrong model and the decoder will
faithfully report it; only a checker that derives the rules again, independently, from the
request can catch that. Keep it simple and obviously right rather than fast. (`placement.cores`, which it
also imports, only runs a function on another core: no rule lives there.)

Each violation is one string, ``"<rule>: <what, naming the objects>"``, so callers can grep or
group by rule. Messages come out in a fixed rule order (see `RULES`) and, within a rule, in the
order of the request's and plan's own lists, so the same inputs always give the same report.

One module per concern, as the compiler has (`context` holds the indexes they all read); the
order of `RULES` below is the order of the report.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from placement_models import PlacementRequest, Plan, presets

from placement.cores import available, beside
from placement.verify import (
    capacity,
    cost,
    gang,
    mig,
    migration,
    objective,
    preemption,
    quota,
    reference,
    reservation,
    selectors,
    sharing,
    strict,
    topology,
    usage,
)
from placement.verify.context import EPS, Context
from placement.verify.selectors import BLOCKING_EFFECTS, effective_labels
from placement.verify.topology import topology_domains, topology_report

#: Pods from which the objective's terms are recomputed on another core (a fork costs 10-30 ms; the terms of
#: 4,000 pods about 0.1 s).
BESIDE_PODS = 4_000


class PlanViolation(Exception):
    """A plan broke hard rules; `.violations` lists them so callers can show every one at once."""

    def __init__(self, violations: list[str]) -> None:
        self.violations = list(violations)
        shown = "\n".join(self.violations)
        super().__init__(f"plan violates {len(self.violations)} rule(s):\n{shown}")


def verify(request: PlacementRequest | dict[str, Any], plan: Plan | dict[str, Any]) -> list[str]:
    """All violations of `plan` against `request`, one string each; an empty list means valid.

    Takes plain dicts (the wire format, as ``placement.plan()`` does) or models; a dict that is not a
    valid request or plan raises pydantic's ``ValidationError`` naming the fields, as ``plan()`` does.
    """
    if not isinstance(request, PlacementRequest):
        request = PlacementRequest.model_validate(request)
    if not isinstance(plan, Plan):
        plan = Plan.model_validate(plan)
    ctx = Context.build(presets.resolve(request), plan)  # the plan answers the request its preset spells out
    # The objective's terms, recomputed, are half the work on a big plan: on another core where there is one
    # (placement.cores; the same report either way).
    with beside(lambda: objective.check_objective(ctx),
                fork=len(plan.assignments) >= BESIDE_PODS and available()) as terms:
        found = {rule: check_rule(ctx) for rule, check_rule in _CHECKS if rule != "objective"}
        found["objective"] = terms.result()
    return [message for rule, _ in _CHECKS for message in found[rule]]


def check(request: PlacementRequest | dict[str, Any], plan: Plan | dict[str, Any]) -> None:
    """Raise `PlanViolation` unless `plan` is valid: the gate `placement.plan()` passes plans through."""
    violations = verify(request, plan)
    if violations:
        raise PlanViolation(violations)


#: (rule name, checker) in the order messages are reported.
_CHECKS: tuple[tuple[str, Callable[[Context], list[str]]], ...] = (
    ("api_version", reference.check_api_version),
    ("reference", reference.check_reference),
    ("gpus", capacity.check_gpus),
    ("capacity.cpu", capacity.check_cpu),
    ("capacity.memory", capacity.check_memory),
    ("gpu_memory", capacity.check_gpu_memory),
    ("selector", selectors.check_selector),
    ("taints", selectors.check_taints),
    ("gang", gang.check_gang),
    ("topology.required", topology.check_required),
    ("topology.slice", topology.check_slice),
    ("pending", gang.check_pending),
    ("spot", cost.check_spot),
    ("reserve", cost.check_reserve),
    ("provisioning", cost.check_provisioning),
    ("cost", cost.check_cost),
    ("objective", objective.check_objective),
    ("priority", strict.check_strict),
    ("quota", quota.check_quota),
    ("preemption", preemption.check_preemption),
    ("migration", migration.check_migration),
    ("mig", mig.check_mig),
    ("sharing", sharing.check_sharing),
    ("right_size", usage.check_right_size),
    ("reservation", reservation.check_reservation),
)


#: Every rule name a violation can start with, in report order.
RULES: tuple[str, ...] = tuple(name for name, _ in _CHECKS)


__all__ = [
    "BLOCKING_EFFECTS",
    "EPS",
    "RULES",
    "PlanViolation",
    "check",
    "effective_labels",
    "topology_domains",
    "topology_report",
    "verify",
]
