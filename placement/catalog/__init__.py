"""GPU facts as data: which models exist and how much memory each GPU has.

Kept as JSON beside this module so that adding a model is a data change, not a code path.
Lookups accept the canonical name or any alias (case-insensitive), because callers copy names
from GPU Feature Discovery labels, cloud instance docs or their own inventories.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True)
class GpuModel:
    name: str
    memory_gib: float


@cache
def _table() -> tuple[dict[str, GpuModel], dict[str, str]]:
    raw = json.loads(resources.files(__package__).joinpath("gpus.json").read_text())
    models: dict[str, GpuModel] = {}
    index: dict[str, str] = {}
    for name, facts in raw["models"].items():
        models[name] = GpuModel(name=name, memory_gib=float(facts["memory_gib"]))
        for alias in [name, *facts.get("aliases", [])]:
            index[alias.lower()] = name
    return models, index


def known_models() -> list[str]:
    return sorted(_table()[0])


def lookup(name: str) -> GpuModel | None:
    """The model for a canonical name or alias, or None when unknown."""
    models, index = _table()
    canonical = index.get(name.strip().lower())
    return models[canonical] if canonical else None
