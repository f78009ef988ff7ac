"""Gang: a partial gang passes only down to min_available and each task's min_replicas, and duplicates
cannot make one look whole."""

from __future__ import annotations

from typing import Any

from verify_cases import asg, build, set_, task

from placement.verify import verify


def test_min_available_allows_a_partial_gang() -> None:
    def mutate(r: dict[str, Any], p: dict[str, Any]) -> None:
        r["jobs"][0]["min_available"] = 2
        p["assignments"].pop(1)

    assert verify(*build(mutate)) == []


def test_gang_counts_distinct_pods_and_caps_task_replicas() -> None:
    def mutate(r: dict[str, Any], p: dict[str, Any]) -> None:
        # Worker 1 replaced by a second copy of worker 0: three assignments, only two distinct pods.
        set_(asg(p, "llm", "worker", 1), pod=0, gpus=[0, 1, 2, 3, 4, 5, 6, 7])
        p["assignments"].append({"job": "llm", "task": "worker", "pod": 1, "node": "n002", "gpus": []})

    violations = verify(*build(mutate))
    assert "gang: task llm/worker has 3 pods assigned, more than its 2" in violations
    assert not any(v.startswith("gang: job llm") for v in violations)  # 3 distinct pods: enough


def _drop(p: dict[str, Any], job: str, name: str, pod: int) -> None:
    p["assignments"].remove(asg(p, job, name, pod))


def test_a_plan_below_a_task_minimum_is_a_violation() -> None:
    def mutate(r: dict[str, Any], p: dict[str, Any]) -> None:
        set_(task(r, "llm", "worker"), min_replicas=1)  # elastic workers; the launcher (no min_replicas) is needed
        _drop(p, "llm", "launcher", 0)  # hand-broken: workers without their launcher

    assert verify(*build(mutate)) == [
        "gang: task llm/launcher has 0 of its 1 required pods (every replica: it sets no min_replicas)"]


def test_min_available_does_not_cover_a_task_minimum() -> None:
    def mutate(r: dict[str, Any], p: dict[str, Any]) -> None:
        r["jobs"][0]["min_available"] = 2
        set_(task(r, "llm", "worker"), min_replicas=2)
        _drop(p, "llm", "worker", 1)  # 2 pods in all (enough for min_available) but 1 of the 2 workers

    assert verify(*build(mutate)) == ["gang: task llm/worker has 1 of its 2 required pods (min_replicas)"]


def test_an_elastic_task_may_run_between_its_minimum_and_its_replicas() -> None:
    def mutate(r: dict[str, Any], p: dict[str, Any]) -> None:
        set_(task(r, "llm", "worker"), min_replicas=1)
        _drop(p, "llm", "worker", 1)

    assert verify(*build(mutate)) == []


def test_duplicates_cannot_fill_a_task_minimum() -> None:
    def mutate(r: dict[str, Any], p: dict[str, Any]) -> None:
        r["jobs"][0]["min_available"] = 2
        set_(task(r, "llm", "worker"), min_replicas=2)
        # worker 1 becomes a second copy of worker 0: two assignments, one distinct worker
        set_(asg(p, "llm", "worker", 1), pod=0)

    violations = verify(*build(mutate))
    assert "gang: task llm/worker has 1 of its 2 required pods (min_replicas)" in violations
