"""The objective's term names: one list for the whole compiler.

Every compile module adds its terms under these names, so a name is spelled once, and the plan reports
its score under them (`plan.objective.terms`). `MODULE` says which module adds each term: where term and
module names differ (`quota` comes from `nominal`, `turnaround` from `waiting`), this is where to look.

The verifier keeps its own list (`placement.verify.objective`) and shares no code with this one, so a
misspelt name here shows up there as a term it does not know.
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
}
#: every term the compiler may report
NAMES = frozenset(MODULE)
