"""Priority: the value of a plan is the priority-weighted GPUs it places.

Each distinct priority level among pending jobs gets a weight from 1 (lowest) to 10 (highest)
per GPU, so a high-priority gang outweighs several low ones of the same size but a huge
low-priority gang is not worthless. CPU-only pods count 0.01 GPU so they are placed when free.
A MIG or shared pod counts the part of a GPU it takes (placement/devices.py `gpu_value`).
"""

from __future__ import annotations

from placement.compile.context import ModelContext

CPU_POD_VALUE = 0.01
TOP_WEIGHT = 10.0


def level_weights(priorities: list[int]) -> dict[int, float]:
    levels = sorted(set(priorities))
    if len(levels) <= 1:
        return dict.fromkeys(levels, 1.0)
    return {p: 1.0 + (TOP_WEIGHT - 1.0) * i / (len(levels) - 1) for i, p in enumerate(levels)}


def pod_value(gpus: float) -> float:
    return float(gpus) if gpus > 0 else CPU_POD_VALUE


def apply(ctx: ModelContext) -> None:
    weights = level_weights([job.priority for job in ctx.problem.jobs])
    weight = ctx.problem.request.policy.weights.priority
    for t, task in enumerate(ctx.problem.tasks):
        w = weights[ctx.problem.jobs[task.job].priority] * pod_value(ctx.problem.gpu_value(t))
        ctx.objective.add("priority", ctx.x[t], [w] * len(ctx.x[t]), weight)
