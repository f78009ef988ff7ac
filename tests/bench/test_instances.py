"""`placement bench DIR`: which files a folder contributes, gzipped requests, NAME.best.json beside each."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import yaml

from placement.bench import instances, library
from placement.cli import main as cli_main
from placement.io import load_document


def _tiny() -> dict:
    req = library.instance("gangs", "S")
    req["policy"].update(time_limit_s=0.5, workers=1)
    return req


def test_load_document_reads_gzipped_json_and_yaml(tmp_path: Path) -> None:
    req = _tiny()
    (tmp_path / "r.json.gz").write_bytes(library.gzipped(library.dump(req)))
    assert load_document(tmp_path / "r.json.gz") == req
    (tmp_path / "r.yaml.gz").write_bytes(library.gzipped(yaml.safe_dump(req).encode()))
    assert load_document(str(tmp_path / "r.yaml.gz")) == req
    (tmp_path / "bad.json.gz").write_bytes(library.gzipped(b"{not json"))
    with pytest.raises(json.JSONDecodeError):
        load_document(tmp_path / "bad.json.gz")


def test_discovery_lists_json_gz_and_pairs_it_with_its_best_json(tmp_path: Path) -> None:
    req = _tiny()
    (tmp_path / "a-S.json").write_text(json.dumps(req))
    (tmp_path / "a-S.best.json").write_text(json.dumps({"objective": 1.0, "bound": 2.0}))
    (tmp_path / "b-XL.json.gz").write_bytes(library.gzipped(library.dump(req)))
    (tmp_path / "b-XL.best.json").write_text(json.dumps({"objective": 3.0, "bound": None}))
    (tmp_path / "b-XL.plan.json").write_text(json.dumps({"assignments": []}))
    (tmp_path / "notes.txt.gz").write_bytes(library.gzipped(b"not a request"))
    found = dict(instances._instances(str(tmp_path), argparse.Namespace()))
    assert [Path(n).name for n in found] == ["a-S.json", "b-XL.json.gz"]
    assert found[str(tmp_path / "b-XL.json.gz")] == req
    assert instances._best_known(str(tmp_path / "b-XL.json.gz")) == {"objective": 3.0, "bound": None}
    assert instances._best_known(str(tmp_path / "a-S.json")) == {"objective": 1.0, "bound": 2.0}
    # A single .json.gz file is a target too, and its row carries the best-known values.
    out = tmp_path / "rows.json"
    target = str(tmp_path / "b-XL.json.gz")
    assert instances.main([target, "--time-limit", "0.5", "--workers", "1", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())
    assert row["instance"] == target and row["nodes"] == 16 and row["best_known"] == 3.0


def test_cli_solves_a_gzipped_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gz = tmp_path / "gangs-S.json.gz"
    gz.write_bytes(library.gzipped(library.dump(_tiny())))
    out = tmp_path / "plan.json"
    assert cli_main(["solve", str(gz), "-o", str(out), "--time-limit", "0.5", "--workers", "1"]) == 0
    assert json.loads(out.read_text())["assignments"]
    assert cli_main(["kube", "export", str(gz), str(out), "--format", "table"]) == 0  # a request, not objects
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(library.gzipped(b"{}")[:-12])  # truncated
    assert cli_main(["solve", str(broken)]) == 2
    assert "gzip file" in capsys.readouterr().err
