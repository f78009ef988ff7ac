"""`placement bench solvers`: a MIP solver's answer is only worth reporting if it reads back into a plan the
verifier accepts, in the same units as CP-SAT's on the same model."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from placement.api import parse
from placement.bench import mip, solvers
from placement.cli import main as cli_main

pytest.importorskip("highspy", reason="the dev extra installs highspy")

LIBRARY = Path(__file__).resolve().parents[2] / "instances" / "library"


def _smallest() -> Path:
    return min(LIBRARY.glob("*-S.json"), key=lambda p: p.stat().st_size)


def test_highs_solution_reads_back_verified_and_within_the_gap_of_cpsat() -> None:
    rows = solvers.run_instance(_smallest(), ["cpsat", "cpsat-export", "highs"], time_limit=2.0, threads=2)
    by = {r["solver"]: r for r in rows}
    highs, cpsat = by["highs"], by["cpsat-export"]
    assert highs["objective"] is not None and highs["verified"] is True, highs
    assert cpsat["verified"] is True and by["cpsat"]["verified"] is True
    # the decoded plan scores what the solver said (no second decoder drifting from the model)
    assert highs["objective"] == pytest.approx(highs["solver_objective"], rel=1e-9, abs=1e-6)  # optimal: no slack
    # same model, same units: each is within the other's reported gap
    gap = max(highs["gap"], cpsat["gap"])
    assert abs(highs["objective"] - cpsat["objective"]) <= gap * max(1.0, abs(highs["bound"])) + 1e-6
    assert highs["variables"] == cpsat["variables"]


def test_table_names_every_solver_row(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    assert solvers.main([str(_smallest()), "--time-limit", "1", "--solvers", "highs", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "| highs " in table and "verified" in table
    assert out.exists()


def test_bad_path_exits_2_with_an_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["bench", "solvers", "/no/such/instances", "--time-limit", "1"]) == 2
    err = capsys.readouterr().err
    assert any(line.startswith("error:") for line in err.splitlines()), err


def test_unknown_solver_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert solvers.main([str(_smallest()), "--solvers", "gurobi"]) == 2
    assert "error:" in capsys.readouterr().err


def _sleeps(path: Path, time_limit: float, threads: int, gap: float) -> mip.MipResult:
    time.sleep(30)
    return mip.MipResult("optimal")


def test_a_solver_past_its_limit_is_stopped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # SCIP once ran ten minutes on a 10 s limit: the guard stops a solver and the row says so
    monkeypatch.setitem(mip.SOLVE, "slow", _sleeps)
    monkeypatch.setattr(mip, "OVERRUN_FACTOR", 0.0)
    monkeypatch.setattr(mip, "OVERRUN_SLACK_S", 0.5)
    began = time.perf_counter()
    result = mip.solve_guarded("slow", Path("unused.mps"), 1.0, 1, 0.0)
    assert result.status == "overran" and result.values is None and "stopped" in (result.note or "")
    assert time.perf_counter() - began < 10
    exported = mip.export_mps(parse(json.loads(_smallest().read_text())), tmp_path)
    assert mip.solve_guarded("highs", exported.path, 5.0, 1, 0.0).status == "optimal"  # a result crosses back


def test_record_keeps_verified_plans_and_whole_request_bounds(tmp_path: Path) -> None:
    instance = tmp_path / "tiny-S.json"
    instance.write_text(_smallest().read_text())
    (tmp_path / "tiny-S.best.json").write_text(json.dumps({"objective": 1.0, "bound": None, "found_by": "old"}))
    rows = solvers.run_instance(instance, ["highs"], time_limit=5.0, threads=1)
    assert rows[0]["verified"] is True and rows[0]["restricted"] is False
    out = solvers.record(instance, rows, 5.0, 1)
    assert out is not None and out["objective"] == rows[0]["objective"] > 1.0
    assert out["bound"] == rows[0]["bound"] and out["found_by"].startswith("HiGHS on the exported model (highspy")
    refused = [{**rows[0], "verified": False, "objective": 1e12, "restricted": True, "bound": 1.0}]
    assert solvers.record(instance, refused, 5.0, 1) == out  # neither an unverified plan nor a trimmed bound
