"""Kueue admissions as Kueue writes them (conditions, pod set assignments, v1beta1 or v1beta2), and the
`kubectl placement` plugin reading `kubectl get -o json` from stdin or -f files.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from kube_helpers import FIXTURES, docs, load, reimport

from placement import plan
from placement.kube import export
from placement.kube.plugin import main as plugin_main
from placement.kube.plugin import to_kube_args


def _v1beta2(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for d in objects:
        if d["apiVersion"].startswith("kueue.x-k8s.io/"):
            d["apiVersion"] = "kueue.x-k8s.io/v1beta2"
    return objects


def test_kueue_export_has_quota_reserved_and_admitted_in_v1beta1() -> None:
    imported = reimport(docs("nvl72"))
    result = plan(imported.request)
    document, _ = export(imported.request, result, "kueue", imported.origins)
    (workload,) = document["items"]
    assert workload["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    conditions = {c["type"]: c for c in workload["status"]["conditions"]}
    assert set(conditions) == {"QuotaReserved", "Admitted"}
    assert all(c["status"] == "True" and c["lastTransitionTime"].endswith("Z") for c in conditions.values())
    assert "frontier" in conditions["QuotaReserved"]["message"]


def test_kueue_export_follows_a_v1beta2_input_with_compact_topology() -> None:
    imported = reimport(_v1beta2(docs("nvl72")))
    result = plan(imported.request)
    document, _ = export(imported.request, result, "kueue", imported.origins)
    (workload,) = document["items"]
    assert workload["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    (podset,) = workload["status"]["admission"]["podSetAssignments"]
    ta = podset["topologyAssignment"]
    (one,) = ta["slices"]
    assert ta["levels"] == ["kubernetes.io/hostname"] and sum(one["podCounts"]["individual"]) == 16
    assert one["domainCount"] == len(one["valuesPerLevel"][0]["individual"]["roots"])


def test_kueue_export_of_a_controller_job_names_its_workload_and_says_how() -> None:
    imported = load("kueue-upstream/nodes.yaml", "kueue-upstream/queues.yaml", "kueue-upstream/pytorchjob.yaml")
    result = plan(imported.request)
    document, notes = export(imported.request, result, "kueue", imported.origins)
    names = [w["metadata"]["name"] for w in document["items"]]
    assert names == ["pytorchjob-pytorch-simple"]
    (podsets,) = [w["status"]["admission"]["podSetAssignments"] for w in document["items"]]
    assert [(p["name"], p["count"]) for p in podsets] == [("master", 1), ("worker", 3)]
    assert document["items"][0]["status"]["admission"]["clusterQueue"] == "cluster-queue"
    assert any("pytorchjob-pytorch-simple" in n and "hash" in n for n in notes)
    assert any(n.startswith("not admitted: default/pi") for n in notes)


# --------------------------------------------------------------------------------------------
# kubectl placement


def test_plugin_arguments_follow_kubectl() -> None:
    assert to_kube_args(["plan", "-f", "a/", "--filename=b.json", "--format", "kueue"]) == [
        "plan", "a/", "b.json", "--format", "kueue"]
    assert to_kube_args(["import", "-o", "req.json"]) == ["import", "-", "-o", "req.json"]
    assert to_kube_args(["export", "req.json", "plan.json"]) == ["export", "req.json", "plan.json"]
    assert to_kube_args([]) == []


def test_plugin_plans_what_kubectl_get_prints_on_stdin(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture) -> None:
    items = docs("kai-quickstart")
    listing = {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(listing)))
    assert plugin_main(["plan", "--time-limit", "5", "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("plan ") and "default/gpu-pod" in out and "0 pending" in out


def test_plugin_reads_files_and_reports_errors_like_placement_kube(capsys: pytest.CaptureFixture) -> None:
    assert plugin_main(["import", "-f", str(FIXTURES / "device-plugin")]) == 0
    request = json.loads(capsys.readouterr().out)
    assert {j["name"] for j in request["jobs"]} >= {"default/time-slicing-verification"}
    assert plugin_main(["import", "-f", str(FIXTURES / "no-such-folder")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    assert plugin_main([]) == 0 and "usage: kubectl placement" in capsys.readouterr().out


def test_readme_kubernetes_section_commands_parse() -> None:
    """The README's Kubernetes examples are real: each `kubectl placement` line parses with the plugin's parser."""
    import re
    import shlex
    from pathlib import Path

    from placement.kube import parser

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme.split("\n## Kubernetes\n", 1)[1].split("\n## ", 1)[0]
    blocks = [b.replace("\\\n", " ") for b in re.findall(r"```bash\n(.*?)```", section, flags=re.S)]
    lines = [seg.strip() for b in blocks for line in b.splitlines() for seg in line.split("|")
             if seg.strip().startswith("kubectl placement")]
    assert len(lines) == 2
    for line in lines:
        words = shlex.split(line, comments=True)[2:]
        parser().parse_args(to_kube_args(words))
    assert "| Volcano HyperNode |" in section and "| KAI pods |" in section
