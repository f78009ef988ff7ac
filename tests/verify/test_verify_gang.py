"""Gang: a partial gang passes only down to min_available, and duplicates cannot make one look whole."""

from __future__ import annotations

from typing import Any

from verify_cases import asg, build, set_

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
