"""Time-slicing and MPS: shares and GPU memory never over-committed, replicas capped, hand-checked packings."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from models import PlacementRequest, Plan
from placement import plan
from placement import problem as problem_mod
from placement.verify import verify

H100 = "H100-SXM5-80GB"  # 80 GiB


def _request(sharing: dict[int, Any], jobs: list[dict[str, Any]], running: list[dict[str, Any]] | None = None,
             gpus: int = 1) -> dict[str, Any]:
    node = {"name": "n1", "gpu_model": H100, "gpus": gpus, "cpu": 64, "memory_gib": 512, "sharing": sharing}
    return {"cluster": {"nodes": [node], "running": running or []}, "jobs": jobs,
            "policy": {"deterministic": True, "time_limit_s": 5, "workers": 1}}


def _ts(replicas: int = 4, mode: str = "time-slicing") -> dict[str, Any]:
    return {"mode": mode, "replicas": replicas}


def _job(name: str, share: float, replicas: int = 1, **task: Any) -> dict[str, Any]:
    return {"name": name, "tasks": [{"name": "s", "replicas": replicas, "gpu_share": share, **task}]}


def _placed(p: Plan) -> set[str]:
    return {a.job for a in p.assignments}


def test_four_quarters_fill_a_gpu_and_a_fifth_waits() -> None:
    p = plan(_request({0: _ts(8)}, [_job("a", 0.25, 4), _job("b", 0.25)]))
    assert _placed(p) == {"a"}
    assert all(a.gpus == [0] and a.gpu_share == 0.25 for a in p.assignments)
    assert p.pending[0].job == "b" and "capacity went to" in p.pending[0].reason
    assert "0.25 of a shared GPU" in p.pending[0].reason


def test_memory_is_never_overcommitted() -> None:
    """Two 0.3 shares fit by compute, but 50 + 50 GiB exceed the 80 GiB GPU: one waits."""
    p = plan(_request({0: _ts()}, [_job("a", 0.3, gpu_memory_gib=50), _job("b", 0.3, gpu_memory_gib=50)]))
    assert len(_placed(p)) == 1


def test_memory_defaults_to_the_share_of_the_gpu() -> None:
    """Without gpu_memory_gib a 0.5 share counts 40 GiB: a running 0.25 pod declaring 50 GiB leaves 30."""
    running = [{"job": "old", "pods": [{"task": "s", "node": "n1", "gpus": [0], "gpu_share": 0.25,
                                        "gpu_memory_gib": 50}]}]
    p = plan(_request({0: _ts()}, [_job("a", 0.5), _job("b", 0.3, gpu_memory_gib=30)], running))
    assert _placed(p) == {"b"}


def test_replicas_cap_the_pods_on_a_gpu() -> None:
    p = plan(_request({0: _ts(2, "mps")}, [_job("a", 0.1), _job("b", 0.1), _job("c", 0.1)]))
    assert len(_placed(p)) == 2


def test_shares_are_bin_packed_across_gpus() -> None:
    """0.6, 0.6, 0.4, 0.4 on two shared GPUs: only 0.6+0.4 on each places all four."""
    jobs = [_job("a", 0.6), _job("b", 0.6), _job("c", 0.4), _job("d", 0.4)]
    p = plan(_request({0: _ts(), 1: _ts()}, jobs, gpus=2))
    assert _placed(p) == {"a", "b", "c", "d"}
    per_gpu: dict[int, float] = {}
    for a in p.assignments:
        per_gpu[a.gpus[0]] = per_gpu.get(a.gpus[0], 0.0) + (a.gpu_share or 0.0)
    assert per_gpu == pytest.approx({0: 1.0, 1: 1.0})


def test_whole_gpu_pods_never_land_on_a_shared_gpu() -> None:
    whole = [{"name": "w", "tasks": [{"name": "t", "gpus": 2}]}, {"name": "v", "tasks": [{"name": "t", "gpus": 1}]}]
    p = plan(_request({1: _ts()}, whole, gpus=2))
    assert _placed(p) == {"v"} and p.assignments[0].gpus == [0]


def test_running_shares_count() -> None:
    running = [{"job": "old", "pods": [{"task": "s", "node": "n1", "gpus": [0], "gpu_share": 0.7}]}]
    p = plan(_request({0: _ts()}, [_job("a", 0.4), _job("b", 0.3)], running))
    assert _placed(p) == {"b"}


def test_a_share_task_without_shared_gpus_waits_with_a_reason() -> None:
    p = plan(_request({}, [_job("a", 0.5)]))
    assert "no matching node has a shared (time-slicing/MPS) GPU" in p.pending[0].reason


@pytest.mark.parametrize(("mutate", "loc"), [
    (lambda r: r["cluster"]["running"].append({"job": "x", "pods": [
        {"task": "s", "node": "n1", "gpus": [1], "gpu_share": 0.5}]}), ("cluster", "running", 0, "pods", 0, "gpus", 0)),
    (lambda r: r["cluster"]["running"].extend([{"job": f"x{i}", "pods": [
        {"task": "s", "node": "n1", "gpus": [0], "gpu_share": 0.6}]} for i in range(2)]),
     ("cluster", "nodes", 0, "sharing", 0)),
    (lambda r: r["cluster"]["running"].append({"job": "x", "pods": [
        {"task": "s", "node": "n1", "gpus": [0], "gpu_share": 0.5, "gpu_memory_gib": 90}]}),
     ("cluster", "nodes", 0, "sharing", 0)),
    (lambda r: r["jobs"].append(_job("j", 0.5, gpus=1)), ("jobs", 0, "tasks", 0, "gpu_share")),
    (lambda r: r["jobs"].append(_job("j", 1.5)), ("jobs", 0, "tasks", 0, "gpu_share")),
    (lambda r: r["cluster"]["nodes"][0].update(mig={0: []}), ("cluster", "nodes", 0, "sharing", 0)),
])
def test_bad_sharing_input_names_its_field(mutate: Any, loc: tuple[Any, ...]) -> None:
    req = _request({0: _ts()}, [], gpus=2)
    mutate(req)
    with pytest.raises(ValidationError) as err:
        problem_mod.build(PlacementRequest.model_validate(req))
    assert any(e["loc"] == loc for e in err.value.errors()), err.value.errors()


def _checked(mutate: Any) -> list[str]:
    req = _request({0: _ts(2)}, [_job("a", 0.5, 2, gpu_memory_gib=30)], gpus=2)
    good = {"status": "feasible", "objective": {"total": 0.0}, "assignments": [
        {"job": "a", "task": "s", "pod": k, "node": "n1", "gpus": [0], "gpu_share": 0.5} for k in range(2)]}
    p = copy.deepcopy(good)
    mutate(req, p)
    return [v for v in verify(PlacementRequest.model_validate(req), Plan.model_validate(p))
            if v.startswith(("sharing: ", "gpus: "))]


@pytest.mark.parametrize(("mutate", "fragment"), [
    (lambda r, p: None, None),
    (lambda r, p: r["jobs"][0]["tasks"][0].update(gpu_share=0.6), "is given 1.2 of a GPU"),
    (lambda r, p: r["jobs"][0]["tasks"][0].update(gpu_memory_gib=41), "82 GiB of GPU memory"),
    (lambda r, p: r["cluster"]["nodes"][0]["sharing"][0].update(replicas=1), "more than its 1 replicas"),
    (lambda r, p: p["assignments"][1].update(gpus=[1]), "which is not shared"),
    (lambda r, p: p["assignments"][1].update(gpu_share=0.25), "takes share 0.25"),
])
def test_checker_catches_broken_sharing_plans(mutate: Any, fragment: str | None) -> None:
    found = _checked(mutate)
    if fragment is None:
        assert found == []
    else:
        assert any(fragment in v for v in found), found


@st.composite
def _cases(draw: st.DrawFn) -> dict[str, Any]:
    gpus = draw(st.integers(1, 3))
    sharing = {g: _ts(draw(st.integers(1, 4)), draw(st.sampled_from(["time-slicing", "mps"])))
               for g in range(gpus) if draw(st.booleans())}
    running = []
    for g in sharing:
        if draw(st.booleans()):
            running.append({"job": f"r{g}", "pods": [{"task": "s", "node": "n1", "gpus": [g], "gpu_share": 0.3,
                                                      "gpu_memory_gib": 20}]})
    jobs = []
    for j in range(draw(st.integers(1, 5))):
        share = draw(st.sampled_from([0.1, 0.25, 0.3, 0.5, 0.81, 1.0]))
        extra = {"gpu_memory_gib": draw(st.sampled_from([5, 30, 60]))} if draw(st.booleans()) else {}
        jobs.append(_job(f"j{j}", share, draw(st.integers(1, 3)), **extra))
    if draw(st.booleans()):
        jobs.append({"name": "whole", "tasks": [{"name": "t", "gpus": 1}]})
    req = _request(sharing, jobs, running, gpus=gpus)
    req["policy"]["time_limit_s"] = 1
    return req


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_random_sharing_requests_give_verified_plans(req: dict[str, Any]) -> None:
    p = plan(req)
    assert verify(PlacementRequest.model_validate(req), p) == []
    for a in p.assignments:
        shared = a.gpu_share is not None
        assert shared == (a.job != "whole")
        if not shared:
            assert not set(a.gpus) & set(req["cluster"]["nodes"][0]["sharing"])
