"""End to end through `placement.plan`: optimality against brute force, properties, determinism, reasons.

The brute force below is written from the definitions (the v1 wire format in models/), not from the
compiler: its own candidate filter, its own capacity arithmetic, its own objective. If the
compiler mis-encodes a rule, the two disagree.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from functools import cache
from itertools import product
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_models import PlacementRequest, Plan, PlanStatus

import placement
from placement.generate import generate

H100 = "H100-SXM5-80GB"
A100_40 = "A100-SXM4-40GB"
#: GPU memory per model, from the data sheets (not from the catalog the solver uses).
GPU_MEMORY = {H100: 80.0, A100_40: 40.0}
CPU_POD_VALUE = 0.01
TIMING = ("wall_s", "build_s", "first_plan_s", "phases")

# ---------------------------------------------------------------------------------------------
# Independent semantics: labels, taints, free capacity, candidates, objective.


def _labels(node: dict[str, Any]) -> dict[str, str]:
    labels = {"kubernetes.io/hostname": node["name"]}
    if node.get("pool"):
        labels["placement/pool"] = node["pool"]
    if node.get("gpu_model"):
        labels["placement/gpu-model"] = node["gpu_model"]  # tests use canonical names only
    labels.update(node.get("labels", {}))
    return labels


def _tolerates(tol: dict[str, Any], taint: dict[str, Any]) -> bool:
    if tol.get("effect") is not None and tol["effect"] != taint.get("effect", "NoSchedule"):
        return False
    if tol.get("operator", "Equal") == "Exists":
        return tol.get("key", "") in ("", taint["key"])
    return tol.get("key", "") == taint["key"] and tol.get("value", "") == taint.get("value", "")


def _allowed(task: dict[str, Any], node: dict[str, Any]) -> bool:
    labels = _labels(node)
    if any(labels.get(k) != v for k, v in task.get("node_selector", {}).items()):
        return False
    for taint in node.get("taints", []):
        if taint.get("effect", "NoSchedule") == "PreferNoSchedule":
            continue
        if not any(_tolerates(t, taint) for t in task.get("tolerations", [])):
            return False
    if task.get("gpus", 0) > 0:
        if node.get("gpus", 0) == 0:
            return False
        need = task.get("gpu_memory_gib")
        if need is not None and GPU_MEMORY[node["gpu_model"]] < need:
            return False
    return True


def _free(req: dict[str, Any]) -> tuple[list[tuple[float, float, float]], list[bool]]:
    """Per node: (free healthy GPUs, free CPU, free GiB), and whether every healthy GPU is free."""
    free, whole = [], []
    for node in req["cluster"]["nodes"]:
        pods = [p for r in req["cluster"].get("running", []) for p in r["pods"] if p["node"] == node["name"]]
        healthy = set(range(node.get("gpus", 0))) - set(node.get("unhealthy_gpus", []))
        held = {g for p in pods for g in p.get("gpus", [])}
        free.append((len(healthy - held), node["cpu"] - sum(p.get("cpu", 0) for p in pods),
                     node["memory_gib"] - sum(p.get("memory_gib", 0) for p in pods)))
        whole.append(bool(healthy) and not (healthy & held))
    return free, whole


def _could_fit(req: dict[str, Any]) -> set[str]:
    """Jobs the screen keeps (placement.screen; its soundness is tested against the brute force below)."""
    from placement import problem as problem_mod
    from placement import screen

    problem = problem_mod.build(PlacementRequest.model_validate(req))
    return {job.name for j, job in enumerate(problem.jobs) if screen.could_fit(problem, j)}


def _level_weights(req: dict[str, Any]) -> dict[int, float]:
    """1 (lowest) to 10 (highest) per level, over the levels of jobs that could fit at all."""
    kept = _could_fit(req)
    levels = sorted({j.get("priority", 0) for j in req["jobs"] if j["name"] in kept}) or [0]
    if len(levels) == 1:
        return {levels[0]: 1.0}
    return {p: 1.0 + 9.0 * i / (len(levels) - 1) for i, p in enumerate(levels)}


def _pod_value(req: dict[str, Any], job: dict[str, Any], task: dict[str, Any]) -> float:
    w = req.get("policy", {}).get("weights", {}).get("priority", 1.0)
    gpus = task.get("gpus", 0)
    return w * _level_weights(req).get(job.get("priority", 0), 0.0) * (gpus if gpus > 0 else CPU_POD_VALUE)


def _frag_weight(req: dict[str, Any]) -> float:
    return req.get("policy", {}).get("weights", {}).get("fragmentation", 0.1)


def _score(req: dict[str, Any], counts: dict[tuple[str, str, str], int]) -> float:
    """Objective of pods-per-(job, task, node) counts, from the definitions."""
    _, whole = _free(req)
    names = [n["name"] for n in req["cluster"]["nodes"]]
    value, broken = 0.0, set()
    for job in req["jobs"]:
        for task in job["tasks"]:
            for node in names:
                k = counts.get((job["name"], task["name"], node), 0)
                value += k * _pod_value(req, job, task)
                if k and task.get("gpus", 0) > 0 and whole[names.index(node)]:
                    broken.add(node)
    return value - _frag_weight(req) * len(broken)


def _plan_counts(plan: Plan) -> dict[tuple[str, str, str], int]:
    counts: dict[tuple[str, str, str], int] = {}
    for a in plan.assignments:
        counts[a.job, a.task, a.node] = counts.get((a.job, a.task, a.node), 0) + 1
    return counts


Option = tuple[tuple[tuple[float, float, float], ...], frozenset[int], float]


def job_options(req: dict[str, Any], job: dict[str, Any],
                value_of: Callable[[dict[str, Any], dict[str, Any], dict[str, Any]], float]) -> list[Option]:
    """Every way to place the job on its own (at least min_available pods): per-node usage, the nodes its GPU
    pods touch, and its value (`value_of(req, job, task)` per pod)."""
    nodes = req["cluster"]["nodes"]
    pairs = [(task, n) for task in job["tasks"] for n in range(len(nodes)) if _allowed(task, nodes[n])]
    needed = job.get("min_available") or sum(t.get("replicas", 1) for t in job["tasks"])
    out = []
    for ks in product(*[range(task.get("replicas", 1) + 1) for task, _ in pairs]):
        per_task: dict[str, int] = {}
        for (task, _), k in zip(pairs, ks, strict=True):
            per_task[task["name"]] = per_task.get(task["name"], 0) + k
        if any(per_task.get(t["name"], 0) > t.get("replicas", 1) for t in job["tasks"]):
            continue
        if sum(ks) < needed:
            continue
        use = [[0.0, 0.0, 0.0] for _ in nodes]
        gpu_nodes, value = set(), 0.0
        for (task, n), k in zip(pairs, ks, strict=True):
            if not k:
                continue
            use[n][0] += k * task.get("gpus", 0)
            use[n][1] += k * task.get("cpu", 0)
            use[n][2] += k * task.get("memory_gib", 0)
            value += k * value_of(req, job, task)
            if task.get("gpus", 0) > 0:
                gpu_nodes.add(n)
        out.append((tuple(tuple(u) for u in use), frozenset(gpu_nodes), value))
    return out


def brute_force(req: dict[str, Any]) -> float:
    """The best objective over every feasible assignment of pod counts per (task, node)."""
    free0, whole = _free(req)
    jobs = req["jobs"]

    opts = [job_options(req, job, _pod_value) for job in jobs]

    @cache
    def best(j: int, free: tuple[tuple[float, float, float], ...], touched: frozenset[int]) -> float:
        if j == len(jobs):
            return -_frag_weight(req) * sum(1 for n in touched if whole[n])
        result = best(j + 1, free, touched)  # the job waits
        for use, gpu_nodes, value in opts[j]:
            left = tuple(tuple(f - u for f, u in zip(fr, us, strict=True)) for fr, us in zip(free, use, strict=True))
            if all(x >= -1e-9 for row in left for x in row):
                result = max(result, value + best(j + 1, left, touched | gpu_nodes))
        return result

    return best(0, tuple(free0), frozenset())


# ---------------------------------------------------------------------------------------------
# Random instances


@st.composite
def instances(draw: st.DrawFn, max_nodes: int = 3, max_gpus: int = 4, max_jobs: int = 4, max_tasks: int = 2,
              max_replicas: int = 2, deterministic: bool = True) -> dict[str, Any]:
    nodes, running = [], []
    for i in range(draw(st.integers(1, max_nodes))):
        gpus = draw(st.integers(0, max_gpus))
        node: dict[str, Any] = {"name": f"n{i}", "pool": draw(st.sampled_from(["p1", "p2"])), "gpus": gpus,
                                "cpu": draw(st.sampled_from([4, 8, 16])),
                                "memory_gib": draw(st.sampled_from([16, 32, 64]))}
        if gpus:
            node["gpu_model"] = draw(st.sampled_from([H100, A100_40]))
            node["unhealthy_gpus"] = draw(st.lists(st.integers(0, gpus - 1), max_size=1, unique=True))
        if draw(st.booleans()):
            node["labels"] = {"zone": draw(st.sampled_from(["a", "b"]))}
        taint = draw(st.sampled_from([None, "NoSchedule", "PreferNoSchedule", "NoExecute"]))
        if taint:
            node["taints"] = [{"key": "dedicated", "value": draw(st.sampled_from(["x", "y"])), "effect": taint}]
        nodes.append(node)
        if draw(st.integers(0, 2)) == 0:
            held = draw(st.lists(st.integers(0, gpus - 1), max_size=gpus, unique=True)) if gpus else []
            running.append({"job": f"r{i}", "pods": [{
                "task": "w", "node": node["name"], "gpus": held,
                "cpu": draw(st.integers(0, node["cpu"] // 2)),
                "memory_gib": draw(st.integers(0, node["memory_gib"] // 2))}]})
    names = [n["name"] for n in nodes]
    selectors = st.sampled_from([{}, {}, {"zone": "a"}, {"placement/pool": "p1"}, {"placement/gpu-model": H100},
                                 {"kubernetes.io/hostname": names[0]}])
    tolerations = st.sampled_from([[], [], [{"key": "dedicated", "operator": "Exists"}],
                                   [{"key": "dedicated", "value": "x"}],
                                   [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
                                   [{"operator": "Exists"}]])
    jobs = []
    for j in range(draw(st.integers(1, max_jobs))):
        tasks = []
        for t in range(draw(st.integers(1, max_tasks))):
            gpus = draw(st.sampled_from([0, 1, 1, 2, 2, 3, 4][: max_gpus + 3]))
            task: dict[str, Any] = {"name": f"t{t}", "replicas": draw(st.integers(1, max_replicas)), "gpus": gpus,
                                    "cpu": draw(st.sampled_from([0, 1, 2, 4])),
                                    "memory_gib": draw(st.sampled_from([0, 4, 8, 16])),
                                    "node_selector": draw(selectors), "tolerations": draw(tolerations)}
            if not (gpus or task["cpu"] or task["memory_gib"]):
                task["cpu"] = 1  # zero-demand tasks crash greedy: see test_task_without_any_demand_is_placed
            if gpus and draw(st.integers(0, 3)) == 0:
                task["gpu_memory_gib"] = draw(st.sampled_from([40, 60, 80]))
            tasks.append(task)
        job: dict[str, Any] = {"name": f"j{j}", "priority": draw(st.sampled_from([0, 1, 5])), "tasks": tasks}
        pods = sum(t["replicas"] for t in tasks)
        if pods > 1 and draw(st.booleans()):
            job["min_available"] = draw(st.integers(1, pods))
        jobs.append(job)
    policy: dict[str, Any] = {
        # the objective these tests recompute is the weighted one; strict classes: tests/test_priority.py
        "priority_mode": "weighted",
        "deterministic": deterministic, "time_limit_s": 20.0 if deterministic else 2.0,
        "workers": draw(st.sampled_from([1, 2])), "seed": draw(st.integers(0, 3)),
        # Weights whose products with the level weights are exact in thousandths (the model's scale).
        "weights": {"priority": draw(st.sampled_from([1.0, 2.0])),
                    "fragmentation": draw(st.sampled_from([0.0, 0.1, 1.5]))},
    }
    return {"cluster": {"pools": [{"name": "p1"}, {"name": "p2"}], "nodes": nodes, "running": running},
            "jobs": jobs, "policy": policy}


def _check_plan(req: dict[str, Any], plan: Plan) -> None:
    """Properties every plan has: verified, gangs whole, every pending job explained, never below greedy."""
    assert placement.verify(PlacementRequest.model_validate(req), plan) == []
    per_job: dict[str, int] = {}
    per_task: dict[tuple[str, str], int] = {}
    for a in plan.assignments:
        per_job[a.job] = per_job.get(a.job, 0) + 1
        per_task[a.job, a.task] = per_task.get((a.job, a.task), 0) + 1
    pending = {p.job: p.reason for p in plan.pending}
    for job in req["jobs"]:
        pods = sum(t.get("replicas", 1) for t in job["tasks"])
        needed = job.get("min_available") or pods
        if job["name"] in per_job:
            assert per_job[job["name"]] >= needed, f"gang {job['name']} split"
            for t in job["tasks"]:
                assert per_task.get((job["name"], t["name"]), 0) <= t.get("replicas", 1)
            assert job["name"] not in pending
        else:
            assert pending.get(job["name"], "").strip(), f"job {job['name']} pending without a reason"
    assert plan.solver.baseline_objective is not None
    assert plan.objective.total >= plan.solver.baseline_objective - 1e-9
    if plan.solver.winner == "baseline":
        assert abs(plan.objective.total - plan.solver.baseline_objective) <= 1e-6
    # The plan's reported score is the score of its own assignments.
    assert abs(plan.objective.total - _score(req, _plan_counts(plan))) <= 1e-6
    assert plan.status in typing.get_args(PlanStatus)


# ---------------------------------------------------------------------------------------------
# Optimality and properties


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_solver_matches_brute_force_optimum(req: dict[str, Any]) -> None:
    plan = placement.plan(req)
    _check_plan(req, plan)
    assert plan.status == "optimal"
    optimum = brute_force(req)
    assert abs(plan.objective.total - optimum) <= 1e-6, (plan.objective.total, optimum)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_nodes=5, max_gpus=8, max_jobs=6, max_tasks=2, max_replicas=3, deterministic=False))
def test_random_plans_verify_and_keep_gangs_whole(req: dict[str, Any]) -> None:
    _check_plan(req, placement.plan(req))


def _tiny(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]], **policy: Any) -> dict[str, Any]:
    # hand-checked against the weighted objective (strict classes: tests/test_priority.py)
    return {"cluster": {"nodes": nodes}, "jobs": jobs,
            "policy": {"deterministic": True, "priority_mode": "weighted", **policy}}


def _h100(name: str, gpus: int = 8, **extra: Any) -> dict[str, Any]:
    return {"name": name, "gpu_model": H100, "gpus": gpus, "cpu": 64, "memory_gib": 512, **extra}


def test_brute_force_sanity_on_a_hand_checked_instance() -> None:
    # Two 4-GPU nodes; a 2×4-GPU gang (priority 1) vs two 2-GPU jobs (priority 0).
    # Levels {0, 1} weigh 1 and 10: the gang is worth 80 − 0.2 (two whole nodes broken).
    req = _tiny([_h100("a", 4), _h100("b", 4)], [
        {"name": "gang", "priority": 1, "tasks": [{"name": "w", "replicas": 2, "gpus": 4}]},
        {"name": "s1", "tasks": [{"name": "w", "gpus": 2}]},
        {"name": "s2", "tasks": [{"name": "w", "gpus": 2}]},
    ])
    assert abs(brute_force(req) - 79.8) < 1e-9
    plan = placement.plan(req)
    assert abs(plan.objective.total - 79.8) < 1e-9
    assert plan.objective.terms == {"priority": 80.0, "fragmentation": -0.2}


def _greedy_blocks_itself() -> dict[str, Any]:
    """Greedy takes the bigger gang first (3 GPUs over both 2-GPU nodes), after which neither 2-GPU
    job fits; the two 2-GPU jobs, one per node, are worth more (4 GPUs vs 3)."""
    return _tiny([_h100("a", 2), _h100("b", 2)], [
        {"name": "big", "tasks": [{"name": "w", "gpus": 1, "replicas": 3}]},
        {"name": "x", "tasks": [{"name": "w", "gpus": 2}]},
        {"name": "y", "tasks": [{"name": "w", "gpus": 2}]},
    ], weights={"fragmentation": 0.0})


def test_solver_beats_greedy_when_greedy_blocks_itself() -> None:
    req = _greedy_blocks_itself()
    plan = placement.plan(req)
    assert plan.solver.baseline_objective == 3.0
    assert plan.objective.total == brute_force(req) == 4.0 + 0.0
    assert plan.solver.winner == "solver"
    assert {a.job for a in plan.assignments} == {"x", "y"}


def test_task_without_any_demand_is_placed() -> None:
    # A task with gpus 0, cpu 0, memory_gib 0 (all defaults) is valid input and fits anywhere.
    req = _tiny([{"name": "n0", "cpu": 4, "memory_gib": 16}], [{"name": "j", "tasks": [{"name": "t", "replicas": 2}]}])
    plan = placement.plan(req)
    _check_plan(req, plan)
    assert len(plan.assignments) == 2


# ---------------------------------------------------------------------------------------------
# Determinism


def _without_timing(plan: Plan) -> dict[str, Any]:
    data = plan.model_dump(mode="json")
    for key in TIMING:
        data["solver"].pop(key)
    return data


def test_deterministic_mode_repeats_the_same_plan() -> None:
    # Sized so the deterministic budget ends before optimality is proved (a feasible, not trivial, plan).
    req = generate(48, 100, seed=3)
    req["policy"] = {"deterministic": True, "time_limit_s": 0.1, "workers": 2, "seed": 7}
    first, second = placement.plan(req), placement.plan(req)
    assert first.solver.mode == "deterministic"
    assert first.assignments
    assert _without_timing(first) == _without_timing(second)
    assert first.model_dump_json(exclude={"solver": set(TIMING)}) == second.model_dump_json(
        exclude={"solver": set(TIMING)})


# ---------------------------------------------------------------------------------------------
# Pending reasons


def test_over_subscribed_instance_has_the_right_pending_reasons() -> None:
    req = _tiny(
        [_h100("a", labels={"zone": "x"}), _h100("b", labels={"zone": "x"}),
         _h100("t", 2, taints=[{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}])],
        [
            {"name": "hi", "priority": 10, "tasks": [{"name": "w", "replicas": 2, "gpus": 8}]},
            {"name": "lo", "tasks": [{"name": "w", "gpus": 4}]},
            {"name": "huge", "tasks": [{"name": "w", "replicas": 3, "gpus": 8}]},
            {"name": "picky", "tasks": [{"name": "w", "gpus": 1, "node_selector": {"zone": "y"}}]},
            {"name": "tainted", "tasks": [{"name": "w", "gpus": 1,
                                           "node_selector": {"kubernetes.io/hostname": "t"}}]},
            {"name": "memory", "tasks": [{"name": "w", "gpus": 1, "gpu_memory_gib": 100}]},
        ],
    )
    plan = placement.plan(req)
    _check_plan(req, plan)
    assert {a.job for a in plan.assignments} == {"hi"}
    reasons = {p.job: p.reason for p in plan.pending}
    assert set(reasons) == {"lo", "huge", "picky", "tainted", "memory"}
    assert "no node matches node_selector" in reasons["picky"] and "zone" in reasons["picky"]
    assert "does not fit even if no other job were placed" in reasons["huge"]
    assert reasons["lo"].startswith("outranked by jobs hi (priority 10, 16 GPUs)"), reasons["lo"]
    constraints = {p.job: p.constraint for p in plan.pending}
    # weighted levels: hi's 16 GPUs outweigh lo's 4 whatever lo's level, so value (capacity) binds, not the class
    assert constraints == {"lo": "capacity", "huge": "gang_size", "picky": "filter", "tainted": "filter",
                           "memory": "filter"}
    assert "taint" in reasons["tainted"] and "dedicated=infer:NoSchedule" in reasons["tainted"]
    assert "100 GiB of GPU memory" in reasons["memory"]


def test_pending_reason_does_not_claim_a_gang_cannot_fit_when_it_can() -> None:
    # g fits alone (light on b, heavy on a: only a has CPU for heavy), but best-fit puts light on a
    # first. h (higher priority) takes a, so g waits: the reason must blame h, not the cluster size.
    nodes = [_h100("a", 1), {**_h100("b", 2), "cpu": 5}]
    g = {"name": "g", "tasks": [{"name": "light", "gpus": 1}, {"name": "heavy", "gpus": 1, "cpu": 10}]}
    h = {"name": "h", "priority": 5, "tasks": [{"name": "w", "gpus": 1, "cpu": 10}]}
    alone = placement.plan(_tiny(nodes, [g]))
    assert {a.job for a in alone.assignments} == {"g"}  # it does fit when nothing else is placed
    plan = placement.plan(_tiny(nodes, [g, h]))
    assert {a.job for a in plan.assignments} == {"h"}
    reason = plan.pending[0].reason
    assert "does not fit even if no other job were placed" not in reason, reason
    assert reason.startswith("outranked by jobs h (priority 5, ") and plan.pending[0].constraint == "priority", reason


def test_pending_reason_does_not_blame_the_time_limit_when_the_plan_is_optimal() -> None:
    # Fragmentation weight 2 > the value of a 1-GPU pod, so leaving the job pending is optimal
    # (objective 0 vs 1 − 2 = −1). The reason must not claim the solver ran out of time.
    req = _tiny([_h100("a")], [{"name": "one", "tasks": [{"name": "w", "gpus": 1}]}],
                weights={"fragmentation": 2.0})
    plan = placement.plan(req)
    assert plan.status == "optimal" and plan.objective.total == 0.0 == brute_force(req)
    reason = plan.pending[0].reason
    assert "time limit" not in reason, reason


# ---------------------------------------------------------------------------------------------
# Time limit


def test_short_time_limit_returns_a_valid_plan() -> None:
    req = generate(64, 150, seed=1)
    req["policy"] = {"time_limit_s": 0.5, "workers": 2}
    plan = placement.plan(req)
    assert plan.status in typing.get_args(PlanStatus)
    assert plan.solver.mode == "wall-clock"
    assert placement.verify(PlacementRequest.model_validate(req), plan) == []
    assert plan.objective.total >= plan.solver.baseline_objective - 1e-9
    assert plan.assignments  # the greedy floor places work even if CP-SAT finds nothing in time
    assert plan.solver.wall_s < 30  # loose: only that the limit is not ignored outright


def test_every_field_at_its_bound_plans_and_verifies() -> None:
    """Numbers each within their bound can still multiply past 64 bits (weights × class weights × prices, or the
    lost work of a century-long job on a spot node): the plan comes back, verified, never an overflow."""
    from placement_models import base as bounds

    spec = {"gpu_model": "H100-SXM5-80GB", "gpus": 8, "cpu": bounds.MAX_CPU, "memory_gib": bounds.MAX_MEMORY_GIB}
    weights = {k: bounds.MAX_WEIGHT for k in ("priority", "fragmentation", "cost", "fairness", "aging", "preemption",
                                               "topology", "stability")}
    req = {
        "cluster": {"pools": [{"name": "p", "gpu_hour_price": bounds.MAX_PRICE, "capacity_type": "spot",
                               "reclaim_rate_per_h": 0.5}],
                    "nodes": [{"name": f"n{i}", "pool": "p", **spec} for i in range(3)],
                    "running": [{"job": "r", "team": "t", "priority": bounds.MIN_PRIORITY, "preemptible": True,
                                 "started_at": "2020-01-01T00:00:00Z", "expected_runtime_h": bounds.MAX_HOURS,
                                 "pods": [{"task": "w", "node": "n0", "gpus": [0]}]}]},
        "teams": [{"name": "t", "weight": bounds.MAX_WEIGHT, "usage_gpu_h": bounds.MAX_GPU_HOURS},
                  {"name": "u", "weight": 1e-6}],
        "jobs": [{"name": f"j{k}", "team": "tu"[k % 2],
                  "priority": bounds.MAX_PRIORITY if k % 2 else bounds.MIN_PRIORITY,
                  "submitted_at": "1970-01-01T00:00:00Z", "spot_ok": True, "checkpoint_interval_h": bounds.MAX_HOURS,
                  "expected_runtime_h": bounds.MAX_HOURS,
                  "tasks": [{"name": "w", "replicas": 2, "gpus": 4, "cpu": bounds.MAX_CPU / 4}]} for k in range(4)],
        "policy": {"time_limit_s": 2, "workers": 1, "deterministic": True, "weights": weights, "preemption": True},
    }
    result = placement.plan(req)
    assert result.status in ("optimal", "feasible")
    assert placement.verify(PlacementRequest.model_validate(req), result) == []


def test_greedy_plan_is_the_floor_the_solver_starts_from() -> None:
    req = _greedy_blocks_itself()
    floor = placement.greedy_plan(req)
    assert {a.job for a in floor.assignments} == {"big"}  # the greedy blocks itself
    assert placement.verify(req, floor) == []
    assert floor.solver.status == "SKIPPED"
    assert placement.plan(req).solver.baseline_objective == 3.0  # the same floor, scored by the model


def test_with_no_time_to_search_the_greedy_plan_is_scored_not_searched() -> None:
    """Deterministic mode sizes from the limit alone: 0.02 s can compile the 150 tasks' greedy pairs but not the
    affordable ones too and leave a search its share, so the model only scores the greedy plan (no CP-SAT
    objective, no dominance); the plan is that greedy plan, scored term by term and verified."""
    req = generate(64, 150, seed=1)
    req["policy"] = {"time_limit_s": 0.02, "workers": 1, "deterministic": True}
    plan = placement.plan(req)
    greedy = placement.greedy_plan(req)
    assert plan.solver.search == "none" and plan.solver.winner == "baseline"
    assert plan.objective.terms and plan.objective.total == plan.solver.baseline_objective
    assert {(a.job, a.node) for a in plan.assignments} == {(a.job, a.node) for a in greedy.assignments}
    assert placement.verify(PlacementRequest.model_validate(req), plan) == []
    longer = placement.plan({**req, "policy": {**req["policy"], "time_limit_s": 2.0}})
    assert longer.solver.search != "none"  # the same request with time to search searches


def test_with_no_time_to_score_the_greedy_plan_goes_out_unscored_and_verified() -> None:
    """0.01 s cannot even pay for the model that scores 150 tasks: the greedy plan goes out as it is (the limit is
    a promise for the whole call), without a score, as `greedy_plan` gives it, and every hard rule verified."""
    req = generate(64, 150, seed=1)
    req["policy"] = {"time_limit_s": 0.01, "workers": 1, "deterministic": True}
    plan = placement.plan(req)
    greedy = placement.greedy_plan(req)
    assert plan.solver.search == "none" and plan.solver.objective is None and "unscored" in (plan.solver.note or "")
    assert not plan.objective.terms and plan.objective.total == 0 and plan.status == "feasible"
    assert {(a.job, a.node) for a in plan.assignments} == {(a.job, a.node) for a in greedy.assignments}
    assert placement.verify(PlacementRequest.model_validate(req), plan) == []
