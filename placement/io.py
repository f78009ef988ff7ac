"""Reading requests and plans from files (JSON or YAML) for the faces."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import yaml


def load_document(path: str | Path) -> Any:
    """Parse a JSON or YAML file; YAML by suffix, else JSON with a YAML retry for extension-less files.

    A ``.gz`` file (``NAME.json.gz``, ``NAME.yaml.gz``) is decompressed first and parsed by the
    suffix before ``.gz``.
    """
    p = Path(path)
    if p.suffix.lower() == ".gz":
        text = gzip.decompress(p.read_bytes()).decode("utf-8")
        suffix = Path(p.stem).suffix.lower()
    else:
        text = p.read_text()
        suffix = p.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return yaml.safe_load(text)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        if suffix == ".json":
            raise
        return yaml.safe_load(text)


def emit(text: str, output: str | Path | None) -> None:
    """A face's document to the file named by -o, else to stdout (one trailing newline either way)."""
    text = text if text.endswith("\n") else text + "\n"
    if output:
        Path(output).write_text(text)
    else:
        sys.stdout.write(text)
