"""For the device tests: is the greedy plan, given to CP-SAT as its hint, a complete and feasible solution?

The solver starts from that hint (docs/solver.md §1), so a module whose hint misses a variable or breaks a row
would silently start from nothing; test_mig and test_sharing both check it through here.
"""

from __future__ import annotations

from typing import Any

from ortools.sat.python import cp_model
from placement_models import PlacementRequest

from placement import candidates
from placement import compile as compiler
from placement import problem as problem_mod
from placement.baseline import greedy
from placement.solution import Placement


def greedy_hint_solves(req: dict[str, Any]) -> tuple[bool, Placement]:
    """(the model accepts the greedy plan with every variable fixed to its hint, that plan)."""
    problem = problem_mod.build(PlacementRequest.model_validate(req))
    base = greedy(problem)
    ctx = compiler.build(problem, candidates.select(problem, base))
    values = ctx.assignment_of(base)
    assert len(values) == len(ctx.model.proto.variables)  # every variable hinted
    ctx.hint(values)
    solver = cp_model.CpSolver()
    solver.parameters.fix_variables_to_their_hinted_value = True
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 5
    return solver.solve(ctx.model) in (cp_model.OPTIMAL, cp_model.FEASIBLE), base
