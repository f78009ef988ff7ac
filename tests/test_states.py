"""States and changes: a loop sends the full request once, then only what changed, and gets the plan the full
request gives (deterministic mode); unknown states and changes that do not apply are clear errors."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_models import PlacementRequest
from pydantic import ValidationError

from placement.api import plan
from placement.states import ChangeError, States, UnknownState, diff

NOW = "2026-12-01T12:00:00Z"


def _node(name: str, model: str = "H100-SXM5-80GB") -> dict[str, Any]:
    return {"name": name, "gpu_model": model, "gpus": 8, "cpu": 64, "memory_gib": 512}


def _job(name: str, gpus: int, replicas: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "submitted_at": "2026-12-01T10:00:00Z", "expected_runtime_h": 2.0,
            "tasks": [{"name": "w", "gpus": gpus, "replicas": replicas}], **extra}


def _request(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]],
             running: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"cluster": {"nodes": nodes, "running": running or []}, "jobs": jobs,
            "policy": {"deterministic": True, "workers": 1, "time_limit_s": 2, "now": NOW}}


@st.composite
def loops(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A first request and the ones a loop sees after it: jobs arrive (appended), are withdrawn or start
    (onto a node of their own, added for them), running jobs end, idle nodes go, the clock moves."""
    models = ["H100-SXM5-80GB", "A100-SXM4-80GB"]
    nodes = [_node(f"n{i}", draw(st.sampled_from(models))) for i in range(draw(st.integers(1, 3)))]
    jobs = [_job(f"j{i}", draw(st.sampled_from([1, 2, 4, 8])), draw(st.integers(1, 2)),
                 **({"speeds": {models[0]: 1.0, models[1]: 0.5}} if draw(st.booleans()) else {}))
            for i in range(draw(st.integers(1, 4)))]
    states = [_request(nodes, jobs)]
    made = len(jobs)
    for step in range(draw(st.integers(1, 3))):
        req = copy.deepcopy(states[-1])
        queue, running, cluster = req["jobs"], req["cluster"]["running"], req["cluster"]["nodes"]
        for _ in range(draw(st.integers(0, 2))):  # arrivals
            queue.append(_job(f"j{made}", draw(st.sampled_from([1, 2, 4, 8]))))
            made += 1
        if queue and draw(st.booleans()):  # withdrawn
            queue.pop(draw(st.integers(0, len(queue) - 1)))
        if queue and draw(st.booleans()):  # one starts on a node added for it
            job = queue.pop(draw(st.integers(0, len(queue) - 1)))
            cluster.append(_node(f"x{step}-{job['name']}"))
            running.append({"job": job["name"], "started_at": NOW, "expected_runtime_h": 2.0,
                            "pods": [{"task": "w", "node": cluster[-1]["name"], "gpus": [0]}]})
        if running and draw(st.booleans()):  # one ends; its node stays
            running.pop(draw(st.integers(0, len(running) - 1)))
        busy = {p["node"] for r in running for p in r["pods"]}
        idle = [n for n in cluster if n["name"] not in busy]
        if len(idle) > 1 and draw(st.booleans()):  # an idle node goes
            cluster.remove(idle[draw(st.integers(0, len(idle) - 1))])
        if draw(st.booleans()):
            req["policy"]["now"] = "2026-12-01T12:10:00Z"
        states.append(req)
    return states


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(loops())
def test_a_change_gives_the_plan_of_the_full_request_it_stands_for(states: list[dict[str, Any]]) -> None:
    store = States()
    first = store.plan(states[0])
    state = first.state
    for before, after in zip(states, states[1:], strict=False):
        change = diff(before, after, state)
        sent = PlacementRequest.model_validate(after).model_dump(mode="json", exclude_unset=True)
        assert store.request(change).model_dump(mode="json", exclude_unset=True) == sent  # what it stands for
        got = store.plan_change(change)
        want = plan(after)
        assert got.plan.assignments == want.assignments and got.plan.pending == want.pending
        assert got.plan.objective == want.objective
        state = got.state


def test_an_unknown_or_evicted_state_is_an_error_naming_base() -> None:
    store = States(max_states=2)
    first = store.put(_request([_node("n0")], [_job("a", 1)]))
    store.put(_request([_node("n0")], []))
    store.put(_request([_node("n1")], []))  # the first falls out
    with pytest.raises(UnknownState) as err:
        store.plan_change({"base": first, "jobs_put": [_job("b", 1)]})
    assert str(err.value).startswith("base: unknown or expired state")
    with pytest.raises(UnknownState):
        store.request({"base": "never-issued"})


@pytest.mark.parametrize(("change", "field"), [
    ({"nodes_removed": ["nope"]}, "nodes_removed.0"),
    ({"jobs_removed": ["a", "ghost"]}, "jobs_removed.1"),
    ({"running_removed": ["ghost"]}, "running_removed.0"),
])
def test_a_change_naming_what_the_state_lacks_is_refused(change: dict[str, Any], field: str) -> None:
    store = States()
    state = store.put(_request([_node("n0")], [_job("a", 1)]))
    with pytest.raises(ChangeError) as err:
        store.request({"base": state, **change})
    assert err.value.field[0] == field.split(".")[0] and str(err.value).startswith(field)


def test_a_change_that_breaks_the_request_is_refused_with_the_request_path() -> None:
    store = States()
    state = store.put(_request([_node("n0")], [_job("a", 1)],
                               [{"job": "r", "pods": [{"task": "w", "node": "n0", "gpus": [0]}]}]))
    with pytest.raises(ValidationError) as err:  # the node its running job sits on goes, the job stays
        store.request({"base": state, "nodes_removed": ["n0"], "nodes_put": [_node("n1")]})
    assert "cluster.running.0.pods.0.node" in str(err.value)
    with pytest.raises(ValidationError) as err:  # a pending job named as a running one
        store.request({"base": state, "jobs_put": [_job("r", 1)]})
    assert "duplicate job name 'r'" in str(err.value)
    with pytest.raises(ValidationError):  # a bad entry in the change itself: read before anything is applied
        store.request({"base": state, "jobs_put": [{"name": "b", "tasks": []}]})


def test_a_job_that_starts_leaves_the_queue_and_unset_fields_stay_unset() -> None:
    store = States()
    state = store.put(_request([_node("n0")], [_job("a", 1), _job("b", 2)]))
    req = store.request({"base": state, "running_put": [{"job": "a", "pods": [{"task": "w", "node": "n0",
                                                                               "gpus": [0]}]}]})
    assert [j.name for j in req.jobs] == ["b"] and [r.job for r in req.cluster.running] == ["a"]
    assert "turnaround" not in req.policy.weights.model_fields_set  # so the loop preset still fills it in
