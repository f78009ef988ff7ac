"""Why a job waits and why a running job is preempted: a precise, human reason for each.

* `reasons` — the reason of every pending job and preemption (filters, capacity, quota, rivals);
* `filters` — no node passes a task's filters: which one, and whether it is a filter, MIG or sharing policy;
* `devices` — MIG and shared pods: which device filter emptied a task's nodes;
* `topology` — gangs with a topology: which level binds;
* `rivals` — who took the room a job needs, and why the objective ranked them first.
"""

from placement.explain.reasons import pending_reason, preemption_reason, quota_after
from placement.explain.rivals import Reason

__all__ = ["Reason", "pending_reason", "preemption_reason", "quota_after"]
