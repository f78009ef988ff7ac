"""The peer schedulers of ``placement bench cycles``: hand-made cluster states, one per rule each peer claims,
and every decision checked the way the simulator checks it."""

from __future__ import annotations

import random

import numpy as np
import pytest

from placement.bench.cycles.peers import EasyBackfill, KueueLike, StrictFifo, TiresiasLike, VolcanoLike
from placement.bench.cycles.peers_common import best_fit
from placement.bench.cycles.sim import check_decision
from placement.bench.cycles.state import Decision, Running, TraceJob, pods_of

H = 3600.0
G = 8  # GPUs per node in every state here


def job(name, gpus, submit=0.0, estimate=None, priority=0, team=None, attained=0.0, done=0.0):
    return TraceJob(name=name, submit_s=submit, duration_s=10 * H, gpus=gpus, estimate_s=estimate,
                    priority=priority, team=team, attained_gpu_s=attained, done_s=done)


def run(j, nodes, start=0.0):
    return Running(job=j, start_s=start, nodes=dict(nodes))


def free_of(nodes, running):
    free = np.full(nodes, G, dtype=np.int64)
    for r in running:
        for n, g in r.nodes.items():
            free[n] -= g
    return free


def decide(policy, queue, running, nodes, now=0.0):
    """The policy's decision on a read-only ``free`` (so modifying it raises), checked as the simulator does."""
    free = free_of(nodes, running)
    view = free.copy()
    view.flags.writeable = False
    d = policy.cycle(now, list(queue), list(running), view, G)
    wrong = check_decision(d, {j.name: j for j in queue}, {r.job.name: r for r in running}, free,
                           np.ones(nodes, dtype=bool), G)
    assert wrong is None, wrong
    assert np.array_equal(view, free)
    return d


def started(d: Decision) -> dict[str, dict[int, int]]:
    return {j.name: nodes for j, nodes in d.starts}


# -- placement --------------------------------------------------------------------------------------


def test_best_fit_keeps_whole_nodes_free():
    free = np.array([8, 4, 8, 6])
    assert best_fit(free, 4, G) == {1: 4}  # the 4 free GPUs of node 1, not half of a whole node
    assert best_fit(free, 6, G) == {3: 6}
    assert best_fit(free, 16, G) == {0: 8, 2: 8}
    assert best_fit(free, 12, G) == {3: 6, 0: 6}  # 2 pods of 6, fewest free first
    assert best_fit(free, 24, G) is None
    assert np.array_equal(free, [8, 4, 8, 6])
    # pods of one gang share a node: 44 GPUs are 11 pods of 4, two per whole node
    free = np.array([8, 8, 8, 8, 8, 4])
    assert pods_of(44, G) == [4] * 11
    assert best_fit(free, 44, G) == {5: 4, 0: 8, 1: 8, 2: 8, 3: 8, 4: 8}
    assert best_fit(np.array([3, 3, 3]), 4, G) is None  # 4 GPUs free in all, but no node holds the pod


# -- FIFO and Volcano -------------------------------------------------------------------------------


def blocked_state():
    """Node 0 is half used, node 1 full: a 16-GPU gang cannot start, 4-GPU jobs can."""
    running = [run(job("r0", 4), {0: 4}), run(job("r1", 8), {1: 8})]
    queue = [job("small1", 2, submit=1), job("big", 16, submit=2), job("small2", 2, submit=3)]
    return queue, running


def test_fifo_blocks_behind_the_head():
    queue, running = blocked_state()
    d = decide(StrictFifo(), queue, running, 2)
    assert started(d) == {"small1": {0: 2}}
    assert d.preempt == []


def test_volcano_starts_later_gangs_past_a_blocked_one():
    queue, running = blocked_state()
    d = decide(VolcanoLike(), queue, running, 2)
    assert started(d) == {"small1": {0: 2}, "small2": {0: 2}}


def test_volcano_higher_priority_first_and_all_or_nothing():
    queue = [job("low", 8, submit=1), job("high", 8, submit=2, priority=5)]
    d = decide(VolcanoLike(), queue, [], 1)
    assert started(d) == {"high": {0: 8}}
    # a 16-GPU gang gets nothing when only one node is free: no partial gang
    running = [run(job("r", 8), {0: 8})]
    assert started(decide(VolcanoLike(), [job("gang", 16)], running, 2)) == {}


def test_volcano_binpack_keeps_a_whole_node_for_a_later_gang():
    running = [run(job("r", 4), {1: 4})]
    queue = [job("a", 4, submit=1), job("gang", 8, submit=2)]
    d = decide(VolcanoLike(), queue, running, 2)
    assert started(d) == {"a": {1: 4}, "gang": {0: 8}}  # "a" fills node 1, so node 0 stays whole


# -- EASY backfill ----------------------------------------------------------------------------------


def easy_state():
    """3 nodes; r holds nodes 1 and 2 until t=100 (estimated), node 0 is free; the 16-GPU head must wait
    for r: shadow time 100, reserved on nodes 1 and 2, so node 0 is extra capacity."""
    running = [run(job("r", 16, estimate=100.0), {1: 8, 2: 8})]
    return running


def test_easy_backfills_a_short_job_and_refuses_a_long_one_that_would_delay_the_head():
    # r holds nodes 0 and 1 until t=100, node 2 is free; the 24-GPU head needs all three at t=100
    running = [run(job("r", 16, estimate=100.0), {0: 8, 1: 8})]
    queue = [job("head", 24, submit=1, estimate=H), job("long", 8, submit=2, estimate=1000.0),
             job("noest", 8, submit=3), job("short", 8, submit=4, estimate=50.0)]
    d = decide(EasyBackfill(), queue, running, 3, now=10.0)
    assert started(d) == {"short": {2: 8}}  # ends at 60 ≤ 100; "long" and "noest" would hold node 2


def test_easy_backfills_long_jobs_into_the_extra_capacity():
    queue = [job("head", 16, submit=1, estimate=H), job("noest", 4, submit=2), job("long", 4, submit=3,
             estimate=1000.0), job("more", 4, submit=4, estimate=1000.0)]
    d = decide(EasyBackfill(), queue, easy_state(), 3, now=10.0)
    assert started(d) == {"noest": {0: 4}, "long": {0: 4}}  # node 0 is not needed by the head at t=100
    assert "more" not in started(d)


def test_easy_uses_estimates_never_durations_and_treats_overdue_jobs_as_ending_soon():
    # r's estimate has passed (it started at 0 with estimate 5): assumed to end one cycle from now (160),
    # although it truly runs for 10 h; the 24-GPU head is reserved all three nodes then
    running = [run(job("r", 16, estimate=5.0), {1: 8, 2: 8})]
    queue = [job("head", 24, submit=1, estimate=H), job("long", 8, submit=2, estimate=1000.0),
             job("short", 8, submit=3, estimate=30.0)]
    policy = EasyBackfill(overdue_s=60.0)
    assert policy.end_of(running[0].job, 0.0, 100.0) == 160.0
    d = decide(policy, queue, running, 3, now=100.0)
    assert started(d) == {"short": {0: 8}}  # ends at 130 ≤ 160; "long" would delay the head


def test_easy_starts_from_the_head_while_jobs_fit_and_counts_them_in_the_shadow_time():
    # "first" starts now on node 0 until 200; r frees node 1 at 100: the 24-GPU head needs both, so the
    # shadow time is 200 and "mid" (ends 150) backfills node 2, "late" (ends 300) does not
    running = [run(job("r", 8, estimate=100.0), {1: 8})]
    queue = [job("first", 8, submit=1, estimate=200.0), job("head", 24, submit=2, estimate=H),
             job("late", 8, submit=3, estimate=300.0), job("mid", 8, submit=4, estimate=150.0)]
    d = decide(EasyBackfill(), queue, running, 3, now=0.0)
    assert started(d) == {"first": {0: 8}, "mid": {2: 8}}


def test_easy_reserves_the_nodes_busy_now_and_passes_over_a_head_that_can_never_fit():
    # 4 nodes: r (node 1) ends at 100, r2 (node 2) in an hour; "first" takes node 0. The 16-GPU head
    # fits at 100 on nodes 1 and 3: node 3 is free now but reserved, so only a job ending by 100 uses it
    running = [run(job("r", 8, estimate=100.0), {1: 8}), run(job("r2", 8, estimate=H), {2: 8})]
    queue = [job("first", 8, submit=1, estimate=200.0), job("head", 16, submit=2, estimate=H),
             job("mid", 8, submit=3, estimate=150.0), job("short", 8, submit=4, estimate=50.0)]
    d = decide(EasyBackfill(), queue, running, 4, now=0.0)
    assert started(d) == {"first": {0: 8}, "short": {3: 8}}
    # a 40-GPU job on 4 nodes never fits: no reservation, the jobs behind it start as they fit
    queue = [job("never", 40, submit=1, estimate=H), job("long", 8, submit=2, estimate=10 * H)]
    assert started(decide(EasyBackfill(), queue, running, 4)) == {"long": {0: 8}}


# -- Kueue ------------------------------------------------------------------------------------------


def test_kueue_admits_within_nominal_before_borrowing():
    # team a already uses its 8 GPUs; a1 (earlier) would borrow b's, b1 fits b's own nominal: b1 first
    running = [run(job("ra", 8, team="a"), {0: 8})]
    queue = [job("a1", 8, submit=1, team="a"), job("b1", 8, submit=2, team="b")]
    d = decide(KueueLike({"a": 8, "b": 8}), queue, running, 2)
    assert started(d) == {"b1": {1: 8}}
    assert started(decide(VolcanoLike(), queue, running, 2)) == {"a1": {1: 8}}  # arrival order instead


def test_kueue_borrows_unused_nominal_of_the_cohort():
    queue = [job("a1", 8, submit=1, team="a"), job("a2", 8, submit=2, team="a")]
    d = decide(KueueLike({"a": 8, "b": 8}), queue, [], 2)
    assert set(started(d)) == {"a1", "a2"}  # a2 borrows b's idle 8 GPUs
    # no cohort quota left: nothing is admitted even though node 2 is free
    running = [run(job("r", 16, team="b"), {0: 8, 1: 8})]
    d = decide(KueueLike({"a": 8, "b": 8}), [job("a3", 8, team="a")], running, 3)
    assert started(d) == {}


def test_kueue_best_effort_fifo_skips_what_does_not_fit():
    # quota: a1 needs 16 of the 8 GPUs left in the cohort; a2 behind it fits
    running = [run(job("rb", 8, team="b"), {1: 8})]
    queue = [job("a1", 16, submit=1, team="a"), job("a2", 8, submit=2, team="a")]
    d = decide(KueueLike({"a": 8, "b": 8}), queue, running, 3)
    assert started(d) == {"a2": {0: 8}}
    # nodes: one team owning the cluster (quota 24, 8 used), the 16-GPU gang has quota but finds one
    # whole node only; the 8 behind it starts
    queue = [job("big", 16, submit=1), job("small", 8, submit=2)]
    d = decide(KueueLike(), queue, [run(job("r1", 4), {1: 4}), run(job("r2", 4), {2: 4})], 3)
    assert started(d) == {"small": {0: 8}}


def test_kueue_splits_the_cluster_evenly_among_teams_seen():
    policy = KueueLike()
    queue = [job("a1", 8, team="a"), job("b1", 8, team="b"), job("c1", 8, team="c")]
    decide(policy, queue, [], 2)
    assert policy.quotas(16) == {"a": 6, "b": 5, "c": 5}
    assert sum(policy.quotas(16).values()) == 16


def test_kueue_takes_a_head_from_every_team_each_round():
    # team a has three waiting jobs ahead of b's one; b's is admitted alongside a's first
    queue = [job("a1", 8, submit=1, team="a"), job("a2", 8, submit=2, team="a"),
             job("a3", 8, submit=3, team="a"), job("b1", 8, submit=4, team="b")]
    d = decide(KueueLike({"a": 8, "b": 8}), queue, [], 2)
    assert set(started(d)) == {"a1", "b1"}


# -- Tiresias ---------------------------------------------------------------------------------------


def test_tiresias_preempts_a_job_with_large_attained_service_for_a_fresh_one():
    old = job("old", 8, submit=0, attained=8 * 10 * H)
    fresh = job("fresh", 8, submit=5 * H)
    policy = TiresiasLike()
    assert policy.every_cycle is True
    assert (policy.queue_of(old), policy.queue_of(fresh)) == (1, 0)
    d = decide(policy, [fresh], [run(old, {0: 8}, start=0.0)], 1, now=10 * H)
    assert d.preempt == ["old"]
    assert started(d) == {"fresh": {0: 8}}
    # with room for both, nothing is preempted
    d = decide(policy, [fresh], [run(old, {0: 8}, start=0.0)], 2, now=10 * H)
    assert d.preempt == [] and started(d) == {"fresh": {1: 8}}


def test_tiresias_respects_the_minimum_lease():
    old = job("old", 8, submit=0, attained=8 * 10 * H)
    fresh = job("fresh", 8, submit=5 * H)
    d = decide(TiresiasLike(min_lease_s=600.0), [fresh], [run(old, {0: 8}, start=10 * H - 300)], 1, now=10 * H)
    assert d.preempt == [] and d.starts == []
    d = decide(TiresiasLike(min_lease_s=600.0), [fresh], [run(old, {0: 8}, start=10 * H - 600)], 1, now=10 * H)
    assert d.preempt == ["old"]


def test_tiresias_preempts_as_few_as_needed_lowest_ranked_first_and_never_within_a_queue():
    a = job("a", 8, submit=0, attained=8 * 5 * H)
    b = job("b", 8, submit=1, attained=8 * 5 * H)
    running = [run(a, {0: 8}), run(b, {1: 8})]
    d = decide(TiresiasLike(), [job("fresh", 8, submit=2 * H)], running, 2, now=10 * H)
    assert d.preempt == ["b"]  # same queue: the later arrival ranks lower
    assert started(d) == {"fresh": {1: 8}}
    # a waiting job of the same queue as the running ones (preempted earlier) waits behind them
    waiting = job("w", 8, submit=-1, attained=8 * 2 * H)
    d = decide(TiresiasLike(), [waiting], running, 2, now=10 * H)
    assert d.preempt == [] and d.starts == []


def test_tiresias_spares_a_victim_that_turns_out_unneeded():
    # node 0: "small" (lowest ranked) next to a job within its lease; node 1: "big". Preempting "small"
    # alone frees half a node, so "big" goes too; then "small" is not needed after all and is spared.
    pinned = run(job("pinned", 4, submit=0, attained=4 * 5 * H), {0: 4}, start=10 * H - 60)
    small = run(job("small", 4, submit=2, attained=4 * 5 * H), {0: 4})
    big = run(job("big", 8, submit=1, attained=8 * 5 * H), {1: 8})
    d = decide(TiresiasLike(), [job("fresh", 8, submit=3 * H)], [pinned, small, big], 2, now=10 * H)
    assert d.preempt == ["big"]
    assert started(d) == {"fresh": {1: 8}}


def test_tiresias_demotes_by_gpu_time_against_its_thresholds():
    policy = TiresiasLike(thresholds_gpu_s=(3600.0, 36000.0))
    assert [policy.queue_of(job("x", 1, attained=s)) for s in (0.0, 3599.0, 3600.0, 36000.0)] == [0, 0, 1, 2]


def test_tiresias_skips_a_job_that_cannot_fit_and_starts_smaller_ones():
    old = job("old", 4, submit=0, attained=4 * 10 * H)
    queue = [job("huge", 24, submit=1), job("fresh", 4, submit=2)]
    d = decide(TiresiasLike(), queue, [run(old, {0: 4})], 2, now=10 * H)
    assert d.preempt == [] and started(d) == {"fresh": {0: 4}}


# -- every decision is one the simulator accepts -----------------------------------------------------


@pytest.mark.parametrize("make", [StrictFifo, VolcanoLike, KueueLike, EasyBackfill, TiresiasLike])
def test_random_states_give_valid_decisions(make):
    rng = random.Random(7)
    sizes = [1, 2, 4, 6, 8, 12, 16, 24, 32]
    for trial in range(150):
        nodes = rng.randint(1, 6)
        free = np.full(nodes, G, dtype=np.int64)
        running = []
        for i in range(rng.randint(0, 8)):
            g = rng.choice(sizes)
            place = best_fit(free, g, G)
            if place is None:
                continue
            for n, k in place.items():
                free[n] -= k
            est = rng.choice([None, rng.uniform(10, 5 * H)])
            j = job(f"r{i}", g, submit=rng.uniform(0, H), estimate=est, team=rng.choice([None, "a", "b"]),
                    attained=rng.uniform(0, 20 * H) * g, done=rng.choice([0.0, 600.0]))
            running.append(run(j, place, start=rng.uniform(0, 2 * H)))
        queue = [job(f"q{i}", rng.choice(sizes), submit=rng.uniform(0, 2 * H), estimate=rng.choice(
                 [None, rng.uniform(10, 5 * H)]), priority=rng.choice([0, 0, 1]), team=rng.choice([None, "a", "b"]),
                 attained=rng.choice([0.0, rng.uniform(0, 4 * H)]))
                 for i in range(rng.randint(0, 10))]
        queue.sort(key=lambda j: j.submit_s)
        d = decide(make(), queue, running, nodes, now=2 * H)
        assert isinstance(d, Decision), trial
