"""The wire format (pydantic v2): the only shape data takes on its way in and out.

Imports nothing of ours, so any face (CLI, HTTP, a caller's own code) can depend on it alone.
"""

from placement_models.errors import ErrorList, format_errors, reject
from placement_models.plan import (
    Assignment,
    CostSummary,
    JobCost,
    MigChange,
    Objective,
    Overdue,
    Pending,
    Plan,
    PlanStatus,
    Preemption,
    PreemptionRule,
    Provisioned,
    Reservation,
    ReservedNode,
    RightSized,
    SharingChange,
    SolverStats,
    TeamReport,
)
from placement_models.policy import BorrowWithinCohort, OffPeak, OffPeakWindow, PreemptionRules
from placement_models.request import (
    API_VERSION,
    Cluster,
    FlavorQuota,
    GpuQuota,
    GpuSharing,
    Job,
    JobTopology,
    MigInstance,
    MigSlot,
    Node,
    NodeTemplate,
    NodeTopology,
    PlacementRequest,
    Policy,
    Pool,
    Provisionable,
    Quota,
    RunningJob,
    RunningPod,
    Taint,
    Task,
    Team,
    Toleration,
    TopologySlice,
    Weights,
)
from placement_models.speeds import Workload
from placement_models.teams import Cohort, ResourceQuota

__all__ = [
    "API_VERSION", "Assignment", "Cluster", "ErrorList", "Job", "MigChange", "Node", "NodeTopology",
    "Objective", "Pending", "PlacementRequest", "Plan", "PlanStatus", "Policy", "Pool", "Preemption", "RunningJob",
    "RunningPod", "SolverStats", "Overdue", "Reservation", "ReservedNode",
    "OffPeak", "OffPeakWindow",
    "CostSummary", "JobCost", "NodeTemplate", "Provisionable", "Provisioned",
    "Taint", "Task", "Team", "Toleration", "Weights", "format_errors",
    "reject",
    "Cohort", "FlavorQuota", "GpuQuota", "Quota", "TeamReport", "RightSized",
    "JobTopology", "TopologySlice",
    "GpuSharing", "MigInstance", "MigSlot", "SharingChange",
    "BorrowWithinCohort", "PreemptionRule", "PreemptionRules", "ResourceQuota",
    "Workload",
]
