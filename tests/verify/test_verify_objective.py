"""The verifier recomputes every objective term: the mutation table over the bundled instances.

Each instance is planned once (deterministic, a short limit); every term the plan reports is then moved
by a small amount, up and down, with the total so the sum still adds up, and `placement.verify` must
reject the plan with a line naming that term. Terms the verifier derives only as bounds (`BOUNDED`,
each checker's docstring says why) are rejected when moved outside them, which the table records
without asking it of a small move.
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
INSTANCES = ["example.json", "library/gangs-S.json", "library/mig-S.json", "library/spot-S.json",
             "library/teams-S.json", "library/topology-S.json", "topology/nvl72.json", "whatif/request.json"]
#: Terms derived as bounds, or not at all, on some requests (see their checkers): a small move may stay inside.
#: fragmentation on nodes with MIG or shared GPUs; quota and fairness where teams run work (teams-S); the topology
#: terms where some node names no domain at some level (every bundled topology instance).
BOUNDED = {"cost.compute", "topology.spread", "topology.keep_whole", "topology.bandwidth", "preemption", "alignment",
           "fragmentation", "quota", "fairness"}
#: Of those, the terms not derived at all on some bundled instance.
UNDERIVED = {"topology.bandwidth", "topology.spread", "topology.keep_whole", "quota", "fairness"}

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
    assert [m for m in missed if m[0] not in BOUNDED] == []


@pytest.mark.parametrize("name", INSTANCES)
def test_bounded_terms_moved_far_are_rejected(name: str) -> None:
    request, p = planned(name)
    for term, value in p["objective"]["terms"].items():
        if term not in BOUNDED or term in UNDERIVED:
            continue
        lines = verify(request, moved(p, term, 1000.0 + abs(value)))  # every bounded term is at most 0
        assert any(f"term '{term}'" in line for line in lines)


def test_unknown_and_hidden_terms_are_rejected() -> None:
    request, p = planned("example.json")
    unknown = json.loads(json.dumps(p))
    unknown["objective"]["terms"]["bonus"] = 0.0
    assert any("term 'bonus' is not one" in line for line in verify(request, unknown))
    hidden = json.loads(json.dumps(p))
    value = hidden["objective"]["terms"].pop("priority")
    hidden["objective"]["total"] -= value
    assert any("term 'priority'" in line for line in verify(request, hidden))
