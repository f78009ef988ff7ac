"""`policy.relative_gap_limit`: the search ends once its plan is proven within the limit, and says why it ended."""

from __future__ import annotations

import pytest
from ortools.sat.python import cp_model
from placement_models import Plan

from placement.api import plan
from placement.cli import summary
from placement.compile.context import SCALE
from placement.generate import generate
from placement.search.solve import _WithinGap


def test_a_bound_from_outside_the_model_ends_the_search_at_the_first_plan_within_the_limit() -> None:
    """The callback compares with a bound CP-SAT does not know (the class relaxation's for a trimmed model)."""
    model = cp_model.CpModel()
    xs = [model.new_int_var(0, 10, f"x{i}") for i in range(30)]
    model.add(sum(xs) <= 200)
    model.maximize(SCALE * sum(xs))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    within = _WithinGap(bound=300.0, limit=0.5)  # any plan worth 150 or more is within half of 300
    assert solver.solve(model, within) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    assert within.hit and solver.objective_value / SCALE >= 150
    never = _WithinGap(bound=300.0, limit=0.01)  # 200 is the optimum: never within 1 % of 300
    solver.solve(model, never)
    assert not never.hit and solver.objective_value / SCALE == 200


def test_greedy_plan_proven_within_the_limit_skips_the_search() -> None:
    request = generate(256, 384, 1)
    request["policy"] = {"time_limit_s": 10, "relative_gap_limit": 0.01}
    result = plan(request)
    s = result.solver
    assert s.search == "none" and s.ended == "gap_limit" and s.restricted
    assert s.gap is not None and s.gap <= 0.01 and s.wall_s < 5
    assert "none needed, the greedy plan is proven within policy.relative_gap_limit" in summary(result)


def test_default_limit_is_zero_and_the_summary_says_what_ended_the_search() -> None:
    request = generate(4, 6, 1)
    request["policy"] = {"time_limit_s": 2, "deterministic": True}
    result = plan(request)
    assert result.solver.ended in ("optimal", "time_limit")
    assert "search ended" in summary(result)


@pytest.mark.parametrize(("ended", "search", "words"), [
    ("optimal", "model", "proven optimal after 1.50s of search"),
    ("gap_limit", "model", "ended early: the plan is proven within policy.relative_gap_limit (2 below the "
                           "relaxation bound, 0.002 relative) after 1.50s"),
    ("gap_limit", "none", "none needed, the greedy plan is proven within policy.relative_gap_limit"),
    ("trimmed_optimal", "model", "the trimmed model is solved to optimality after 1.50s of search"),
    ("time_limit", "windows", "time limit after 1.50s of search; not proven optimal (2 below"),
    ("time_limit", "none", "no time was left for a search"),
    ("stopped", "model", "stopped by the caller after 1.50s"),
])
def test_summary_says_why_the_solve_took_what_it_took(ended: str, search: str, words: str) -> None:
    result = Plan.model_validate({"status": "feasible", "objective": {"total": 998.0}, "solver": {
        "status": "FEASIBLE", "objective": 998.0, "bound": 1000.0, "bound_kind": "relaxation", "gap": 0.002,
        "search": search, "ended": ended, "phases": {"search": 1.5}}})
    assert words in summary(result)


def test_a_plan_without_the_field_says_nothing_about_it() -> None:
    assert "search ended" not in summary(Plan.model_validate({"status": "feasible", "objective": {"total": 1.0}}))
