"""`placement bench changes`: a change's bytes and read-and-check time against the whole request's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement.bench.changes import change_of, measure
from placement.cli import main as cli_main


def test_a_change_is_a_share_of_the_request_and_reads_as_the_request_it_stands_for() -> None:
    [row] = measure(64, 1.5, 1, [0.1], 1.0, solve=False)
    assert row["change_mb"] < row["request_mb"] / 3 and row["change_call_s"] is None
    data = {"jobs": [{"name": f"j{i}"} for i in range(100)],
            "cluster": {"nodes": [{"name": f"n{i}"} for i in range(50)]}}
    change = change_of(data, 0.1, "s", 1)
    assert len(change["jobs_removed"]) == len(change["jobs_put"]) == 10 and len(change["nodes_put"]) == 5


def test_the_command_prints_a_row_per_share_and_refuses_bad_shares(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.json"
    argv = ["bench", "changes", "--nodes", "32", "--shares", "0.01,0.1", "--no-solve", "--json", str(out)]
    assert cli_main(argv) == 0
    assert len(json.loads(out.read_text())) == 2 and "0.1 %" not in capsys.readouterr().out.split("\n")[0]
    assert cli_main(["bench", "changes", "--nodes", "32", "--shares", "2"]) == 2
    assert "error: --shares" in capsys.readouterr().err
