"""Why a job waits and why a running job is preempted: a precise, human reason for each.

* `reasons` — the reason of every pending job and preemption (filters, capacity, quota, rivals);
* `devices` — MIG and shared pods: which device filter emptied a task's nodes;
* `topology` — gangs with a topology: which level binds.
"""

from placement.explain.reasons import pending_reason, preemption_reason, quota_after

__all__ = ["pending_reason", "preemption_reason", "quota_after"]
