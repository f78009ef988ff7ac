"""The greedy gang planner: the plan every solve starts from, and the floor it never goes below.

* `gangs` — priority, then size, descending; best-fit nodes; quotas respected;
* `fit` — the best-fit rule for one pod, and the index the greedy answers it from at scale;
* `topology` — gangs with a topology go to whole domains first (Kueue's BestFit);
* `devices` and `device_state` — where MIG and shared pods go, which GPUs change layout.
"""

from placement.baseline.gangs import greedy, job_order, place_task

__all__ = ["greedy", "job_order", "place_task"]
