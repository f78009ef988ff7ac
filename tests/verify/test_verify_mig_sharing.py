"""Shared MIG instances, checked by the verifier alone: shares of one instance within its replicas, one
instance's worth and its memory; no whole-instance pod on a shared instance, no share on a whole one; an
instance running pods share stays shared through a re-partition. The wire format accepts such requests
and refuses running pods that break the same limits."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from placement_models import PlacementRequest, Plan
from pydantic import ValidationError
from verify_cases import recomputed

from placement.verify import verify

SHARED = {"mode": "time-slicing", "replicas": 4}
REQUEST: dict[str, Any] = {
    "cluster": {
        "nodes": [{"name": "n1", "gpu_model": "H100-SXM5-80GB", "gpus": 1, "cpu": 64, "memory_gib": 512,
                   "mig": {"0": [{"profile": "1g.10gb", "start": 0, "sharing": SHARED},
                                 {"profile": "1g.10gb", "start": 1}]}}],
        "running": [{"job": "r", "pods": [{"task": "t", "node": "n1", "gpu_share": 0.25,
                                           "mig": {"gpu": 0, "profile": "1g.10gb", "start": 0}}]}],
    },
    "jobs": [{"name": "s", "tasks": [{"name": "t", "replicas": 2, "mig_profile": "1g.10gb", "gpu_share": 0.25}]},
             {"name": "w", "tasks": [{"name": "t", "mig_profile": "1g.10gb"}]}],
}
PLAN: dict[str, Any] = {
    "status": "feasible",
    "assignments": [
        {"job": "s", "task": "t", "pod": 0, "node": "n1", "mig": {"gpu": 0, "profile": "1g.10gb", "start": 0},
         "gpu_share": 0.25},
        {"job": "s", "task": "t", "pod": 1, "node": "n1", "mig": {"gpu": 0, "profile": "1g.10gb", "start": 0},
         "gpu_share": 0.25},
        {"job": "w", "task": "t", "pod": 0, "node": "n1", "mig": {"gpu": 0, "profile": "1g.10gb", "start": 1}},
    ],
    "objective": {"total": 0.0},
}


def _check(mutate: Callable[[dict[str, Any], dict[str, Any]], None] | None = None) -> list[str]:
    req, plan = copy.deepcopy(REQUEST), copy.deepcopy(PLAN)
    if mutate is not None:
        mutate(req, plan)
    request, out = PlacementRequest.model_validate(req), Plan.model_validate(plan)
    out = out.model_copy(update={"objective": recomputed(request, out)})
    return verify(request, out)


def _mig(found: list[str]) -> list[str]:
    return [v for v in found if v.startswith(("mig:", "sharing:"))]


def test_shares_of_a_shared_instance_within_its_limits_pass() -> None:
    assert _check() == []


def _layout(req: dict[str, Any]) -> list[dict[str, Any]]:
    return req["cluster"]["nodes"][0]["mig"]["0"]


@pytest.mark.parametrize(("mutate", "fragment"), [
    (lambda r, p: _layout(r)[0]["sharing"].update(replicas=2), "has 3 pods, more than its 2 replicas"),
    (lambda r, p: r["jobs"][0]["tasks"][0].update(gpu_share=0.5) or [a.update(gpu_share=0.5)
                                                                      for a in p["assignments"][:2]],
     "is given 1.25 of the instance"),
    (lambda r, p: r["jobs"][0]["tasks"][0].update(gpu_memory_gib=5), "GiB of GPU memory, more than its"),
    (lambda r, p: p["assignments"][2]["mig"].update(start=0), "is shared (time-slicing); a pod that asks for a "
     "whole instance cannot take it"),
    (lambda r, p: [a["mig"].update(start=1) for a in p["assignments"][:2]], "is not shared, but the pod takes a "
     "share"),
    (lambda r, p: p["assignments"][0].update(gpu_share=0.5), "takes share 0.5 of its instance; its task asks 0.25"),
])
def test_each_broken_share_names_the_mig_rule(mutate: Callable[[dict[str, Any], dict[str, Any]], None],
                                              fragment: str) -> None:
    found = _mig(_check(mutate))
    assert any(fragment in v for v in found), found


def test_a_re_partition_that_drops_the_sharing_of_a_running_share_is_refused() -> None:
    def unshare(r: dict[str, Any], p: dict[str, Any]) -> None:
        r["policy"] = {"allow_mig_changes": True}
        p["assignments"] = p["assignments"][2:]
        r["jobs"] = r["jobs"][1:]
        p["mig_changes"] = [{"node": "n1", "gpu": 0, "layout": [{"profile": "1g.10gb", "start": 0},
                                                                 {"profile": "1g.10gb", "start": 1}]}]

    found = _mig(_check(unshare))
    assert any("held in shares by running job r is not shared after the plan" in v for v in found), found

    def keep(r: dict[str, Any], p: dict[str, Any]) -> None:
        unshare(r, p)
        p["mig_changes"][0]["layout"][0]["sharing"] = SHARED
        p["mig_changes"][0]["layout"].append({"profile": "1g.10gb", "start": 2})

    assert _mig(_check(keep)) == []


def _running(pods: list[dict[str, Any]], sharing: dict[str, Any] | None = SHARED) -> dict[str, Any]:
    req = copy.deepcopy(REQUEST)
    req["jobs"] = []
    _layout(req)[0]["sharing"] = sharing
    req["cluster"]["running"][0]["pods"] = pods
    return req


POD = {"task": "t", "node": "n1", "gpu_share": 0.25, "mig": {"gpu": 0, "profile": "1g.10gb", "start": 0}}


@pytest.mark.parametrize(("request_", "where", "fragment"), [
    (_running([POD] * 5), "cluster.nodes.0.mig.0.0.sharing.replicas", "5 running pods share"),
    (_running([{**POD, "gpu_share": 0.75}] * 2), "cluster.nodes.0.mig.0.0.sharing", "sums to 1.5"),
    (_running([POD], None), "cluster.running.0.pods.0.gpu_share", "is not shared"),
    (_running([{k: v for k, v in POD.items() if k != "gpu_share"}]), "cluster.running.0.pods.0.gpu_share",
     "is shared: a pod on it holds a share"),
])
def test_the_wire_format_refuses_running_shares_beyond_the_instance(request_: dict[str, Any], where: str,
                                                                    fragment: str) -> None:
    with pytest.raises(ValidationError) as info:
        PlacementRequest.model_validate(request_)
    errors = {".".join(map(str, e["loc"])): e["msg"] for e in info.value.errors()}
    assert fragment in errors[where], errors


def test_a_task_shares_a_named_instance_never_auto() -> None:
    with pytest.raises(ValidationError, match="names the instance's profile"):
        PlacementRequest.model_validate({**REQUEST, "jobs": [{"name": "a", "tasks": [
            {"name": "t", "mig_profile": "auto", "gpu_memory_gib": 5, "gpu_share": 0.5}]}]})


def _reshare(sharing: dict[str, Any] | None, running_whole: bool = False) -> Callable[[dict[str, Any], dict[str, Any]],
                                                                                         None]:
    """The plan makes free instance 1g.10gb@1 shared (a MIG change that keeps the layout) and puts job w's share
    there; `running_whole`: a running pod holds that instance whole."""

    def mutate(r: dict[str, Any], p: dict[str, Any]) -> None:
        r["policy"] = {"allow_mig_changes": True}
        r["jobs"][1]["tasks"][0]["gpu_share"] = 0.5
        p["assignments"][2]["gpu_share"] = 0.5
        layout = [{"profile": "1g.10gb", "start": 0, "sharing": SHARED}, {"profile": "1g.10gb", "start": 1}]
        if sharing is not None:
            layout[1]["sharing"] = sharing
        p["mig_changes"] = [{"node": "n1", "gpu": 0, "layout": layout}]
        if running_whole:
            r["cluster"]["running"].append({"job": "h", "pods": [{"task": "t", "node": "n1", "mig": {
                "gpu": 0, "profile": "1g.10gb", "start": 1}}]})
            r["jobs"] = r["jobs"][:1]
            p["assignments"] = p["assignments"][:2]

    return mutate


def test_an_instance_the_plan_shares_gets_the_policy_default() -> None:
    assert _mig(_check(_reshare({"mode": "time-slicing", "replicas": 8}))) == []  # policy.sharing_default
    found = _mig(_check(_reshare({"mode": "mps", "replicas": 3})))
    assert any("is made shared as mps with 3 replicas; policy.sharing_default says time-slicing with 8" in v
               for v in found), found


def test_an_instance_a_running_pod_holds_whole_never_becomes_shared() -> None:
    found = _mig(_check(_reshare({"mode": "time-slicing", "replicas": 8}, running_whole=True)))
    assert any("is held whole by running job h and cannot become shared" in v for v in found), found


def test_a_declared_shared_instance_keeps_its_setting() -> None:
    def retune(r: dict[str, Any], p: dict[str, Any]) -> None:
        r["policy"] = {"allow_mig_changes": True}
        p["mig_changes"] = [{"node": "n1", "gpu": 0, "layout": [
            {"profile": "1g.10gb", "start": 0, "sharing": {"mode": "time-slicing", "replicas": 8}},
            {"profile": "1g.10gb", "start": 1}]}]

    found = _mig(_check(retune))
    assert any("is shared as time-slicing with 4 replicas; the plan gives it time-slicing with 8" in v
               for v in found), found
