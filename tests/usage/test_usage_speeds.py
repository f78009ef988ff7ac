"""`placement usage speeds`: speed tables learned from logged run rates, and the plan stating their source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement.api import plan
from placement.cli import main as cli_main
from placement.usage.speeds import learn, read_runs

RUNS = """workload,gpu_model,throughput,gpus
resnet50,V100-SXM2-16GB,400,4
resnet50,V100-SXM2-16GB,440,4
resnet50,V100-SXM2-16GB,100,4
resnet50,K80,56,4
resnet50,Tesla-P100-PCIE-16GB,240,4
lm,K80,10,1
lm,V100-SXM2-16GB,40,1
rl,K80,3,1
"""


def _runs(tmp_path: Path, text: str = RUNS) -> Path:
    path = tmp_path / "runs.csv"
    path.write_text(text)
    return path


def test_speeds_are_median_per_gpu_rates_over_the_reference(tmp_path: Path) -> None:
    learned = learn(read_runs(_runs(tmp_path)), "V100-16GB")
    tables = {w["name"]: w["speeds"] for w in learned.workloads}
    # resnet50 on V100: median of 100, 110, 25 per GPU = 100 (the slow run does not set it)
    assert tables == {"lm": {"K80-12GB": 0.25, "V100-SXM2-16GB": 1.0},
                      "resnet50": {"K80-12GB": 0.14, "P100-SXM2-16GB": 0.6, "V100-SXM2-16GB": 1.0}}
    assert learned.skipped == ["rl"]  # never ran on the reference
    assert learned.workloads[1]["source"].startswith("observed: 5 runs on 3 models")


def test_the_default_reference_is_the_model_most_workloads_ran_on(tmp_path: Path) -> None:
    assert learn(read_runs(_runs(tmp_path))).reference == "K80-12GB"  # lm, resnet50, rl


def test_learned_speeds_feed_a_request_and_the_plan_names_their_source(tmp_path: Path) -> None:
    request = {"cluster": {"nodes": [{"name": "v", "gpus": 4, "cpu": 64, "memory_gib": 512,
                                      "gpu_model": "V100-SXM2-16GB"},
                                     {"name": "k", "gpus": 4, "cpu": 64, "memory_gib": 512, "gpu_model": "K80"}]},
               "workloads": [{"name": "lm", "speeds": {"K80": 0.9}}],
               "jobs": [{"name": "a", "workload": "lm", "tasks": [{"name": "w", "gpus": 4}]},
                        {"name": "b", "workload": "resnet50", "tasks": [{"name": "w", "gpus": 4}]},
                        {"name": "c", "speeds": {"K80": 0.5}, "tasks": [{"name": "w", "gpus": 4}]}]}
    req_path, out = tmp_path / "req.json", tmp_path / "out.json"
    req_path.write_text(json.dumps(request))
    code = cli_main(["usage", "speeds", str(_runs(tmp_path)), "--reference", "V100-16GB", "--request",
                     str(req_path), "-o", str(out)])
    assert code == 0
    learned = json.loads(out.read_text())
    assert [w["name"] for w in learned["workloads"]] == ["lm", "resnet50"]  # the declared lm replaced
    p = plan(learned)
    assert set(p.speed_sources) == {"lm", "resnet50", "(jobs' own speeds)"}
    assert p.speed_sources["lm"].startswith("observed: 2 runs") and p.speed_sources["(jobs' own speeds)"] == "declared"


@pytest.mark.parametrize(("text", "phrase"), [
    ("workload,gpu_model\nx,V100\n", "missing: throughput"),
    ("workload,gpu_model,throughput\nx,V1000,3\n", ":2: gpu_model: unknown GPU model"),
    ("workload,gpu_model,throughput\nx,V100,-3\n", ":2: throughput must be positive"),
    ("workload,gpu_model,throughput\nx,V100,fast\n", ":2: throughput and gpus must be numbers"),
    ("workload,gpu_model,throughput\n", "no runs"),
])
def test_bad_runs_exit_2_naming_the_row(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                        phrase: str) -> None:
    assert cli_main(["usage", "speeds", str(_runs(tmp_path, text))]) == 2
    assert phrase in capsys.readouterr().err


def test_a_reference_no_workload_ran_on_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["usage", "speeds", str(_runs(tmp_path)), "--reference", "H200"]) == 2
    assert "no workload ran on the reference model H200-141GB" in capsys.readouterr().err
