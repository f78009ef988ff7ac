"""Each compile module's rules on their own, as cpsat-primer tests its rules: the module alone is applied to
a fresh context, the placement is fixed by hand, and CP-SAT must find the model feasible or infeasible.

No other module adds a row, so a test fails only for the rule it names; the objective terms a module adds
are checked at the fixed placement against the value the rule says.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

from ortools.sat.python import cp_model
from placement_models import PlacementRequest

from placement import screen
from placement.compile import build, capacity, fragmentation, gang, stability
from placement.compile.context import ModelContext, _reach

H100 = "H100-SXM5-80GB"


def _node(name: str, gpus: int = 8, cpu: int = 64, **extra: Any) -> dict[str, Any]:
    return {"name": name, "gpu_model": H100, "gpus": gpus, "cpu": cpu, "memory_gib": 512, **extra}


def _job(name: str, gpus: int, replicas: int = 1, cpu: float = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "tasks": [{"name": "w", "gpus": gpus, "cpu": cpu, "replicas": replicas}], **extra}


def _context(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]], modules: Sequence[ModuleType],
             **policy: Any) -> ModelContext:
    request = PlacementRequest.model_validate({"cluster": {"nodes": nodes}, "jobs": jobs, "policy": policy})
    ctx = ModelContext(screen.build_problem(request))
    for module in modules:
        module.apply(ctx)
    return ctx


def _fixed(ctx: ModelContext, pods: dict[tuple[str, str], int], placed: set[str]) -> tuple[int, cp_model.CpSolver]:
    """Solve with pods per (job, node) and `placed` jobs fixed (every other pair 0, every other job out)."""
    problem = ctx.problem
    names = [n.name for n in problem.nodes]
    for t, (row, cand) in enumerate(zip(ctx.x, ctx.candidates, strict=True)):
        job = problem.jobs[problem.tasks[t].job].name
        for var, n in zip(row, cand.tolist(), strict=True):
            ctx.model.add(var == pods.get((job, names[n]), 0))
    for j, var in enumerate(ctx.placed):
        ctx.model.add(var == int(problem.jobs[j].name in placed))
    ctx.model.maximize(ctx.objective.expression(ctx.model))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    return solver.solve(ctx.model), solver


OK = (cp_model.OPTIMAL, cp_model.FEASIBLE)


def test_capacity_counts_gpus_and_cpu_alone() -> None:
    def status(pods: dict[tuple[str, str], int], nodes: list[dict[str, Any]]) -> int:
        jobs = [_job("a", 6, cpu=10), _job("b", 2, cpu=10), _job("c", 2, cpu=10)]
        return _fixed(_context(nodes, jobs, [capacity]), pods, set())[0]

    eight = [_node("n", gpus=8, cpu=64)]
    assert status({("a", "n"): 1, ("b", "n"): 1}, eight) in OK  # 8 of 8 GPUs
    assert status({("a", "n"): 1, ("b", "n"): 1, ("c", "n"): 1}, eight) == cp_model.INFEASIBLE  # 10 GPUs
    assert status({("b", "n"): 1, ("c", "n"): 1}, [_node("n", gpus=8, cpu=16)]) == cp_model.INFEASIBLE  # 20 CPU


def test_gang_is_all_or_nothing_alone() -> None:
    nodes = [_node("n0", gpus=4), _node("n1", gpus=4)]
    gang_job = [_job("g", 4, replicas=2)]
    assert _fixed(_context(nodes, gang_job, [gang]), {("g", "n0"): 1, ("g", "n1"): 1}, {"g"})[0] in OK
    assert _fixed(_context(nodes, gang_job, [gang]), {("g", "n0"): 1}, {"g"})[0] == cp_model.INFEASIBLE
    assert _fixed(_context(nodes, gang_job, [gang]), {("g", "n0"): 1}, set())[0] == cp_model.INFEASIBLE
    elastic = [{**_job("e", 4, replicas=2), "min_available": 1}]
    assert _fixed(_context(nodes, elastic, [gang]), {("e", "n0"): 1}, {"e"})[0] in OK  # its minimum is one pod


def test_fragmentation_charges_each_whole_free_node_broken_alone() -> None:
    nodes = [_node("empty0"), _node("empty1"), _node("used")]
    running = {"job": "r", "pods": [{"task": "w", "node": "used", "gpus": [0]}]}
    request = {"cluster": {"nodes": nodes, "running": [running]}, "jobs": [_job("a", 1), _job("b", 1)],
               "policy": {}}
    req = PlacementRequest.model_validate(request)

    def term(pods: dict[tuple[str, str], int]) -> float:
        ctx = ModelContext(screen.build_problem(req))
        gang.apply(ctx)
        fragmentation.apply(ctx)
        status, solver = _fixed(ctx, pods, {job for job, _ in pods})
        assert status in OK
        return ctx.objective.values(lambda v: solver.value(v)).get("fragmentation", 0.0)

    none = term({("a", "used"): 1, ("b", "used"): 1})
    one = term({("a", "empty0"): 1, ("b", "empty0"): 1})
    two = term({("a", "empty0"): 1, ("b", "empty1"): 1})
    assert none == 0.0 and two == 2 * one < 0  # each whole free node broken costs the same


def test_stability_rewards_the_previous_plans_nodes_alone() -> None:
    previous = {"status": "optimal", "assignments": [{"job": "a", "task": "w", "pod": 0, "node": "n1",
                                                      "gpus": [0]}]}
    nodes = [_node("n0"), _node("n1")]

    def term(node: str) -> float:
        ctx = _context(nodes, [_job("a", 1)], [gang, stability], previous_plan=previous)
        status, solver = _fixed(ctx, {("a", node): 1}, {"a"})
        assert status in OK
        return ctx.objective.values(lambda v: solver.value(v)).get("stability", 0.0)

    assert term("n1") > term("n0")


def test_a_scoring_model_has_the_terms_and_no_solver_objective() -> None:
    request = PlacementRequest.model_validate({"cluster": {"nodes": [_node("a"), _node("b")]},
                                               "jobs": [_job("x", 4), _job("y", 8)]})
    problem = screen.build_problem(request)
    searched, scored = build(problem), build(problem, objective=False)
    assert not searched.scores_only and searched.model.has_objective()
    assert scored.scores_only and not scored.model.has_objective()
    assert set(scored.objective.terms) == set(searched.objective.terms)  # the same named terms score a plan


def test_the_objective_range_counts_each_variable_at_its_widest_value() -> None:
    model = cp_model.CpModel()
    a, b, c = model.new_int_var(-7, 3, "a"), model.new_int_var(0, 5, "b"), model.new_bool_var("c")
    assert _reach(model, [a, b, c, a], [2, -3, 4, 1]) == 2 * 7 + 3 * 5 + 4 + 7
    big = model.new_int_var(0, 2**40, "big")
    assert _reach(model, [big, a], [2**30, 1]) == 2**70 + 7  # past the float estimate's margin: exact
