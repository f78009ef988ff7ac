"""Reading the openb CSVs: sorting, spec parsing, where the data folder is looked for, and what a miss says."""

from __future__ import annotations

from pathlib import Path

import pytest
from openb_helpers import node_row, pod_row, write_data

from placement.bench.openb.cli import main
from placement.bench.openb.trace import DataNotFound, list_traces, load_nodes, load_trace, resolve_data_dir


def test_loader_sorts_by_name_and_parses_spec(tmp_path: Path) -> None:
    data = write_data(
        tmp_path / "openb",
        [node_row("n-b", 64000, 2, "T4"), node_row("n-a", 32000, 8, "G2")],
        {"tiny": [pod_row("p-2", 1000, 1, 500, "T4|V100M32|T4"), pod_row("p-1", 2000, 0, 0)]},
    )
    nodes = load_nodes(data)
    assert nodes.names == ("n-a", "n-b")
    assert nodes.total_gpus == 10 and nodes.max_gpus == 8
    assert [nodes.models[m] for m in nodes.model] == ["G2", "T4"]
    trace = load_trace("tiny", data)
    assert [p.name for p in trace.pods] == ["p-1", "p-2"]
    assert trace.pods[1].spec == ("T4", "V100M32")  # deduplicated, as the gpuspec files repeat models
    assert trace.pods[1].is_share and not trace.pods[0].is_share
    assert trace.demand == 500


def test_data_dir_accepts_parent_folder_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_data(tmp_path / "openb", [node_row("n", 1000, 1)], {"default": [pod_row("p", 1, 1, 1000)]})
    assert resolve_data_dir(tmp_path) == tmp_path / "openb"
    monkeypatch.setenv("PLACEMENT_DATA", str(tmp_path))
    assert resolve_data_dir() == tmp_path / "openb"
    assert list_traces() == ["default"]


def test_missing_data_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(DataNotFound, match=str(missing)):
        resolve_data_dir(missing)
    write_data(tmp_path / "d", [node_row("n", 1000, 1)], {"default": [pod_row("p", 1, 1, 1000)]})
    with pytest.raises(DataNotFound, match="default"):  # lists the traces that do exist
        load_trace("cpu050", tmp_path / "d")


def test_main_reports_missing_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--data", str(tmp_path / "absent"), "--seeds", "1"]) == 2
    assert str(tmp_path / "absent") in capsys.readouterr().err
