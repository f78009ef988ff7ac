"""Small commands answer at once: help loads no solver or validation stack, `verify` never loads OR-Tools.

Each case runs in a fresh interpreter (what a user's shell starts) and lists the heavy modules it ended
up importing; a module-level import added to a face shows up here as a name, not as a slow drift.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from placement.api import plan

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "instances" / "example.json"
HEAVY = ("ortools", "numpy", "networkx", "pandas", "pydantic", "placement_models", "yaml", "placement.api")


def _loaded(entry: str, argv: list[str]) -> tuple[str, list[str]]:
    """(stdout, heavy modules loaded) after `entry`'s main(argv) in a fresh interpreter."""
    module, _, function = entry.partition(":")
    code = (f"import sys\nfrom {module} import {function} as main\ntry:\n    main(sys.argv[1:])\n"
            f"except SystemExit:\n    pass\nheavy = {HEAVY!r}\n"
            "print('LOADED', sorted(m for m in heavy if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    text, _, loaded = out.rpartition("LOADED ")
    return text, eval(loaded)  # noqa: S307 - our own print of a list of names


@pytest.mark.parametrize("argv", [
    ["kube", "--help"], ["kube", "plan", "--help"], ["kube", "import", "--help"], ["kube", "export", "--help"],
    ["what-if", "--help"], ["usage", "--help"], ["usage", "report", "--help"], ["usage", "annotate", "--help"],
    ["sweep", "--help"], ["generate", "--help"], ["serve", "--help"],
])
def test_help_of_each_face_loads_nothing_heavy(argv: list[str]) -> None:
    text, loaded = _loaded("placement.cli:main", argv)
    assert "usage: placement" in text and loaded == [], (argv, loaded)


def test_kubectl_plugin_help_loads_nothing_heavy() -> None:
    text, loaded = _loaded("placement.kube.plugin:main", ["plan", "--help"])
    assert "usage: kubectl placement plan" in text and loaded == [], loaded


def test_verify_never_loads_the_solver(tmp_path: Path) -> None:
    request = json.loads(EXAMPLE.read_text())
    request["policy"] = {**request.get("policy", {}), "time_limit_s": 2, "deterministic": True}
    req = tmp_path / "req.json"
    req.write_text(json.dumps(request))
    out = tmp_path / "plan.json"
    out.write_text(plan(request).model_dump_json())
    _, loaded = _loaded("placement.cli:main", ["verify", str(req), str(out)])
    assert "ortools" not in loaded and "placement.api" not in loaded and "numpy" not in loaded, loaded


def _subparsers(ap: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: p for a in ap._actions if isinstance(a, argparse._SubParsersAction) for name, p in a.choices.items()}


def test_every_argument_has_help_and_every_default_shows() -> None:
    """argparse's own help for an option without text is its name alone: say what it does and what it defaults to."""
    from placement import cli, kube

    parsers = {f"placement {n}": p for n, p in _subparsers(cli.parser()).items() if n not in cli.DELEGATED}
    parsers.pop("placement bench")  # its own help text (cli.BENCH_HELP) lists the targets
    parsers |= {f"placement kube {n}": p for n, p in _subparsers(kube.parser()).items()}
    for name, p in parsers.items():
        for action in p._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, (name, action.dest)
            if action.option_strings and action.default not in (None, False, [], argparse.SUPPRESS):
                assert str(action.default) in p.format_help(), (name, action.dest)
