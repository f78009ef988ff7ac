"""The call's budget: phases add up, the model's pairs come from the time left (or the limit alone), rounds stop
when they no longer fit."""

from __future__ import annotations

import time

from placement.budget import COMPILE_SHARE, MIN_SEARCH_SHARE, PAIRS_PER_S, ROUND_MARGIN, Budget, PairLimits


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


def test_pair_limits_cap_the_total_and_keep_a_floor_per_task() -> None:
    budget = Budget(2.0, deterministic=True)
    affordable = budget.pairs(0.5)
    assert budget.pair_limits(0.5, 10, cap=10**9, floor=12) == PairLimits(affordable, 12)
    assert budget.pair_limits(0.5, 10, cap=100, floor=12).total == 100
    assert budget.pair_limits(0.5, affordable, cap=10**9, floor=12).per_task == 1  # share below the floor
    assert Budget(1.0, start=time.perf_counter() - 5.0).pair_limits(0.1, 10, 100, 12) == PairLimits(0, 0)


def test_rounds_pay_only_with_the_mean_and_the_last_round_left_and_never_deterministic() -> None:
    budget = Budget(10.0)
    assert budget.round_pays(0.0, mean_s=1.0, last_s=1.0)
    assert not budget.round_pays(0.0, mean_s=1.0, last_s=ROUND_MARGIN * 10.0)  # the last round was long
    assert not budget.round_pays(0.0, mean_s=ROUND_MARGIN * 10.0, last_s=1.0)  # rounds were long on average
    assert not budget.round_pays(9.5, mean_s=1.0, last_s=1.0)  # decode and verify's share is kept
    assert not Budget(10.0, deterministic=True).round_pays(0.0, mean_s=0.0, last_s=0.0)


def test_a_search_pays_only_with_a_share_of_the_limit_left_after_its_compile() -> None:
    budget = Budget(2.0, deterministic=True, start=time.perf_counter() - 100.0)  # the limit alone decides
    pairs = int(PAIRS_PER_S * 0.5)  # half a second of compile
    assert budget.search_pays(0.5, pairs)  # 2 - 0.5 - 0.5 = 1 s left
    assert not budget.search_pays(1.5, pairs)  # nothing left
    assert not budget.search_pays(1.5 - MIN_SEARCH_SHARE * 2.0 + 0.01, pairs)  # just short of the share
    assert not Budget(1.0, start=time.perf_counter() - 5.0).search_pays(0.0, 0)  # wall clock: past the limit


def test_scoring_pays_while_the_greedy_pairs_compile_within_the_time_left_after_the_reserve() -> None:
    budget = Budget(1.0, deterministic=True)
    assert budget.scoring_pays(0.5, int(PAIRS_PER_S * 0.4))  # 1 - 0.5 - 0.4 ≥ 0
    assert not budget.scoring_pays(0.5, int(PAIRS_PER_S * 0.6))


def test_scoring_pays_with_what_runs_beside_its_compile_and_deterministic_mode_ignores_it() -> None:
    pairs = int(PAIRS_PER_S * 1.0)  # a second of compile
    late = Budget(3.0, start=time.perf_counter() - 1.0)  # 2 s left
    assert not late.scoring_pays(1.5, pairs)  # 1.5 + 1 s of compile, one after the other
    assert late.scoring_pays(1.5, pairs, overlap_s=0.75)  # 0.75 of the reserve runs beside the compile
    assert not late.scoring_pays(1.5, pairs * 3, overlap_s=0.75)  # a compile longer than what overlaps it
    assert not Budget(2.0, deterministic=True).scoring_pays(1.5, pairs, overlap_s=1.5)  # the limit alone


def test_phases_timed_elsewhere_merge_in_call_order_and_a_resumed_lap_skips_the_wait() -> None:
    budget = Budget(10.0)
    budget.lap("problem")
    budget.lap("decode")
    budget.merge({"compile": 0.5, "bound": 0.25})
    assert list(budget.phases) == ["problem", "compile", "bound", "decode"]
    time.sleep(0.05)  # waiting for the work beside
    budget.resume()
    assert budget.lap("verify") < 0.05
