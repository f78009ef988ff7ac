"""The planner beside shared MIG instances: it leaves a shared instance (and the running shares on it) in place
and offers it to no whole-instance pod; a task asking for a share of a MIG instance is refused with the field
named, since only the wire format and the verifier know such pods so far."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from placement import plan
from placement.verify import verify

SHARED = {"mode": "mps", "replicas": 2}
REQUEST: dict[str, Any] = {
    "cluster": {
        "nodes": [{"name": "n1", "gpu_model": "H100-SXM5-80GB", "gpus": 1, "cpu": 64, "memory_gib": 512,
                   "mig": {"0": [{"profile": "1g.10gb", "start": 0, "sharing": SHARED},
                                 {"profile": "1g.10gb", "start": 1}]}}],
        "running": [{"job": "r", "pods": [{"task": "t", "node": "n1", "gpu_share": 0.5,
                                           "mig": {"gpu": 0, "profile": "1g.10gb", "start": 0}}]}],
    },
    "jobs": [{"name": "w", "tasks": [{"name": "t", "replicas": 2, "mig_profile": "1g.10gb"}]}],
    "policy": {"time_limit_s": 2, "deterministic": True, "workers": 1},
}


def test_a_whole_instance_pod_never_lands_on_a_shared_instance() -> None:
    request = copy.deepcopy(REQUEST)
    result = plan(request)
    placed = [a for a in result.assignments if a.job == "w"]
    assert placed == [] and [p.job for p in result.pending] == ["w"]  # one whole instance free for two pods
    request["jobs"][0]["tasks"][0]["replicas"] = 1
    result = plan(request)
    assert [(a.mig.gpu, a.mig.start) for a in result.assignments if a.mig] == [(0, 1)]
    assert verify(request, result) == []


def test_a_re_partition_keeps_the_shared_instance_and_its_sharing() -> None:
    request = copy.deepcopy(REQUEST)
    request["policy"]["allow_mig_changes"] = True
    request["jobs"][0]["tasks"][0]["replicas"] = 3
    result = plan(request)
    assert verify(request, result) == []
    for change in result.mig_changes:
        kept = [i for i in change.layout if i.start == 0]
        assert kept and kept[0].sharing is not None and kept[0].sharing.mode == "mps"


def test_a_task_asking_a_share_of_a_mig_instance_is_refused_with_its_field() -> None:
    request = copy.deepcopy(REQUEST)
    request["jobs"][0]["tasks"][0]["gpu_share"] = 0.5
    with pytest.raises(ValidationError) as info:
        plan(request)
    (error,) = info.value.errors()
    assert error["loc"] == ("jobs", 0, "tasks", 0, "gpu_share") and "does not place one yet" in error["msg"]
