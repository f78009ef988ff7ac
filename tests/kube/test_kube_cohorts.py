"""Kueue cohorts as the request's cohorts: ClusterQueues borrow only within their cohort tree, a Cohort's own
quota is lent to its subtree, and a child cohort's borrowingLimit caps what its subtree takes from the parent.

The kueue-cohorts fixture: team-a-cq and team-b-cq, one 16-GPU job (train-a) and one 8-GPU job (train-b).
The kueue-cohort-weights fixture: a root cohort `org` with 16 GPUs of quota, child cohorts `research`
(fairSharing weight 3) and `prod` (weight 1) with one quota-less ClusterQueue each and four 4-GPU jobs each:
the weights decide who borrows the contested GPUs.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from kube_helpers import docs, find, load, reimport
from placement_models import Cohort, PlacementRequest
from placement_models.base import MAX_WEIGHT
from pydantic import ValidationError

from placement import plan, verify
from placement.cohorts import fair_weights
from placement.kube import KubeError

NODES = "kueue-upstream/nodes.yaml"


def _objects(cohorts: list[dict[str, Any]], queues: dict[str, tuple[str | None, int]]) -> list[dict[str, Any]]:
    """The fixture with these Cohort objects and, per ClusterQueue, its cohort and GPU nominal quota."""
    objects = [d for d in docs(NODES, "kueue-cohorts") if d["kind"] != "Cohort"] + cohorts
    for name, (cohort, nominal) in queues.items():
        spec = find(objects, "ClusterQueue", name)["spec"]
        spec.pop("cohort", None)
        if cohort is not None:
            spec["cohort"] = cohort
        spec["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = nominal
    return objects


def _cohort(name: str, nominal: int, version: str = "v1beta1", **spec: Any) -> dict[str, Any]:
    resources = {"name": "nvidia.com/gpu", "nominalQuota": nominal}
    resources.update({k: v for k, v in spec.items() if k in ("borrowingLimit", "lendingLimit")})
    body: dict[str, Any] = {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "default-flavor", "resources": [resources]}]}]}
    body.update({k: v for k, v in spec.items() if k in ("parent", "parentName")})
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "Cohort", "metadata": {"name": name}, "spec": body}


def _placed(objects: list[dict[str, Any]]) -> set[str]:
    """Import, plan and verify; the jobs placed."""
    request = reimport(objects).request
    result = plan(request)
    assert verify(request, result) == []
    return {a.job for a in result.assignments}


def test_queues_in_different_cohorts_do_not_borrow_from_each_other() -> None:
    apart = _objects([], {"team-a-cq": ("left", 8), "team-b-cq": ("right", 24)})
    imported = reimport(apart)
    assert {c.name for c in imported.request.cohorts} == {"left", "right"}  # named, no Cohort objects
    assert {t.name: t.cohort for t in imported.request.teams} == {"team-a-cq": "left", "team-b-cq": "right"}
    assert _placed(apart) == {"team-b/train-b"}  # train-a needs 16, its cohort has 8
    together = _objects([], {"team-a-cq": ("left", 8), "team-b-cq": ("left", 24)})
    assert _placed(together) == {"team-a/train-a", "team-b/train-b"}  # team-a borrows 8 of team-b's idle 16


def test_a_queue_without_a_cohort_neither_borrows_nor_lends_while_others_have_one() -> None:
    objects = _objects([], {"team-a-cq": (None, 8), "team-b-cq": ("left", 0)})
    request = reimport(objects).request
    assert [c.name for c in request.cohorts] == ["left"]
    assert {t.name: t.cohort for t in request.teams} == {"team-a-cq": None, "team-b-cq": "left"}
    assert request.teams[0].quota.gpus.borrowing_limit is None  # no limits-0 trick: no cohort says it
    assert _placed(objects) == set()  # train-a needs 16 of team-a's 8; team-b may not borrow team-a's idle 8


def test_without_any_cohort_none_is_declared_and_queues_keep_to_their_quota() -> None:
    objects = _objects([], {"team-a-cq": (None, 8), "team-b-cq": (None, 0)})
    request = reimport(objects).request
    assert request.cohorts == []
    assert all(t.cohort is None and t.quota.gpus.borrowing_limit == 0 and t.quota.gpus.lending_limit == 0
               for t in request.teams)
    assert _placed(objects) == set()


@pytest.mark.parametrize(("version", "key"), [("v1alpha1", "parent"), ("v1beta1", "parentName"),
                                              ("v1beta2", "parentName")])
def test_a_child_cohorts_borrowing_limit_caps_its_subtree(version: str, key: str) -> None:
    def tree(limit: int | None) -> list[dict[str, Any]]:
        child = _cohort("ml", 0, version, **{key: "org"}, **({"borrowingLimit": limit} if limit is not None else {}))
        return _objects([_cohort("org", 24, version), child], {"team-a-cq": ("ml", 0), "team-b-cq": ("ml", 0)})

    imported = reimport(tree(8))
    cohorts = {c.name: c for c in imported.request.cohorts}
    assert cohorts["ml"].parent == "org" and cohorts["ml"].quota.gpus.borrowing_limit == 8
    assert cohorts["org"].parent is None and cohorts["org"].quota.gpus.nominal == 24
    assert not any("flattened" in str(w) for w in imported.warnings)
    assert _placed(tree(8)) == {"team-b/train-b"}  # 8 borrowed from org: train-a's 16 do not fit
    assert _placed(tree(None)) == {"team-a/train-a", "team-b/train-b"}  # org's 24 GPUs, no cap


def test_a_cohorts_own_nominal_quota_is_lent_to_its_queues() -> None:
    def with_cohort(nominal: int) -> list[dict[str, Any]]:
        return _objects([_cohort("ml-org", nominal)], {"team-a-cq": ("ml-org", 8), "team-b-cq": ("ml-org", 0)})

    cohort = reimport(with_cohort(8)).request.cohorts[0]
    assert cohort.name == "ml-org" and cohort.quota.gpus.nominal == 8
    assert _placed(with_cohort(8)) == {"team-a/train-a"}  # team-a's 8 and the cohort's 8, first come
    assert _placed(with_cohort(0)) == {"team-b/train-b"}  # only team-a's 8: team-b borrows them


def _shares(objects: list[dict[str, Any]]) -> tuple[Counter[str], dict[str, Any]]:
    """Import, plan and verify; the jobs placed per namespace, and the plan's team reports by name."""
    imported = reimport(objects)
    result = plan(imported.request)
    assert verify(imported.request, result) == []
    return Counter(a.job.split("/")[0] for a in result.assignments), {t.team: t for t in result.teams}


def _weighted(research: str | None = "3", prod: str | None = "1") -> list[dict[str, Any]]:
    """The kueue-cohort-weights fixture with these fairSharing weights on its child cohorts (None: unset)."""
    objects = docs("kueue-cohort-weights")
    for name, weight in (("research", research), ("prod", prod)):
        spec = find(objects, "Cohort", name)["spec"]
        spec.pop("fairSharing", None)
        if weight is not None:
            spec["fairSharing"] = {"weight": weight}
    return objects


def test_a_heavier_cohort_s_queues_get_more_of_the_contested_borrowable_gpus() -> None:
    # org lends its 16 GPUs to two child cohorts asking 16 each (four 4-GPU jobs): weights 3:1 split them 12:4
    imported = load("kueue-cohort-weights")
    cohorts = {c.name: c for c in imported.request.cohorts}
    assert (cohorts["research"].weight, cohorts["prod"].weight, cohorts["org"].weight) == (3.0, 1.0, 1.0)
    assert cohorts["research"].parent == cohorts["prod"].parent == "org"
    assert {t.name: t.weight for t in imported.request.teams} == {"research-cq": 1.0, "prod-cq": 1.0}
    assert not any("fairSharing" in str(w) for w in imported.warnings)
    placed, teams = _shares(_weighted("3", "1"))
    assert placed == {"research": 3, "prod": 1}
    assert (teams["research-cq"].entitlement, teams["prod-cq"].entitlement) == (12.0, 4.0)
    assert (teams["research-cq"].weight, teams["prod-cq"].weight) == (3.0, 1.0)  # the fair weights
    placed, teams = _shares(_weighted(None, None))  # no weights: an even split
    assert placed == {"research": 2, "prod": 2}
    assert (teams["research-cq"].entitlement, teams["prod-cq"].entitlement) == (8.0, 8.0)
    placed, _ = _shares(_weighted("1", "3"))  # the other way round
    assert placed == {"research": 1, "prod": 3}


def test_a_cohort_weight_of_zero_borrows_only_what_nobody_else_wants() -> None:
    objects = _weighted("1", "0")
    imported = reimport(objects)
    assert {c.name: c.weight for c in imported.request.cohorts}["prod"] == 0.001
    assert any("Cohort prod" in str(w) and "spec.fairSharing.weight" in str(w) and "0.001" in str(w)
               for w in imported.warnings)
    placed, teams = _shares(objects)
    assert placed == {"research": 4}  # research wants all 16: prod's claim is nearly nothing
    assert teams["prod-cq"].entitlement < 0.1
    for job in [d for d in objects if d["kind"] == "Job" and d["metadata"]["name"] in ("research-train-2",
                                                                                         "research-train-3")]:
        objects.remove(job)
    placed, _ = _shares(objects)
    assert placed == {"research": 2, "prod": 2}  # what research leaves, prod still takes


def test_a_root_cohort_s_weight_changes_nothing_and_says_so() -> None:
    objects = _weighted("3", "1")
    find(objects, "Cohort", "org")["spec"]["fairSharing"] = {"weight": 5}
    imported = reimport(objects)
    assert {c.name: c.weight for c in imported.request.cohorts}["org"] == 5.0
    assert any("Cohort org" in str(w) and "root cohort" in str(w) for w in imported.warnings)
    assert list(fair_weights(imported.request)) == [3.0, 1.0]  # research-cq, prod-cq: org's 5 left out
    placed, _ = _shares(objects)
    assert placed == {"research": 3, "prod": 1}


def test_fair_weights_multiply_down_a_nested_path() -> None:
    request = PlacementRequest.model_validate({
        "cluster": {"nodes": [{"name": "n", "cpu": 8, "memory_gib": 64}]},
        "teams": [{"name": "a", "weight": 2, "cohort": "leaf"}, {"name": "b", "cohort": "mid"},
                  {"name": "c", "cohort": "root"}, {"name": "d"}],
        "cohorts": [{"name": "root", "weight": 7}, {"name": "mid", "parent": "root", "weight": 3},
                    {"name": "leaf", "parent": "mid", "weight": 0.5}]})
    assert list(fair_weights(request)) == [2 * 0.5 * 3, 3.0, 1.0, 1.0]


@pytest.mark.parametrize("weight", [0, -1, MAX_WEIGHT * 2])
def test_a_cohort_weight_is_bounded(weight: float) -> None:
    with pytest.raises(ValidationError) as exc:
        Cohort(name="c", parent="p", weight=weight)
    assert "weight" in str(exc.value)
    assert Cohort(name="c").weight == 1.0 and Cohort(name="c", weight=MAX_WEIGHT).weight == MAX_WEIGHT


def test_a_cohort_parent_cycle_names_the_cohorts() -> None:
    cycle = [_cohort("a", 0, parentName="b"), _cohort("b", 0, parentName="a")]
    with pytest.raises(KubeError) as exc:
        reimport(_objects(cycle, {"team-a-cq": ("a", 0), "team-b-cq": ("a", 0)}))
    assert "Cohort a (input #" in str(exc.value) and "parent cycle" in str(exc.value)
