"""The greedy's best-fit index (placement.baseline.fit.Room) answers exactly as the scan over every node does."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from placement_models import PlacementRequest

from placement.baseline import fit, gangs, greedy
from placement.problem import Problem, build

H100, A100 = "H100-SXM5-80GB", "A100-SXM4-80GB"


def _request(rng: np.random.Generator, n_nodes: int, n_jobs: int) -> dict[str, Any]:
    """Nodes of a few kinds (some tainted, some in a pool that may add more), running pods on some, and
    jobs of mixed shapes: GPU and CPU-only pods, several replicas, selectors, tolerations."""
    kinds = [(H100, 8, 192, 2048), (A100, 8, 128, 1024), (A100, 4, 64, 512), (None, 0, 96, 384)]
    nodes, running = [], []
    for i in range(n_nodes):
        model, gpus, cpu, mem = kinds[int(rng.integers(len(kinds)))]
        node: dict[str, Any] = {"name": f"n{i}", "gpus": gpus, "cpu": cpu, "memory_gib": mem,
                                "pool": "od" if rng.random() < 0.5 else "other"}
        if model:
            node["gpu_model"] = model
        if rng.random() < 0.1:
            node["taints"] = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
        nodes.append(node)
        if gpus and rng.random() < 0.6:
            held = int(rng.integers(1, gpus + 1))
            running.append({"job": f"r{i}", "pods": [{"task": "w", "node": f"n{i}", "gpus": list(range(held)),
                                                      "cpu": float(rng.integers(0, cpu // 2)),
                                                      "memory_gib": float(rng.integers(0, mem // 2))}]})
    jobs = []
    for j in range(n_jobs):
        gpus = int(rng.choice([0, 1, 1, 2, 4, 8]))
        task: dict[str, Any] = {"name": "t", "replicas": int(rng.choice([1, 1, 2, 3, 8])), "gpus": gpus,
                                "cpu": float(rng.choice([1, 4, 8, 16, 48])),
                                "memory_gib": float(rng.choice([4, 32, 96, 256]))}
        if rng.random() < 0.2:
            task["node_selector"] = {"placement/pool": "od"}
        if rng.random() < 0.2:
            task["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        jobs.append({"name": f"j{j}", "priority": int(rng.integers(0, 3)), "tasks": [task]})
    template = {"gpu_model": H100, "gpus": 8, "cpu": 192, "memory_gib": 2048}
    pools = [{"name": "od"}, {"name": "other", "provisionable": {"max_nodes": 2, "node": template}}]
    return {"cluster": {"pools": pools, "nodes": nodes, "running": running}, "jobs": jobs}


def _problem(seed: int, n_nodes: int = 40, n_jobs: int = 60) -> Problem:
    rng = np.random.default_rng(seed)
    return build(PlacementRequest.model_validate(_request(rng, n_nodes, n_jobs)))


@pytest.mark.parametrize("seed", range(6))
def test_index_picks_the_node_the_scan_picks(seed: int) -> None:
    problem = _problem(seed)
    assert problem.n_nodes > len(problem.request.cluster.nodes)  # added nodes, which come last
    rng = np.random.default_rng(100 + seed)
    free = problem.free.copy()
    room = fit.Room(problem, free, indexed=True)
    compared = 0
    for _ in range(300):
        task = problem.tasks[int(rng.integers(len(problem.tasks)))]
        d = (int(task.demand[0]), int(task.demand[1]), int(task.demand[2]))
        want = fit.best_node(problem, task.candidates, free, task.demand)
        got = room.best(task.candidates, d)
        if got == -1:  # gave up scanning: the caller asks best_node, so nothing to compare
            continue
        assert got == want
        compared += 1
        n = int(rng.integers(problem.n_nodes))  # change a node as placing or undoing a gang does
        delta = tuple(int(-rng.integers(0, x + 1)) if rng.random() < 0.7 else int(rng.integers(0, 3))
                      for x in free[n])
        room.add(n, delta)  # type: ignore[arg-type]
        assert room.rows[n] == tuple(free[n].tolist())
    assert compared > 200


def test_index_falls_back_to_the_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = _problem(7)
    monkeypatch.setattr(fit, "SCAN", 0)  # gives up at the first node that does not fit: best_node answers
    free, scanned = problem.free.copy(), problem.free.copy()
    room = fit.Room(problem, free, indexed=True)
    counts: dict[tuple[int, int], int] = {}
    plain: dict[tuple[int, int], int] = {}
    for t in range(len(problem.tasks)):
        assert room.place(t, counts) == gangs.place_task(problem, t, scanned, plain)
    assert counts == plain
    assert (free == scanned).all()


@pytest.mark.parametrize("seed", range(4))
def test_greedy_places_the_same_with_or_without_the_index(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    problem = _problem(seed, n_nodes=30, n_jobs=80)
    monkeypatch.setattr(gangs, "INDEXED_FROM", 0)
    indexed = greedy(problem)
    monkeypatch.setattr(gangs, "INDEXED_FROM", 10**9)
    scanned = greedy(problem)
    assert indexed.counts == scanned.counts
    assert list(indexed.counts) == list(scanned.counts)
