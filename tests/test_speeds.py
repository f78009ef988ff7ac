"""Speed per GPU model: the wire format, its resolution under catalog names, and what the plan makes of it.

A job's table (its own `speeds` or a named `workload`'s) steers the plan by work done: the fast GPUs go to the
jobs that gain most (`throughput` term); a uniform fleet or no table leaves plans as they were; running jobs'
expected ends scale with their slowest GPU. Every plan here passes `placement.verify` (plan() checks it).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from placement_models import PlacementRequest
from pydantic import ValidationError

from placement.api import plan
from placement.problem import build
from placement.speeds import scaled_runtime, slowest, speed
from placement.verify import verify
from placement.verify.context import Context
from placement.verify.fairness import team_work

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _nodes(**per_model: int) -> list[dict[str, Any]]:
    return [{"name": f"{model.lower()}-{i}", "gpus": 4, "cpu": 64, "memory_gib": 512, "gpu_model": model}
            for model, count in per_model.items() for i in range(count)]


def _job(name: str, gpus: int = 4, **extra: Any) -> dict[str, Any]:
    return {"name": name, "tasks": [{"name": "w", "gpus": gpus}], **extra}


def _request(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]], **extra: Any) -> PlacementRequest:
    return PlacementRequest.model_validate({"cluster": {"nodes": nodes, **extra.pop("cluster", {})}, "jobs": jobs,
                                            "policy": {"now": NOW.isoformat(), **extra.pop("policy", {})}, **extra})


def _where(p: Any) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a in p.assignments:
        out.setdefault(a.job, set()).add(a.node.split("-")[0])
    return out


LM = {"V100": 1.0, "K80": 0.25}  # gains 4x from a V100 (Gavel's language models gain most)
RL = {"V100": 1.0, "K80": 0.8}  # gains a quarter (an RL agent gains least)


def test_the_fast_gpus_go_to_the_jobs_that_gain_most_whatever_the_order() -> None:
    # Arrival order puts the RL jobs first: a GPU counter gives them the V100s; by work, the LMs get them.
    jobs = [_job("rl1", speeds=RL), _job("rl2", workload="rl"), _job("lm1", speeds=LM), _job("lm2", speeds=LM)]
    p = plan(_request(_nodes(V100=2, K80=2), jobs, workloads=[{"name": "rl", "speeds": RL}]))
    assert _where(p) == {"lm1": {"v100"}, "lm2": {"v100"}, "rl1": {"k80"}, "rl2": {"k80"}}
    # each RL job loses 1 - 0.8 of its 4 GPUs' work: -0.2 x 4 x 2
    assert p.objective.terms["throughput"] == pytest.approx(-1.6)


def test_a_slow_placement_still_beats_waiting() -> None:
    # Only K80s are free: the LM job still runs there (a quarter of its work is better than none).
    p = plan(_request(_nodes(K80=1, V100=0), [_job("lm", speeds=LM)], cluster={}))
    assert _where(p) == {"lm": {"k80"}}
    p = plan(_request(_nodes(V100=1, K80=1), [_job("lm1", speeds=LM), _job("lm2", speeds=LM)]))
    assert sorted(len(v) for v in _where(p).values()) == [1, 1] and p.objective.terms["throughput"] == \
        pytest.approx(-0.75 * 4)


def test_a_gang_is_charged_for_its_slowest_member() -> None:
    # An 8-GPU gang on a V100 node and a K80 node runs at K80 speed: it loses 0.75 of all 8 GPUs' work.
    p = plan(_request(_nodes(V100=1, K80=1), [_job("big", gpus=4, speeds=LM) | {
        "tasks": [{"name": "w", "gpus": 4, "replicas": 2}]}]))
    assert _where(p) == {"big": {"v100", "k80"}}
    assert p.objective.terms["throughput"] == pytest.approx(-0.75 * 8)


def test_without_tables_or_on_a_uniform_fleet_plans_are_as_before() -> None:
    jobs = [_job(f"j{i}", gpus=2 + i % 3) for i in range(6)]
    base = plan(_request(_nodes(V100=3), jobs))
    paced = plan(_request(_nodes(V100=3), [j | {"speeds": LM} for j in jobs]))
    assert [a.model_dump() for a in paced.assignments] == [a.model_dump() for a in base.assignments]
    assert "throughput" not in paced.objective.terms and paced.objective.total == base.objective.total
    mixed = _nodes(V100=2, K80=1)
    assert "throughput" not in plan(_request(mixed, jobs)).objective.terms


def test_a_running_job_ends_later_on_slow_gpus_and_reservations_wait_for_it() -> None:
    # One K80 node, held by a job estimated at 2 h at V100 speed: on K80 (0.25) it ends in 8 h, not 2.
    run = {"job": "r", "started_at": (NOW - timedelta(hours=1)).isoformat(), "expected_runtime_h": 2.0,
           "pods": [{"task": "w", "node": "k80-0", "gpus": [0, 1, 2, 3]}]}
    waiting = _job("w", submitted_at=(NOW - timedelta(hours=10)).isoformat())
    for table, hours in ((None, 1.0), (LM, 7.0)):
        r = run | ({"speeds": table} if table else {})
        p = plan(_request(_nodes(K80=1), [waiting], cluster={"running": [r]}, policy={"max_wait_h": 1.0}))
        [reservation] = p.reservations
        assert (reservation.earliest_start - NOW).total_seconds() / 3600 == pytest.approx(hours)


def test_the_domain_rules() -> None:
    table = {"V100-SXM2-32GB": 1.0, "K80-12GB": 0.5}
    assert speed(table, "K80-12GB") == 0.5 and speed(table, "A100-SXM4-80GB") == 1.0 and speed(None, "x") == 1.0
    assert slowest(table, ["V100-SXM2-32GB", "K80-12GB"]) == 0.5 and slowest(table, []) == 1.0
    assert scaled_runtime(2.0, table, ["K80-12GB"]) == 4.0


@pytest.mark.parametrize(("extra", "path"), [
    ({"jobs": [_job("a", speeds={"K81": 1.0})]}, "jobs.0.speeds.K81"),
    ({"jobs": [_job("a", workload="nope")]}, "jobs.0.workload"),
    ({"jobs": [_job("a", speeds=LM, workload="w")], "workloads": [{"name": "w", "speeds": LM}]}, "jobs.0.workload"),
    ({"jobs": [_job("a", speeds={"V100": 0})]}, "jobs.0.speeds.V100"),
    ({"jobs": [_job("a", speeds={"V100": 1001})]}, "jobs.0.speeds.V100"),
    ({"workloads": [{"name": "w", "speeds": {}}]}, "workloads.0.speeds"),
    ({"workloads": [{"name": "w", "speeds": LM}, {"name": "w", "speeds": RL}]}, "workloads.1.name"),
    ({"workloads": [{"name": "w", "speeds": {"Tesla-K80": 1.0, "K80": 0.5}}]}, "workloads.0.speeds.K80"),
])
def test_bad_speed_input_names_its_field(extra: dict[str, Any], path: str) -> None:
    body = {"cluster": {"nodes": _nodes(V100=1)}, "jobs": [], **extra}
    with pytest.raises(ValidationError) as err:
        build(PlacementRequest.model_validate(body))
    assert path in str(err.value)


def test_a_plan_that_hides_the_throughput_loss_is_rejected() -> None:
    request = _request(_nodes(V100=1, K80=1), [_job("lm1", speeds=LM), _job("lm2", speeds=LM)])
    p = plan(request)
    assert verify(request, p) == []
    hidden = p.model_copy(update={"objective": p.objective.model_copy(update={
        "terms": {k: v for k, v in p.objective.terms.items() if k != "throughput"},
        "total": p.objective.total - p.objective.terms["throughput"]})})
    assert any(line.startswith("objective: term 'throughput'") for line in verify(request, hidden))


def test_cost_is_per_unit_of_work() -> None:
    # Spot K80s at $0.5/GPU-h vs on-demand V100s at $1.2: per hour the K80 is cheaper, but the LM job runs 4x
    # slower there (2 $/h of V100 work), so by work the V100 is cheaper; the RL job (0.8) is cheaper on K80.
    pools = [{"name": "od", "gpu_hour_price": 1.2}, {"name": "k", "gpu_hour_price": 0.5}]
    nodes = [n | {"pool": "od" if n["gpu_model"] == "V100" else "k"} for n in _nodes(V100=2, K80=2)]
    jobs = [_job("rl", speeds=RL, expected_runtime_h=10.0), _job("lm", speeds=LM, expected_runtime_h=10.0)]
    p = plan(_request(nodes, jobs, cluster={"pools": pools}, policy={"weights": {"throughput": 0.0}}))
    assert _where(p) == {"lm": {"v100"}, "rl": {"k80"}}
    rows = {r.job: r for r in p.cost.jobs}
    assert rows["rl"].runtime_h == pytest.approx(12.5) and rows["rl"].compute == pytest.approx(4 * 0.5 * 12.5)
    assert rows["lm"].runtime_h == pytest.approx(10.0) and rows["lm"].compute == pytest.approx(4 * 1.2 * 10.0)
    assert verify(_request(nodes, jobs, cluster={"pools": pools}, policy={"weights": {"throughput": 0.0}}), p) == []


def test_fair_share_in_work_serves_the_team_whose_gpus_do_least_for_it() -> None:
    # Team a holds 4 K80s running an LM job (a quarter of its V100 speed: 1 GPU of work); team b holds 2 V100s.
    # Counting GPUs, b holds less and gets the free V100s; counting work (Gavel's normalised throughput), a does.
    nodes = [{"name": "k80-0", "gpus": 4, "cpu": 64, "memory_gib": 512, "gpu_model": "K80"},
             {"name": "v100-0", "gpus": 8, "cpu": 64, "memory_gib": 512, "gpu_model": "V100"}]
    running = [{"job": "a-run", "team": "a", "speeds": LM,
                "pods": [{"task": "w", "node": "k80-0", "gpus": [0, 1, 2, 3]}]},
               {"job": "b-run", "team": "b", "speeds": RL, "pods": [{"task": "w", "node": "v100-0", "gpus": [0, 1]}]}]
    jobs = [_job("a-new", team="a", speeds=LM), _job("b-new", team="b", speeds=RL)]
    teams = [{"name": "a"}, {"name": "b"}]
    placed = {}
    for unit in ("gpus", "work"):
        request = _request(nodes, jobs, cluster={"running": running}, teams=teams,
                           policy={"fair_share": unit, "weights": {"throughput": 0.0}})
        p = plan(request)
        assert verify(request, p) == []
        placed[unit] = {a.job for a in p.assignments}
        if unit == "work":  # the verifier's own count: a's 4 K80s at 1/4 plus the 4 V100s it gets; b's 2 V100s
            assert team_work(Context.build(request, p)) == {"a": 1000 + 4000, "b": 2000}
    assert placed == {"gpus": {"b-new"}, "work": {"a-new"}}


def test_turnaround_counts_the_runtime_at_the_speed_placed() -> None:
    # A 1 h (at V100 speed) LM job on a K80 runs 4 h: it earns 1 / (1 + 4), where its V100 placement earns ½.
    policy = {"weights": {"turnaround": 1.0, "throughput": 0.0, "alignment": 0.0, "fragmentation": 0.0}}
    job = _job("lm", speeds=LM, expected_runtime_h=1.0)
    full = {"job": "r", "pods": [{"task": "w", "node": "v100-0", "gpus": [0, 1, 2, 3]}]}
    for nodes, running, earned in ((_nodes(V100=1, K80=1), [], 0.5), (_nodes(V100=1, K80=1), [full], 0.2),
                                   (_nodes(K80=1), [], 0.2)):
        p = plan(_request(nodes, [job], cluster={"running": running}, policy=policy))
        assert p.objective.terms["turnaround"] == pytest.approx(earned), (nodes, running)
