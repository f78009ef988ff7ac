"""Windows (LNS) over the compiled model: valid, never worse than greedy, reproducible when asked."""

from __future__ import annotations

import pytest

from placement import plan
from placement.api import parse
from placement.generate import generate
from placement.search import lns
from placement.verify import verify


@pytest.fixture
def windows_always(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lns, "LNS_ABOVE", 0)
    monkeypatch.setattr(lns, "WINDOW_NODES", 16)
    monkeypatch.setattr(lns, "WINDOW_JOBS", 40)


def _request(seed: int) -> dict:
    data = generate(48, 160, seed)
    data["policy"] = {"time_limit_s": 2, "workers": 1, "seed": 7, "deterministic": True}
    return data


@pytest.mark.usefixtures("windows_always")
def test_windows_plan_verifies_and_is_never_below_greedy() -> None:
    data = _request(2)
    result = plan(data)
    assert result.solver.search == "windows"
    assert verify(parse(data), result) == []
    assert result.objective.total >= result.solver.baseline_objective - 1e-9
    assert result.status == "feasible"


@pytest.mark.usefixtures("windows_always")
def test_windows_are_reproducible_in_deterministic_mode() -> None:
    data = _request(3)
    a, b = plan(data), plan(data)
    assert a.assignments == b.assignments and a.pending == b.pending
    assert a.objective == b.objective


def test_node_groups_follow_racks() -> None:
    from placement import compile as compiler
    from placement import problem as problem_mod

    problem = problem_mod.build(parse(_request(1)))
    groups = lns.node_groups(compiler.build(problem))
    racks = [{problem.nodes[i].topology.rack for i in g.tolist()} for g in groups]
    assert all(len(r) == 1 for r in racks)
    assert sum(g.size for g in groups) == problem.n_nodes


def test_repair_windows_come_first_most_valuable_waiting_job_first() -> None:
    """A waiting job's repair window holds the nodes the model offers it, the jobs placed there and the nodes
    the model offers those to move to; the most valuable waiting jobs are tried first."""
    import numpy as np

    from placement import candidates, pricing, screen
    from placement import compile as compiler
    from placement.baseline import greedy

    node = {"gpu_model": "H100-SXM5-80GB", "gpus": 8, "cpu": 96, "memory_gib": 1024}
    taint = {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}
    tolerant = {"name": "main", "gpus": 8, "cpu": 8, "memory_gib": 64,
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "inference",
                                 "effect": "NoSchedule"}]}
    plain = {"name": "main", "gpus": 8, "cpu": 8, "memory_gib": 64}
    req = parse({"cluster": {"nodes": [{"name": "a", **node}, {"name": "b", **node},
                                       {"name": "c", **node, "taints": [taint]}]},
                 "jobs": [{"name": "held", "priority": 100, "tasks": [tolerant]},
                          {"name": "small", "priority": 10, "tasks": [{**plain, "gpus": 1}]},
                          {"name": "big", "priority": 10, "tasks": [plain]},
                          {"name": "filler", "priority": 100, "tasks": [{**plain, "gpus": 7}]}],
                 "policy": {"time_limit_s": 5, "workers": 1, "deterministic": True}})
    problem = screen.build_problem(req)
    base = greedy(problem, pricing.held_back(req, problem.nodes, problem.free))
    ctx = compiler.build(problem, candidates.select(problem, base, max_pairs=3, min_per_task=1))
    job_of_task = np.array([t.job for t in problem.tasks])
    cand = [np.asarray(c) for c in ctx.candidates]
    waiting = sorted(set(range(len(problem.jobs))) - base.placed_jobs(problem))
    targets = lns._targets(ctx, base, job_of_task, cand)
    assert set(targets) <= set(waiting) and targets
    ranks = [(-problem.jobs[j].priority, -problem.job_gpus(j)) for j in targets]
    assert ranks == sorted(ranks)  # highest priority, then most GPUs first
    window = lns._repair_window(ctx, base, targets[0], job_of_task, cand)
    own = {int(n) for t in problem.job_tasks[targets[0]] for n in cand[t]}
    assert own <= set(np.flatnonzero(window).tolist())
    holders = {int(job_of_task[t]) for (t, n), k in base.counts.items() if k and n in own}
    exits = {int(n) for h in holders for t in problem.job_tasks[h] for n in cand[t]}
    assert exits <= set(np.flatnonzero(window).tolist())  # where the jobs in its way may move


def test_the_window_kind_that_gains_more_runs_next() -> None:
    gains, tries = {"repair": 0.0, "random": 0.0}, {"repair": 0, "random": 0}
    assert lns._repair_next(gains, tries, 0)  # a repair first
    tries["repair"] = 1
    assert not lns._repair_next(gains, tries, 1)  # then a random window
    tries["random"] = 1
    assert lns._repair_next(gains, tries, 2) and not lns._repair_next(gains, tries, 3)  # tied: alternate
    gains["random"] = 5.0
    assert not lns._repair_next(gains, tries, 2)  # random windows gain more
    gains["repair"], tries["repair"] = 12.0, 2
    assert lns._repair_next(gains, tries, 3)  # 6 a repair against 5 a random window


@pytest.mark.usefixtures("windows_always")
def test_a_window_plan_the_caller_refuses_is_not_kept() -> None:
    """The caller's rule decides too (strict classes refuse a plan that gives up a higher class): a window
    that scores higher but is refused leaves the plan as it was."""
    from placement import api
    from placement.budget import Budget
    from placement.search.strategy import placement_from

    req = parse(_request(2))
    budget = Budget(2.0, True)
    front = api._front(req, budget)
    ctx, _, _, _ = api._first_model(req, front, budget)
    kept = lns.improve(ctx, front.baseline, req.policy, 2.0, lambda v: placement_from(ctx, v))
    refused = lns.improve(ctx, front.baseline, req.policy, 2.0, lambda v: placement_from(ctx, v),
                          accept=lambda plan, values: False)
    assert kept.improved > 0  # the windows find better plans here
    assert refused.improved == 0 and refused.placement is front.baseline
