"""Windows (LNS) over the compiled model: valid, never worse than greedy, reproducible when asked."""

from __future__ import annotations

import pytest

from placement import plan
from placement.api import parse
from placement.generate import generate
from placement.search import lns
from placement.verify import verify


@pytest.fixture
def windows_always(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lns, "LNS_ABOVE", 0)
    monkeypatch.setattr(lns, "WINDOW_NODES", 16)
    monkeypatch.setattr(lns, "WINDOW_JOBS", 40)


def _request(seed: int) -> dict:
    data = generate(48, 160, seed)
    data["policy"] = {"time_limit_s": 2, "workers": 1, "seed": 7, "deterministic": True}
    return data


@pytest.mark.usefixtures("windows_always")
def test_windows_plan_verifies_and_is_never_below_greedy() -> None:
    data = _request(2)
    result = plan(data)
    assert result.solver.search == "windows"
    assert verify(parse(data), result) == []
    assert result.objective.total >= result.solver.baseline_objective - 1e-9
    assert result.status == "feasible"


@pytest.mark.usefixtures("windows_always")
def test_windows_are_reproducible_in_deterministic_mode() -> None:
    data = _request(3)
    a, b = plan(data), plan(data)
    assert a.assignments == b.assignments and a.pending == b.pending
    assert a.objective == b.objective


def test_node_groups_follow_racks() -> None:
    from placement import compile as compiler
    from placement import problem as problem_mod

    problem = problem_mod.build(parse(_request(1)))
    groups = lns.node_groups(compiler.build(problem))
    racks = [{problem.nodes[i].topology.rack for i in g.tolist()} for g in groups]
    assert all(len(r) == 1 for r in racks)
    assert sum(g.size for g in groups) == problem.n_nodes
