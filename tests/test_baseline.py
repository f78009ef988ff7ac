"""The greedy baseline: priority first, whole gangs or nothing, best-fit nodes."""

from __future__ import annotations

from typing import Any

from placement_models import PlacementRequest

from placement.baseline import greedy, job_order
from placement.problem import Problem, build
from placement.solution import Placement

H100 = "H100-SXM5-80GB"


def _node(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "gpu_model": H100, "gpus": 8, "cpu": 64, "memory_gib": 512, **extra}


def _job(name: str, gpus: int, replicas: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "tasks": [{"name": "t", "replicas": replicas, "gpus": gpus}], **extra}


def _hold(node: str, gpus: list[int]) -> dict[str, Any]:
    return {"job": f"hold-{node}", "pods": [{"task": "w", "node": node, "gpus": gpus}]}


def _problem(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]],
             running: list[dict[str, Any]] | None = None) -> Problem:
    return build(PlacementRequest.model_validate(
        {"cluster": {"nodes": nodes, "running": running or []}, "jobs": jobs}))


def _placed(problem: Problem, placement: Placement) -> set[str]:
    return {problem.jobs[j].name for j in placement.placed_jobs(problem)}


def _where(problem: Problem, placement: Placement, job: str) -> dict[str, int]:
    """Pods of `job` per node name."""
    out: dict[str, int] = {}
    for (t, n), k in placement.counts.items():
        if k and problem.jobs[problem.tasks[t].job].name == job:
            out[problem.nodes[n].name] = out.get(problem.nodes[n].name, 0) + k
    return out


def _assert_fits(problem: Problem, placement: Placement) -> None:
    assert (placement.usage(problem) <= problem.free).all()


def test_job_order_priority_then_size_then_age_then_name() -> None:
    jobs = [
        _job("low-big", 8, priority=0),
        _job("high-small", 1, priority=5),
        _job("high-big", 4, priority=5),
        _job("mid-old", 2, priority=1, submitted_at="2026-01-01T00:00:00Z"),
        _job("mid-new", 2, priority=1, submitted_at="2026-06-01T00:00:00Z"),
        _job("mid-b", 2, priority=1, submitted_at="2026-06-01T00:00:00Z"),
    ]
    p = _problem([_node("a")], jobs)
    assert [p.jobs[j].name for j in job_order(p)] == ["high-big", "high-small", "mid-old", "mid-b", "mid-new",
                                                      "low-big"]


def test_higher_priority_first_even_when_listed_last() -> None:
    # One 8-GPU node: two 8-GPU jobs compete; the higher priority one wins regardless of order.
    p = _problem([_node("a")], [_job("low", 8, priority=1), _job("high", 8, priority=2)])
    g = greedy(p)
    assert _placed(p, g) == {"high"}
    _assert_fits(p, g)


def test_priority_beats_size() -> None:
    p = _problem([_node("a")], [_job("big", 8, priority=0), _job("small", 2, priority=1)])
    g = greedy(p)
    # small (priority 1) goes first and takes 2 GPUs; big no longer fits.
    assert _placed(p, g) == {"small"}


def test_gang_that_does_not_fit_is_rolled_back() -> None:
    # 3 pods × 4 GPUs need 12 GPUs on 2 nodes with 4 + 4 free: 2 pods fit, the third does not.
    # The gang must release its 2 pods so the later 4-GPU job can use the space.
    running = [_hold("a", [0, 1, 2, 3]), _hold("b", [0, 1, 2, 3])]
    p = _problem([_node("a"), _node("b")], [_job("gang", 4, replicas=3, priority=5), _job("after", 4, priority=0)],
                 running)
    g = greedy(p)
    assert _placed(p, g) == {"after"}
    assert sum(g.counts.values()) == 1
    _assert_fits(p, g)


def test_multi_task_gang_rolled_back_when_a_later_task_does_not_fit() -> None:
    # Workers fit, but the launcher's CPU does not fit anywhere beside them: nothing of the gang stays.
    job = {"name": "gang", "priority": 5, "tasks": [
        {"name": "worker", "replicas": 1, "gpus": 8, "cpu": 60},
        {"name": "launcher", "replicas": 1, "cpu": 10},
    ]}
    p = _problem([_node("a")], [job, _job("other", 2, priority=0)])
    g = greedy(p)
    assert _placed(p, g) == {"other"}
    assert _where(p, g, "gang") == {}


def test_elastic_gang_placed_with_at_least_min_available() -> None:
    # 4 pods × 4 GPUs, min_available 2, on 8 free GPUs: 2 pods placed, the job runs.
    p = _problem([_node("a")], [_job("elastic", 4, replicas=4, min_available=2)])
    g = greedy(p)
    assert _placed(p, g) == {"elastic"}
    assert sum(g.counts.values()) == 2
    # min_available 3 cannot be met: rolled back.
    p = _problem([_node("a")], [_job("elastic", 4, replicas=4, min_available=3)])
    assert greedy(p).counts == {}


def test_best_fit_prefers_the_tighter_node() -> None:
    # a has 6 free GPUs, b has 3, c has 8: a 2-GPU pod goes to b (fewest GPUs left after placing).
    running = [_hold("a", [0, 1]), _hold("b", [0, 1, 2, 3, 4])]
    p = _problem([_node("a"), _node("b"), _node("c")], [_job("j", 2)], running)
    g = greedy(p)
    assert _where(p, g, "j") == {"b": 1}


def test_best_fit_skips_nodes_too_small_and_keeps_whole_nodes_whole() -> None:
    # b has 1 free GPU (too small for 2); a has 4; c is whole. The pod goes to a, c stays whole.
    running = [_hold("a", [0, 1, 2, 3]), _hold("b", [0, 1, 2, 3, 4, 5, 6])]
    p = _problem([_node("c"), _node("a"), _node("b")], [_job("j", 2, replicas=2)], running)
    g = greedy(p)
    assert _where(p, g, "j") == {"a": 2}


def test_best_fit_cpu_only_pods_prefer_gpu_less_nodes() -> None:
    p = _problem([_node("g"), _node("cpu", gpus=0, gpu_model=None)],
                 [{"name": "j", "tasks": [{"name": "t", "replicas": 2, "cpu": 4}]}])
    assert _where(p, greedy(p), "j") == {"cpu": 2}


def test_greedy_respects_a_given_free_matrix() -> None:
    p = _problem([_node("a")], [_job("j", 4)])
    free = p.free.copy()
    free[0, 0] = 3
    assert greedy(p, free).counts == {}
    assert (p.free[0, 0]) == 8  # the problem itself is untouched
