"""cpsat-online-scarce: nodes few others can match are kept for the pods that fit nothing else."""

from __future__ import annotations

import numpy as np
from openb_helpers import node_row, pod_row

from placement.bench.openb.cluster import ClusterState, ReplayContext
from placement.bench.openb.loop import loop_trace_from_rows, simulate
from placement.bench.openb.registry import make_policy
from placement.bench.openb.scarce import scarce_nodes
from placement.bench.openb.trace import Pod, Trace, nodes_from_rows

BIG_MEM = 768 * 1024
SMALL = Pod("small", 1000, 1024, 1, 1000)


def _nodes() -> list[dict[str, str]]:
    return [node_row(f"s{i:02d}", 32000, 2) for i in range(20)] + [node_row("zbig", 128000, 8, mem=BIG_MEM)]


def test_a_node_no_other_matches_is_scarce() -> None:
    table = nodes_from_rows(_nodes())
    assert scarce_nodes(table).tolist() == [False] * 20 + [True]
    assert scarce_nodes(table, share=1.0).all()  # every node matched by at most all of them


def _run(policy: str) -> tuple[dict[str, float], int]:
    rows = []
    for k in range(30):  # small long-lived pods arrive first: one GPU each, a week
        row = pod_row(f"p{k:02d}", 1000, 1, 1000)
        row.update(creation_time=str(k), deletion_time=str(k + 7 * 86400), scheduled_time=str(k))
        rows.append(row)
    big = pod_row("big", 120000, 8, 1000, mem=700 * 1024)
    big.update(creation_time="100", deletion_time="3700", scheduled_time="100")
    trace = loop_trace_from_rows("t", [*rows, big])
    result = simulate(nodes_from_rows(_nodes()), trace.trace, trace.pods, make_policy(policy, 42))
    return {p.pod.name: s for p, s in zip(trace.pods, result.start.tolist(), strict=True)}, result.invalid


def test_small_pods_leave_the_scarce_node_to_the_pod_only_it_takes() -> None:
    starts, invalid = _run("bench-cpsat-online-scarce")
    assert starts["big"] == 100.0 and invalid == 0
    assert all(np.isfinite(s) for s in starts.values())


def test_a_scarce_node_is_chosen_only_when_nothing_else_fits() -> None:
    table = nodes_from_rows(_nodes())
    policy = make_policy("bench-cpsat-online-scarce", 42)
    policy.prepare(ReplayContext(nodes=table, trace=Trace("t", (SMALL,)), seed=42))
    state = ClusterState(table)
    chosen = set()
    for _ in range(40):  # the small nodes' 40 GPUs, then nothing
        node, gpus = policy.choose(state, SMALL)
        state.place(SMALL, (node, gpus))
        chosen.add(node)
    assert 20 not in chosen
    node, _ = policy.choose(state, SMALL)  # the small nodes are full: the scarce one takes it
    assert node == 20
