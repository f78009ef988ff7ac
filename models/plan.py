"""The v1 plan: what to bind where, what waits and why, and how good the plan is (DESIGN.md §2)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PlanStatus = Literal["optimal", "feasible", "infeasible", "no_solution_in_time", "invalid"]


class PlanModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Assignment(PlanModel):
    job: str
    task: str
    pod: int = Field(ge=0)
    node: str
    gpus: list[int] = Field(default_factory=list)


class Preemption(PlanModel):
    job: str
    reason: str


class MigChange(PlanModel):
    node: str
    gpu: int
    layout: list[dict[str, object]]


class Pending(PlanModel):
    job: str
    reason: str


class Objective(PlanModel):
    """Recomputed from the placement, term by term, so the plan explains its own score."""

    total: float
    terms: dict[str, float] = Field(default_factory=dict)


class SolverStats(PlanModel):
    status: str = Field(description="CP-SAT status, or SKIPPED when the model was not solved")
    objective: float | None = None
    bound: float | None = None
    gap: float | None = Field(None, description="relative gap of the returned plan to the bound")
    wall_s: float = 0.0
    build_s: float = 0.0
    first_plan_s: float | None = Field(None, description="seconds until the first plan (the greedy one)")
    variables: int = 0
    constraints: int = 0
    workers: int = 1
    seed: int = 0
    mode: Literal["deterministic", "wall-clock"] = "wall-clock"
    winner: Literal["solver", "baseline"] = "baseline"
    baseline_objective: float | None = None


class Plan(PlanModel):
    api_version: Literal["placement/v1"] = "placement/v1"
    status: PlanStatus
    assignments: list[Assignment] = Field(default_factory=list)
    preemptions: list[Preemption] = Field(default_factory=list)
    mig_changes: list[MigChange] = Field(default_factory=list)
    pending: list[Pending] = Field(default_factory=list)
    objective: Objective = Field(default_factory=lambda: Objective(total=0.0))
    solver: SolverStats = Field(default_factory=lambda: SolverStats(status="SKIPPED"))
