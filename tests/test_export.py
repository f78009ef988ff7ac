"""`placement export`: the CP-SAT model plan() solves, written as pb or pbtxt and loadable back."""

from __future__ import annotations

from pathlib import Path

import pytest
from ortools.sat import cp_model_pb2
from ortools.sat.python import cp_model

from placement.api import plan
from placement.cli import main as cli_main
from placement.export import build_model, export
from placement.generate import generate

EXAMPLE = Path(__file__).resolve().parents[1] / "instances" / "example.json"


def _request() -> dict:
    req = generate(8, 12, seed=3)
    req["policy"] = {"time_limit_s": 2, "workers": 1, "seed": 0}
    return req


def test_pb_and_pbtxt_load_back_and_solve(tmp_path: Path) -> None:
    req = _request()
    pb = export(req, tmp_path / "m.pb")
    txt = export(req, tmp_path / "m.pbtxt")
    assert (pb.format, txt.format) == ("pb", "pbtxt") and pb.variables == txt.variables > 0
    proto = cp_model_pb2.CpModelProto()
    proto.ParseFromString((tmp_path / "m.pb").read_bytes())
    assert len(proto.variables) == pb.variables and len(proto.constraints) == pb.constraints
    assert len(proto.solution_hint.vars) > 0  # the greedy plan travels with the model
    model = cp_model.CpModel()
    model.proto.parse_text_format((tmp_path / "m.pbtxt").read_text())
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = 5
    solver.parameters.num_workers = 1
    assert solver.solve(model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    # The same model plan() solves: its objective (in GPU-equivalents x 1000) is at least the plan's.
    result = plan(req)
    assert solver.objective_value / 1000 >= result.objective.total - 1e-6 or solver.status_name() == "FEASIBLE"


def test_format_overrides_suffix_and_no_hint(tmp_path: Path) -> None:
    out = export(_request(), tmp_path / "model.bin", "pbtxt", hint=False)
    text = out.path.read_text()
    assert text.startswith("variables") and "solution_hint" not in text
    with pytest.raises(ValueError, match="format"):
        export(_request(), tmp_path / "x", "json")  # type: ignore[arg-type]
    assert len(build_model(_request()).model.proto.variables) == out.variables


def test_cli_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "example.pb"
    assert cli_main(["export", str(EXAMPLE), "--format", "pb", "-o", str(target)]) == 0
    assert target.stat().st_size > 0 and "variables" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"cluster": {"nodes": []}}')
    assert cli_main(["export", str(bad), "-o", str(tmp_path / "bad.pb")]) == 2
