"""placement: a constraint-solver placement optimizer for GPU clusters.

`plan(request)` compiles the cluster and every pending job into one CP-SAT model and returns a
plan that an independent checker (`verify`) has passed. Both take plain dicts or models.
`greedy_plan(request)` is the greedy floor alone, decoded: what every solve starts from.

The public names are imported on first use, not with the package: `import placement.cli` (the
`placement` command) must not pay for OR-Tools, numpy and pydantic before it knows whether it
only has to print its help.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from placement_models import PlacementRequest, Plan

    from placement.api import greedy_plan, parse, plan
    from placement.whatif import what_if

#: public name -> the module that defines it
_LAZY = {"greedy_plan": "placement.api", "parse": "placement.api", "plan": "placement.api",
         "what_if": "placement.whatif"}

__all__ = ["greedy_plan", "parse", "plan", "verify", "what_if"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # once: later lookups do not come here
        return value
    raise AttributeError(f"module 'placement' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


def verify(request: PlacementRequest | dict[str, Any], plan: Plan | dict[str, Any]) -> list[str]:
    """All violations of `plan` against `request`, one string each; an empty list means valid.

    Plain dicts (as ``plan()`` takes) or models; a dict that is not a valid request or plan raises
    pydantic's ``ValidationError``, naming the fields. See :func:`placement.verify.verify`.
    """
    from placement.verify import verify as _verify

    return _verify(request, plan)


class _Package(types.ModuleType):
    """Keeps `placement.verify` the function above. Importing the subpackage `placement.verify` (the planner
    does, to check each plan) would otherwise rebind the package attribute to the subpackage, and
    `placement.verify(request, plan)` would stop being callable depending on what ran before."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "verify" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
