"""The protocol: the inflation quirk, the seeded arrival order, the metric's rounding, replays on tiny
synthetic traces, the command line, and a seeded slice of the real trace.

The full 10-seed replays (which must land within ±0.5 points of the FGD paper) are benchmarks, not
tests; here we pin the pieces that decide those numbers.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from openb_helpers import node_row, pod_row, real_data, write_data

from placement.bench.openb.cli import format_leftover, main, parse_seeds
from placement.bench.openb.cluster import Binding, ClusterState, ReplayContext
from placement.bench.openb.policies import TypicalPods
from placement.bench.openb.registry import POLICIES, make_policy, register_policy
from placement.bench.openb.replay import WHOLE_IDLE, allocation_curve, arrival_order, replay, run
from placement.bench.openb.trace import GPU_MILLI, Pod, load_nodes, load_trace, nodes_from_rows, trace_from_rows

# ------------------------------------------------------------------------------------------ protocol


def test_inflation_uses_per_gpu_milli_and_counts_total_demand() -> None:
    # G = 2 GPUs: target 1.3 × 2000 = 2600 milli. The only pod asks 2 × 500 = 1000.
    # D = 1000; 1000 + 500 ≤ 2600 → copy (D = 2000); 2000 + 500 ≤ 2600 → copy (D = 3000);
    # 3000 + 500 > 2600 → stop. Testing total demand instead would have stopped one copy earlier.
    nodes = nodes_from_rows([node_row("n", 64000, 2)])
    trace = trace_from_rows("t", [pod_row("p", 1000, 2, 500)])
    order, rank = arrival_order(trace, nodes, seed=7)
    assert len(order) == 3 and all(p is trace.pods[0] for p in order)
    assert sum(p.demand for p in order) == 3000
    assert sorted(rank.tolist()) == [0]


def test_arrival_order_is_seeded_shuffle_then_copies() -> None:
    nodes = nodes_from_rows([node_row(f"n{i}", 64000, 8) for i in range(4)])
    trace = trace_from_rows("t", [pod_row(f"p{i:02d}", 1000, 1, 1000) for i in range(20)])
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
    assert parse_seeds("42-51") == list(range(42, 52))
    assert parse_seeds("1,5,7-8") == [1, 5, 7, 8]


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

    def choose(self, state: ClusterState, pod: Pod) -> Binding | None:
        assert (state.cpu_free >= 0).all() and (state.mem_free >= 0).all()
        assert (state.idle >= 0).all() and (state.idle <= GPU_MILLI).all()
        assert state.used_milli == state.capacity_milli - int(state.idle.sum())
        decision = self.inner.choose(state, pod)  # type: ignore[attr-defined]
        if decision is None:
            self.fails += 1
            assert not state.feasible(pod).any()
        else:
            assert state.check(pod, decision) is None
        return decision


def test_tiny_cluster_replay_fails_only_when_full(tmp_path: Path) -> None:
    nodes = nodes_from_rows([node_row("n0", 16000, 2), node_row("n1", 16000, 1)])
    rows = [pod_row(f"p{i}", 2000, 1, m) for i, m in enumerate([1000, 500, 300, 700, 200])]
    rows.append(pod_row("p9", 4000, 2, 1000))
    trace = trace_from_rows("t", rows)
    for name in ("random", "bestfit", "fgd"):
        checked = _Checked(make_policy(name, 3))
        res = replay(nodes, trace, checked, seed=3)
        assert res.pods == len(res.used) == len(res.arrived) and res.failed == checked.fails
        assert res.failed_while_feasible == 0
        assert (np.diff(res.used) >= 0).all() and res.used[-1] <= res.capacity_milli
        assert res.arrived[-1] > res.capacity_milli  # inflated past capacity, so some pods failed
        assert res.failed > 0


def test_leftover_is_filed_beside_the_largest_pod_of_each_gpu() -> None:
    nodes = nodes_from_rows([node_row("n0", 64000, 2), node_row("n1", 64000, 1)])
    trace = trace_from_rows("t", [pod_row(f"p{i}", 1000, 1, m) for i, m in enumerate([810, 160, 470, 320])])

    class InOrder:
        """Fixed decisions: 810 and 160 share GPU 0 of n0; 470 and 320 share GPU 1; n1 stays idle."""

        name = "in-order"
        where = {810: (0, (0,)), 160: (0, (0,)), 470: (0, (1,)), 320: (0, (1,))}

        def prepare(self, ctx: ReplayContext) -> None:
            pass

        def choose(self, state: ClusterState, pod: Pod) -> Binding | None:
            return self.where[pod.gpu_milli]

    res = replay(nodes, trace, InOrder(), seed=0, limit=4)
    assert res.leftover == {
        WHOLE_IDLE: 1.0,
        "beside 810-milli pods": pytest.approx(0.03),
        "beside 470-milli pods": pytest.approx(0.21),
    }
    total = sum(res.leftover.values()) * GPU_MILLI
    assert total == pytest.approx(res.capacity_milli - res.used[-1])
    out = format_leftover([{"trace": "t", "policy": "in-order", "leftover": res.leftover}], top=2)
    assert "idle whole GPUs 1.0, beside 470-milli pods 0.2, elsewhere 0.0" in out


def test_run_main_and_a_registered_batch_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write_data(
        tmp_path,
        [node_row(f"n{i:02d}", 64000, 4) for i in range(60)],  # steps of ≤ 1000 milli hit every whole %
        {"default": [pod_row(f"p{i:02d}", 4000, 1, [1000, 500, 250][i % 3]) for i in range(30)]},
    )

    class FirstFitBatch:
        """A toy batch policy: decides a window at once, first feasible node, first fitting GPU."""

        name = "firstfit-batch"
        window = 4

        def prepare(self, ctx: ReplayContext) -> None:
            pass

        def choose_batch(self, state: ClusterState, pods: list[Pod]) -> list[Binding | None]:
            out: list[Binding | None] = []
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

    register_policy("firstfit-batch", lambda seed: FirstFitBatch())
    try:
        res = run("default", "firstfit-batch", [1, 2], data)
        assert len(res["seeds"]) == 2 and not math.isnan(res["mean"]["alloc_100"])
        assert res["published"] == {100: None, 130: None}
        fgd = run("default", "fgd", [1], data, limit=5)
        assert fgd["seeds"][0]["pods"] == 5 and math.isnan(fgd["mean"]["alloc_130"])
        plot = tmp_path / "fig.png"
        assert (
            main(["--data", str(data), "--policies", "bestfit,firstfit-batch", "--seeds", "1-2", "--plot", str(plot)])
            == 0
        )
        out = capsys.readouterr().out
        assert "firstfit-batch" in out and "bestfit" in out
        assert ("plot written" in out and plot.is_file()) or "plot skipped" in out
    finally:
        POLICIES.pop("firstfit-batch", None)


# ---------------------------------------------------------------------------------------- real data


@pytest.mark.parametrize("policy", ["bestfit", "fgd"])
def test_real_trace_slice_keeps_invariants(policy: str) -> None:
    data = real_data()
    nodes, trace = load_nodes(data), load_trace("default", data)
    assert nodes.size == 1213 and nodes.total_gpus == 6212
    if policy == "fgd":
        assert len(TypicalPods.from_trace(trace.pods)) == 35  # the README's count for the default trace
    checked = _Checked(make_policy(policy, 42))
    res = replay(nodes, trace, checked, seed=42, limit=300)
    assert res.pods == 300 and res.failed == checked.fails and res.failed_while_feasible == 0
    assert (np.diff(res.used) >= 0).all() and res.used[-1] <= res.capacity_milli
    # 300 arrivals fill about 4 % of the cluster: nothing may fail, everything arrived is allocated.
    assert res.failed == 0 and res.used[-1] == res.arrived[-1] > 0
