"""Stability, recomputed: a pending pod on the node `policy.previous_plan` gave its task earns
weights.stability × its declared GPUs (0.01 for a CPU-only pod).

Per (task, node), the kept pods are min(pods there now, pods the previous plan put there); a pod the
usage stage moved onto a MIG instance (right-sized) is another task's and keeps nothing. Each kept pod's
coefficient rounded to model units, as the model holds it (`Tally`).
"""

from __future__ import annotations

from collections import Counter

from placement.verify.context import Context, Expected, Tally
from placement.verify.priority import pod_value


def check_stability_term(ctx: Context) -> list[Expected] | None:
    previous = ctx.request.policy.previous_plan
    weight = ctx.request.policy.weights.stability
    if previous is None or weight == 0:
        return [Expected.exact(0.0)]
    before = Counter((a.job, a.task, a.node) for a in previous.assignments)
    now = Counter((r.job.name, r.task.name, r.node.name) for r in ctx.new_work() if not r.right_sized)
    gpus = {(job.name, task.name): task.gpus for job in ctx.request.jobs for task in job.tasks}
    kept = {key: min(k, before.get(key, 0)) for key, k in now.items()}
    total = Tally()
    for (job, task, _), k in kept.items():
        total.add(pod_value(float(gpus[job, task])), k, weight)
    return [total.expected()]
