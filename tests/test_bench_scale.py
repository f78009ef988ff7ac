"""`placement bench scale`: one fresh process per run, rows with time and memory, the slope, exit codes.

Small clusters and a 1 s limit keep it fast; one bench run is shared by the tests that read its output.
"""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest

from placement.bench import scale

FIELDS = ("nodes", "seed", "gpus", "jobs", "whole_call_s", "time_limit_s", "over_limit_pct", "first_plan_s",
          "build_s", "wall_s", "status", "objective", "bound", "gap", "gap_pct", "baseline_objective",
          "gain_over_greedy_pct", "winner", "search", "restricted", "variables", "bound_kind", "peak_rss_mb",
          "verified", "greedy_gap_pct", "problem_s", "greedy_s", "compile_s", "search_s", "decode_s", "verify_s")


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("scale")
    out, png = tmp / "rows.json", tmp / "scale.png"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = scale.main(["--sizes", "8,16", "--time-limit", "1", "--json", str(out), "--plot", str(png)])
    return {"code": code, "doc": json.loads(out.read_text()), "out": printed.getvalue(), "png": png}


def test_every_row_is_measured_in_its_own_process_and_verified(bench: dict[str, Any]) -> None:
    assert bench["code"] == 0
    rows = bench["doc"]["rows"]
    assert [r["nodes"] for r in rows] == [8, 16]
    for r in rows:
        assert not r.get("error")
        assert set(FIELDS) <= set(r)
        assert r["whole_call_s"] > 0 and r["peak_rss_mb"] > 0
        assert r["verified"] is True and r["violations"] == []
        assert r["gpus"] == 8 * r["nodes"] and r["jobs"] == round(1.5 * r["nodes"])
        assert r["bound_kind"] in ("none", "model", "relaxation")
        assert sum(r["phases"].values()) <= r["whole_call_s"] + 1e-3
        assert r["rss_source"] in ("VmHWM", "ru_maxrss")


def test_the_table_and_the_slope_are_printed(bench: dict[str, Any]) -> None:
    out = bench["out"]
    assert "| nodes | seed | GPUs | jobs | whole call s |" in out
    assert "slope against nodes × jobs (2 sizes" in out and "per million node·jobs" in out
    fit = bench["doc"]["fit"]
    assert fit["sizes"] == 2 and fit["whole_call_s"]["exponent"] is not None
    assert fit["peak_rss_mb"]["per_million_node_jobs"] is not None


def test_the_plot_is_written_when_matplotlib_is_there(bench: dict[str, Any]) -> None:
    pytest.importorskip("matplotlib")
    assert bench["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("argv", "option"), [
    (["--sizes", "abc"], "--sizes"),
    (["--sizes", "0,8"], "--sizes"),
    (["--sizes", "8", "--time-limit", "0"], "--time-limit"),
    (["--sizes", "8", "--seeds", "x"], "--seeds"),
    (["--sizes", "8", "--changes", "0.1,2"], "--changes"),
    (["--sizes", "8", "--changes", "a"], "--changes"),
])
def test_bad_options_exit_2_naming_the_option(argv: list[str], option: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert scale.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and option in err


def test_a_child_killed_or_out_of_time_is_a_failed_row_not_a_crash(monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(scale, "CHILD_CODE", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert scale.main(["--sizes", "8", "--time-limit", "1"]) == 1
    out = capsys.readouterr().out
    assert "| failed " in out
    assert "killed by SIGKILL" in out
    assert "slope: needs at least 2 sizes" in out

    monkeypatch.setattr(scale, "CHILD_CODE", "import time; time.sleep(30)")
    monkeypatch.setattr(scale, "HARD_TIMEOUT_EXTRA_S", -2.8)  # 3 × 1 s − 2.8 s: killed after 0.2 s
    row = scale.run_one(8, 1.5, 1, 1.0, 1)
    assert "hard timeout" in row["error"]


def test_changes_are_planned_against_the_kept_state_after_the_full_call(capsys: pytest.CaptureFixture[str]) -> None:
    row = scale.run_one(16, 1.5, 1, 1.0, 1, changes=[0.05, 0.5])
    assert "error" not in row and row["verified"]
    assert [c["share"] for c in row["changes"]] == [0.05, 0.5]
    assert all(c["whole_call_s"] > 0 and c["status"] and "problem" in c["phases"] for c in row["changes"])
    table = scale.format_changes([row])
    assert "| change % |" in table and "|       50 |" in table
