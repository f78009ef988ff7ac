"""The wire format (pydantic v2): the only shape data takes on its way in and out.

Imports nothing of ours, so any face (CLI, HTTP, a caller's own code) can depend on it alone.
"""

from models.errors import ErrorList, format_errors, reject
from models.plan import Assignment, MigChange, Objective, Pending, Plan, PlanStatus, Preemption, SolverStats
from models.request import (
    API_VERSION,
    Cluster,
    Job,
    Node,
    NodeTopology,
    PlacementRequest,
    Policy,
    Pool,
    RunningJob,
    RunningPod,
    Taint,
    Task,
    Team,
    Toleration,
    Weights,
)

__all__ = [
    "API_VERSION", "Assignment", "Cluster", "ErrorList", "Job", "MigChange", "Node", "NodeTopology",
    "Objective", "Pending", "PlacementRequest", "Plan", "PlanStatus", "Policy", "Pool", "Preemption", "RunningJob",
    "RunningPod", "SolverStats", "Taint", "Task", "Team", "Toleration", "Weights", "format_errors",
    "reject",
]
