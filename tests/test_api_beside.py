"""With no time to search, the greedy plan is scored on another core while this one decodes it
(`placement.api._scored_beside`): the plan is the one the call gives on one core, whether the child ran, could not
start, or the machine has no second core."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import pytest
from placement_models import PlacementRequest, Plan

import placement
from placement import api, cores
from placement.generate import generate

needs_fork = pytest.mark.skipif(not cores.available(), reason="no second core or no fork here")


def _request(seed: int, urgent: bool) -> dict[str, Any]:
    """A generated request in deterministic mode; `urgent` queues a high class over a full cluster that may
    preempt (the warm start then extends the greedy plan: another placement comes back from the child)."""
    req = generate(32, 300, seed=seed) if urgent else generate(64, 150, seed=seed)
    for job in req["jobs"][::3] if urgent else []:
        job["priority"] = 9
    req["policy"] = {"time_limit_s": 1.0, "workers": 1, "deterministic": True, "preemption": urgent}
    return req


@pytest.fixture(autouse=True)
def _no_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every call here has time to score the greedy plan and none to search (whatever this machine's speed), at
    any size (the beside path is otherwise kept for big plans)."""
    monkeypatch.setattr(api, "_searches", lambda *_: False)
    monkeypatch.setattr(api, "BESIDE_TASKS", 0)


def _shown(plan: Plan) -> dict[str, Any]:
    """The plan without what the clock decides (seconds, and the note that cites them)."""
    out = plan.model_dump()
    out["solver"] = {k: v for k, v in out["solver"].items()
                     if k not in ("wall_s", "build_s", "first_plan_s", "phases", "note")}
    return out


def _no_fork(*_: object) -> int:
    raise OSError("no process slots")


def _in_the_child(monkeypatch: pytest.MonkeyPatch, first: Callable[[], object]) -> None:
    """The scoring search, in a forked child only, does `first` (dies, hangs) before its work."""
    parent = os.getpid()
    real = api.search.run

    def run(*args: Any, **kwargs: Any) -> Any:
        if os.getpid() != parent:
            first()
        return real(*args, **kwargs)

    monkeypatch.setattr(api.search, "run", run)


@needs_fork
@pytest.mark.parametrize(("seed", "urgent"), [(1, False), (2, False), (3, True), (4, True)])
def test_the_plan_scored_beside_is_the_plan_scored_on_one_core(monkeypatch: pytest.MonkeyPatch, seed: int,
                                                                 urgent: bool) -> None:
    req = _request(seed, urgent)
    beside = placement.plan(req)
    assert beside.solver.search == "none" and beside.objective.terms  # scored, not searched
    assert bool(beside.preemptions) == urgent
    assert "scored by a model of its own pairs" in (beside.solver.note or "")
    assert {"compile", "decode", "verify"} <= set(beside.solver.phases)
    assert placement.verify(PlacementRequest.model_validate(req), beside) == []

    with monkeypatch.context() as m:  # the fork fails: the caller scores after its draft
        m.setattr(cores.os, "fork", _no_fork)
        assert _shown(placement.plan(req)) == _shown(beside)
    monkeypatch.setenv(cores.ENV, "1")  # one core: the sequential path, draft and all in one go
    assert _shown(placement.plan(req)) == _shown(beside)


@needs_fork
def test_a_child_that_dies_leaves_the_same_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    req = _request(1, False)
    expected = _shown(placement.plan(req))
    _in_the_child(monkeypatch, lambda: os._exit(9))
    assert _shown(placement.plan(req)) == expected


@needs_fork
def test_a_late_child_leaves_the_greedy_plan_unscored_within_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wall-clock mode: a child not back by the time verify needs the rest of the limit is stopped, and the
    greedy plan goes out unscored (verified, every hard rule)."""
    req = _request(1, False)
    req["policy"] = {"time_limit_s": 0.3, "workers": 1}
    assert "scored by a model" in (placement.plan(req).solver.note or "")  # in time, it is scored
    _in_the_child(monkeypatch, lambda: time.sleep(60))
    plan = placement.plan(req)
    assert "not done in time for verify" in (plan.solver.note or "") and not plan.objective.terms
    assert plan.solver.wall_s < 5.0
    assert placement.verify(PlacementRequest.model_validate(req), plan) == []


@needs_fork
def test_a_stuck_child_in_deterministic_mode_is_replaced_by_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deterministic mode never trades the plan for the clock: past its (long) wait the caller scores the plan
    itself, the plan one core gives."""
    req = _request(2, False)
    req["policy"]["time_limit_s"] = 0.02
    monkeypatch.setenv(cores.ENV, "1")
    alone = _shown(placement.plan(req))
    assert alone["objective"]["terms"]  # scored
    monkeypatch.delenv(cores.ENV)
    monkeypatch.setattr(api, "DETERMINISTIC_WAIT_S", 0.3)
    _in_the_child(monkeypatch, lambda: time.sleep(60))
    began = time.monotonic()
    assert _shown(placement.plan(req)) == alone
    assert time.monotonic() - began < 10.0
