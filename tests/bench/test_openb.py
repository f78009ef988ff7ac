"""The openb replay harness: hand-checkable answers on tiny synthetic traces, and a seeded slice of the real one.

The full 10-seed replays (which must land within ±0.5 points of the FGD paper) are benchmarks, not
tests; here we pin the pieces that decide those numbers: the inflation quirk, BestFit's integer
score and tie-breaks, FGD's fragmentation measure and GPU choice, and the metric's rounding.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

import numpy as np
import pytest

from placement.bench import openb
from placement.bench.openb import (
    BestFitPolicy,
    ClusterState,
    FGDPolicy,
    Pod,
    ReplayContext,
    TypicalPods,
    allocation_curve,
    arrival_order,
    nodes_from_rows,
    trace_from_rows,
)

POD_FIELDS = ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec"]


def _node(sn: str, cpu: int, gpus: int, model: str = "A", mem: int = 262144) -> dict[str, str]:
    return {"sn": sn, "cpu_milli": str(cpu), "memory_mib": str(mem), "gpu": str(gpus), "model": model}


def _pod(name: str, cpu: int, num: int, milli: int, spec: str = "", mem: int = 1024) -> dict[str, str]:
    return {
        "name": name,
        "cpu_milli": str(cpu),
        "memory_mib": str(mem),
        "num_gpu": str(num),
        "gpu_milli": str(milli),
        "gpu_spec": spec,
    }


def _write(folder: Path, nodes: list[dict[str, str]], traces: dict[str, list[dict[str, str]]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / openb.NODE_FILE).open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["sn", "cpu_milli", "memory_mib", "gpu", "model"])
        w.writeheader()
        w.writerows(nodes)
    for name, pods in traces.items():
        with (folder / f"openb_pod_list_{name}.csv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=POD_FIELDS)
            w.writeheader()
            w.writerows(pods)
    return folder


def _pod_obj(cpu: int, num: int, milli: int, spec: tuple[str, ...] = (), name: str = "p") -> Pod:
    return Pod(name=name, cpu=cpu, mem=0, num_gpu=num, gpu_milli=milli, spec=spec)


# ------------------------------------------------------------------------------------------- loading


def test_loader_sorts_by_name_and_parses_spec(tmp_path: Path) -> None:
    data = _write(
        tmp_path / "openb",
        [_node("n-b", 64000, 2, "T4"), _node("n-a", 32000, 8, "G2")],
        {"tiny": [_pod("p-2", 1000, 1, 500, "T4|V100M32|T4"), _pod("p-1", 2000, 0, 0)]},
    )
    nodes = openb.load_nodes(data)
    assert nodes.names == ("n-a", "n-b")
    assert nodes.total_gpus == 10 and nodes.max_gpus == 8
    assert [nodes.models[m] for m in nodes.model] == ["G2", "T4"]
    trace = openb.load_trace("tiny", data)
    assert [p.name for p in trace.pods] == ["p-1", "p-2"]
    assert trace.pods[1].spec == ("T4", "V100M32")  # deduplicated, as the gpuspec files repeat models
    assert trace.pods[1].is_share and not trace.pods[0].is_share
    assert trace.demand == 500


def test_data_dir_accepts_parent_folder_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path / "openb", [_node("n", 1000, 1)], {"default": [_pod("p", 1, 1, 1000)]})
    assert openb.resolve_data_dir(tmp_path) == tmp_path / "openb"
    monkeypatch.setenv("PLACEMENT_DATA", str(tmp_path))
    assert openb.resolve_data_dir() == tmp_path / "openb"
    assert openb.list_traces() == ["default"]


def test_missing_data_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(openb.DataNotFound, match=str(missing)):
        openb.resolve_data_dir(missing)
    _write(tmp_path / "d", [_node("n", 1000, 1)], {"default": [_pod("p", 1, 1, 1000)]})
    with pytest.raises(openb.DataNotFound, match="default"):  # lists the traces that do exist
        openb.load_trace("cpu050", tmp_path / "d")


def test_main_reports_missing_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert openb.main(["--data", str(tmp_path / "absent"), "--seeds", "1"]) == 2
    assert str(tmp_path / "absent") in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ protocol


def test_inflation_uses_per_gpu_milli_and_counts_total_demand() -> None:
    # G = 2 GPUs: target 1.3 × 2000 = 2600 milli. The only pod asks 2 × 500 = 1000.
    # D = 1000; 1000 + 500 ≤ 2600 → copy (D = 2000); 2000 + 500 ≤ 2600 → copy (D = 3000);
    # 3000 + 500 > 2600 → stop. Testing total demand instead would have stopped one copy earlier.
    nodes = nodes_from_rows([_node("n", 64000, 2)])
    trace = trace_from_rows("t", [_pod("p", 1000, 2, 500)])
    order, rank = arrival_order(trace, nodes, seed=7)
    assert len(order) == 3 and all(p is trace.pods[0] for p in order)
    assert sum(p.demand for p in order) == 3000
    assert sorted(rank.tolist()) == [0]


def test_arrival_order_is_seeded_shuffle_then_copies() -> None:
    nodes = nodes_from_rows([_node(f"n{i}", 64000, 8) for i in range(4)])
    trace = trace_from_rows("t", [_pod(f"p{i:02d}", 1000, 1, 1000) for i in range(20)])
    a, ra = arrival_order(trace, nodes, seed=42)
    b, rb = arrival_order(trace, nodes, seed=42)
    c, _ = arrival_order(trace, nodes, seed=43)
    assert [p.name for p in a] == [p.name for p in b] and ra.tolist() == rb.tolist()
    assert [p.name for p in a] != [p.name for p in c]
    assert sorted(p.name for p in a[:20]) == [p.name for p in trace.pods]  # a permutation first
    assert len(a) == 41  # 32 GPUs × 1.3 = 41.6 → 41 whole-GPU pods in total
    assert sorted(ra.tolist()) == [0, 1, 2, 3]


def test_metric_rounds_half_to_even_and_to_two_decimals() -> None:
    # G = 1 so A/(10G) = A/10: 5 → 0.5 → 0, 15 → 2, 25 → 2, 1005 → 100, 995 → 100 (half to even).
    arrived = np.array([5, 15, 25, 1000, 1005, 995])
    used = np.array([5, 10, 15, 1000, 1000, 990])
    curve = allocation_curve(arrived, used, total_gpus=1)
    assert curve.keys() == {0, 2, 100}
    assert curve[0] == 0.5 and curve[2] == 1.25
    assert curve[100] == pytest.approx((100 + 100 + 99) / 3)
    # G = 3: y = round(U/30, 2): 1/30 = 0.0333 → 0.03, 2/30 = 0.0667 → 0.07.
    assert allocation_curve(np.array([0, 0]), np.array([1, 2]), total_gpus=3) == {0: pytest.approx(0.05)}


def test_parse_seeds() -> None:
    assert openb.parse_seeds("42-51") == list(range(42, 52))
    assert openb.parse_seeds("1,5,7-8") == [1, 5, 7, 8]


# ------------------------------------------------------------------------------------------- BestFit


def test_bestfit_integer_score_and_rank_tie_break() -> None:
    # Pod: 8 cores, one whole GPU. raw = trunc(100 − (a + 16 b)/2560), a = CPU left, b = GPU milli left.
    #   n0: a = 56000, b = 1000 → 100 − 71.875/…: (256000 − 56000 − 16000)/2560 = 71.875 → 71
    #   n1: a = 24000, b = 7000 → (256000 − 24000 − 112000)/2560 = 46.875 → 46
    #   n2: a = 58000, b = 1000 → 182000/2560 = 71.09 → 71 (tied with n0 by the truncation)
    nodes = nodes_from_rows([_node("n0", 64000, 2), _node("n1", 32000, 8), _node("n2", 66000, 2)])
    pod = _pod_obj(8000, 1, 1000)
    state = ClusterState(nodes, rank=np.array([1, 2, 0]))
    assert BestFitPolicy.raw_scores(state, pod).tolist() == [71, 46, 71]
    assert BestFitPolicy().choose(state, pod) == (2, (0,))  # n2 has the lower rank
    state = ClusterState(nodes, rank=np.array([0, 2, 1]))
    assert BestFitPolicy().choose(state, pod) == (0, (0,))


def test_bestfit_share_pod_takes_the_tightest_gpu() -> None:
    nodes = nodes_from_rows([_node("n0", 64000, 4)])
    state = ClusterState(nodes)
    state.place(_pod_obj(0, 1, 700), (0, (1,)))  # GPU idle: 1000, 300, 1000, 1000
    state.place(_pod_obj(0, 1, 400), (0, (2,)))  # 1000, 300, 600, 1000
    state.place(_pod_obj(0, 1, 500), (0, (3,)))  # 1000, 300, 600, 500
    assert BestFitPolicy().choose(state, _pod_obj(1000, 1, 500)) == (0, (3,))
    assert BestFitPolicy().choose(state, _pod_obj(1000, 1, 550)) == (0, (2,))
    assert BestFitPolicy().choose(state, _pod_obj(1000, 2, 1000)) is None  # only one fully idle GPU


def test_feasibility_filters() -> None:
    nodes = nodes_from_rows([_node("n0", 4000, 2, "T4", mem=2048), _node("n1", 64000, 8, "G2")])
    state = ClusterState(nodes)
    assert state.feasible(_pod_obj(8000, 0, 0)).tolist() == [False, True]
    assert state.feasible(_pod_obj(1000, 1, 500, ("T4",))).tolist() == [True, False]
    assert state.feasible(_pod_obj(1000, 4, 1000)).tolist() == [False, True]
    big_mem = Pod(name="m", cpu=1000, mem=4096, num_gpu=1, gpu_milli=1000)
    assert state.feasible(big_mem).tolist() == [False, True]


def test_invalid_placement_is_refused() -> None:
    state = ClusterState(nodes_from_rows([_node("n0", 64000, 2)]))
    state.place(_pod_obj(0, 1, 800), (0, (0,)))
    with pytest.raises(openb.InvalidPlacement):
        state.place(_pod_obj(0, 1, 300), (0, (0,)))  # 200 idle left
    with pytest.raises(openb.InvalidPlacement):
        state.place(_pod_obj(0, 2, 1000), (0, (1,)))  # two GPUs asked, one given


# ----------------------------------------------------------------------------------------------- FGD


def _fgd_setup() -> tuple[FGDPolicy, ClusterState]:
    """One 4-GPU node with idle [1000, 1000, 600, 200] and 32 cores free, plus a mix of typical pods.

    Typical pods: t1 = (4 cores, 1 × 1000) × 2, t2 = (2 cores, 1 × 500) × 1, t3 = CPU-only × 1,
    so f = ½, ¼, ¼ (all groups kept: the two largest cover only 75 %).
    """
    nodes = nodes_from_rows([_node("n0", 32000, 4), _node("n1", 32000, 4)])
    rows = [_pod("a1", 4000, 1, 1000), _pod("a2", 4000, 1, 1000), _pod("b", 2000, 1, 500), _pod("c", 1000, 0, 0)]
    trace = trace_from_rows("t", rows)
    policy = FGDPolicy()
    policy.prepare(ReplayContext(nodes=nodes, trace=trace, seed=0))
    state = ClusterState(nodes)
    state.place(_pod_obj(0, 1, 400), (0, (2,)))
    state.place(_pod_obj(0, 1, 800), (0, (3,)))
    return policy, state


def test_typical_pods_cover_95_percent_by_count() -> None:
    rows = [_pod(f"a{i:02d}", 1000, 1, 1000) for i in range(60)]
    rows += [_pod(f"b{i:02d}", 2000, 1, 500) for i in range(36)]
    rows += [_pod(f"c{i}", 3000, 0, 0) for i in range(3)] + [_pod("d", 4000, 8, 1000)]
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
    nodes = nodes_from_rows([_node("n0", 3000, 2, "T4")])
    rows = [_pod("a", 4000, 1, 1000), _pod("b", 1000, 1, 500, "G2")]  # t_a: too much CPU; t_b: wrong model
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
    assert openb.fgd_score(np.array([200.0, 50.0, -350.0, 0.0]), 1).tolist() == [54, 51, 41, 50]
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


# -------------------------------------------------------------------------------------------- replay


class _Checked:
    """Wraps a policy and checks, before every decision, that nothing is over-allocated and that a
    declined pod really had no feasible node (the protocol fails a pod only then)."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.name = f"checked-{inner.name}"  # type: ignore[attr-defined]
        self.fails = 0

    def prepare(self, ctx: ReplayContext) -> None:
        self.inner.prepare(ctx)  # type: ignore[attr-defined]

    def choose(self, state: ClusterState, pod: Pod) -> openb.Placement | None:
        assert (state.cpu_free >= 0).all() and (state.mem_free >= 0).all()
        assert (state.idle >= 0).all() and (state.idle <= openb.GPU_MILLI).all()
        assert state.used_milli == state.capacity_milli - int(state.idle.sum())
        decision = self.inner.choose(state, pod)  # type: ignore[attr-defined]
        if decision is None:
            self.fails += 1
            assert not state.feasible(pod).any()
        else:
            assert state.check(pod, decision) is None
        return decision


def test_tiny_cluster_replay_fails_only_when_full(tmp_path: Path) -> None:
    nodes = nodes_from_rows([_node("n0", 16000, 2), _node("n1", 16000, 1)])
    rows = [_pod(f"p{i}", 2000, 1, m) for i, m in enumerate([1000, 500, 300, 700, 200])]
    rows.append(_pod("p9", 4000, 2, 1000))
    trace = trace_from_rows("t", rows)
    for name in ("random", "bestfit", "fgd"):
        checked = _Checked(openb.make_policy(name, 3))
        res = openb.replay(nodes, trace, checked, seed=3)
        assert res.pods == len(res.used) == len(res.arrived) and res.failed == checked.fails
        assert res.failed_while_feasible == 0
        assert (np.diff(res.used) >= 0).all() and res.used[-1] <= res.capacity_milli
        assert res.arrived[-1] > res.capacity_milli  # inflated past capacity, so some pods failed
        assert res.failed > 0


def test_leftover_is_filed_beside_the_largest_pod_of_each_gpu() -> None:
    nodes = nodes_from_rows([_node("n0", 64000, 2), _node("n1", 64000, 1)])
    trace = trace_from_rows("t", [_pod(f"p{i}", 1000, 1, m) for i, m in enumerate([810, 160, 470, 320])])

    class InOrder:
        """Fixed decisions: 810 and 160 share GPU 0 of n0; 470 and 320 share GPU 1; n1 stays idle."""

        name = "in-order"
        where = {810: (0, (0,)), 160: (0, (0,)), 470: (0, (1,)), 320: (0, (1,))}

        def prepare(self, ctx: ReplayContext) -> None:
            pass

        def choose(self, state: ClusterState, pod: Pod) -> openb.Placement | None:
            return self.where[pod.gpu_milli]

    res = openb.replay(nodes, trace, InOrder(), seed=0, limit=4)
    assert res.leftover == {
        openb.WHOLE_IDLE: 1.0,
        "beside 810-milli pods": pytest.approx(0.03),
        "beside 470-milli pods": pytest.approx(0.21),
    }
    total = sum(res.leftover.values()) * openb.GPU_MILLI
    assert total == pytest.approx(res.capacity_milli - res.used[-1])
    out = openb.format_leftover([{"trace": "t", "policy": "in-order", "leftover": res.leftover}], top=2)
    assert "idle whole GPUs 1.0, beside 470-milli pods 0.2, elsewhere 0.0" in out


def test_run_main_and_a_registered_batch_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _write(
        tmp_path,
        [_node(f"n{i:02d}", 64000, 4) for i in range(60)],  # steps of ≤ 1000 milli hit every whole %
        {"default": [_pod(f"p{i:02d}", 4000, 1, [1000, 500, 250][i % 3]) for i in range(30)]},
    )

    class FirstFitBatch:
        """A toy batch policy: decides a window at once, first feasible node, first fitting GPU."""

        name = "firstfit-batch"
        window = 4

        def prepare(self, ctx: ReplayContext) -> None:
            pass

        def choose_batch(self, state: ClusterState, pods: list[Pod]) -> list[openb.Placement | None]:
            out: list[openb.Placement | None] = []
            idle = state.idle.copy()
            for pod in pods:
                nodes = np.flatnonzero((idle >= pod.gpu_milli).any(axis=1))
                if nodes.size == 0:
                    out.append(None)
                    continue
                n = int(nodes[0])
                g = int(np.flatnonzero(idle[n] >= pod.gpu_milli)[0])
                idle[n, g] -= pod.gpu_milli
                out.append((n, (g,)))
            return out

    openb.register_policy("firstfit-batch", lambda seed: FirstFitBatch())
    try:
        res = openb.run("default", "firstfit-batch", [1, 2], data)
        assert len(res["seeds"]) == 2 and not math.isnan(res["mean"]["alloc_100"])
        assert res["published"] == {100: None, 130: None}
        fgd = openb.run("default", "fgd", [1], data, limit=5)
        assert fgd["seeds"][0]["pods"] == 5 and math.isnan(fgd["mean"]["alloc_130"])
        plot = tmp_path / "fig.png"
        assert (
            openb.main(
                ["--data", str(data), "--policies", "bestfit,firstfit-batch", "--seeds", "1-2", "--plot", str(plot)]
            )
            == 0
        )
        out = capsys.readouterr().out
        assert "firstfit-batch" in out and "bestfit" in out
        assert ("plot written" in out and plot.is_file()) or "plot skipped" in out
    finally:
        openb.POLICIES.pop("firstfit-batch", None)


# ---------------------------------------------------------------------------------------- real data


def _real_data() -> Path:
    base = os.environ.get("PLACEMENT_DATA")
    candidates = (
        [Path(base)]
        if base
        else [Path.cwd() / ".." / "shared" / "data", Path(__file__).resolve().parents[2] / ".." / "shared" / "data"]
    )
    for c in candidates:
        try:
            return openb.resolve_data_dir(c)
        except openb.DataNotFound:
            continue
    pytest.skip(f"openb data not found at {', '.join(map(str, candidates))}: set PLACEMENT_DATA to run this test")


@pytest.mark.parametrize("policy", ["bestfit", "fgd"])
def test_real_trace_slice_keeps_invariants(policy: str) -> None:
    data = _real_data()
    nodes, trace = openb.load_nodes(data), openb.load_trace("default", data)
    assert nodes.size == 1213 and nodes.total_gpus == 6212
    if policy == "fgd":
        assert len(TypicalPods.from_trace(trace.pods)) == 35  # the README's count for the default trace
    checked = _Checked(openb.make_policy(policy, 42))
    res = openb.replay(nodes, trace, checked, seed=42, limit=300)
    assert res.pods == 300 and res.failed == checked.fails and res.failed_while_feasible == 0
    assert (np.diff(res.used) >= 0).all() and res.used[-1] <= res.capacity_milli
    # 300 arrivals fill about 4 % of the cluster: nothing may fail, everything arrived is allocated.
    assert res.failed == 0 and res.used[-1] == res.arrived[-1] > 0
