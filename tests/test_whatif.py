"""What-if: scenarios change a request; the side-by-side output equals separate solves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from placement_models import PlacementRequest

from placement import plan
from placement.cli import main as cli_main
from placement.whatif import Scenario, ScenarioError, apply, diff, fairness, load_scenarios, summarise, what_if

EXAMPLES = Path(__file__).resolve().parents[1] / "instances" / "whatif"
H100 = "H100-SXM5-80GB"


def _node(name: str, pool: str, rack: str) -> dict[str, Any]:
    return {"name": name, "pool": pool, "gpu_model": H100, "gpus": 8, "cpu": 192, "memory_gib": 2048,
            "topology": {"rack": rack}}


def _request() -> PlacementRequest:
    return PlacementRequest.model_validate({
        "cluster": {
            "pools": [{"name": "od", "gpu_hour_price": 4.0}],
            "nodes": [_node("a", "od", "r1"), _node("b", "od", "r2")],
            "running": [{"job": "old", "team": "t1", "priority": 5,
                         "pods": [{"task": "w", "node": "a", "gpus": [0, 1, 2, 3], "cpu": 8, "memory_gib": 64}]}],
        },
        "jobs": [{"name": "big", "team": "t1", "tasks": [{"name": "w", "gpus": 8}]},
                 {"name": "late", "team": "t2", "deferrable": True, "tasks": [{"name": "w", "gpus": 8}]}],
        "policy": {"deterministic": True, "time_limit_s": 5, "workers": 1, "peak": True, "reserve": {"od": 4}},
    })


def _scenario(name: str, *changes: dict[str, Any]) -> Scenario:
    return Scenario.model_validate({"name": name, "changes": list(changes)})


def test_two_scenarios_side_by_side_equal_two_separate_solves() -> None:
    base = _request()
    scenarios = [_scenario("off-peak", {"peak": False}),
                 _scenario("grow", {"add_nodes": {"pool": "od", "count": 1, "like": "b"}})]
    result = what_if(base, scenarios, processes=2)
    assert result.names == ["base", "off-peak", "grow"]
    for name, req, got in zip(result.names, result.requests, result.plans, strict=True):
        alone = plan(req)
        assert [a.model_dump() for a in got.assignments] == [a.model_dump() for a in alone.assignments], name
        assert summarise(name, req, got) == summarise(name, req, alone)
    rows = {r.name: r for r in result.rows}
    # Peak: 12 free GPUs, 4 held back: only "big" (8) fits and "late" is deferred.
    assert (rows["base"].gpus_placed, rows["base"].jobs_pending) == (8, 1)
    assert (rows["off-peak"].gpus_placed, rows["grow"].gpus_placed) == (8, 16)
    assert rows["base"].placed_cost_per_hour == pytest.approx(8 * 4.0)
    # the whole cluster (16 GPUs at 4.0) against the placed work; the added node counts, and costs, too
    assert (rows["base"].cluster_cost_per_hour, rows["grow"].cluster_cost_per_hour) == (64.0, 96.0)
    assert (rows["base"].nodes_added, rows["off-peak"].nodes_added, rows["grow"].nodes_added) == (0, 0, 1)
    # off-peak changes the policy, so its objective is on another scale; growing the cluster does not
    assert (rows["off-peak"].objective_comparable, rows["grow"].objective_comparable) == (False, True)
    # Off-peak the deferrable job goes first: it takes the one free 8-GPU node from "big".
    assert (result.diffs[0].placed, result.diffs[0].pending) == (["late"], ["big"])
    assert result.requests[2].cluster.nodes[-1].name == "od-whatif-0"
    table = result.table().splitlines()
    assert table[0].split() == ["base", "off-peak", "grow"]
    assert table[2].split() == ["GPUs", "placed", "8", "8", "16"]
    objective = next(line for line in table if line.startswith("objective"))
    assert objective.split()[2] == "-"  # off-peak
    assert any(line.split()[:3] == ["placed", "work", "cost/h"] for line in table)
    assert any(line.split()[:2] == ["cluster", "cost/h"] for line in table)
    assert any("busy or idle" in line for line in table) and any("by any means" in line for line in table)


def test_remove_rack_queues_displaced_running_jobs_again() -> None:
    changed = apply(_request(), _scenario("lose-r1", {"remove_rack": "r1"}))
    assert [n.name for n in changed.cluster.nodes] == ["b"]
    assert changed.cluster.running == []
    requeued = changed.jobs[-1]
    assert (requeued.name, requeued.priority, requeued.team) == ("old", 5, "t1")
    assert [(t.name, t.replicas, t.gpus, t.cpu) for t in requeued.tasks] == [("w", 1, 4, 8.0)]
    d = diff(plan(_request()), plan(changed), _request())
    assert d.new_jobs == ["old"]


@pytest.mark.parametrize(("change", "phrase"), [
    ({"remove_rack": "r9"}, "no node in rack r9"),
    ({"add_nodes": {"pool": "gpu", "count": 1}}, "unknown pool gpu"),
    ({"add_nodes": {"pool": "od", "count": 1, "like": "zz"}}, "no node named zz"),
    ({"quota": {"team": "t9", "quota": {"gpus": {"nominal": 8}}}}, "unknown team t9"),
    ({"mig": {"node": "zz", "layout": {}}}, "unknown node zz"),
    ({"policy": {"reserve": {"nope": 1}}}, "unknown pool 'nope'"),
])
def test_scenarios_that_cannot_apply_say_why(change: dict[str, Any], phrase: str) -> None:
    with pytest.raises(ScenarioError, match=phrase):
        apply(_request(), _scenario("x", change))


def test_quota_change_sets_the_teams_quota() -> None:
    data = _request().model_dump(mode="json")
    data["teams"] = [{"name": "t1"}, {"name": "t2"}]
    changed = apply(PlacementRequest.model_validate(data),
                    _scenario("q", {"quota": {"team": "t2", "quota": {"gpus": {"nominal": 8, "borrowing_limit": 0}}}}))
    quota = changed.teams[1].quota
    assert quota is not None and quota.gpus is not None
    assert (quota.gpus.nominal, quota.gpus.borrowing_limit) == (8, 0)


def test_a_change_has_exactly_one_kind() -> None:
    with pytest.raises(ValueError, match="exactly one kind"):
        _scenario("x", {"peak": True, "remove_rack": "r1"})


def test_fairness_is_jains_index_of_served_share_per_team() -> None:
    req = _request()
    p = plan(req)  # peak: big (t1) placed, late (t2) deferred: shares 1 and 0
    assert fairness(req, p) == pytest.approx((1 + 0) ** 2 / (2 * (1 + 0)))


def test_cli_what_if_prints_the_table_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "whatif.json"
    code = cli_main(["what-if", str(EXAMPLES / "request.json"), "--scenario", str(EXAMPLES / "off-peak.yaml"),
                     str(EXAMPLES / "provision.yaml"), "--processes", "2", "--json", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].split() == ["base", "off-peak", "provision"]
    data = json.loads(out.read_text())
    assert [s["row"]["name"] for s in data["scenarios"]] == ["base", "off-peak", "provision"]
    assert data["scenarios"][2]["row"]["nodes_added"] == len(
        [n for x in data["scenarios"][2]["plan"]["provisioned"] for n in x["nodes"]])


def test_example_scenarios_load_with_their_names() -> None:
    names = [s.name for f in sorted(EXAMPLES.glob("*.yaml")) for s in load_scenarios(f)]
    assert names == ["lose-rack", "more-spot", "off-peak", "provision"]


def test_cli_what_if_rejects_a_bad_scenario_with_exit_2(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "quota.yaml"
    bad.write_text("changes:\n  - remove_rack: r42\n")
    code = cli_main(["what-if", str(EXAMPLES / "request.json"), "--scenario", str(bad)])
    assert code == 2
    assert "no node in rack r42" in capsys.readouterr().err


def test_work_per_dollar_compares_gpu_models_for_a_queue_mix() -> None:
    # The mixed-fleet example: each added model's work placed counts its GPUs at the queue's speeds there.
    fleet = EXAMPLES / "fleet"
    data = json.loads((fleet / "request.json").read_text())
    data["policy"]["time_limit_s"] = 2
    scenarios = [s for f in sorted(fleet.glob("add-*.yaml")) for s in load_scenarios(f)]
    assert [s.name for s in scenarios] == ["add-k80", "add-p100", "add-v100"]
    result = what_if(data, scenarios, processes=1)
    for row in result.rows:
        assert 0 < row.placed_work != row.gpus_placed  # each GPU counts its job's speed there, not 1
        assert row.work_per_dollar == pytest.approx(row.placed_work / row.placed_cost_per_hour, abs=1e-3)
    base_plain = what_if(_request(), [], processes=1).rows[0]
    assert base_plain.placed_work == base_plain.gpus_placed  # no speed tables: work placed is GPUs placed


def test_an_unscored_plan_is_not_compared_on_its_objective() -> None:
    from placement.generate import generate

    req = PlacementRequest.model_validate({**generate(64, 150, 1), "policy": {"time_limit_s": 0.01, "workers": 1,
                                                                                "deterministic": True}})
    result = plan(req)
    assert result.solver.objective is None  # no time for the model that scores it
    assert not summarise("base", req, result).objective_comparable
