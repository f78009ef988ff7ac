"""The instance library: seeded families that validate and solve; the stored files match their recipe."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from placement_models import PlacementRequest

from placement.api import plan
from placement.bench import instances, library
from placement.verify import verify

LIBRARY = Path(__file__).resolve().parents[2] / "instances" / "library"


SEEDED = [f for f in library.FAMILIES if f not in library.TRACE_FAMILIES]


@pytest.mark.parametrize("family", library.FAMILIES)
def test_small_instance_validates_plans_and_verifies(family: str) -> None:
    if family in library.TRACE_FAMILIES:
        # the stored file is self-contained: solving it needs no trace data
        path = LIBRARY / library.file_name(family, "S")
        if not path.exists():
            pytest.skip(f"no stored {path}: python -m placement.bench.library --families {family} --data DIR writes it")
        req = json.loads(path.read_text())
    else:
        req = library.instance(family, "S")
        assert len(req["cluster"]["nodes"]) == library.SIZES["S"]
    req["policy"].update(time_limit_s=1.0, workers=1)
    model = PlacementRequest.model_validate(req)
    result = plan(model)
    assert verify(model, result) == []
    assert result.assignments  # every family has work that fits


def test_families_carry_their_concern() -> None:
    topo = library.instance("topology", "S")
    assert any(n.get("topology", {}).get("nvlink_domain") for n in topo["cluster"]["nodes"])
    assert any("topology" in j for j in topo["jobs"])
    mig = library.instance("mig", "S")
    assert any(n.get("mig") for n in mig["cluster"]["nodes"]) and mig["policy"]["allow_mig_changes"]
    assert any(t.get("mig_profile") for j in mig["jobs"] for t in j["tasks"])
    teams = library.instance("teams", "S")
    assert len(teams["teams"]) == 8 and all(j["team"] in library.HELIOS_VC_GPUS for j in teams["jobs"])
    spot = library.instance("spot", "M")
    assert {p["capacity_type"] for p in spot["cluster"]["pools"]} >= {"spot", "on-demand"}
    assert any(j.get("spot_ok") for j in spot["jobs"])


def test_instances_are_deterministic_and_sizes_known() -> None:
    assert library.instance("gangs", "M") == library.instance("gangs", "M")
    assert library.instance("gangs", "S") != library.instance("gangs", "M")
    for family in ("preempt", "offpeak"):
        assert library.dump(library.instance(family, "S")) == library.dump(library.instance(family, "S"))
    assert len(library.stored()) >= 30
    assert all(s in library.SIZES for sizes in library.FAMILY_SIZES.values() for s in sizes)
    with pytest.raises(ValueError, match="unknown family"):
        library.instance("nope", "S")
    with pytest.raises(ValueError, match="unknown size"):
        library.instance("gangs", "XXL")


def test_stored_library_matches_the_recipe_and_has_best_known() -> None:
    stored = sorted(LIBRARY.glob("*-?.json"))
    if not stored:
        pytest.skip(f"no stored library at {LIBRARY}: python -m placement.bench.library writes it")
    names = {p.name for p in [*stored, *LIBRARY.glob("*.json.gz")]}
    assert names == {library.file_name(f, s) for f, s in library.stored()}
    for path in stored:
        family, size = path.stem.split("-")
        data = json.loads(path.read_text())
        PlacementRequest.model_validate(data)
        best = json.loads(path.with_name(f"{path.stem}.best.json").read_text())
        assert {"objective", "bound", "time_s", "workers"} <= set(best)
        assert best["bound"] is None or best["bound"] >= best["objective"] - 1e-6
        if family in library.TRACE_FAMILIES:
            continue  # its recipe reads the trace: tests/bench/test_library_loop.py rebuilds it when the data is there
        # Same shape as the recipe (exact bytes may drift when placement.generate changes: then
        # `python -m placement.bench.library` rewrites the files and their best-known values).
        recipe = library.instance(family, size)
        assert len(data["cluster"]["nodes"]) == len(recipe["cluster"]["nodes"]) == library.SIZES[size], path
        assert len(data["jobs"]) == len(recipe["jobs"]), path
    # The bench reads NAME.best.json beside each file.
    assert instances._best_known(str(stored[0])) is not None


def test_new_records_say_who_found_them_and_how_big_the_model_is() -> None:
    newer = [LIBRARY / f"{f}-{s}.best.json" for f in ("loop", "preempt", "offpeak") for s in library.FAMILY_SIZES[f]]
    if not all(p.exists() for p in newer):
        pytest.skip("the loop, preempt and offpeak records are not all written yet")
    for path in newer:
        best = json.loads(path.read_text())
        assert best["found_by"] and best["variables"] > 0 and best["constraints"] > 0  # who: plan() or a solver
        assert best["bound_kind"] in ("model", "relaxation", "none"), path


def test_stored_xl_files_are_gzipped_requests_with_best_known() -> None:
    stored = sorted(LIBRARY.glob("*-XL.json.gz"))
    if not stored:
        pytest.skip(f"no stored XL files at {LIBRARY}: python -m placement.bench.library --sizes XL writes them")
    for path in stored:
        raw = path.read_bytes()
        assert raw[:4] == b"\x1f\x8b\x08\x00" and raw[4:8] == bytes(4), path  # no file name, mtime 0
        data = json.loads(gzip.decompress(raw))
        assert len(data["cluster"]["nodes"]) == library.SIZES["XL"], path
        best = instances._best_known(str(path))
        assert best is not None and {"objective", "bound", "time_s", "workers", "status"} <= set(best), path
        assert best["bound"] is None or best["bound"] >= best["objective"] - 1e-6


def test_stored_xl_file_is_what_the_recipe_writes(tmp_path: Path) -> None:
    family = "topology"  # the fastest XL family to generate (0.05 s here; the slowest, gangs, 0.3 s)
    stored = LIBRARY / library.file_name(family, "XL")
    if not stored.exists():
        pytest.skip(f"no {stored}: python -m placement.bench.library --sizes XL writes it")
    assert library.main(["--out", str(tmp_path), "--families", family, "--sizes", "XL", "--no-best"]) == 0
    fresh = tmp_path / stored.name
    assert gzip.decompress(fresh.read_bytes()) == gzip.decompress(stored.read_bytes())
    assert not (tmp_path / f"{family}-XL.best.json").exists()


def test_gzip_is_deterministic() -> None:
    data = library.dump(library.instance("gangs", "S"))
    a, b = library.gzipped(data), library.gzipped(data)
    assert a == b and gzip.decompress(a) == data
    assert a[3] == 0 and a[4:8] == bytes(4)  # FLG: no FNAME; MTIME 0
    assert library.file_name("gangs", "XL") == "gangs-XL.json.gz"
    assert library.file_name("gangs", "L") == "gangs-L.json"


def test_write_makes_files_without_the_long_solve(tmp_path: Path) -> None:
    written = library.write(tmp_path, ["gangs", "offpeak"], ["S", "XL"], best=False)
    assert [p.name for p in written] == ["gangs-S.json", "gangs-XL.json.gz", "offpeak-S.json"]  # no offpeak at XL
    assert not (tmp_path / "gangs-S.best.json").exists()
    assert library.main(["--out", str(tmp_path), "--families", "spot", "--sizes", "S", "--best-time-s", "0.5"]) == 0
    best = json.loads((tmp_path / "spot-S.best.json").read_text())
    assert best["workers"] == 2 and best["objective"] > 0


def test_a_record_keeps_the_better_plan_and_the_tighter_bound_with_their_provenance() -> None:
    old = {"objective": 10.0, "bound": None, "found_by": "long run", "time_s": 600.0}
    new = {"objective": 9.0, "bound": 12.0, "bound_kind": "relaxation", "found_by": "short run", "bound_by": "short",
           "time_s": 60.0}
    out = library.merged(old, new)
    assert (out["objective"], out["found_by"], out["time_s"]) == (10.0, "long run", 600.0)
    assert (out["bound"], out["bound_kind"], out["bound_by"], out["gap"]) == (12.0, "relaxation", "short", 0.166667)
    tighter = library.merged(out, {"objective": 11.0, "bound": 11.0, "bound_kind": "model", "found_by": "third"})
    assert (tighter["objective"], tighter["bound"], tighter["bound_by"], tighter["gap"]) == (11.0, 11.0, "third", 0.0)
    assert library.merged(None, new) == new
