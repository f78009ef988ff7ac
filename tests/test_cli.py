"""The `placement` command end to end: exit codes 0 / 1 / 2, files in and out, messages on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from placement_models import PlacementRequest, Plan

from placement import cli
from placement.cli import main
from placement.verify import verify

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "instances" / "example.json"


def _small_request() -> dict:
    return {
        "cluster": {"nodes": [{"name": f"n{i}", "gpus": 8, "gpu_model": "H100-SXM5-80GB", "cpu": 64,
                               "memory_gib": 512} for i in range(2)]},
        "jobs": [
            {"name": "big", "priority": 10, "tasks": [{"name": "w", "replicas": 2, "gpus": 8}]},
            {"name": "small", "tasks": [{"name": "w", "gpus": 1}]},
        ],
        "policy": {"time_limit_s": 5, "deterministic": True},
    }


def test_solve_example_writes_a_verified_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "plan.json"
    assert main(["solve", str(EXAMPLE), "-o", str(out), "--time-limit", "5", "--deterministic"]) == 0
    plan = Plan.model_validate_json(out.read_text())
    request = PlacementRequest.model_validate(json.loads(EXAMPLE.read_text()))
    assert verify(request, plan) == []
    placed = {a.job for a in plan.assignments}
    assert "llm-pretrain" in placed  # the priority-100 gang of the bundled example fits its cluster
    assert sum(1 for a in plan.assignments if a.job == "llm-pretrain") == 9
    err = capsys.readouterr().err
    assert "status" in err and "pending" in err and plan.solver.mode == "deterministic"


def test_solve_reads_yaml_and_prints_plan_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    req = tmp_path / "req.yaml"
    req.write_text(yaml.safe_dump(_small_request()))
    assert main(["solve", str(req)]) == 0
    plan = Plan.model_validate_json(capsys.readouterr().out)
    assert {a.job for a in plan.assignments} == {"big"}  # the 2×8 gang takes both nodes
    assert [p.job for p in plan.pending] == ["small"]


def test_invalid_request_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _small_request()
    data["cluster"]["nodes"][1]["gpu_model"] = "H300"
    data["jobs"][0]["min_available"] = 5
    req = tmp_path / "bad.json"
    req.write_text(json.dumps(data))
    assert main(["solve", str(req)]) == 2
    err = capsys.readouterr().err
    assert "jobs[0].min_available: 5 exceeds the job's 2 pods" in err


def test_unknown_gpu_model_exits_2_with_known_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _small_request()
    data["cluster"]["nodes"][1]["gpu_model"] = "H300"
    req = tmp_path / "bad.json"
    req.write_text(json.dumps(data))
    assert main(["solve", str(req)]) == 2
    err = capsys.readouterr().err
    assert "cluster.nodes[1].gpu_model: unknown GPU model 'H300'" in err and "H100-SXM5-80GB" in err


def test_missing_and_malformed_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", str(tmp_path / "nope.json")]) == 2
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert main(["solve", str(broken)]) == 2
    err = capsys.readouterr().err
    assert "not found" in err and "not valid JSON/YAML" in err


def test_verify_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    req = tmp_path / "req.json"
    req.write_text(json.dumps(_small_request()))
    plan_file = tmp_path / "plan.json"
    assert main(["solve", str(req), "-o", str(plan_file)]) == 0
    assert main(["verify", str(req), str(plan_file)]) == 0

    # hand-break the plan: give the second pod of the gang the first pod's GPUs on the same node
    plan = json.loads(plan_file.read_text())
    first, second = [a for a in plan["assignments"] if a["job"] == "big"]
    second["node"], second["gpus"] = first["node"], first["gpus"]
    plan_file.write_text(json.dumps(plan))
    capsys.readouterr()
    assert main(["verify", str(req), str(plan_file)]) == 1
    out = capsys.readouterr().out
    assert f"gpus: GPU {first['gpus'][0]} of node {first['node']} is given to both pod big/w/0 and pod big/w/1" in out

    plan_file.write_text(json.dumps({"status": "nonsense"}))
    assert main(["verify", str(req), str(plan_file)]) == 2


def test_generate_is_seeded(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    assert main(["generate", "--nodes", "16", "--jobs", "20", "--seed", "3", "-o", str(a)]) == 0
    assert main(["generate", "--nodes", "16", "--jobs", "20", "--seed", "3", "-o", str(b)]) == 0
    assert main(["generate", "--nodes", "16", "--jobs", "20", "--seed", "4", "-o", str(c)]) == 0
    assert a.read_text() == b.read_text() != c.read_text()
    PlacementRequest.model_validate(json.loads(a.read_text()))


def test_bench_over_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "one.json").write_text(json.dumps(_small_request()))
    rows = tmp_path / "rows.json"
    assert main(["bench", str(tmp_path), "--time-limit", "2", "--json", str(rows)]) == 0
    [row] = json.loads(rows.read_text())
    assert row["nodes"] == 2 and row["gpus_placed"] == 16 and row["greedy_gpus_placed"] == 16
    assert row["objective"] >= row["greedy_objective"]
    assert "variables" in capsys.readouterr().out


def test_bench_without_target_lists_the_benches(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--help"]) == 0
    out = capsys.readouterr().out
    for name in cli.NAMED_BENCHES:
        assert f"\n  {name} " in out
    assert main(["bench"]) == 2
    assert "usage: placement bench TARGET" in capsys.readouterr().err


@pytest.mark.parametrize("name", cli.NAMED_BENCHES)
def test_each_named_bench_reaches_its_own_parser(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["bench", name, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "usage:" in out and "target" not in out.split("\n")[0]  # not the instance bench's parser
