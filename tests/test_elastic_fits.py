"""Fit checks outside the gang constraint count elastic gangs as the gang rule does (`fill_gang`): each task's
minimum (`min_replicas`) first, then `needed` pods in all. They decide pending reasons and pruning, never plan
validity, so a check that ignores a minimum blames the wrong cause or keeps a domain the gang cannot use.

A launcher (1 pod, needed, CPU only, on the CPU node) and workers (1..4 needed): with the CPU node full the
workers alone make `needed` (2 pods), but the job cannot run.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from placement_models import PlacementRequest

from placement import compile as compiler
from placement.baseline import place_task
from placement.compile.cost import pending_reason
from placement.explain.devices import job_fits
from placement.problem import Problem, build
from placement.solution import Placement

H100 = "H100-SXM5-80GB"
GENERIC = "the generic reason"


def _cpu_node(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "gpus": 0, "cpu": 16, "memory_gib": 128, "labels": {"role": "cpu"}, **extra}


def _launcher() -> dict[str, Any]:
    return {"name": "launcher", "cpu": 8, "node_selector": {"role": "cpu"}}


def _problem(nodes: list[dict[str, Any]], job: dict[str, Any], **policy: Any) -> Problem:
    return build(PlacementRequest.model_validate({"cluster": {"nodes": nodes, "pools": [{"name": "od"}]},
                                                  "jobs": [job], "policy": {"deterministic": True, **policy}}))


def _without_cpu(problem: Problem, node: str) -> np.ndarray:
    """Free capacity once a plan took every CPU of `node`."""
    free = problem.free.copy()
    free[problem.node_index[node], 1] = 0
    return free


# --------------------------------------------------------------------------------------------
# explain.devices.job_fits (pending reasons of jobs with MIG or shared pods)


def test_job_fits_needs_every_task_minimum() -> None:
    layout = {0: [{"profile": "1g.10gb", "start": s} for s in range(7)]}
    nodes = [{"name": "g", "gpu_model": H100, "gpus": 1, "cpu": 40, "memory_gib": 512, "mig": layout},
             _cpu_node("c")]
    job = {"name": "el", "tasks": [
        {"name": "worker", "replicas": 4, "min_replicas": 1, "mig_profile": "1g.10gb", "cpu": 4}, _launcher()]}
    problem = _problem(nodes, job)
    assert problem.needs_device_ledger()
    assert job_fits(problem, 0, problem.free, None, place_task)
    # four workers make the job's `needed` (2), but the launcher has no CPU left: it does not fit
    assert not job_fits(problem, 0, _without_cpu(problem, "c"), None, place_task)
    # the answer is cached per job shape: the same shape with no per-task minimum fits with workers alone
    counted = {"name": "el", "min_available": 2, "tasks": [
        {"name": "worker", "replicas": 4, "mig_profile": "1g.10gb", "cpu": 4}, _launcher()]}
    other = _problem(nodes, counted)
    assert job_fits(other, 0, _without_cpu(other, "c"), None, place_task)


# --------------------------------------------------------------------------------------------
# compile.cost: the peak reserve's and cost's pending reasons


def _reserve_problem() -> Problem:
    nodes = [{"name": "a", "pool": "od", "gpu_model": H100, "gpus": 8, "cpu": 192, "memory_gib": 2048},
             _cpu_node("c", pool="od")]
    job = {"name": "el", "tasks": [{"name": "worker", "replicas": 4, "min_replicas": 1, "gpus": 2}, _launcher()]}
    return _problem(nodes, job, peak=True, reserve={"od": 4})


def test_the_reserve_is_not_blamed_when_a_task_minimum_cannot_be_placed() -> None:
    problem = _reserve_problem()
    usage = np.zeros_like(problem.free)
    usage[problem.node_index["c"], 1] = problem.free[problem.node_index["c"], 1]  # the plan took c's CPUs
    # the workers alone (8 GPUs, over the 4 the reserve leaves) made `needed`: the reserve was blamed
    assert pending_reason(problem, 0, Placement(), usage, GENERIC) == GENERIC


def test_the_reserve_is_weighed_against_the_smallest_gang_that_runs() -> None:
    # one worker (2 GPUs) and the launcher fit in the 4 GPUs the reserve leaves: the reserve is not why it waits
    problem = _reserve_problem()
    assert pending_reason(problem, 0, Placement(), np.zeros_like(problem.free), GENERIC) == GENERIC
    problem = _reserve_problem()
    usage = np.zeros_like(problem.free)
    usage[problem.node_index["a"], 0] = 3  # 1 GPU of the allowance left: not even one worker
    reason = pending_reason(problem, 0, Placement(), usage, GENERIC)
    assert reason.startswith("pool od holds back 4 GPUs during peak") and reason.endswith("would need 2"), reason


# --------------------------------------------------------------------------------------------
# compile.topology: domains that cannot hold the gang get no variable


def test_a_required_domain_without_room_for_a_task_minimum_is_pruned() -> None:
    # rack r0 has the CPU node and one GPU node, rack r1 three GPU nodes but no CPU node: with `required: rack`
    # the gang can only run in r0, whatever r1's worker slots add up to
    gpu = {"gpu_model": H100, "gpus": 8, "cpu": 96, "memory_gib": 1024}
    nodes = [{"name": "g0", **gpu, "topology": {"rack": "r0"}}, _cpu_node("c0", topology={"rack": "r0"})]
    nodes += [{"name": f"g1{i}", **gpu, "topology": {"rack": "r1"}} for i in range(3)]
    job = {"name": "el", "topology": {"required": "rack"}, "tasks": [
        {"name": "worker", "replicas": 4, "min_replicas": 1, "gpus": 8, "cpu": 96}, _launcher()]}
    problem = _problem(nodes, job)
    ctx = compiler.build(problem)
    domains = sorted(v.name for v in ctx.model.proto.variables if v.name.startswith("topo_required["))
    r0 = problem.topology().level("rack").of_node[problem.node_index["g0"]]
    assert domains == [f"topo_required[0,{r0}]"]
