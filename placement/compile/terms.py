"""The objective's term names: one list for the whole compiler.

Every compile module adds its terms under these names, so a name is spelled once, and the plan reports
its score under them (`plan.objective.terms`). `MODULE` says which module adds each term: where term and
module names differ (`quota` comes from `nominal`, `turnaround` from `waiting`), this is where to look.

The objective registry (`placement.compile.context.ObjectiveRegistry`) asks `check` for every name a module
adds a term or a cap under, so a term added under a name not listed here fails while the model is built,
naming itself and the known names, rather than reaching a plan the verifier would reject. The verifier keeps
its own list (`placement.verify.objective`) and shares no code with this one.
"""

from __future__ import annotations

PRIORITY = "priority"
QUOTA = "quota"
FRAGMENTATION = "fragmentation"
TOPOLOGY_SPREAD = "topology.spread"
TOPOLOGY_KEEP_WHOLE = "topology.keep_whole"
TOPOLOGY_BANDWIDTH = "topology.bandwidth"
MIG_RECONFIGURE = "mig.reconfigure"
SHARING_CHANGE = "sharing_change"
FAIRNESS = "fairness"
AGING = "aging"
PREEMPTION = "preemption"
COST_COMPUTE = "cost.compute"
COST_RECLAIM_RISK = "cost.reclaim_risk"
COST_PROVISIONING = "cost.provisioning"
DEFERRAL = "deferral"
USAGE_OVER_DECLARED = "usage.over_declared"
USAGE_RIGHT_SIZE = "usage.right_size"
STABILITY = "stability"
TURNAROUND = "turnaround"
ALIGNMENT = "alignment"
THROUGHPUT = "throughput"
MIGRATION = "migration"

#: term -> the compile module (placement.compile.<module>) that adds it
MODULE: dict[str, str] = {
    PRIORITY: "priority",
    QUOTA: "nominal",
    FRAGMENTATION: "fragmentation",  # also mig and sharing: partial-GPU pods breaking a whole free node
    TOPOLOGY_SPREAD: "topology",
    TOPOLOGY_KEEP_WHOLE: "topology",
    TOPOLOGY_BANDWIDTH: "topology",
    MIG_RECONFIGURE: "mig",
    SHARING_CHANGE: "sharing",
    FAIRNESS: "fairness",
    AGING: "fairness",
    PREEMPTION: "preemption",
    COST_COMPUTE: "cost",
    COST_RECLAIM_RISK: "cost",
    COST_PROVISIONING: "cost",
    DEFERRAL: "cost",
    USAGE_OVER_DECLARED: "usage",
    USAGE_RIGHT_SIZE: "usage",
    STABILITY: "stability",
    TURNAROUND: "waiting",
    ALIGNMENT: "alignment",
    THROUGHPUT: "throughput",
    MIGRATION: "migration",
}
#: every term the compiler may report
NAMES = frozenset(MODULE)


class UnknownTerm(ValueError):
    """An objective term added under a name `MODULE` does not list."""


def check(name: str) -> str:
    """`name` when it is a registered term name; else UnknownTerm naming it and the known ones."""
    if name not in NAMES:
        known = ", ".join(sorted(NAMES))
        raise UnknownTerm(f"objective term {name!r} is not registered in placement.compile.terms.MODULE "
                          f"(known: {known}); add it there, with the module that adds it")
    return name
