"""Migration (soft): a running job moves when the work the plan gains is worth the move.

With `policy.migration`, a running job that may move has a twin among the pending jobs (placement.migration),
whose candidate nodes are those where it keeps at least three quarters of its speed now. The twin is placed
exactly when the job is evicted for it: `placed[twin] ≤ evicted[r]`, and compile/preemption.py lets the twin
alone justify the eviction (a preemption with rule `migrate`). The twin earns no class, aging or turnaround (it
is no new work), and the throughput term charges it what it loses where it lands, as any job with a speed
table. This term adds, per move:

    + weights.throughput × G × (1 − s_now / s_best)     the loss the job stops paying where it runs now
    − weights.migration × (G + lost)                    the move itself: G GPU-equivalents restarted, and the
                                                         GPU-hours since its last checkpoint (else start) lost

G: the job's GPU-equivalents; s_now: its speed on its slowest GPU now; s_best: its best over the cluster's GPU
models. With the throughput the twin pays where it lands, a move alone is worth weights.throughput × G × the
share of its best speed it gains: a job moves to faster GPUs when that exceeds
weights.migration per GPU-equivalent (a tenth of its best speed at the `las` preset's 1 and the default 0.1),
more when it would lose unsaved work. A move is worth at most weights.throughput per GPU-equivalent, a pending
pod at least its class weight (1 for the lowest class) per GPU-equivalent: at weights.throughput ≤ 1 (the `las`
preset's) a pending job whose pods would take the GPUs a move wants outranks the move; above 1 a move that gains
much may go before a pending job (the completion preset leaves migration off). A move to slower GPUs loses
throughput and pays the move: the plan makes it only where the GPUs it frees are worth more to another job (a
swap: a running job that moves to faster GPUs, or a pending one placed there).
"""

from __future__ import annotations

from placement import speeds
from placement.compile import terms
from placement.compile.context import ModelContext
from placement.compile.throughput import job_gpus
from placement.problem import Problem

NAME = terms.MIGRATION


def gain(problem: Problem, j: int) -> float:
    """What moving twin j's running job is worth before the throughput it pays where it lands (module docstring),
    weighted."""
    r = problem.twins[j]
    weights = problem.request.policy.weights
    table = problem.speeds.running[r]
    gpus = job_gpus(problem, j)
    loss_now = 1.0 - problem.speeds.running_pace[r] / speeds.best(table, problem.speeds.models)
    return weights.throughput * gpus * loss_now - weights.migration * (gpus + problem.running[r].lost_gpu_h)


def apply(ctx: ModelContext) -> None:
    problem = ctx.problem
    if not problem.twins:
        return
    variables, coefs = [], []
    for j, r in problem.twins.items():
        ctx.model.add(ctx.placed[j] <= ctx.evicted[r])
        variables.append(ctx.placed[j])
        coefs.append(gain(problem, j))
    ctx.objective.add(NAME, variables, coefs)
