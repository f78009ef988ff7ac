"""The synthetic request generator and the hand-made example request.

Benchmarks compare runs by seed, so determinism is the first property; validity against the v1
model and the fragmentation it is meant to produce are what make the requests worth solving.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from placement_models.request import PlacementRequest

from placement.generate import ITP_NUM_GPU_COUNTS, generate

EXAMPLE = Path(__file__).resolve().parent.parent / "instances" / "example.json"


@pytest.fixture(scope="module")
def request_dict() -> dict[str, Any]:
    return generate(64, 120, seed=7)


def _used_per_node(req: dict[str, Any]) -> Counter[str]:
    used: Counter[str] = Counter()
    for job in req["cluster"]["running"]:
        for pod in job["pods"]:
            used[pod["node"]] += len(pod["gpus"])
    return used


def test_same_seed_same_request(request_dict: dict[str, Any]) -> None:
    assert json.dumps(generate(64, 120, seed=7)) == json.dumps(request_dict)


def test_different_seeds_differ(request_dict: dict[str, Any]) -> None:
    assert generate(64, 120, seed=8) != request_dict


def test_output_validates(request_dict: dict[str, Any]) -> None:
    req = PlacementRequest.model_validate(request_dict)
    assert len(req.cluster.nodes) == 64
    assert len(req.jobs) == 120
    assert not req.teams
    assert {p.capacity_type for p in req.cluster.pools} == {"on-demand"}


@pytest.mark.parametrize(("nodes", "jobs", "share"), [(1, 0, 0.5), (3, 5, 0.0), (20, 30, 1.0), (200, 300, 0.5)])
def test_edge_sizes_validate(nodes: int, jobs: int, share: float) -> None:
    PlacementRequest.model_validate(generate(nodes, jobs, seed=1, running_share=share))


def test_partly_used_nodes_exist(request_dict: dict[str, Any]) -> None:
    used = _used_per_node(request_dict)
    healthy = {n["name"]: n["gpus"] - len(n.get("unhealthy_gpus", [])) for n in request_dict["cluster"]["nodes"]}
    partial = [name for name, h in healthy.items() if 0 < used[name] < h]
    assert len(partial) >= len(healthy) // 5
    total = sum(healthy.values())
    assert 0.4 * total <= sum(used.values()) <= 0.6 * total


def test_running_gpu_indices_distinct_in_range_and_healthy(request_dict: dict[str, Any]) -> None:
    nodes = {n["name"]: n for n in request_dict["cluster"]["nodes"]}
    held: set[tuple[str, int]] = set()
    for job in request_dict["cluster"]["running"]:
        for pod in job["pods"]:
            node = nodes[pod["node"]]
            for g in pod["gpus"]:
                assert 0 <= g < node["gpus"]
                assert g not in node.get("unhealthy_gpus", [])
                assert (pod["node"], g) not in held
                held.add((pod["node"], g))
    assert any(len(job["pods"]) > 1 for job in request_dict["cluster"]["running"])


def test_job_gpu_counts_come_from_itp_table() -> None:
    req = generate(32, 400, seed=3)
    support = set(ITP_NUM_GPU_COUNTS)
    sizes: Counter[int] = Counter()
    for job in req["jobs"]:
        gpus = sum(t["replicas"] * t["gpus"] for t in job["tasks"])
        assert gpus in support
        sizes[gpus] += 1
        for t in job["tasks"]:
            assert t["gpus"] <= 8
            assert t["gpus"] > 0 or (t["name"] == "launcher" and t["replicas"] == 1)
    assert sizes[1] > len(req["jobs"]) // 2  # the ITP mix is dominated by single-GPU jobs


def test_example_validates_with_llm_pretrain_gang() -> None:
    raw = json.loads(EXAMPLE.read_text())
    req = PlacementRequest.model_validate(raw)
    assert len(req.cluster.nodes) == 12
    llm = next(j for j in req.jobs if j.name == "llm-pretrain")
    assert llm.pods == 9
    assert llm.needed == 9
    assert {t.name: (t.replicas, t.gpus) for t in llm.tasks} == {"worker": (8, 8), "launcher": (1, 0)}
    free = sum(n.gpus - len(n.unhealthy_gpus) for n in req.cluster.nodes) - sum(
        len(p.gpus) for r in req.cluster.running for p in r.pods
    )
    demand = sum(t.replicas * t.gpus for j in req.jobs for t in j.tasks)
    assert demand > free  # some jobs must stay pending


def test_impossible_and_runaway_sizes_are_refused_before_any_work() -> None:
    from placement.generate import MAX_JOBS, MAX_NODES

    with pytest.raises(ValueError, match="nodes must be at least 1, not 0"):
        generate(0, 5, seed=1)
    with pytest.raises(ValueError, match="jobs must be non-negative, not -1"):
        generate(2, -1, seed=1)
    with pytest.raises(ValueError, match=f"nodes must be at most {MAX_NODES:,}"):
        generate(MAX_NODES + 1, 1, seed=1)
    with pytest.raises(ValueError, match=f"jobs must be at most {MAX_JOBS:,}"):
        generate(1, MAX_JOBS + 1, seed=1)
