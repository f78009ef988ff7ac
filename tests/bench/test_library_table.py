"""The library's README table: status from the records, tags from the requests."""

from __future__ import annotations

import json
from pathlib import Path

from placement.bench import library, library_table

LIBRARY = Path(__file__).resolve().parents[2] / "instances" / "library"


def test_status_follows_the_gap() -> None:
    assert library_table.status({"objective": 10.0, "bound": 10.0}) == "optimal"
    assert library_table.status({"objective": 995.0, "bound": 1000.0}) == "best known"
    assert library_table.status({"objective": 500.0, "bound": 1000.0}) == "open"
    assert library_table.status({"objective": 500.0, "bound": None}) == "open"
    assert library_table.gap({"objective": 0.5, "bound": 0.6}) == 0.09999999999999998  # max(1, |bound|) below 1


def test_tags_name_the_structures() -> None:
    assert "preemption" in library_table.tags(library.instance("preempt", "S"))
    offpeak = library_table.tags(library.instance("offpeak", "S"))
    assert {"off-peak", "deferral", "reserve", "provisioning", "spot", "prices"} <= set(offpeak)
    assert "mig" in library_table.tags(library.instance("mig", "S"))


def test_table_has_a_row_per_stored_instance(tmp_path: Path) -> None:
    library.write(tmp_path, ["gangs"], ["S"], best=False)
    (tmp_path / "gangs-S.best.json").write_text(json.dumps({"objective": 1.0, "bound": 2.0, "workers": 2}))
    lines = library_table.markdown_table(tmp_path, ["gangs-S", "gangs-M"]).splitlines()
    assert len(lines) == 3 and "gangs-S" in lines[2] and "open" in lines[2]
    if (LIBRARY / "gangs-S.best.json").exists():
        rows = library_table.rows(LIBRARY, [f"{f}-{s}" for f, s in library.stored()])
        assert {r["status"] for r in rows} <= {"optimal", "best known", "open"}
