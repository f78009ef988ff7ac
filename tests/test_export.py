"""`placement export`: the CP-SAT model plan() solves, written as pb or pbtxt and loadable back, or as MPS/LP
that another solver (HiGHS here) reads and solves to the same optimum."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from ortools.linear_solver.python import model_builder
from ortools.sat import cp_model_pb2
from ortools.sat.python import cp_model

import placement.search
from placement.api import plan
from placement.cli import main as cli_main
from placement.export import ExportError, build_model, export, linear_model
from placement.generate import generate

highspy = pytest.importorskip("highspy", reason="the dev extra installs highspy to read MPS/LP back")

EXAMPLE = Path(__file__).resolve().parents[1] / "instances" / "example.json"
TOPOLOGY = Path(__file__).resolve().parents[1] / "instances" / "library" / "topology-S.json"


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
    with pytest.raises(ValueError, match="format must be one of"):
        export(_request(), tmp_path / "x", "json")  # type: ignore[arg-type]
    assert len(build_model(_request()).model.proto.variables) == out.variables


def test_cli_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "example.pb"
    assert cli_main(["export", str(EXAMPLE), "--format", "pb", "-o", str(target)]) == 0
    assert target.stat().st_size > 0 and "variables" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"cluster": {"nodes": []}}')
    assert cli_main(["export", str(bad), "-o", str(tmp_path / "bad.pb")]) == 2


def _cp_sat_optimum(proto: cp_model_pb2.CpModelProto) -> float:
    model = cp_model.CpModel()
    model.proto.parse_text_format(str(proto))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = 20
    solver.parameters.num_workers = 2
    assert solver.solve(model) == cp_model.OPTIMAL
    return solver.objective_value


def _highs_optimum(path: Path) -> float:
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", 0.0)  # the default stops 0.01 % short: the check below is exact
    h.setOptionValue("mip_abs_gap", 0.5)  # integer objective: within 0.5 is optimal
    h.setOptionValue("time_limit", 20.0)
    assert h.readModel(str(path)) == highspy.HighsStatus.kOk
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return h.getInfo().objective_function_value


def _proto(path: Path) -> cp_model_pb2.CpModelProto:
    proto = cp_model_pb2.CpModelProto()
    proto.ParseFromString(path.read_bytes())
    return proto


@pytest.mark.parametrize("request_file", [EXAMPLE, EXAMPLE.parent / "library" / "teams-S.json"])
def test_mps_and_lp_solve_to_cp_sat_s_optimum_in_highs(request_file: Path, tmp_path: Path) -> None:
    """The example has strict priority classes: objective coefficients with 13 digits, which OR-Tools' own
    MPS/LP writer rounds to 6 (a different problem, with another optimum). The files here are exact."""
    from placement.io import load_document

    req = load_document(request_file)
    mps = export(req, tmp_path / "m.mps")
    lp = export(req, tmp_path / "m.lp")
    export(req, tmp_path / "m.pb", hint=False)
    assert (mps.format, lp.format, mps.hinted) == ("mps", "lp", False)
    assert (tmp_path / "m.mps").read_text().count("\nROWS\n") == 1
    assert "\nSubject To\n" in (tmp_path / "m.lp").read_text()
    proto = _proto(tmp_path / "m.pb")
    assert mps.variables == len(proto.variables)
    best = _cp_sat_optimum(proto)
    assert _highs_optimum(tmp_path / "m.mps") == best
    assert _highs_optimum(tmp_path / "m.lp") == best
    # OR-Tools' own model builder reads the file back too, with the same shape
    back = model_builder.Model()
    assert back.import_from_mps_file(str(tmp_path / "m.mps"))
    assert back.num_variables == mps.variables and back.num_constraints == mps.constraints


def test_boolean_constraints_and_enforcement_become_exact_rows(tmp_path: Path) -> None:
    """Clauses, at-most-one, exactly-one, negated literals and enforcement literals (big-M from the bounds):
    the linear program has CP-SAT's optimum, and dropping the enforcement would change it."""
    m = cp_model.CpModel()
    b = [m.new_bool_var(f"b{i}") for i in range(6)]
    x = m.new_int_var(-4, 9, "x")
    y = m.new_int_var(0, 5, "y")
    m.add_bool_or([b[0], ~b[1], b[2]])
    m.add_bool_and([~b[3], b[4]]).only_enforce_if(b[5])
    m.add_at_most_one([b[0], b[1], ~b[2]])
    m.add_exactly_one([b[2], b[3], ~b[4]])
    m.add(x + 2 * y <= 3).only_enforce_if([b[0], ~b[3]])
    m.add(x - y >= 2).only_enforce_if(b[1])
    m.add_linear_constraint(x + y, 2, 11)
    m.maximize(3 * x + 2 * y + 5 * b[0] - 4 * b[1] + 7 * b[5] - b[3] + 11)
    m.export_to_file(str(tmp_path / "toy.pb"))
    proto = _proto(tmp_path / "toy.pb")
    assert any(len(c.enforcement_literal) for c in proto.constraints)
    model = linear_model(proto)
    from placement.export import write_lp, write_mps

    with (tmp_path / "toy.mps").open("w") as f:
        write_mps(model, f)
    with (tmp_path / "toy.lp").open("w") as f:
        write_lp(model, f)
    best = _cp_sat_optimum(proto)
    assert _highs_optimum(tmp_path / "toy.mps") == best == _highs_optimum(tmp_path / "toy.lp")
    loose = cp_model_pb2.CpModelProto()
    loose.CopyFrom(proto)
    for c in loose.constraints:
        del c.enforcement_literal[:]
    assert _cp_sat_optimum(loose) != best  # the check above could fail: enforcement matters in this model


def test_what_has_no_exact_linear_form_is_refused(tmp_path: Path) -> None:
    m = cp_model.CpModel()
    x = m.new_int_var(0, 5, "x")
    y = m.new_int_var(0, 5, "y")
    z = m.new_int_var(0, 25, "z")
    m.add_multiplication_equality(z, [x, y])
    m.export_to_file(str(tmp_path / "prod.pb"))
    with pytest.raises(ExportError, match="1 int_prod"):
        linear_model(_proto(tmp_path / "prod.pb"))
    holes = cp_model.CpModel()
    holes.new_int_var_from_domain(cp_model.Domain.from_values([1, 3, 5]), "odd")
    holes.export_to_file(str(tmp_path / "holes.pb"))
    with pytest.raises(ExportError, match=r"variable 0 \(odd\) has the domain \[1, 1\] ∪ \[3, 3\] ∪ \[5, 5\]"):
        linear_model(_proto(tmp_path / "holes.pb"))


def test_cli_export_mps_writes_mps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mask = os.umask(0o022)
    try:
        assert cli_main(["export", str(EXAMPLE), "-o", str(tmp_path / "model.mps")]) == 0
        assert cli_main(["export", str(EXAMPLE), "--format", "lp", "-o", str(tmp_path / "model.txt")]) == 0
    finally:
        os.umask(mask)
    text = (tmp_path / "model.mps").read_text()
    assert text.startswith("* placement export") and "\nENDATA\n" in text
    assert (tmp_path / "model.txt").read_text().rstrip().endswith("End")
    assert (tmp_path / "model.mps").stat().st_mode & 0o777 == 0o644  # not a temporary file's 0600
    err = capsys.readouterr().err
    assert "wrote" in err and "(mps)" in err and "no hint: MPS has none" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.mps", "model.txt"]  # no staging left behind


def test_cli_export_needs_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli_main(["export", str(EXAMPLE), "-o", "-"]) == 2
    assert "give -o a file name" in capsys.readouterr().err
    assert not Path("-").exists()


def _written(model: cp_model.CpModel, folder: Path) -> cp_model_pb2.CpModelProto:
    """The model as written to a file, without its hint (the search adds its own warm start to plan()'s)."""
    path = folder / f"m{len(list(folder.iterdir()))}.pb"
    assert model.export_to_file(str(path))
    proto = cp_model_pb2.CpModelProto()
    proto.ParseFromString(path.read_bytes())
    proto.ClearField("solution_hint")
    return proto


def test_the_exported_model_is_the_one_plan_solves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # topology-S: gangs that require or prefer one domain, slices, and jobs the screen drops before the model (an
    # export that indexed the request without plan()'s phases had 262 variables here, plan() 233).
    req: dict[str, Any] = json.loads(TOPOLOGY.read_text())
    req["policy"].update({"deterministic": True, "time_limit_s": 2, "workers": 1})
    solved: list[cp_model_pb2.CpModelProto] = []
    run = placement.search.run

    def capture(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        solved.append(_written(ctx.model, tmp_path))
        return run(ctx, *args, **kwargs)

    monkeypatch.setattr(placement.search, "run", capture)
    result = plan(req)
    monkeypatch.undo()
    exported = _written(build_model(req, hint=False).model, tmp_path)
    assert solved and result.pending  # one round, and some job waits (the screen has work to do)
    assert exported.SerializeToString(deterministic=True) == solved[0].SerializeToString(deterministic=True)
