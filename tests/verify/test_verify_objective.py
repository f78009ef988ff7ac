"""The verifier recomputes every objective term: the mutation table over the bundled instances.

Each instance is planned once (deterministic, a short limit); every term the plan reports is then moved
by a small amount, up and down, with the total so the sum still adds up, and `placement.verify` must
reject the plan with a line naming that term. (Some checkers still derive a term as a range, or not at
all, on requests unlike these: their docstrings say where. On the bundled instances every term is pinned.)
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from placement import plan
from placement.verify import verify
from placement.verify.objective import TERMS

ROOT = Path(__file__).resolve().parents[2] / "instances"
INSTANCES = ["example.json", "topology/nvl72.json", "whatif/request.json",
             *(f"library/{family}-S.json" for family in ("gangs", "mig", "spot", "teams", "topology", "loop",
                                                          "preempt", "offpeak"))]
_PLANS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}


def _load(name: str) -> dict[str, Any]:
    path = ROOT / name
    if path.suffix == ".gz":
        with gzip.open(path, "rt") as f:
            return json.load(f)
    return json.loads(path.read_text())


def planned(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(request, plan) of an instance, planned once per session: deterministic, 2 s of deterministic time."""
    if name not in _PLANS:
        request = _load(name)
        request.setdefault("policy", {}).update({"time_limit_s": 2, "deterministic": True, "workers": 1})
        _PLANS[name] = request, plan(request).model_dump(mode="json")
    return _PLANS[name]


def moved(p: dict[str, Any], term: str, delta: float) -> dict[str, Any]:
    out = json.loads(json.dumps(p))
    out["objective"]["terms"][term] = out["objective"]["terms"][term] + delta
    out["objective"]["total"] = out["objective"]["total"] + delta
    return out


def small(value: float) -> float:
    """A small move: a tenth of a GPU-equivalent, plus 1e-8 of the term (1e9-sized strict priority terms)."""
    return 0.1 + 1e-8 * abs(value)


@pytest.mark.parametrize("name", INSTANCES)
def test_unmodified_plans_pass(name: str) -> None:
    request, p = planned(name)
    assert verify(request, p) == []


@pytest.mark.parametrize("name", INSTANCES)
def test_every_reported_term_moved_is_rejected_naming_it(name: str) -> None:
    request, p = planned(name)
    missed = []
    for term, value in p["objective"]["terms"].items():
        assert term in TERMS
        for sign in (1.0, -1.0):
            lines = verify(request, moved(p, term, sign * small(value)))
            named = [line for line in lines if f"term '{term}'" in line]
            if not named:
                missed.append((term, sign))
            else:
                assert all(line.startswith("objective: ") for line in named)
    assert missed == []


def test_unknown_and_hidden_terms_are_rejected() -> None:
    request, p = planned("example.json")
    unknown = json.loads(json.dumps(p))
    unknown["objective"]["terms"]["bonus"] = 0.0
    assert any("term 'bonus' is not one" in line for line in verify(request, unknown))
    hidden = json.loads(json.dumps(p))
    value = hidden["objective"]["terms"].pop("priority")
    hidden["objective"]["total"] -= value
    assert any("term 'priority'" in line for line in verify(request, hidden))
