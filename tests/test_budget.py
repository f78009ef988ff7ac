"""The call's budget: phases add up, the model's pairs come from the time left (or the limit alone)."""

from __future__ import annotations

import time

from placement.budget import COMPILE_SHARE, PAIRS_PER_S, Budget


def test_laps_add_up_to_the_time_used() -> None:
    budget = Budget(10.0)
    time.sleep(0.01)
    budget.lap("problem")
    time.sleep(0.01)
    budget.lap("greedy")
    budget.lap("greedy")  # a phase run twice adds up
    assert set(budget.phases) == {"problem", "greedy"}
    assert 0.0 < sum(budget.phases.values()) <= budget.used() + 1e-3


def test_deterministic_pairs_depend_on_the_limit_alone() -> None:
    budget = Budget(2.0, deterministic=True, start=time.perf_counter() - 100.0)  # long past its limit
    assert budget.pairs(0.5) == int(COMPILE_SHARE * 1.5 * PAIRS_PER_S)


def test_no_pairs_once_the_time_is_gone() -> None:
    budget = Budget(1.0, start=time.perf_counter() - 5.0)
    assert budget.left() < 0
    assert budget.pairs(0.1) == 0
    assert Budget(10.0).pairs(2.0) > 0
