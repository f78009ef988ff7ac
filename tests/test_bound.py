"""The class relaxation bounds every valid plan, restricted model or not, and plan() reports it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement import candidates, plan, pricing, reservation, screen, timeline
from placement import compile as compiler
from placement.api import first_model, parse
from placement.baseline import greedy
from placement.compile import terms
from placement.compile.context import SCALE, ModelContext
from placement.compile.priority import nominal_bonus
from placement.generate import generate
from placement.problem import Problem
from placement.search import bound, solve
from placement.verify import verify

LIBRARY = Path(__file__).resolve().parent.parent / "instances" / "library"


def _load(name: str) -> dict[str, Any]:
    path = LIBRARY / name
    if path.suffix == ".gz":
        with gzip.open(path, "rt") as handle:
            return json.load(handle)
    return json.loads(path.read_text())


def _contexts(data: dict[str, Any], max_pairs: int) -> tuple[ModelContext, ModelContext, float]:
    """(whole model, model restricted to `max_pairs` pairs, greedy objective) for one request."""
    req = parse(data)
    planned, _ = timeline.without_overdue(req)
    problem = reservation.attach(screen.build_problem(planned))
    base = greedy(problem, pricing.held_back(req, problem.nodes, problem.free))
    whole = compiler.build(problem)
    kept = candidates.select(problem, base, max_pairs=max_pairs, min_per_task=1)
    restricted = compiler.build(problem, kept)
    values = whole.assignment_of(base)
    return whole, restricted, sum(whole.objective.values(lambda v: values[v.index]).values())


def _trimmed(data: dict[str, Any], min_per_task: int) -> tuple[Problem, ModelContext]:
    """A request's problem and its model trimmed as tight as it goes: `min_per_task` best fits per task."""
    data["policy"] = {"time_limit_s": 5, "workers": 1}
    req = parse(data)
    problem = screen.build_problem(req)
    base = greedy(problem, pricing.held_back(req, problem.nodes, problem.free))
    return problem, compiler.build(problem, candidates.select(problem, base, max_pairs=1, min_per_task=min_per_task))


def _optimum(ctx: ModelContext, limit_s: float = 60.0, proven: bool = True) -> float:
    """The whole model solved to optimality (small requests only); with `proven` False, the best plan found
    within `limit_s` (a bound of the optimum must bound it too)."""
    policy = ctx.problem.request.policy.model_copy(update={"time_limit_s": limit_s, "workers": 2,
                                                           "deterministic": False})
    result = solve.run(ctx, policy, limit_s)
    assert result.status == "OPTIMAL" or (not proven and result.status == "FEASIBLE")
    return float(result.objective)


def _assert_bounds(data: dict[str, Any], proven: bool = True) -> tuple[float, bound.Bound, bound.Bound]:
    whole, restricted, greedy_value = _contexts(data, max_pairs=40)
    best = _optimum(whole, 60.0 if proven else 10.0, proven)
    assert greedy_value <= best + 1e-6
    from_whole = bound.relaxation(whole, greedy_value, 10.0)
    from_restricted = bound.relaxation(restricted, greedy_value, 10.0)
    assert from_whole is not None and from_restricted is not None
    assert from_whole.value >= best - 1e-6
    assert from_restricted.value >= best - 1e-6
    return best, from_whole, from_restricted


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), nodes=st.integers(2, 10), jobs=st.integers(1, 40))
def test_the_relaxation_bounds_the_optimum_from_whole_and_restricted_models(seed: int, nodes: int, jobs: int) -> None:
    data = generate(nodes, jobs, seed)
    data["policy"] = {"time_limit_s": 5, "workers": 1, "seed": 0}
    _assert_bounds(data, proven=False)  # some of these take CP-SAT a minute to prove: their best plan then


def test_the_relaxation_bounds_priced_spot_requests_where_prices_vary_by_node() -> None:
    data = _load("spot-S.json")
    best, _, from_restricted = _assert_bounds(data)
    assert from_restricted.value < 2 * abs(best) + 1  # priced rows credit unseen nodes their ceiling, not more


@pytest.mark.parametrize("name", ["teams-S.json", "mig-S.json", "topology-S.json"])
def test_the_relaxation_bounds_library_instances_with_teams_devices_and_topology(name: str) -> None:
    # quota credit and fairness live on team totals whose domains follow a trimmed model's pairs:
    # their declared caps, not those domains, must bound them
    _assert_bounds(_load(name))


def test_the_quota_cap_holds_when_class_weights_are_capped() -> None:
    # teams-L has enough GPUs per class that the strict weights reach their cap: its highest class adds nothing
    # within nominal while lower classes do, and the cap the quota term declares must still cover what they add
    problem, ctx = _trimmed(_load("teams-L.json"), 1)
    assert nominal_bonus(problem)[max(job.priority for job in problem.jobs)] == 0.0
    values = ctx.assignment_of(greedy(problem, pricing.held_back(problem.request, problem.nodes, problem.free)))
    quota = ctx.objective.values(lambda v: values[v.index])["quota"]
    assert 0 < quota <= ctx.objective.caps["quota"] / SCALE + 1e-6


def test_a_reward_on_variables_without_a_cap_gives_no_bound_in_a_trimmed_model(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(terms, "NAMES", terms.NAMES | {"made_up"})  # a term no module adds
    data = generate(8, 12, 5)
    data["policy"] = {"time_limit_s": 5, "workers": 1}
    _, restricted, greedy_value = _contexts(data, max_pairs=8)
    extra = restricted.model.new_int_var(0, 3, "made_up_reward")
    restricted.objective.add("made_up", [extra], [1.0])
    assert bound.relaxation(restricted, greedy_value, 5.0) is None
    restricted.objective.cap("made_up", 3.0)
    found = bound.relaxation(restricted, greedy_value, 5.0)
    assert found is not None


def test_a_reward_on_other_variables_counts_at_the_top_of_their_domain_in_a_whole_model(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """In a model every task saw whole, a reward without a cap on a variable that is no placement is bounded by
    its domain's top: the bound grows by exactly coefficient × top (read from the end of CP-SAT's domain)."""
    monkeypatch.setattr(terms, "NAMES", terms.NAMES | {"made_up"})  # a term no module adds
    data = generate(8, 12, 5)
    data["policy"] = {"time_limit_s": 5, "workers": 1}
    whole, _, _ = _contexts(data, max_pairs=8)
    before = bound._objective_parts(whole)
    extra = whole.model.new_int_var(-2, 3, "made_up_reward")
    whole.objective.add("made_up", [extra], [1.5])
    after = bound._objective_parts(whole)
    assert before is not None and after is not None
    assert after[2] - before[2] == round(1.5 * SCALE) * 3


def test_the_bound_is_tight_when_capacity_binds_on_one_pile_of_gpus() -> None:
    # ten 1-GPU jobs worth the same, eight free GPUs on one node: at most 8 of them run
    data = {"cluster": {"nodes": [{"name": "a", "gpu_model": "H100-SXM5-80GB", "gpus": 8, "cpu": 96,
                                   "memory_gib": 1024}]},
            "jobs": [{"name": f"j{i}", "tasks": [{"name": "main", "gpus": 1, "cpu": 1, "memory_gib": 1}]}
                     for i in range(10)],
            "policy": {"time_limit_s": 5, "workers": 1}}
    whole, _, greedy_value = _contexts(data, max_pairs=40)
    found = bound.relaxation(whole, greedy_value, 5.0)
    assert found is not None
    # 8 of 10 jobs (not 10): the one penalty dropped is breaking the whole free node (fragmentation)
    assert found.value == pytest.approx(8.0, rel=1e-6)
    assert _optimum(whole) <= found.value


def test_classes_price_pools_apart() -> None:
    # Pool a is oversubscribed by jobs that may only run there; pool b sits idle. One pile of GPUs would
    # let every job run; the classes see that pool a holds only 8.
    def node(name: str, pool: str) -> dict[str, Any]:
        return {"name": name, "pool": pool, "gpu_model": "H100-SXM5-80GB", "gpus": 8, "cpu": 96, "memory_gib": 1024,
                "labels": {"pool": pool}}

    data = {"cluster": {"pools": [{"name": "a"}, {"name": "b"}], "nodes": [node("a1", "a"), node("b1", "b")]},
            "jobs": [{"name": f"j{i}", "tasks": [{"name": "main", "gpus": 1, "cpu": 1, "memory_gib": 1,
                                                   "node_selector": {"pool": "a"}}]} for i in range(16)],
            "policy": {"time_limit_s": 5, "workers": 1}}
    whole, _, greedy_value = _contexts(data, max_pairs=40)
    best = _optimum(whole)
    found = bound.relaxation(whole, greedy_value, 5.0)
    assert found is not None
    assert best - 1e-6 <= found.value <= 8.0 + 1e-6  # pool a holds 8, not 16


def test_a_node_varying_reward_without_ceiling_gives_no_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    made_up = {"same_everywhere", "by_node", "by_node_with_ceiling"}  # terms no module adds
    monkeypatch.setattr(terms, "NAMES", terms.NAMES | made_up)
    problem, ctx = _trimmed(generate(8, 12, 5), min_per_task=2)
    t = next(t for t, row in enumerate(ctx.x) if 1 < len(row) < problem.tasks[t].candidates.size)
    ctx.objective.add("same_everywhere", ctx.x[t], [1.0] * len(ctx.x[t]))
    assert bound.relaxation(ctx, 0.0, 5.0) is not None
    ctx.objective.add("by_node", ctx.x[t], [float(i + 1) for i in range(len(ctx.x[t]))])
    assert bound.relaxation(ctx, 0.0, 5.0) is None  # an unseen node might pay more than any seen one
    ctx.objective.add("by_node_with_ceiling", ctx.x[t], [1.0] * len(ctx.x[t]), ceiling=1.0)
    assert bound.relaxation(ctx, 0.0, 5.0) is None  # still: the row without a ceiling decides


def test_no_bound_when_a_task_has_no_node_in_the_model() -> None:
    problem, scored = _trimmed(generate(16, 60, 4), min_per_task=0)
    assert any(task.candidates.size and not row for task, row in zip(problem.tasks, scored.x, strict=True))
    assert bound.relaxation(scored, 0.0, 5.0) is None  # its terms never showed their value for that task


def test_plan_reports_the_relaxation_when_the_model_is_restricted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(candidates, "MAX_PAIRS", 60)
    data = generate(24, 60, 3)
    data["policy"] = {"time_limit_s": 3, "workers": 1, "deterministic": True}
    result = plan(data)
    stats = result.solver
    assert stats.restricted
    assert stats.bound_kind == "relaxation"
    assert stats.bound is not None and stats.bound >= result.objective.total - 1e-6
    assert stats.gap == pytest.approx(max(0.0, stats.bound - result.objective.total) / abs(stats.bound), abs=1e-6)
    assert set(stats.phases) <= {"problem", "greedy", "compile", "bound", "search", "decode", "verify"}
    assert {"problem", "greedy", "compile", "bound", "search", "decode", "verify"} <= set(stats.phases)
    assert verify(parse(data), result) == []


def test_plan_keeps_the_model_bound_when_every_task_saw_every_node() -> None:
    data = generate(6, 10, 2)
    data["policy"] = {"time_limit_s": 3, "workers": 1, "deterministic": True}
    stats = plan(data).solver
    assert not stats.restricted
    assert stats.bound_kind == "model"
    assert "bound" not in stats.phases


def test_dominated_jobs_left_out_of_the_model_still_give_a_bound() -> None:
    # Twenty interchangeable one-GPU jobs in front of eight free GPUs: dominance gives twelve no variable
    # (some optimal plan leaves them out), so the bound over the rest bounds the optimum.
    data = {"cluster": {"nodes": [{"name": "a", "gpu_model": "H100-SXM5-80GB", "gpus": 8, "cpu": 96,
                                   "memory_gib": 1024}]},
            "jobs": [{"name": f"j{i:02d}", "submitted_at": f"2026-01-09T{i:02d}:00:00Z",
                      "tasks": [{"name": "main", "gpus": 1, "cpu": 1, "memory_gib": 1}]} for i in range(20)],
            "policy": {"now": "2026-01-10T00:00:00Z", "deterministic": True, "time_limit_s": 5, "workers": 1}}
    ctx, _ = first_model(data)
    assert len(ctx.idle) == 12
    found = bound.relaxation(ctx, 0.0, 5.0)
    assert found is not None
    assert found.value >= plan(data).objective.total - 1e-6
