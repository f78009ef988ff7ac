"""GPU facts as data: which models exist, how much memory each GPU has, and how MIG slices it.

Kept as JSON beside this module (gpus.json, mig.json) so that adding a model or a profile is a
data change, not a code path. Lookups accept the canonical name or any alias (case-insensitive),
because callers copy names from GPU Feature Discovery labels, cloud instance docs or their own
inventories; GFD's `-SHARED` and `-MIG-<profile>` product suffixes are dropped.

MIG facts (docs/hardware.md §1-2): a profile occupies `memory_slices` consecutive memory slices from
one of its legal `starts`; no two instances of a GPU share a slice; at most `max_count` instances
of a profile and at most one `media` instance (the `+me` profiles and the whole-GPU one, which own
the single OFA/JPEG set) per GPU. The compute-slice budget is implied by the memory-slice rule.
The solver, the greedy planner and the independent verifier all read these facts from here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from typing import Any

_GB = re.compile(r"\.(\d+(?:\.\d+)?)gb")
_GFD_SUFFIX = re.compile(r"(-MIG-.*|-SHARED)$", re.IGNORECASE)


@dataclass(frozen=True)
class MigProfile:
    """One GPU-instance profile of one GPU model, e.g. H100's 3g.40gb."""

    name: str
    kind: str  # the geometry's kind: "1g", "1g+me", "1g.2s", "2g", "3g", "4g", "7g", ...
    compute_slices: int
    memory_slices: int
    starts: tuple[int, ...]  # legal first memory slice
    max_count: int  # per GPU
    media: bool  # owns the GPU's single media engine set: at most one such instance per GPU
    memory_gib: float  # nominal, the number in the name
    nvml: str

    def slices(self, start: int) -> range:
        """The memory slices an instance at `start` occupies."""
        return range(start, start + self.memory_slices)


@dataclass(frozen=True)
class MigGeometry:
    """How one GPU model can be partitioned: its profiles, smallest first, and mig-parted templates."""

    model: str
    geometry: str  # "8-slice" or "4-slice"
    memory_slices: int
    compute_slices: int
    max_instances: int
    profiles: tuple[MigProfile, ...]
    status: str  # V verified placements, I inferred (docs/hardware.md status tags)
    templates: dict[str, dict[str, int]] = field(default_factory=dict)  # config -> profile name -> count
    aliases: dict[str, str] = field(default_factory=dict)  # other printed name -> profile name
    _names: dict[str, MigProfile] = field(default_factory=dict, compare=False, repr=False)  # exact-name index

    def profile(self, name: str) -> MigProfile | None:
        """The profile for a name, a driver alias, or a Kubernetes resource name (nvidia.com/mig-1g.10gb)."""
        exact = self._names.get(name)
        if exact is not None:
            return exact
        wanted = normalize_profile(name)
        wanted = self.aliases.get(wanted, wanted)
        return next((p for p in self.profiles if p.name == wanted), None)

    def smallest_fitting(self, memory_gib: float) -> MigProfile | None:
        """`mig_profile: auto`: the profile with the fewest slices whose memory suffices (no media variants)."""
        fitting = [p for p in self.profiles if p.memory_gib >= memory_gib - 1e-9 and "+" not in p.kind]
        return fitting[0] if fitting else None


@dataclass(frozen=True)
class GpuModel:
    name: str
    memory_gib: float
    mig: MigGeometry | None = None  # None: the model has no MIG


def normalize_profile(name: str) -> str:
    """Canonical spelling: lower case; `nvidia.com/mig-1g.10gb.me` (resource name) -> `1g.10gb+me`."""
    n = name.strip().lower()
    n = n.removeprefix("nvidia.com/").removeprefix("mig-")
    return n[: -len(".me")] + "+me" if n.endswith(".me") else n


def _geometry(model: str, facts: dict[str, Any], geometries: dict[str, Any]) -> MigGeometry:
    geo = geometries[facts["geometry"]]
    profiles = []
    for kind, name in facts["profiles"].items():
        k = geo["kinds"][kind]
        gb = _GB.search(name)
        if gb is None:
            raise ValueError(f"mig.json: profile name {name!r} of {model} carries no memory size")
        profiles.append(MigProfile(
            name=name, kind=kind, compute_slices=k["g"], memory_slices=k["mem_slices"], starts=tuple(k["starts"]),
            max_count=k["max"], media=k["media"], memory_gib=float(gb.group(1)), nvml=k["nvml"],
        ))
    profiles.sort(key=lambda p: (p.memory_slices, p.compute_slices, p.media, p.name))
    templates = {
        config: {facts["profiles"][kind]: count for kind, count in counts.items()}
        for config, counts in geo.get("templates", {}).items()
    }
    return MigGeometry(
        model=model, geometry=facts["geometry"], memory_slices=geo["memory_slices"],
        compute_slices=geo["compute_slices"], max_instances=geo["max_instances"], profiles=tuple(profiles),
        status=facts["status"], templates=templates,
        aliases={normalize_profile(a): n for a, n in facts.get("profile_aliases", {}).items()},
        _names={p.name: p for p in profiles},
    )


@cache
def _table() -> tuple[dict[str, GpuModel], dict[str, str]]:
    here = resources.files(__package__)
    raw = json.loads(here.joinpath("gpus.json").read_text())
    mig = json.loads(here.joinpath("mig.json").read_text())
    models: dict[str, GpuModel] = {}
    index: dict[str, str] = {}
    for name, facts in raw["models"].items():
        geometry = _geometry(name, mig["models"][name], mig["geometries"]) if name in mig["models"] else None
        models[name] = GpuModel(name=name, memory_gib=float(facts["memory_gib"]), mig=geometry)
        for alias in [name, *facts.get("aliases", [])]:
            index[alias.lower()] = name
    unknown = set(mig["models"]) - set(models)
    if unknown:
        raise ValueError(f"mig.json names models missing from gpus.json: {sorted(unknown)}")
    return models, index


def known_models() -> list[str]:
    return sorted(_table()[0])


def mig_models() -> list[str]:
    """Canonical names of the models that support MIG."""
    return sorted(name for name, m in _table()[0].items() if m.mig is not None)


#: Distinct names a process looks up are few (a cluster's models and their aliases); the bound only
#: keeps a long-running service safe from callers that make up names.
_LOOKUP_CACHE = 4096


@lru_cache(maxsize=_LOOKUP_CACHE)
def lookup(name: str) -> GpuModel | None:
    """The model for a canonical name or alias, or None when unknown.

    Cached (the catalog is static and models are frozen): the MIG greedy asked 7.2 M times per plan at
    1,024 nodes (mig-XL), and the strip, lower case and suffix regex cost 6.6 s of an 80 s profiled plan.
    """
    models, index = _table()
    key = name.strip().lower()
    canonical = index.get(key) or index.get(_GFD_SUFFIX.sub("", key))
    return models[canonical] if canonical else None


@lru_cache(maxsize=_LOOKUP_CACHE)
def mig_geometry(model_name: str | None) -> MigGeometry | None:
    """The MIG geometry of a model (any alias), or None when it has none or is unknown."""
    model = lookup(model_name) if model_name else None
    return model.mig if model else None


def profile_names() -> set[str]:
    """Every profile name and alias any MIG model knows: to tell a misspelt profile from an absent one."""
    names: set[str] = set()
    for m in _table()[0].values():
        if m.mig is not None:
            names.update(p.name for p in m.mig.profiles)
            names.update(m.mig.aliases)
    return names
