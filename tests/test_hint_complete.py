"""The greedy plan, given to CP-SAT as its hint, is a complete and feasible solution of every module's model.

The search starts from that hint (docs/solver.md §1): a module whose hint rule misses a variable, or sets one
so that a row breaks, silently starts the solver from nothing. The device tests check MIG and sharing on small
requests (tests/hints.py); this runs the check on every bundled instance, whose models between them use every
compile module: teams and quotas, fair share, preemption, topology, cost and off-peak, turnaround and alignment,
reservations, MIG.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ortools.sat.python import cp_model

from placement.api import first_model
from placement.compile.context import SCALE

ROOT = Path(__file__).resolve().parents[1] / "instances"
INSTANCES = ["example.json", "topology/nvl72.json", "whatif/request.json",
             *(f"library/{family}-S.json" for family in ("gangs", "mig", "spot", "teams", "topology", "loop",
                                                          "preempt", "offpeak"))]
_SEEN: set[str] = set()


@pytest.mark.parametrize("name", INSTANCES)
def test_the_greedy_hint_fixes_every_variable_and_is_feasible(name: str) -> None:
    request = json.loads((ROOT / name).read_text())
    request.setdefault("policy", {}).update({"deterministic": True, "time_limit_s": 5, "workers": 1})
    ctx, greedy = first_model(request)
    values = ctx.assignment_of(greedy)
    assert len(values) == len(ctx.model.proto.variables)  # every variable of every module hinted
    ctx.hint(values)
    solver = cp_model.CpSolver()
    solver.parameters.fix_variables_to_their_hinted_value = True
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 10
    assert solver.solve(ctx.model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    # the model scores the hint as the product scores the greedy plan
    assert solver.objective_value == pytest.approx(sum(ctx.objective.values(lambda v: values[v.index]).values())
                                                   * SCALE, rel=1e-12, abs=1e-6)
    _SEEN.update(ctx.objective.terms)


def test_the_instances_cover_the_terms() -> None:
    if len(_SEEN) == 0:
        pytest.skip("runs after the instances above")
    assert {"priority", "quota", "fairness", "aging", "preemption", "fragmentation", "topology.spread",
            "cost.compute", "cost.reclaim_risk", "deferral", "turnaround", "alignment"} <= _SEEN
