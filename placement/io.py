"""Reading requests and plans from files (JSON or YAML) for the faces."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml


def load_document(path: str | Path) -> Any:
    """Parse a JSON or YAML file; YAML by suffix, else JSON with a YAML retry for extension-less files."""
    p = Path(path)
    text = p.read_text()
    if p.suffix.lower() in (".yaml", ".yml"):
        return yaml.safe_load(text)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        if p.suffix.lower() == ".json":
            raise
        return yaml.safe_load(text)


def emit(text: str, output: str | Path | None) -> None:
    """A face's document to the file named by -o, else to stdout (one trailing newline either way)."""
    text = text if text.endswith("\n") else text + "\n"
    if output:
        Path(output).write_text(text)
    else:
        sys.stdout.write(text)
