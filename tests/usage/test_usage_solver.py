"""Observations in the next plan: usage.over_declared, the right-size offer, and the verifier's right_size rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from placement_models import MigSlot, PlacementRequest, Plan
from pydantic import ValidationError
from usage_synth import node, request

from placement import plan, rightsize
from placement.baseline import greedy
from placement.baseline.gangs import one_choice_per_pod
from placement.solution import Placement
from placement.verify import verify


def _job(name: str, declared: float | None = 32.0, observed: float | None = None, replicas: int = 1,
         **extra: Any) -> dict[str, Any]:
    task: dict[str, Any] = {"name": "w", "replicas": replicas, "gpus": 1}
    if declared is not None:
        task["gpu_memory_gib"] = declared
    job: dict[str, Any] = {"name": name, "tasks": [task], **extra}
    if observed is not None:
        job["observed_gpu_memory_gib"] = observed
    return job


def _placed(p: Plan) -> set[str]:
    return {a.job for a in p.assignments}


# --------------------------------------------------------------------------------------------
# usage.over_declared


@pytest.mark.parametrize("order", [("greedy-8", "honest-32"), ("honest-32", "greedy-8")])
def test_the_over_declared_job_loses_a_tie(order: tuple[str, str]) -> None:
    """One GPU, two jobs alike but for what they were seen to use of the 32 GiB they declare."""
    jobs = {"greedy-8": _job("greedy-8", observed=8.0), "honest-32": _job("honest-32", observed=32.0)}
    p = plan(request([node("n1", gpus=1)], [jobs[name] for name in order]))
    assert _placed(p) == {"honest-32"}
    assert [q.job for q in p.pending] == ["greedy-8"]
    assert p.objective.terms["usage.over_declared"] == 0.0


def test_over_declared_costs_the_unused_share_of_the_value() -> None:
    """Declared 32, used 8: 0.75 unused × weight 0.5 × value 1 (one GPU, lowest priority) = −0.375."""
    p = plan(request([node("n1", gpus=1)], [_job("a", observed=8.0)]))
    assert _placed(p) == {"a"}
    assert p.objective.terms["usage.over_declared"] == pytest.approx(-0.375)
    q = plan(request([node("n1", gpus=1)], [_job("a", observed=8.0)], weights={"over_declared": 0.0}))
    assert "usage.over_declared" not in q.objective.terms


def test_no_declaration_or_no_observation_is_never_over_declared() -> None:
    jobs = [_job("undeclared", declared=None, observed=1.0), _job("unseen", observed=None),
            _job("over-used", observed=40.0)]
    p = plan(request([node("n1", gpus=4)], jobs))
    assert _placed(p) == {"undeclared", "unseen", "over-used"}
    assert "usage.over_declared" not in p.objective.terms


# --------------------------------------------------------------------------------------------
# Right-sizing


def _three_jobs(right_size: bool) -> dict[str, Any]:
    """Two H100s. 'a' (one GPU, seen at 8 GiB), 'b' (one GPU) and 'c' (a 3g.40gb instance): whole GPUs
    for a and b leave no room for c; a on a 1g.10gb instance beside c's 3g does."""
    return request([node("n1", gpus=2)], [
        _job("a", observed=8.0, right_size=right_size), _job("b", declared=None),
        {"name": "c", "tasks": [{"name": "s", "mig_profile": "3g.40gb"}]},
    ], allow_mig_changes=True)


def test_right_sizing_frees_a_gpu_for_more_work() -> None:
    before = plan(_three_jobs(right_size=False))
    assert len(_placed(before)) == 2 and before.right_sized == []
    after = plan(_three_jobs(right_size=True))
    assert _placed(after) == {"a", "b", "c"}
    (a,) = [x for x in after.assignments if x.job == "a"]
    assert (a.task, a.pod, a.gpus, a.mig.profile) == ("w", 0, [], "1g.10gb")  # the request's own names
    (moved,) = after.right_sized
    assert (moved.job, moved.task, moved.pods, moved.profiles) == ("a", "w", 1, ["1g.10gb"])
    assert moved.needs_gib == 10.0  # 8 GiB × headroom 1.25
    assert moved.gpus_saved == pytest.approx(0.875)  # 1 of 8 memory slices
    assert verify(PlacementRequest.model_validate(_three_jobs(right_size=True)), after) == []


def test_right_sized_pods_keep_their_value_and_earn_the_saving() -> None:
    """Alone on an idle GPU, a right-sized pod is worth its declared GPU plus weights.right_size × 7/8 (more than
    the re-layout it needs costs: mig.reconfigure 0.1)."""
    whole = plan(request([node("n1", gpus=1)], [_job("a", declared=None)], allow_mig_changes=True))
    sized = plan(request([node("n1", gpus=1)], [_job("a", declared=None, observed=8.0, right_size=True)],
                         allow_mig_changes=True))
    assert sized.right_sized and sized.right_sized[0].profiles == ["1g.10gb"]
    kept = sized.objective.terms["priority"] + sized.objective.terms["usage.right_size"]
    # Coefficients are integers in 1/1000 GPU (compile/context.py SCALE): rounding moves the sum by < 0.001.
    assert kept == pytest.approx(whole.objective.terms["priority"] + 0.25 * 0.875, abs=1e-3)


def test_pods_split_between_instances_and_whole_gpus() -> None:
    """Three pods, two free 1g.10gb instances (no re-partitioning), one whole GPU: two pods go small."""
    nodes = [node("n1", gpus=2, mig={"0": [{"profile": "1g.10gb", "start": 0}, {"profile": "1g.10gb", "start": 1}]})]
    req = request(nodes, [_job("a", declared=None, observed=6.0, replicas=3, right_size=True)])
    p = plan(req)
    pods = sorted((x.pod, x.mig.profile if x.mig else None, tuple(x.gpus)) for x in p.assignments)
    assert [pod for pod, _, _ in pods] == [0, 1, 2]
    assert sorted(profile or "whole" for _, profile, _ in pods) == ["1g.10gb", "1g.10gb", "whole"]
    assert p.right_sized[0].pods == 2 and p.right_sized[0].gpus_saved == pytest.approx(1.75)
    assert verify(PlacementRequest.model_validate(req), p) == []


def test_no_mig_no_offer() -> None:
    """On L4s (no MIG) the offer is withdrawn before the solve: the job runs as declared."""
    req = PlacementRequest.model_validate(
        request([node("n1", gpus=1, model="L4-24GB")], [_job("a", declared=None, observed=2.0, right_size=True)]))
    problem = rightsize.build_problem(req)
    assert rightsize.pairs(problem) == [] and [t.name for t in problem.tasks] == ["w"]
    p = plan(req)
    assert _placed(p) == {"a"} and p.right_sized == [] and p.assignments[0].gpus == [0]


def test_an_opted_in_job_without_an_observation_gets_no_offer() -> None:
    req = PlacementRequest.model_validate(request([node("n1", gpus=1)], [_job("a", right_size=True)],
                                                  allow_mig_changes=True))
    assert rightsize.offers(req) == []


@pytest.mark.parametrize(("util", "moved"), [(0.10, True), (0.12, False)])
def test_the_instance_must_have_the_compute_the_job_used(util: float, moved: bool) -> None:
    """GPU_UTIL bounds the SMs a job keeps busy: 1g.10gb has 1/7 = 14.3 % of them, enough for 10 % × 1.25
    but not for 12 % × 1.25 = 15 % (then the offer is withdrawn and the job keeps its GPU)."""
    req = PlacementRequest.model_validate(request([node("n1", gpus=1)], [
        _job("a", declared=None, observed=8.0, observed_sm_util=util, right_size=True)], allow_mig_changes=True))
    problem = rightsize.build_problem(req)
    assert bool(rightsize.pairs(problem)) == moved
    p = plan(req)
    assert bool(p.right_sized) == moved and _placed(p) == {"a"}
    assert verify(req, p) == []


def test_greedy_keeps_one_choice_per_pod() -> None:
    """The gang loop fills both the declared task and its alternative; the greedy drops the surplus whole GPUs."""
    req = PlacementRequest.model_validate(request([node("n1", gpus=4)], [
        _job("a", declared=None, observed=8.0, replicas=2, right_size=True)], allow_mig_changes=True))
    problem = rightsize.build_problem(req)
    (pair,) = rightsize.pairs(problem)
    placement = greedy(problem)
    assert placement.task_pods(pair.alternative) == 2 and placement.task_pods(pair.task) == 0
    both = Placement(counts={(pair.task, 0): 2, (pair.alternative, 0): 2})
    trimmed = one_choice_per_pod(problem, both)
    assert trimmed.task_pods(pair.alternative) == 2 and trimmed.task_pods(pair.task) == 0


def test_a_pending_right_sized_job_is_explained_in_its_own_names() -> None:
    """A higher-priority job takes the only GPU; the pending reason names task 'w', not the alternative."""
    req = request([node("n1", gpus=1)], [_job("a", declared=None, observed=8.0, right_size=True),
                                         _job("big", declared=None, priority=10)], allow_mig_changes=True,
                  max_mig_changes=0)
    p = plan(req)
    assert _placed(p) == {"big"}
    (reason,) = [q.reason for q in p.pending]
    assert rightsize.SUFFIX not in reason


@pytest.mark.parametrize(("change", "message"), [
    ({"tasks": [{"name": "w", "gpus": 2}]}, "no task with gpus: 1"),
    ({"topology": {"preferred": "rack"}}, "a job with topology needs is not right-sized"),
])
def test_right_size_is_refused_where_it_cannot_apply(change: dict[str, Any], message: str) -> None:
    job = {**_job("a", observed=8.0, right_size=True), **change}
    with pytest.raises(ValidationError) as info:
        PlacementRequest.model_validate(request([node("n1")], [job]))
    errors = info.value.errors()
    assert errors[0]["loc"][:3] == ("jobs", 0, "right_size") and message in errors[0]["msg"]


# --------------------------------------------------------------------------------------------
# verify: right_size


def _partitioned() -> dict[str, Any]:
    """An H100 with a free 1g.10gb (start 0) and a free 1g.20gb (start 2); 'a' was seen at 9 GiB."""
    mig = {"0": [{"profile": "1g.10gb", "start": 0}, {"profile": "1g.20gb", "start": 2}]}
    return request([node("n1", gpus=1, mig=mig)], [_job("a", declared=None, observed=9.0, right_size=True)])


def test_verify_checks_a_right_sized_instance_holds_observed_times_headroom() -> None:
    req = PlacementRequest.model_validate(_partitioned())
    p = plan(req)
    assert p.assignments[0].mig.profile == "1g.20gb"  # 9 × 1.25 = 11.25 GiB: 1g.10gb is too small
    assert verify(req, p) == []
    small = p.model_copy(update={"assignments": [p.assignments[0].model_copy(
        update={"mig": MigSlot(gpu=0, profile="1g.10gb", start=0)})]})
    assert verify(req, small) == ["right_size: pod a/w/0 holds 1g.10gb (10 GiB); job a needs observed 9 GiB × "
                                  "headroom 1.25 = 11.25 GiB"]


def test_verify_checks_the_instance_has_the_compute_the_job_used() -> None:
    data = _partitioned()
    p = plan(PlacementRequest.model_validate(data))  # no utilisation observed: memory alone sizes it
    busy = copy.deepcopy(data)
    busy["jobs"][0]["observed_sm_util"] = 0.4
    assert verify(PlacementRequest.model_validate(busy), p) == [
        "right_size: pod a/w/0 holds 1g.20gb (1/7 of the SMs); job a needs observed utilisation 0.4 × headroom "
        "1.25 = 0.5 of them"]


def test_verify_refuses_instances_for_jobs_that_did_not_opt_in_or_were_never_seen() -> None:
    data = _partitioned()
    p = plan(PlacementRequest.model_validate(data))
    not_opted = copy.deepcopy(data)
    not_opted["jobs"][0]["right_size"] = False
    # (the plan's own terms no longer add up for the changed request either: the objective rule says so too)
    assert [v for v in verify(PlacementRequest.model_validate(not_opted), p) if not v.startswith("objective: ")] == [
        "gpus: pod a/w/0 on node n1 has 0 GPUs, task asks for 1",
        "mig: pod a/w/0 holds a MIG instance but its task asks for none"]
    unseen = copy.deepcopy(data)
    del unseen["jobs"][0]["observed_gpu_memory_gib"]
    assert verify(PlacementRequest.model_validate(unseen), p) == [
        "right_size: pod a/w/0 holds MIG 1g.20gb instead of a GPU, but job a has no observed_gpu_memory_gib to "
        "size it by"]
