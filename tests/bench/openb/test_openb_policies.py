"""The paper's peers on hand-checkable clusters: BestFit's integer score and tie-breaks, FGD's
fragmentation measure and GPU choice, and the cluster state's feasibility filter and checks."""

from __future__ import annotations

import numpy as np
import pytest
from openb_helpers import node_row, pod_row

from placement.bench.openb.cluster import ClusterState, InvalidPlacement, ReplayContext
from placement.bench.openb.policies import BestFitPolicy, FGDPolicy, TypicalPods, fgd_score
from placement.bench.openb.trace import Pod, nodes_from_rows, trace_from_rows


def _pod_obj(cpu: int, num: int, milli: int, spec: tuple[str, ...] = (), name: str = "p") -> Pod:
    return Pod(name=name, cpu=cpu, mem=0, num_gpu=num, gpu_milli=milli, spec=spec)


# ------------------------------------------------------------------------------------------- BestFit


def test_bestfit_integer_score_and_rank_tie_break() -> None:
    # Pod: 8 cores, one whole GPU. raw = trunc(100 − (a + 16 b)/2560), a = CPU left, b = GPU milli left.
    #   n0: a = 56000, b = 1000 → 100 − 71.875/…: (256000 − 56000 − 16000)/2560 = 71.875 → 71
    #   n1: a = 24000, b = 7000 → (256000 − 24000 − 112000)/2560 = 46.875 → 46
    #   n2: a = 58000, b = 1000 → 182000/2560 = 71.09 → 71 (tied with n0 by the truncation)
    nodes = nodes_from_rows([node_row("n0", 64000, 2), node_row("n1", 32000, 8), node_row("n2", 66000, 2)])
    pod = _pod_obj(8000, 1, 1000)
    state = ClusterState(nodes, rank=np.array([1, 2, 0]))
    assert BestFitPolicy.raw_scores(state, pod).tolist() == [71, 46, 71]
    assert BestFitPolicy().choose(state, pod) == (2, (0,))  # n2 has the lower rank
    state = ClusterState(nodes, rank=np.array([0, 2, 1]))
    assert BestFitPolicy().choose(state, pod) == (0, (0,))


def test_bestfit_share_pod_takes_the_tightest_gpu() -> None:
    nodes = nodes_from_rows([node_row("n0", 64000, 4)])
    state = ClusterState(nodes)
    state.place(_pod_obj(0, 1, 700), (0, (1,)))  # GPU idle: 1000, 300, 1000, 1000
    state.place(_pod_obj(0, 1, 400), (0, (2,)))  # 1000, 300, 600, 1000
    state.place(_pod_obj(0, 1, 500), (0, (3,)))  # 1000, 300, 600, 500
    assert BestFitPolicy().choose(state, _pod_obj(1000, 1, 500)) == (0, (3,))
    assert BestFitPolicy().choose(state, _pod_obj(1000, 1, 550)) == (0, (2,))
    assert BestFitPolicy().choose(state, _pod_obj(1000, 2, 1000)) is None  # only one fully idle GPU


def test_feasibility_filters() -> None:
    nodes = nodes_from_rows([node_row("n0", 4000, 2, "T4", mem=2048), node_row("n1", 64000, 8, "G2")])
    state = ClusterState(nodes)
    assert state.feasible(_pod_obj(8000, 0, 0)).tolist() == [False, True]
    assert state.feasible(_pod_obj(1000, 1, 500, ("T4",))).tolist() == [True, False]
    assert state.feasible(_pod_obj(1000, 4, 1000)).tolist() == [False, True]
    big_mem = Pod(name="m", cpu=1000, mem=4096, num_gpu=1, gpu_milli=1000)
    assert state.feasible(big_mem).tolist() == [False, True]


def test_invalid_placement_is_refused() -> None:
    state = ClusterState(nodes_from_rows([node_row("n0", 64000, 2)]))
    state.place(_pod_obj(0, 1, 800), (0, (0,)))
    with pytest.raises(InvalidPlacement):
        state.place(_pod_obj(0, 1, 300), (0, (0,)))  # 200 idle left
    with pytest.raises(InvalidPlacement):
        state.place(_pod_obj(0, 2, 1000), (0, (1,)))  # two GPUs asked, one given


# ----------------------------------------------------------------------------------------------- FGD


def _fgd_setup() -> tuple[FGDPolicy, ClusterState]:
    """One 4-GPU node with idle [1000, 1000, 600, 200] and 32 cores free, plus a mix of typical pods.

    Typical pods: t1 = (4 cores, 1 × 1000) × 2, t2 = (2 cores, 1 × 500) × 1, t3 = CPU-only × 1,
    so f = ½, ¼, ¼ (all groups kept: the two largest cover only 75 %).
    """
    nodes = nodes_from_rows([node_row("n0", 32000, 4), node_row("n1", 32000, 4)])
    rows = [
        pod_row("a1", 4000, 1, 1000),
        pod_row("a2", 4000, 1, 1000),
        pod_row("b", 2000, 1, 500),
        pod_row("c", 1000, 0, 0),
    ]
    trace = trace_from_rows("t", rows)
    policy = FGDPolicy()
    policy.prepare(ReplayContext(nodes=nodes, trace=trace, seed=0))
    state = ClusterState(nodes)
    state.place(_pod_obj(0, 1, 400), (0, (2,)))
    state.place(_pod_obj(0, 1, 800), (0, (3,)))
    return policy, state


def test_typical_pods_cover_95_percent_by_count() -> None:
    rows = [pod_row(f"a{i:02d}", 1000, 1, 1000) for i in range(60)]
    rows += [pod_row(f"b{i:02d}", 2000, 1, 500) for i in range(36)]
    rows += [pod_row(f"c{i}", 3000, 0, 0) for i in range(3)] + [pod_row("d", 4000, 8, 1000)]
    typ = TypicalPods.from_trace(trace_from_rows("t", rows).pods)
    # 60 % + 36 % = 96 % ≥ 95 %: two groups, renormalised to 60/96 and 36/96.
    assert typ.counts.tolist() == [60, 36]
    assert typ.freq == pytest.approx([0.625, 0.375])


def test_fgd_fragmentation_of_a_node() -> None:
    policy, state = _fgd_setup()
    # Idle total 2800. t1 fits (two whole GPUs): stranded = 600 + 200 = 800.
    # t2 fits (three GPUs ≥ 500): stranded = 200. t3 is CPU-only: all 2800 idle counts.
    # F = ½·800 + ¼·200 + ¼·2800 = 1150. Node n1 (4 idle GPUs): t1, t2 strand 0, t3 4000 → 1000.
    assert policy.fragmentation(state).tolist() == pytest.approx([1150.0, 1000.0])


def test_fgd_fragmentation_counts_unfit_typical_pods_as_all_idle() -> None:
    nodes = nodes_from_rows([node_row("n0", 3000, 2, "T4")])
    rows = [pod_row("a", 4000, 1, 1000), pod_row("b", 1000, 1, 500, "G2")]  # t_a: too much CPU; t_b: wrong model
    policy = FGDPolicy()
    policy.prepare(ReplayContext(nodes=nodes, trace=trace_from_rows("t", rows), seed=0))
    assert policy.fragmentation(ClusterState(nodes)).tolist() == [2000.0]


def test_fgd_share_pod_scores_each_gpu_and_binds_the_best() -> None:
    policy, state = _fgd_setup()
    pod = _pod_obj(1000, 1, 200)
    # GPU 3 (200 → 0):   idle 2600; t1 strands 600, t2 strands 0 → F = 300 + 0 + 650 = 950, Δ = 200
    #   score = trunc(100 / (1 + e^−0.2)) = trunc(54.98) = 54.
    # GPU 2 (600 → 400): t2 strands 400 + 200 → F = 300 + 150 + 650 = 1100, Δ = 50 → 51.
    # GPU 0 (1000 → 800): t1 strands 1600 → F = 800 + 50 + 650 = 1500, Δ = −350 → 41.
    score, gpu = policy.node_scores(state, pod)
    assert (int(score[0]), int(gpu[0])) == (54, 3)
    assert fgd_score(np.array([200.0, 50.0, -350.0, 0.0]), 1).tolist() == [54, 51, 41, 50]
    assert policy.choose(state, pod) == (0, (3,))


def test_fgd_equal_scores_go_to_the_lowest_rank_and_cache_follows_changes() -> None:
    policy, state = _fgd_setup()
    whole = _pod_obj(1000, 1, 1000)
    # On n0 and n1 a whole-GPU pod scores the same (trunc of the sigmoid), so rank decides.
    s, _ = policy.node_scores(state, whole)
    assert s[0] == s[1]
    state.rank = np.array([1, 0])
    assert policy.choose(state, whole) == (1, (0,))
    state.place(whole, (1, (0,)))
    state.place(whole, (1, (1,)))
    state.place(whole, (1, (2,)))
    # n1 now has one idle GPU; the cached scores must follow the change.
    fresh = FGDPolicy()
    fresh.typical = policy.typical
    assert policy.node_scores(state, whole)[0].tolist() == fresh.node_scores(state, whole)[0].tolist()
