"""The objective's terms recomputed on another core (`placement.cores`, on big plans): the same report, in the
same rule order, as on one core."""

from __future__ import annotations

import importlib
import json

import pytest
from test_verify_objective import moved, planned

from placement import cores
from placement.verify import verify

verifier = importlib.import_module("placement.verify")  # the package (`placement.verify` is also its function)


@pytest.mark.skipif(not cores.available(), reason="no second core or no fork here")
def test_a_report_made_on_two_cores_is_the_report_made_on_one(monkeypatch: pytest.MonkeyPatch) -> None:
    request, plan = planned("example.json")
    term = next(iter(plan["objective"]["terms"]))
    wrong = moved(plan, term, 5.0)  # an objective violation, reported by the child
    wrong["assignments"][0]["gpus"] = [999]  # and a hard rule's, reported by the caller
    wrong = json.loads(json.dumps(wrong))

    monkeypatch.setattr(verifier, "BESIDE_PODS", 0)
    forked = verify(request, wrong)
    monkeypatch.setenv(cores.ENV, "1")
    alone = verify(request, wrong)
    assert forked == alone
    rules = [line.split(":", 1)[0] for line in forked]
    assert "objective" in rules and "gpus" in rules
    assert rules.index("gpus") < rules.index("objective")  # the report's rule order
    assert verify(request, plan) == []
