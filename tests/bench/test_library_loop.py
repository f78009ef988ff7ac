"""The loop family: a scheduler-loop state captured mid-replay of an ITP slice, stored self-contained.

Without the trace the recipe fails, naming --data and PLACEMENT_DATA; with it (PLACEMENT_DATA, or the data
folder beside the checkout) the recipe rebuilds the stored bytes. Solving the stored S file is in
tests/bench/test_library.py (it needs no data).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from placement_models import PlacementRequest

from placement.bench import library, library_loop
from placement.bench.cycles.traces import DataNotFound

LIBRARY = Path(__file__).resolve().parents[2] / "instances" / "library"


def _data() -> Path:
    env = os.environ.get("PLACEMENT_DATA")
    base = Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "data"
    if not (base / "itp" / "cluster04.csv").is_file():
        pytest.skip("ITP trace data not found: set PLACEMENT_DATA to the folder holding itp/ to rebuild loop instances")
    return base


def test_without_data_the_recipe_names_data_and_placement_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("PLACEMENT_DATA", raising=False)
    with pytest.raises(DataNotFound, match="--data DIR or set PLACEMENT_DATA"):
        library.instance("loop", "S")
    assert library.main(["--out", str(tmp_path), "--families", "loop", "--sizes", "S", "--no-best"]) == 2
    err = capsys.readouterr().err
    assert "--data" in err and "PLACEMENT_DATA" in err and "--families gangs," in err
    assert not (tmp_path / "loop-S.json").exists()
    with pytest.raises(DataNotFound, match="does not exist"):
        library.instance("loop", "S", data=tmp_path / "nowhere")


def test_loop_has_no_xl() -> None:
    with pytest.raises(ValueError, match="unknown size 'XL' for loop"):
        library.instance("loop", "XL", data="unused")


@pytest.mark.parametrize("size", list(library_loop.SPECS))
def test_stored_loop_instance_is_a_scheduler_call(size: str) -> None:
    path = LIBRARY / library.file_name("loop", size)
    if not path.exists():
        pytest.skip(f"no stored {path}")
    data = json.loads(path.read_text())
    req = PlacementRequest.model_validate(data)
    spec = library_loop.SPECS[size]
    assert len(req.cluster.nodes) == spec.nodes and len(req.jobs) >= spec.depth
    assert req.policy.now is not None and all(j.submitted_at is not None for j in req.jobs)
    assert all(r.started_at is not None for r in req.cluster.running)
    assert req.policy.preset == spec.preset
    if spec.preset == "bounded-wait":  # last cycle's reservation, for a job that still waits
        held = [r.job for r in req.policy.previous_plan.reservations]
        assert held and set(held) <= {j.name for j in req.jobs}


@pytest.mark.parametrize("size", ["S", "M"])
def test_recipe_rebuilds_the_stored_bytes(size: str) -> None:
    data = _data()
    path = LIBRARY / library.file_name("loop", size)
    if not path.exists():
        pytest.skip(f"no stored {path}")
    assert library.dump(library.instance("loop", size, data)) == path.read_bytes()


def test_capture_refuses_a_slice_that_never_queues_deep_enough() -> None:
    data = _data()
    spec = library_loop.LoopSpec("itp:cluster04:6000-6099", nodes=64, depth=10_000, warm_h=1.0)
    with pytest.raises(ValueError, match="never queues 10000 jobs with 16 GPUs free"):
        library_loop.capture(spec, data)
