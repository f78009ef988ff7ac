"""The house rules that keep the code a newcomer can hold: what installs, how big a module may grow,
what shipped text may point to, and the layers contract (docs/architecture.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The import name of each folder the design card fixes (a generic top-level name would collide).
FOLDERS = {"placement": "placement", "models": "placement_models", "service": "placement_service"}
#: Lines a module may have: a few hundred is the aim, this is the ceiling.
MAX_LINES = 600


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _packages_on_disk() -> set[str]:
    found = set()
    for folder, name in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join((name, *rel.parts)))
    return found


def test_every_package_on_disk_is_installed_under_its_own_name() -> None:
    tool = _pyproject()["tool"]["setuptools"]
    assert set(tool["packages"]) == _packages_on_disk()
    assert tool["package-dir"] == {"placement_models": "models", "placement_service": "service"}
    assert not {"models", "service"} & {p.split(".")[0] for p in tool["packages"]}


def test_the_card_folders_import_under_their_installed_names() -> None:
    import placement_models
    import placement_service

    assert Path(placement_models.__file__).parent == ROOT / "models"
    assert Path(placement_service.__file__).parent == ROOT / "service"


def _sources() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def test_no_module_is_too_big_to_hold() -> None:
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in _sources()}
    assert {path: n for path, n in sizes.items() if n > MAX_LINES} == {}


#: Files and notes outside this repository, and tracker numbers, mean nothing in a user's clone.
OUTSIDE = re.compile(r"\b(?:DESIGN|CPSAT|HARDWARE|PEERS)(?:\.md| §| lesson)|\.\./shared|shared/data|\bissues? #?\d+")


def test_what_ships_refers_only_to_what_ships() -> None:
    shipped = [*_sources(), ROOT / "README.md", ROOT / "pyproject.toml",
               *(ROOT / "docs").rglob("*.md"), *(ROOT / "instances").rglob("*.md"),
               *(ROOT / "placement" / "catalog").glob("*.json"), *(ROOT / "service").rglob("*.md")]
    hits = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in shipped if p.exists()
            for i, line in enumerate(p.read_text().splitlines(), 1) if OUTSIDE.search(line)]
    assert hits == []


def test_docs_name_only_modules_that_exist() -> None:
    """docs/architecture.md is where a newcomer looks a rule up: every `placement.x.y` it names must exist."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    names = set(re.findall(r"`(placement(?:_models|_service)?(?:\.[a-z_]+)+)", text))
    assert names, "the architecture doc names no module"
    missing = []
    for name in sorted(names):
        parts = name.split(".")
        folder = ROOT / {"placement": "placement", "placement_models": "models",
                         "placement_service": "service"}[parts[0]]
        base = folder.joinpath(*parts[1:])
        # a module, a package, or a name defined in one (placement.verify.check)
        if not (base.with_suffix(".py").exists() or (base / "__init__.py").exists()
                or base.parent.with_suffix(".py").exists() or (base.parent / "__init__.py").exists()):
            missing.append(name)
    assert missing == []


def test_the_layers_contract_holds() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    if not lint.exists():
        pytest.skip("import-linter is not installed (it comes with the dev extra)")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:]
