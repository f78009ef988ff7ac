"""The preemption warm start (placement.search.warm) speaks the model's language: the quota term's units
(in-nominal GPU-equivalents, counted in milli-GPU with MIG instances and shares), the priority term's pod
values, and the gang's per-task minimums. Each scenario has one right extension, computed by hand."""

from __future__ import annotations

from typing import Any

from placement_models import PlacementRequest

from placement import compile as compiler
from placement import rightsize
from placement.baseline import greedy
from placement.problem import Problem, build
from placement.search.warm import warm_start

H100 = "H100-SXM5-80GB"
NOW = "2026-12-01T12:00:00Z"
STARTED = "2026-12-01T10:00:00Z"


def _problem(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]], running: list[dict[str, Any]],
             teams: list[dict[str, Any]] | None = None, **policy: Any) -> Problem:
    return build(PlacementRequest.model_validate({
        "cluster": {"nodes": nodes, "running": running}, "jobs": jobs, "teams": teams or [],
        "policy": {"deterministic": True, "workers": 1, "time_limit_s": 5, "now": NOW, "preemption": True,
                   **policy}}))


def _warm(problem: Problem) -> tuple[set[str], dict[str, int], float] | None:
    """(evicted jobs, pods per placed job, objective) of the warm start from the greedy plan, or None."""
    base = greedy(problem)
    ctx = compiler.build(problem)
    found = warm_start(ctx, base, budget_s=2.0)
    if found is None:
        return None
    placement, _, score = found
    pods: dict[str, int] = {}
    for (t, _), k in placement.counts.items():
        name = problem.jobs[problem.tasks[t].job].name
        pods[name] = pods.get(name, 0) + k
    return {problem.running[r].spec.job for r in placement.evicted}, pods, score


def _cpu_node(name: str, cpu: float = 4) -> dict[str, Any]:
    return {"name": name, "gpus": 0, "cpu": cpu, "memory_gib": 64, "labels": {"role": "cpu"}}


#: A second priority level, placed by the greedy on the CPU node: weighted levels are then 1 and 10.
LOW = {"name": "lo", "team": "b", "tasks": [{"name": "c", "cpu": 4, "node_selector": {"role": "cpu"}}]}


def test_in_nominal_loss_is_counted_in_gpus_not_milli_gpus() -> None:
    """Team a (nominal 4 GPUs) holds all 4 on n1; hi (team a, 2 GPUs) may evict 'old' (3 GPUs, same team). The
    model: +20 (2 GPUs × level 10) − 10 (one GPU fewer within nominal × nominal value 10) − 5 (the eviction) > 0.
    The warm start counted the lost GPU in milli-GPU (−10,000) and never made the move."""
    nodes = [{"name": "n1", "gpu_model": H100, "gpus": 4, "cpu": 64, "memory_gib": 512}, _cpu_node("c1")]
    running = [{"job": "keep", "team": "a", "pods": [{"task": "w", "node": "n1", "gpus": [0]}]},
               {"job": "old", "team": "a", "preemptible": True, "started_at": STARTED,
                "pods": [{"task": "w", "node": "n1", "gpus": [1, 2, 3]}]}]
    jobs = [{"name": "hi", "team": "a", "priority": 10, "tasks": [{"name": "w", "gpus": 2}]}, LOW]
    teams = [{"name": "a", "quota": {"gpus": {"nominal": 4}}}, {"name": "b"}]
    found = _warm(_problem(nodes, jobs, running, teams, priority_mode="weighted"))
    assert found is not None
    evicted, pods, _ = found
    assert evicted == {"old"} and pods == {"hi": 1, "lo": 1}


def test_shared_pods_count_their_share_in_value_and_quota() -> None:
    """Shares: 'old' (team a, nominal 1 GPU) holds n1's plain GPU and every CPU; hi (team a) asks 0.75 of the
    shared GPU beside it. The model: +7.5 (0.75 × level 10) + 7.5 (hi's share within a's nominal once 'old'
    leaves it room, in quanta of 1/4, each 10 per GPU) − 1 (the eviction, weights.preemption 0.1). The warm start
    valued hi's pod as a CPU pod (0.1), did not count its share in the quota and counted the lost GPU in milli-GPU."""
    nodes = [{"name": "n1", "gpu_model": H100, "gpus": 2, "cpu": 8, "memory_gib": 512,
              "sharing": {0: {"mode": "time-slicing", "replicas": 4}}}, _cpu_node("c1")]
    running = [{"job": "old", "team": "a", "preemptible": True, "started_at": STARTED,
                "pods": [{"task": "w", "node": "n1", "gpus": [1], "cpu": 8}]}]
    jobs = [{"name": "hi", "team": "a", "priority": 10, "tasks": [{"name": "s", "gpu_share": 0.75, "cpu": 8}]},
            LOW]
    teams = [{"name": "a", "quota": {"gpus": {"nominal": 1}}}, {"name": "b"}]
    problem = _problem(nodes, jobs, running, teams, priority_mode="weighted", weights={"preemption": 0.1})
    found = _warm(problem)
    assert found is not None
    evicted, pods, _ = found
    assert evicted == {"old"} and pods == {"hi": 1, "lo": 1}
    gained = _terms(problem, warm=True)
    before = _terms(problem, warm=False)
    assert {name: round(gained[name] - before.get(name, 0.0), 6) for name in ("priority", "quota", "preemption")} == {
        "priority": 7.5, "quota": 7.5, "preemption": -1.0}


def _terms(problem: Problem, warm: bool) -> dict[str, float]:
    """The objective's terms of the greedy plan, or of the warm start from it."""
    base = greedy(problem)
    ctx = compiler.build(problem)
    if warm:
        found = warm_start(ctx, base, budget_s=2.0)
        assert found is not None
        values = found[1]
    else:
        values = ctx.assignment_of(base)
    return ctx.objective.values(lambda v: values[v.index])


def test_mig_pods_over_the_borrowing_limit_are_not_placed_by_eviction() -> None:
    """Team a may hold 1 GPU (nominal 1, borrowing limit 0): 'big' (priority 10) asks 9 × 1g.10gb (9/8 GPU) and
    'small' (priority 5) 4 × 1g.10gb. Both need 'old' (team a, priority 0, n1's CPUs) evicted. The warm start
    counted MIG pods as no GPU, took 'big', and the model refused the whole extension; counted as the quota
    counts them, 'big' breaks the limit and 'small' goes in."""
    layout = {0: [{"profile": "1g.10gb", "start": s} for s in range(7)],
              1: [{"profile": "1g.10gb", "start": s} for s in range(7)]}
    nodes = [{"name": "n1", "gpu_model": H100, "gpus": 2, "cpu": 16, "memory_gib": 512, "mig": layout},
             _cpu_node("c1")]
    running = [{"job": "old", "team": "a", "preemptible": True, "started_at": STARTED,
                "pods": [{"task": "c", "node": "n1", "cpu": 16}]}]
    jobs = [{"name": "big", "team": "a", "priority": 10,
             "tasks": [{"name": "m", "replicas": 9, "mig_profile": "1g.10gb", "cpu": 1}]},
            {"name": "small", "team": "a", "priority": 5,
             "tasks": [{"name": "m", "replicas": 4, "mig_profile": "1g.10gb", "cpu": 1}]}, LOW]
    teams = [{"name": "a", "quota": {"gpus": {"nominal": 1, "borrowing_limit": 0}}}, {"name": "b"}]
    found = _warm(_problem(nodes, jobs, running, teams))
    assert found is not None
    evicted, pods, _ = found
    assert evicted == {"old"} and pods == {"small": 4, "lo": 1}


def test_an_elastic_task_keeps_room_for_the_other_tasks_minimum() -> None:
    """Elastic 'el': 1..2 workers (4 GPUs, 30 CPUs each) and a launcher (30 CPUs) on n1 (64 CPUs), all held by
    'old'. The warm start filled both workers first (2 pods: the job's `needed`) and left the launcher out, a gang
    the model refuses; minimums first it places one worker and the launcher."""
    nodes = [{"name": "n1", "gpu_model": H100, "gpus": 8, "cpu": 64, "memory_gib": 512}]
    running = [{"job": "old", "preemptible": True, "started_at": STARTED,
                "pods": [{"task": "w", "node": "n1", "gpus": list(range(8)), "cpu": 64}]}]
    jobs = [{"name": "el", "priority": 10, "tasks": [
        {"name": "worker", "replicas": 2, "min_replicas": 1, "gpus": 4, "cpu": 30},
        {"name": "launcher", "cpu": 30}]}]
    problem = _problem(nodes, jobs, running)
    found = _warm(problem)
    assert found is not None
    evicted, pods, _ = found
    assert evicted == {"old"} and pods == {"el": 2}
    worker, launcher = problem.job_tasks[0]
    base = greedy(problem)
    placement = warm_start(compiler.build(problem), base, budget_s=2.0)
    assert placement is not None and placement[0].counts == {(worker, 0): 1, (launcher, 0): 1}


def test_a_task_and_its_right_size_alternative_share_their_pods() -> None:
    """A right-size job (3 one-GPU pods, or 1g instances in their stead) needs 'old' evicted. Filling the declared
    task and its MIG alternative each up to its replicas placed 6 pods for 3, a gang the model refuses."""
    layout = {0: [{"profile": "1g.10gb", "start": s} for s in range(7)]}
    node = {"name": "n1", "gpu_model": H100, "gpus": 4, "cpu": 16, "memory_gib": 512, "mig": layout}
    running = [{"job": "old", "preemptible": True, "started_at": STARTED,
                "pods": [{"task": "w", "node": "n1", "gpus": [1, 2, 3], "cpu": 16}]}]
    jobs = [{"name": "rs", "priority": 10, "right_size": True, "observed_gpu_memory_gib": 5,
             "tasks": [{"name": "w", "replicas": 3, "gpus": 1, "cpu": 2}]}]
    problem = rightsize.build_problem(PlacementRequest.model_validate({
        "cluster": {"nodes": [node], "running": running}, "jobs": jobs,
        "policy": {"deterministic": True, "workers": 1, "now": NOW, "preemption": True}}))
    assert len(problem.tasks) == 2  # the declared task and its alternative
    found = _warm(problem)
    assert found is not None
    evicted, pods, _ = found
    assert evicted == {"old"} and pods == {"rs": 3}
