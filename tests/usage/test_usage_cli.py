"""`placement usage report|annotate` end to end: files in and out, exit codes, messages."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml
from placement_models import PlacementRequest
from test_usage_report import cluster_metrics, cluster_request

from placement.cli import main


def _files(tmp_path: Path) -> tuple[Path, Path]:
    req = tmp_path / "req.json"
    req.write_text(json.dumps(cluster_request()))
    return req, cluster_metrics(tmp_path / "m.csv")


def test_report_with_what_if_html_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    req, metrics = _files(tmp_path)
    md, page, plots = tmp_path / "r.md", tmp_path / "r.html", tmp_path / "plots"
    code = main(["usage", "report", str(metrics), "--request", str(req), "-o", str(md), "--html", str(page),
                 "--plots", str(plots), "--what-if", "--chunk-rows", "500"])
    assert code == 0
    err = capsys.readouterr().err
    assert "read 3,200 samples in 7 chunks" in err
    text = md.read_text()
    assert "## What-if: remove the 1 idle free cards" in text
    assert "Removed (marked out of service): n1/gpu1." in text
    assert "| jobs placed | 2 | 2 |" in text
    assert "Everything placed before is still placed." in text
    assert page.read_text().startswith("<!DOCTYPE html>")
    if importlib.util.find_spec("matplotlib") is None:
        assert "Plots skipped: matplotlib is not installed" in text and not plots.exists()
    else:
        assert "![SM utilisation per node over time](plots/heatmap_nodes.png)" in text


def test_report_to_stdout_without_a_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, metrics = _files(tmp_path)
    assert main(["usage", "report", str(metrics), "--idle-below", "50", "--max-rows", "0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# GPU utilisation report")
    assert "3 cards idle" in out  # under 50 %: serve's, the free one and nb's; inf (60 %) is not


def test_annotate_writes_a_valid_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    req, metrics = _files(tmp_path)
    out = tmp_path / "req2.yaml"
    assert main(["usage", "annotate", str(req), str(metrics), "-o", str(out)]) == 0
    assert "annotated 1 running and 2 pending jobs" in capsys.readouterr().err
    data = yaml.safe_load(out.read_text())
    request = PlacementRequest.model_validate(data)
    assert request.jobs[0].observed_gpu_memory_gib == 8.0 and request.jobs[0].observed_sm_util == 0.6
    assert request.cluster.running[0].observed_sm_util == 0.05
    assert list(data) == list(cluster_request())  # the caller's layout is kept


@pytest.mark.parametrize(("argv", "message"), [
    (["report", "{bad}"], "the header lacks SM utilisation"),
    (["report", "{metrics}", "--what-if"], "--what-if needs --request"),
    (["report", "{metrics}", "--idle-share", "2"], "idle-share must be in (0, 1]"),
    (["report", "{metrics}", "--request", "{badreq}"], "invalid request"),
    (["annotate", "{req}", "{tmp}/nope.csv", "-o", "{tmp}/x.json"], "metrics file not found"),
])
def test_bad_input_exits_2_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                          message: str) -> None:
    req, metrics = _files(tmp_path)
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,uuid,mem_used_gib\n1,g,1\n")
    badreq = tmp_path / "badreq.json"
    badreq.write_text(json.dumps({"cluster": {"nodes": []}}))
    names = {"bad": bad, "metrics": metrics, "req": req, "badreq": badreq, "tmp": tmp_path}
    assert main(["usage", *[a.format(**names) for a in argv]]) == 2
    assert message in capsys.readouterr().err
