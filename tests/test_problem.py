"""The indexed view: free capacity after running pods, and candidate filtering before any variable exists."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from placement_models import PlacementRequest
from pydantic import ValidationError

from placement import catalog
from placement.generate import generate
from placement.problem import Problem, Slot, build, cpu_units, mem_units

H100 = "H100-SXM5-80GB"  # 80 GiB per GPU
A100_40 = "A100-SXM4-40GB"  # 40 GiB per GPU


def _node(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "pool": "od", "gpu_model": H100, "gpus": 8, "cpu": 64, "memory_gib": 512, **extra}


def _request(nodes: list[dict[str, Any]], tasks: list[dict[str, Any]] | None = None,
             running: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "cluster": {"pools": [{"name": "od"}, {"name": "res", "capacity_type": "reserved"}],
                    "nodes": nodes, "running": running or []},
        "jobs": [{"name": "j", "tasks": tasks or [{"name": "t", "gpus": 1}]}],
    }


def _problem(req: dict[str, Any]) -> Problem:
    return build(PlacementRequest.model_validate(req))


def _candidates(req: dict[str, Any]) -> list[str]:
    p = _problem(req)
    return [p.nodes[i].name for i in p.tasks[0].candidates]


# ---------------------------------------------------------------------------------------------
# Units and free capacity


def test_units_round_demand_up_and_capacity_down() -> None:
    assert cpu_units(1.5, demand=True) == 1500
    assert cpu_units(0.0001, demand=True) == 1  # a sliver of CPU still needs a milli-CPU
    assert cpu_units(0.0009, demand=False) == 0
    assert mem_units(1.0, demand=False) == 1024
    assert mem_units(0.5, demand=True) == 512
    assert mem_units(1 / 3, demand=True) == 342
    assert mem_units(1 / 3, demand=False) == 341


def test_free_capacity_after_running_pods_in_milli_cpu_and_mib() -> None:
    running = [
        {"job": "r1", "pods": [{"task": "w", "node": "a", "gpus": [0, 1], "cpu": 10.5, "memory_gib": 100},
                               {"task": "w", "node": "a", "gpus": [5], "cpu": 1, "memory_gib": 0.5}]},
        {"job": "r2", "pods": [{"task": "w", "node": "b", "cpu": 2}]},
    ]
    p = _problem(_request([_node("a"), _node("b"), _node("c", gpus=0, gpu_model=None)], running=running))
    np.testing.assert_array_equal(p.capacity, [[8, 64000, 524288], [8, 64000, 524288], [0, 64000, 524288]])
    np.testing.assert_array_equal(p.free, [
        [5, 64000 - 11500, 524288 - 100 * 1024 - 512],
        [8, 62000, 524288],
        [0, 64000, 524288],
    ])
    assert p.free_gpu_ids == ((2, 3, 4, 6, 7), tuple(range(8)), ())
    assert p.free.dtype == np.int64


def test_unhealthy_gpus_are_excluded_from_capacity_and_free_ids() -> None:
    running = [{"job": "r", "pods": [{"task": "w", "node": "a", "gpus": [0, 3]}]}]  # GPU 3 is also unhealthy
    p = _problem(_request([_node("a", unhealthy_gpus=[3, 6]), _node("b", unhealthy_gpus=[7])], running=running))
    assert p.capacity[:, 0].tolist() == [6, 7]
    # A running pod on an unhealthy GPU does not count twice against the healthy ones.
    assert p.free[:, 0].tolist() == [5, 7]
    assert p.free_gpu_ids == ((1, 2, 4, 5, 7), (0, 1, 2, 3, 4, 5, 6))
    # "gpu_empty" is about healthy GPUs: b has all 7 healthy GPUs free, a does not.
    assert p.gpu_empty().tolist() == [False, True]


def test_gpu_empty_needs_gpus() -> None:
    p = _problem(_request([_node("a"), _node("cpu", gpus=0, gpu_model=None), _node("dead", gpus=2,
                                                                                   unhealthy_gpus=[0, 1])]))
    assert p.gpu_empty().tolist() == [True, False, False]


def test_task_demand_and_job_gpus() -> None:
    tasks = [{"name": "w", "replicas": 3, "gpus": 2, "cpu": 0.25, "memory_gib": 1.5},
             {"name": "l", "cpu": 4}]
    p = _problem(_request([_node("a")], tasks=tasks))
    assert p.tasks[0].demand.tolist() == [2, 250, 1536]
    assert p.tasks[1].demand.tolist() == [0, 4000, 0]
    assert p.job_tasks == ((0, 1),)
    assert p.job_gpus(0) == 6


# ---------------------------------------------------------------------------------------------
# Candidate filtering


def test_max_per_node_is_what_fits_on_the_free_node_capped_by_replicas() -> None:
    running = [{"job": "r", "pods": [{"task": "w", "node": "a", "gpus": [0, 1, 2, 3, 4], "cpu": 40}]}]
    tasks = [{"name": "t", "replicas": 5, "gpus": 1, "cpu": 10}]
    p = _problem(_request([_node("a"), _node("b"), _node("c", gpus=0, gpu_model=None)], tasks=tasks,
                          running=running))
    task = p.tasks[0]
    # a: 3 GPUs but only 24 CPUs free -> 2 pods; b: 8 GPUs, 64 CPUs -> 6, capped at 5 replicas; c: no GPUs.
    assert task.candidates.tolist() == [0, 1]
    assert task.max_per_node.tolist() == [2, 5]


def test_full_node_is_not_a_candidate() -> None:
    running = [{"job": "r", "pods": [{"task": "w", "node": "a", "gpus": list(range(8))}]}]
    assert _candidates(_request([_node("a"), _node("b")], running=running)) == ["b"]
    # ... but a CPU-only pod still fits there.
    assert _candidates(_request([_node("a"), _node("b")], tasks=[{"name": "t", "cpu": 1}], running=running)) == [
        "a", "b"]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({}, ["a", "b", "c"]),
        ({"zone": "x"}, ["a"]),
        ({"zone": "x", "tier": "gold"}, []),
        ({"kubernetes.io/hostname": "b"}, ["b"]),
        ({"placement/pool": "res"}, ["c"]),
        ({"placement/gpu-model": A100_40}, ["b"]),
        # Aliases resolve to the canonical model name, so the label is the canonical one.
        ({"placement/gpu-model": H100}, ["a", "c"]),
        ({"placement/gpu-model": "H100-80GB"}, []),
        ({"missing": ""}, []),
    ],
)
def test_node_selector_with_implicit_labels(selector: dict[str, str], expected: list[str]) -> None:
    nodes = [_node("a", labels={"zone": "x"}), _node("b", gpu_model=A100_40, labels={"zone": "y"}),
             _node("c", pool="res", gpu_model="H100-80GB")]
    assert _candidates(_request(nodes, tasks=[{"name": "t", "gpus": 1, "node_selector": selector}])) == expected


def test_explicit_label_overrides_implicit_one() -> None:
    nodes = [_node("a", labels={"kubernetes.io/hostname": "alias-a"}), _node("b")]
    sel = {"kubernetes.io/hostname": "alias-a"}
    assert _candidates(_request(nodes, tasks=[{"name": "t", "gpus": 1, "node_selector": sel}])) == ["a"]
    sel = {"kubernetes.io/hostname": "a"}
    assert _candidates(_request(nodes, tasks=[{"name": "t", "gpus": 1, "node_selector": sel}])) == []


def test_selector_funnel_records_the_stage_that_emptied_the_list() -> None:
    p = _problem(_request([_node("a")], tasks=[{"name": "t", "gpus": 1, "node_selector": {"zone": "q"}}]))
    assert dict(p.tasks[0].funnel)["node_selector"] == 0


TAINTED = [
    _node("plain"),
    _node("ns", taints=[{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]),
    _node("ne", taints=[{"key": "dedicated", "value": "infer", "effect": "NoExecute"}]),
    _node("pref", taints=[{"key": "noisy", "value": "", "effect": "PreferNoSchedule"}]),
    _node("two", taints=[{"key": "dedicated", "value": "infer", "effect": "NoSchedule"},
                         {"key": "gpu", "value": "bad", "effect": "NoSchedule"}]),
]


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        ([], ["plain", "pref"]),
        ([{"key": "dedicated", "operator": "Equal", "value": "infer"}], ["plain", "ns", "ne", "pref"]),
        ([{"key": "dedicated", "operator": "Equal", "value": "train"}], ["plain", "pref"]),
        ([{"key": "dedicated", "operator": "Exists"}], ["plain", "ns", "ne", "pref"]),
        ([{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}], ["plain", "ns", "pref"]),
        ([{"operator": "Exists"}], ["plain", "ns", "ne", "pref", "two"]),  # empty key + Exists: everything
        ([{"key": "dedicated", "operator": "Exists"}, {"key": "gpu", "value": "bad"}],
         ["plain", "ns", "ne", "pref", "two"]),
    ],
)
def test_taints_and_tolerations(tolerations: list[dict[str, Any]], expected: list[str]) -> None:
    req = _request(copy.deepcopy(TAINTED), tasks=[{"name": "t", "gpus": 1, "tolerations": tolerations}])
    assert _candidates(req) == expected


def test_gpu_memory_against_the_model_memory() -> None:
    nodes = [_node("h", gpu_model=H100), _node("a40", gpu_model=A100_40), _node("cpu", gpus=0, gpu_model=None)]
    for need, expected in [(None, ["h", "a40"]), (40, ["h", "a40"]), (40.5, ["h"]), (80, ["h"]), (81, [])]:
        task: dict[str, Any] = {"name": "t", "gpus": 1}
        if need is not None:
            task["gpu_memory_gib"] = need
        assert _candidates(_request(copy.deepcopy(nodes), tasks=[task])) == expected, need
    p = _problem(_request(nodes, tasks=[{"name": "t", "gpus": 1, "gpu_memory_gib": 81}]))
    assert dict(p.tasks[0].funnel)["gpu_memory"] == 0


def test_cpu_only_task_may_use_gpu_less_nodes() -> None:
    nodes = [_node("g"), _node("c", gpus=0, gpu_model=None)]
    assert _candidates(_request(nodes, tasks=[{"name": "t", "cpu": 8}])) == ["g", "c"]
    assert _candidates(_request(copy.deepcopy(nodes), tasks=[{"name": "t", "gpus": 1}])) == ["g"]


def test_gpu_model_alias_is_canonicalised() -> None:
    p = _problem(_request([_node("a", gpu_model="nvidia-h100-80gb-hbm3")]))
    assert p.gpu_models == (H100,)


def test_unknown_gpu_model_names_the_field_and_lists_known_models() -> None:
    req = PlacementRequest.model_validate(_request([_node("a"), _node("b", gpu_model="Z-9000")]))
    with pytest.raises(ValidationError) as info:
        build(req)
    errors = info.value.errors()
    assert [e["loc"] for e in errors] == [("cluster", "nodes", 1, "gpu_model")]
    msg = errors[0]["msg"]
    assert "unknown GPU model 'Z-9000'" in msg
    for known in catalog.known_models():
        assert known in msg


def test_unknown_gpu_model_reported_through_the_library_door() -> None:
    import placement

    with pytest.raises(ValidationError) as info:
        placement.plan(_request([_node("a", gpu_model="Z-9000")]))
    assert info.value.errors()[0]["loc"] == ("cluster", "nodes", 0, "gpu_model")


# ---------------------------------------------------------------------------------------------
# Tasks of one shape share their candidate arrays


def test_tasks_of_one_shape_share_read_only_arrays() -> None:
    req = _request([_node("a"), _node("b", pool="res")], [{"name": "t", "gpus": 1}])
    shape = {"name": "t", "gpus": 1}
    req["jobs"] += [{"name": "same", "tasks": [shape]},
                    {"name": "elastic", "tasks": [{**shape, "replicas": 2, "min_replicas": 1}]},
                    {"name": "picky", "tasks": [{**shape, "node_selector": {"placement/pool": "res"}}]}]
    p = _problem(req)
    first, same, elastic, picky = p.tasks
    assert same.candidates is first.candidates and same.demand is first.demand  # computed once
    assert (same.index, same.job, same.spec.name) == (1, 1, "t")
    assert elastic.max_per_node is not first.max_per_node  # replicas cap the pods per node
    assert elastic.max_per_node.tolist() == [2, 2]
    assert [p.nodes[n].name for n in picky.candidates] == ["b"]
    for arr in (first.candidates, first.max_per_node, first.demand, first.eligible):
        assert arr is not None and not arr.flags.writeable
        with pytest.raises(ValueError):
            arr[0] = 0


def test_views_share_their_facts_and_a_per_view_slot_answers_only_its_owner() -> None:
    problem = build(PlacementRequest.model_validate(generate(4, 6, 1)))
    view = replace(problem, tasks=problem.tasks[:1])
    assert view.facts is problem.facts  # one set of facts for the request, its nodes and running jobs
    assert view.topology() is problem.topology()
    shared: Slot[list[int]] = Slot("test_shared")
    own: Slot[list[int]] = Slot("test_own", per_view=True)
    assert view.facts.slot(shared, view, list) is problem.facts.slot(shared, problem, list)
    mine = problem.facts.slot(own, problem, list)
    assert problem.facts.slot(own, problem, list) is mine
    assert view.facts.slot(own, view, list) is not mine  # a view computes afresh: its tasks differ
