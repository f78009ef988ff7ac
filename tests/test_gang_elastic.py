"""Elastic gangs: a minimum per task (`tasks[].min_replicas`) beside the job's `min_available`.

A launcher (1 replica, needed) and 16 workers of which 4 are needed: the job runs with the launcher
and 4..16 workers, never with workers alone, in the greedy, the model and the verifier alike.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_models import Job, PlacementRequest, Plan, SolverStats, format_errors
from pydantic import ValidationError

from placement import candidates, plan, pricing, screen, verify
from placement import compile as compiler
from placement.baseline import greedy
from placement.decode import decode

H100 = "H100-SXM5-80GB"
A100 = "A100-SXM4-80GB"


def _gpu_node(name: str, **extra: Any) -> dict[str, Any]:
    # One worker (8 GPUs, 96 CPUs) fills it: no room is left for a launcher beside it.
    return {"name": name, "gpu_model": H100, "gpus": 8, "cpu": 96, "memory_gib": 1024, **extra}


def _cpu_node(name: str) -> dict[str, Any]:
    return {"name": name, "gpus": 0, "cpu": 16, "memory_gib": 128, "labels": {"role": "cpu"}}


def _elastic_job(**extra: Any) -> dict[str, Any]:
    return {"name": "train", "tasks": [
        {"name": "launcher", "replicas": 1, "cpu": 8, "memory_gib": 64, "node_selector": {"role": "cpu"}},
        {"name": "worker", "replicas": 16, "min_replicas": 4, "gpus": 8, "cpu": 96, "memory_gib": 512},
    ], **extra}


def _request(gpu_nodes: int, cpu_nodes: int, jobs: list[dict[str, Any]] | None = None,
             cpu_held: bool = False) -> PlacementRequest:
    """`cpu_held`: a running pod holds c0's CPUs, so the launcher has no room (but a candidate node)."""
    nodes = [_gpu_node(f"g{i:02d}") for i in range(gpu_nodes)] + [_cpu_node(f"c{i}") for i in range(cpu_nodes)]
    running = [{"job": "etl", "pods": [{"task": "e", "node": "c0", "cpu": 12, "memory_gib": 8}]}] if cpu_held else []
    return PlacementRequest.model_validate({
        "cluster": {"nodes": nodes, "running": running}, "jobs": jobs if jobs is not None else [_elastic_job()],
        "policy": {"deterministic": True, "workers": 1, "time_limit_s": 5}})


def _greedy_plan(req: PlacementRequest) -> Plan:
    """The greedy floor alone, decoded as api.plan would return it had the solver found nothing (its phases:
    right-size offers, the screen, the greedy with the reserve held back)."""
    problem = screen.build_problem(req)  # as plan() builds it: never-fitting jobs out
    baseline = greedy(problem, pricing.held_back(req, problem.nodes, problem.free))
    ctx = compiler.build(problem, candidates.select(problem, baseline))
    values = ctx.assignment_of(baseline)
    terms = ctx.objective.values(lambda v: values[v.index])
    return decode(problem, baseline, terms, "no_solution_in_time", SolverStats(status="SKIPPED",
                                                                               objective=sum(terms.values())))


def _pods(p: Plan, job: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in p.assignments:
        if a.job == job:
            out[a.task] = out.get(a.task, 0) + 1
    return out


# --------------------------------------------------------------------------------------------
# The launcher + workers example, through the greedy and the solver


@pytest.mark.parametrize("make", [plan, _greedy_plan], ids=["solver", "greedy"])
def test_workers_without_room_for_the_launcher_stay_pending(make: Any) -> None:
    # Three or six free workers' worth of GPUs (a min_available of 5 alone would place five workers), but
    # the launcher's one node is busy: the job waits.
    for gpu_nodes in (3, 6):
        req = _request(gpu_nodes, cpu_nodes=1, cpu_held=True)
        p = make(req)
        assert p.assignments == [] and [x.job for x in p.pending] == ["train"]
        assert verify(req, p) == []
    assert "task 'launcher'" in plan(_request(6, 1, cpu_held=True)).pending[0].reason
    reason = plan(_request(3, 1)).pending[0].reason  # room for the launcher, 3 of the 4 workers needed
    assert "gang of 1×launcher (8 CPU, 64 GiB) + 4..16×worker (8 GPUs" in reason, reason


@pytest.mark.parametrize("make", [plan, _greedy_plan], ids=["solver", "greedy"])
def test_room_for_the_launcher_and_four_workers_places_the_job(make: Any) -> None:
    req = _request(4, cpu_nodes=1)
    p = make(req)
    assert _pods(p, "train") == {"launcher": 1, "worker": 4}
    assert verify(req, p) == []


@pytest.mark.parametrize("make", [plan, _greedy_plan], ids=["solver", "greedy"])
def test_more_room_places_more_workers_up_to_the_replicas(make: Any) -> None:
    for gpu_nodes, workers in ((7, 7), (20, 16)):
        req = _request(gpu_nodes, cpu_nodes=1)
        p = make(req)
        assert _pods(p, "train") == {"launcher": 1, "worker": workers}
        assert verify(req, p) == []


def test_the_greedy_places_each_minimum_before_extra_pods() -> None:
    # One node holds 4 GPU pods or 3 GPU pods and the launcher's CPUs; tasks go biggest-pods first, so a
    # one-pass fill would put 4 workers there and leave no CPU for the launcher.
    node = {"name": "n", "gpu_model": H100, "gpus": 8, "cpu": 40, "memory_gib": 512}
    job = {"name": "j", "tasks": [{"name": "launcher", "replicas": 1, "cpu": 8},
                                  {"name": "worker", "replicas": 4, "min_replicas": 2, "gpus": 2, "cpu": 10}]}
    req = PlacementRequest.model_validate({"cluster": {"nodes": [node]}, "jobs": [job]})
    for p in (_greedy_plan(req), plan(req)):
        assert _pods(p, "j") == {"launcher": 1, "worker": 3}
        assert verify(req, p) == []


def test_min_available_alone_still_counts_pods_across_tasks() -> None:
    # min_available 5, no min_replicas: five workers run without the launcher, as before.
    job = _elastic_job(min_available=5)
    del job["tasks"][1]["min_replicas"]
    for make in (plan, _greedy_plan):
        req = _request(6, 1, [job], cpu_held=True)
        p = make(req)
        assert _pods(p, "train") == {"worker": 6}
        assert verify(req, p) == []
        req = _request(4, 1, [job], cpu_held=True)
        assert make(req).assignments == []


def test_min_available_above_the_minimums_needs_both() -> None:
    # min_available 6 with the launcher's 1 and the workers' 4: at least 5 workers and the launcher.
    job = _elastic_job(min_available=6)
    job["tasks"][0]["min_replicas"] = 1
    for make in (plan, _greedy_plan):
        assert make(_request(4, 1, [job])).assignments == []
        p = make(_request(5, 1, [job]))
        assert _pods(p, "train") == {"launcher": 1, "worker": 5}
    assert "at least 6 of its 17 pods" in plan(_request(4, 1, [job])).pending[0].reason


def _racked(job: dict[str, Any], racks: list[int]) -> PlacementRequest:
    """GPU nodes in racks (racks[i] nodes in rack ri) and one CPU node in rack r0."""
    nodes = [_gpu_node(f"g{r}{i}", topology={"rack": f"r{r}"}) for r, count in enumerate(racks) for i in range(count)]
    nodes.append({**_cpu_node("c0"), "topology": {"rack": "r0"}})
    return PlacementRequest.model_validate({"cluster": {"nodes": nodes}, "jobs": [job]})


def test_an_elastic_task_inside_a_required_domain() -> None:
    # The launcher's only node is in rack r0, which has 3 GPU nodes: 3 of the 4 workers, in r0.
    job = _elastic_job(topology={"required": "rack"})
    job["tasks"][1].update(replicas=4, min_replicas=2)
    req = _racked(job, [3, 3])
    for make in (plan, _greedy_plan):
        p = make(req)
        assert _pods(p, "train") == {"launcher": 1, "worker": 3}
        assert {a.node[:2] for a in p.assignments} == {"g0", "c0"}
        assert verify(req, p) == []


def test_an_elastic_sliced_task_places_whole_slices() -> None:
    # Slices of 2 workers per rack: rack r0 (3 nodes) holds one slice, r1 (1 node) none; a minimum of 2
    # runs with that slice, a minimum of 3 needs two slices and waits.
    job = _elastic_job(topology={"slice": {"size": 2, "required": "rack"}})
    job["tasks"][1].update(replicas=4, min_replicas=2)
    for make in (plan, _greedy_plan):
        req = _racked(job, [3, 1])
        p = make(req)
        assert _pods(p, "train") == {"launcher": 1, "worker": 2}
        assert verify(req, p) == []
    job["tasks"][1]["min_replicas"] = 3
    for make in (plan, _greedy_plan):
        assert make(_racked(job, [3, 1])).assignments == []


# --------------------------------------------------------------------------------------------
# The wire format


def _job_errors(job: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as info:
        PlacementRequest.model_validate({"cluster": {"nodes": [_gpu_node("g")]}, "jobs": [job]})
    return format_errors(info.value)


def test_defaults_and_the_effective_minimum() -> None:
    job = Job.model_validate(_elastic_job())
    assert [job.task_minimum(t) for t in job.tasks] == [1, 4] and job.needed == 5 and job.elastic
    whole = Job.model_validate({"name": "w", "tasks": [{"name": "a", "replicas": 3}, {"name": "b"}]})
    assert whole.needed == whole.pods == 4 and not whole.elastic
    counted = Job.model_validate({"name": "c", "min_available": 2, "tasks": [{"name": "a", "replicas": 3}]})
    assert counted.task_minimum(counted.tasks[0]) == 0 and counted.needed == 2
    both = Job.model_validate(_elastic_job(min_available=9))  # launcher: 0 (min_available set), workers 4
    assert [both.task_minimum(t) for t in both.tasks] == [0, 4] and both.needed == 9
    nothing = Job.model_validate({"name": "z", "tasks": [{"name": "a", "replicas": 2, "min_replicas": 0}]})
    assert nothing.needed == 1  # a job runs with at least one pod


def test_min_replicas_above_replicas_names_its_path() -> None:
    job = _elastic_job()
    job["tasks"][1]["min_replicas"] = 17
    assert _job_errors(job) == ["jobs[0].tasks[1].min_replicas: 17 exceeds the task's 16 replicas"]


def test_minimums_above_min_available_is_a_clear_error() -> None:
    job = _elastic_job(min_available=4)
    job["tasks"][0]["min_replicas"] = 1
    (line,) = _job_errors(job)
    assert line.startswith("jobs[0].min_available: 4 is below the 5 pods the tasks' min_replicas require")


@pytest.mark.parametrize(("value", "words"), [(-1, "greater than or equal to 0"), (100_001, "less than or equal"),
                                               ("x", "valid integer")])
def test_min_replicas_is_bounded(value: Any, words: str) -> None:
    job = _elastic_job()
    job["tasks"][1]["min_replicas"] = value
    errors = _job_errors(job)
    assert any(e.startswith("jobs[0].tasks[1].min_replicas:") and words in e for e in errors), errors


# --------------------------------------------------------------------------------------------
# Property: plans of random requests with random minimums verify, and meet every minimum


@st.composite
def elastic_requests(draw: st.DrawFn) -> dict[str, Any]:
    nodes = []
    for n in range(draw(st.integers(1, 4))):
        gpus = draw(st.sampled_from([0, 4, 8, 8]))
        node: dict[str, Any] = {"name": f"n{n}", "gpus": gpus, "cpu": draw(st.sampled_from([16, 64])),
                                "memory_gib": 512, "topology": {"rack": f"r{n // 2}"}}
        if gpus:
            node["gpu_model"] = draw(st.sampled_from([H100, A100]))
            if draw(st.integers(0, 3)) == 0:
                node["mig"] = {0: [{"profile": "3g.40gb", "start": 0}, {"profile": "3g.40gb", "start": 4}]}
        nodes.append(node)
    jobs = []
    for j in range(draw(st.integers(1, 4))):
        tasks: list[dict[str, Any]] = [{"name": "w", "replicas": draw(st.integers(1, 5)),
                                        "gpus": draw(st.sampled_from([1, 2, 4])), "cpu": draw(st.sampled_from([0, 8]))}]
        if draw(st.booleans()):
            tasks.append({"name": "launcher", "replicas": draw(st.integers(1, 2)),
                          "cpu": draw(st.sampled_from([2, 12]))})
        job: dict[str, Any] = {"name": f"j{j}", "priority": draw(st.integers(0, 3)), "tasks": tasks}
        for task in tasks:
            if draw(st.booleans()):
                task["min_replicas"] = draw(st.integers(0, task["replicas"]))
        floor = sum(t.get("min_replicas", 0) for t in tasks)
        pods = sum(t["replicas"] for t in tasks)
        if draw(st.integers(0, 2)) == 0 and floor < pods:
            job["min_available"] = draw(st.integers(max(1, floor), pods))
        kind = draw(st.sampled_from(["plain", "plain", "required", "preferred", "right"]))
        if kind in ("required", "preferred"):
            job["topology"] = {kind: draw(st.sampled_from(["node", "rack"]))}
        elif kind == "right":  # one-GPU pods a MIG instance could hold (placement.rightsize)
            tasks[0].update(gpus=1, gpu_memory_gib=80)
            job.update(right_size=True, observed_gpu_memory_gib=20.0)
        jobs.append(job)
    policy = {"deterministic": True, "workers": 1, "time_limit_s": draw(st.sampled_from([0.01, 0.3])),
              "allow_mig_changes": draw(st.booleans())}
    return {"cluster": {"nodes": nodes}, "jobs": jobs, "policy": policy}


def _meets_minimums(req: PlacementRequest, p: Plan) -> None:
    placed = {a.job for a in p.assignments}
    for job in req.jobs:
        if job.name not in placed:
            continue
        pods = _pods(p, job.name)
        assert sum(pods.values()) >= job.needed, (job.name, pods)
        for task in job.tasks:
            assert job.task_minimum(task) <= pods.get(task.name, 0) <= task.replicas, (job.name, task.name, pods)


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(elastic_requests())
def test_plans_with_random_minimums_verify(data: dict[str, Any]) -> None:
    try:
        req = PlacementRequest.model_validate(data)
    except ValidationError:  # e.g. a right-size job with a topology: not this property's business
        return
    for p in (plan(req), _greedy_plan(req)):  # plan() runs the verifier itself: a violation raises
        assert verify(req, p) == []
        _meets_minimums(req, p)
