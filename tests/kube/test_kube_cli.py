"""`placement kube import|plan|export`: files in, files out, warnings and errors on stderr, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from kube_helpers import BLOCK, FIXTURES, RACK, docs
from placement_models import PlacementRequest, Plan

from placement.cli import main

LABELS = ["--rack-label", RACK, "--block-label", BLOCK]
SOURCES = [str(FIXTURES / "cluster"), str(FIXTURES / "volcano")]


def test_import_writes_a_valid_request_and_reports_warnings(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "request.json"
    assert main(["kube", "import", *SOURCES, *LABELS, "--price", "h100=4.0", "-o", str(out)]) == 0
    request = PlacementRequest.model_validate(json.loads(out.read_text()))
    assert [j.name for j in request.jobs] == ["research/llm-pretrain"]
    assert {p.name: p.gpu_hour_price for p in request.cluster.pools}["h100"] == 4.0
    err = capsys.readouterr().err
    assert "warning: Job (batch.volcano.sh) research/llm-pretrain" in err
    assert "imported 3 nodes, 2 running jobs, 1 pending job, 3 teams" in err


def test_import_then_solve_then_export_from_the_v1_request(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    request, plan = tmp_path / "request.json", tmp_path / "plan.json"
    assert main(["kube", "import", *SOURCES, *LABELS, "-o", str(request)]) == 0
    assert main(["solve", str(request), "-o", str(plan), "--time-limit", "5", "--deterministic"]) == 0
    capsys.readouterr()
    assert main(["kube", "export", str(request), str(plan), "--format", "table"]) == 0
    table = capsys.readouterr().out
    assert "pending   research/llm-pretrain" in table


def test_export_from_the_objects_keeps_their_names(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    plan = tmp_path / "plan.json"
    out = tmp_path / "bindings.yaml"
    objects = [str(FIXTURES / "cluster"), str(FIXTURES / "kai")]
    assert main(["kube", "plan", *objects, "--plan-out", str(plan), "--time-limit", "5", "-o",
                 str(tmp_path / "table.txt")]) == 0
    assert "ddp-resnet-master-0" in (tmp_path / "table.txt").read_text()
    Plan.model_validate(json.loads(plan.read_text()))
    # export's REQUEST may be the Kubernetes objects themselves (one folder or multi-document file)
    both = tmp_path / "objects.yaml"
    both.write_text("---\n".join(p.read_text() for f in objects for p in sorted(Path(f).glob("*.yaml")))
                    + "---\n" + yaml.safe_dump(json.loads((FIXTURES / "cluster" / "nodes.json").read_text())))
    assert main(["kube", "export", str(both), str(plan), "--format", "bindings", "-o", str(out)]) == 0
    names = {b["metadata"]["name"] for b in yaml.safe_load(out.read_text())["items"]}
    assert "ddp-resnet-worker-2" in names and "notebook-bo" in names


def test_plan_writes_kueue_admissions(tmp_path: Path) -> None:
    out = tmp_path / "admissions.json"
    assert main(["kube", "plan", str(FIXTURES / "nvl72"), "--format", "kueue", "-o", str(out), "--time-limit",
                 "5"]) == 0
    (workload,) = json.loads(out.read_text())["items"]
    assert workload["status"]["admission"]["podSetAssignments"][0]["count"] == 16


def test_bad_objects_exit_2_with_one_line_per_problem(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: lots, memory: 1Gi}}\n"
                   "---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: web}\n")
    assert main(["kube", "import", str(bad)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "error: cannot import the Kubernetes objects:"
    assert err[1].startswith("  DaemonSet default/web (bad.yaml #2): kind: unknown kind apps/v1 DaemonSet")
    assert err[2].startswith("  Node n1 (bad.yaml #1): status.allocatable.cpu: 'lots' is not a Kubernetes quantity")


def test_export_refuses_a_plan_of_another_request(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    request = tmp_path / "request.json"
    assert main(["kube", "import", *SOURCES, *LABELS, "-o", str(request)]) == 0
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"status": "feasible", "assignments": [
        {"job": "other/job", "task": "t", "pod": 0, "node": "n1"}]}))
    capsys.readouterr()
    assert main(["kube", "export", str(request), str(plan)]) == 2
    assert "places jobs the request does not have: other/job" in capsys.readouterr().err


def test_bad_price_option_exits_2(capsys: pytest.CaptureFixture) -> None:
    assert main(["kube", "import", *SOURCES, "--price", "h100"]) == 2
    assert "expected POOL=PRICE_PER_GPU_HOUR" in capsys.readouterr().err


def _bindings(path: Path) -> list[dict]:
    return [b for b in json.loads(path.read_text())["items"] if b["kind"] == "Binding"]


def test_import_solve_export_from_the_request_binds_the_real_pods(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    request, plan, out = tmp_path / "request.json", tmp_path / "plan.json", tmp_path / "bindings.json"
    assert main(["kube", "import", str(FIXTURES / "cluster"), str(FIXTURES / "kai"), "-o", str(request)]) == 0
    assert main(["solve", str(request), "-o", str(plan), "--time-limit", "5", "--deterministic"]) == 0
    capsys.readouterr()
    assert main(["kube", "export", str(request), str(plan), "--format", "bindings", "-o", str(out)]) == 0
    assert "synthetic" not in capsys.readouterr().err
    pods = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in docs("kai")
            if d["kind"] == "Pod" and not d["spec"].get("nodeName")}
    found = {(b["metadata"]["namespace"], b["metadata"]["name"]) for b in _bindings(out)}
    assert found == pods and ("team-a", "ddp-resnet-worker-2") in found
    assert not any("placement.dev/pod-name" in b["metadata"]["annotations"] for b in _bindings(out))


def test_export_from_a_request_without_pod_names_warns_of_synthetic_pods(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture) -> None:
    request, plan, out = tmp_path / "request.json", tmp_path / "plan.json", tmp_path / "bindings.json"
    assert main(["kube", "import", str(FIXTURES / "cluster"), str(FIXTURES / "kai"), "-o", str(request)]) == 0
    data = json.loads(request.read_text())
    for job in data["jobs"]:
        job.pop("namespace", None)
        for task in job["tasks"]:
            task.pop("pod_names", None)
    request.write_text(json.dumps(data))
    assert main(["solve", str(request), "-o", str(plan), "--time-limit", "5", "--deterministic"]) == 0
    capsys.readouterr()
    assert main(["kube", "export", str(request), str(plan), "--format", "bindings", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "name synthetic pods" in err and "pg-ddp-resnet-7f2c-master-0" in err
    assert all(b["metadata"]["annotations"]["placement.dev/pod-name"] == "derived" for b in _bindings(out))
