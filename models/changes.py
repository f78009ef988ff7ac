"""Changes: what a scheduler's loop sends instead of the whole cluster, against a state the planner keeps.

At ten thousand nodes a request is tens of megabytes, and most of it is the same every cycle. A loop sends
the full request once (its state gets an id) and then, every cycle, only what changed since a state it holds:
jobs that arrived, were withdrawn or started; running jobs that ended; nodes added, updated (cordoned, GPUs
failed) or gone; the policy (a new `now`). The planner applies the change to the state and plans the result,
which is the full request the caller would otherwise have sent (`placement.states`): the same plan.
"""

from __future__ import annotations

from placement_models.base import (
    MAX_JOBS,
    MAX_NAME,
    MAX_NODES,
    MAX_RUNNING_JOBS,
    Name,
    Strict,
    bounded_list,
)
from placement_models.cluster import Node, RunningJob
from placement_models.jobs import Job
from placement_models.policy import Policy
from pydantic import Field


class ClusterChange(Strict):
    """What changed since the state `base`; applied in the order the fields are listed."""

    #: the id of the state this change applies to (returned with the plan of the full request or of a change)
    base: str = Field(min_length=1, max_length=MAX_NAME)
    #: nodes that left the cluster (failed, drained away, scaled in): by name
    nodes_removed: bounded_list(Name, MAX_NODES) = Field(default_factory=list)
    #: nodes that joined, or (same name) replace the node as it was: cordoned, GPUs failed, relabelled
    nodes_put: bounded_list(Node, MAX_NODES) = Field(default_factory=list)
    #: running jobs that ended or were stopped: by name
    running_removed: bounded_list(Name, MAX_RUNNING_JOBS) = Field(default_factory=list)
    #: jobs that started (a pending job of the same name leaves the queue), or running jobs replaced (same name)
    running_put: bounded_list(RunningJob, MAX_RUNNING_JOBS) = Field(default_factory=list)
    #: pending jobs withdrawn or ended without running: by name
    jobs_removed: bounded_list(Name, MAX_JOBS) = Field(default_factory=list)
    #: jobs that arrived, or (same name) replace the pending job as it was
    jobs_put: bounded_list(Job, MAX_JOBS) = Field(default_factory=list)
    #: the policy of the new state, whole (unset: the base state's)
    policy: Policy | None = None
