"""Time-slicing and MPS: shares and GPU memory never over-committed, replicas capped, hand-checked packings."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hints import greedy_hint_solves
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_models import PlacementRequest, Plan
from pydantic import ValidationError

from placement import plan
from placement import problem as problem_mod
from placement.baseline import greedy
from placement.verify import verify

H100 = "H100-SXM5-80GB"  # 80 GiB


def _request(sharing: dict[int, Any], jobs: list[dict[str, Any]], running: list[dict[str, Any]] | None = None,
             gpus: int = 1) -> dict[str, Any]:
    node = {"name": "n1", "gpu_model": H100, "gpus": gpus, "cpu": 64, "memory_gib": 512, "sharing": sharing}
    return {"cluster": {"nodes": [node], "running": running or []}, "jobs": jobs,
            "policy": {"deterministic": True, "time_limit_s": 5, "workers": 1}}


def _ts(replicas: int = 4, mode: str = "time-slicing") -> dict[str, Any]:
    return {"mode": mode, "replicas": replicas}


def _job(name: str, share: float, replicas: int = 1, **task: Any) -> dict[str, Any]:
    return {"name": name, "tasks": [{"name": "s", "replicas": replicas, "gpu_share": share, **task}]}


def _placed(p: Plan) -> set[str]:
    return {a.job for a in p.assignments}


def test_four_quarters_fill_a_gpu_and_a_fifth_waits() -> None:
    p = plan(_request({0: _ts(8)}, [_job("a", 0.25, 4), _job("b", 0.25)]))
    assert _placed(p) == {"a"}
    assert all(a.gpus == [0] and a.gpu_share == 0.25 for a in p.assignments)
    assert p.pending[0].job == "b" and "capacity went to" in p.pending[0].reason
    assert "0.25 of a shared GPU" in p.pending[0].reason


def test_memory_is_never_overcommitted() -> None:
    """Two 0.3 shares fit by compute, but 50 + 50 GiB exceed the 80 GiB GPU: one waits."""
    p = plan(_request({0: _ts()}, [_job("a", 0.3, gpu_memory_gib=50), _job("b", 0.3, gpu_memory_gib=50)]))
    assert len(_placed(p)) == 1


def test_memory_defaults_to_the_share_of_the_gpu() -> None:
    """Without gpu_memory_gib a 0.5 share counts 40 GiB: a running 0.25 pod declaring 50 GiB leaves 30."""
    running = [{"job": "old", "pods": [{"task": "s", "node": "n1", "gpus": [0], "gpu_share": 0.25,
                                        "gpu_memory_gib": 50}]}]
    p = plan(_request({0: _ts()}, [_job("a", 0.5), _job("b", 0.3, gpu_memory_gib=30)], running))
    assert _placed(p) == {"b"}


def test_replicas_cap_the_pods_on_a_gpu() -> None:
    p = plan(_request({0: _ts(2, "mps")}, [_job("a", 0.1), _job("b", 0.1), _job("c", 0.1)]))
    assert len(_placed(p)) == 2


def test_shares_are_bin_packed_across_gpus() -> None:
    """0.6, 0.6, 0.4, 0.4 on two shared GPUs: only 0.6+0.4 on each places all four."""
    jobs = [_job("a", 0.6), _job("b", 0.6), _job("c", 0.4), _job("d", 0.4)]
    p = plan(_request({0: _ts(), 1: _ts()}, jobs, gpus=2))
    assert _placed(p) == {"a", "b", "c", "d"}
    per_gpu: dict[int, float] = {}
    for a in p.assignments:
        per_gpu[a.gpus[0]] = per_gpu.get(a.gpus[0], 0.0) + (a.gpu_share or 0.0)
    assert per_gpu == pytest.approx({0: 1.0, 1: 1.0})


def test_whole_gpu_pods_never_land_on_a_shared_gpu() -> None:
    whole = [{"name": "w", "tasks": [{"name": "t", "gpus": 2}]}, {"name": "v", "tasks": [{"name": "t", "gpus": 1}]}]
    p = plan(_request({1: _ts()}, whole, gpus=2))
    assert _placed(p) == {"v"} and p.assignments[0].gpus == [0]


def test_running_shares_count() -> None:
    running = [{"job": "old", "pods": [{"task": "s", "node": "n1", "gpus": [0], "gpu_share": 0.7}]}]
    p = plan(_request({0: _ts()}, [_job("a", 0.4), _job("b", 0.3)], running))
    assert _placed(p) == {"b"}


def test_a_share_task_without_shared_gpus_waits_with_a_reason() -> None:
    p = plan(_request({}, [_job("a", 0.5)]))
    assert "no matching node has a shared (time-slicing/MPS) GPU" in p.pending[0].reason


@pytest.mark.parametrize(("mutate", "loc"), [
    (lambda r: r["cluster"]["running"].append({"job": "x", "pods": [
        {"task": "s", "node": "n1", "gpus": [1], "gpu_share": 0.5}]}), ("cluster", "running", 0, "pods", 0, "gpus", 0)),
    (lambda r: r["cluster"]["running"].extend([{"job": f"x{i}", "pods": [
        {"task": "s", "node": "n1", "gpus": [0], "gpu_share": 0.6}]} for i in range(2)]),
     ("cluster", "nodes", 0, "sharing", 0)),
    (lambda r: r["cluster"]["running"].append({"job": "x", "pods": [
        {"task": "s", "node": "n1", "gpus": [0], "gpu_share": 0.5, "gpu_memory_gib": 90}]}),
     ("cluster", "nodes", 0, "sharing", 0)),
    (lambda r: r["jobs"].append(_job("j", 0.5, gpus=1)), ("jobs", 0, "tasks", 0, "gpu_share")),
    (lambda r: r["jobs"].append(_job("j", 1.5)), ("jobs", 0, "tasks", 0, "gpu_share")),
    (lambda r: r["cluster"]["nodes"][0].update(mig={0: []}), ("cluster", "nodes", 0, "sharing", 0)),
])
def test_bad_sharing_input_names_its_field(mutate: Any, loc: tuple[Any, ...]) -> None:
    req = _request({0: _ts()}, [], gpus=2)
    mutate(req)
    with pytest.raises(ValidationError) as err:
        problem_mod.build(PlacementRequest.model_validate(req))
    assert any(e["loc"] == loc for e in err.value.errors()), err.value.errors()


def _checked(mutate: Any) -> list[str]:
    req = _request({0: _ts(2)}, [_job("a", 0.5, 2, gpu_memory_gib=30)], gpus=2)
    good = {"status": "feasible", "objective": {"total": 0.0}, "assignments": [
        {"job": "a", "task": "s", "pod": k, "node": "n1", "gpus": [0], "gpu_share": 0.5} for k in range(2)]}
    p = copy.deepcopy(good)
    mutate(req, p)
    return [v for v in verify(PlacementRequest.model_validate(req), Plan.model_validate(p))
            if v.startswith(("sharing: ", "gpus: "))]


@pytest.mark.parametrize(("mutate", "fragment"), [
    (lambda r, p: None, None),
    (lambda r, p: r["jobs"][0]["tasks"][0].update(gpu_share=0.6), "is given 1.2 of a GPU"),
    (lambda r, p: r["jobs"][0]["tasks"][0].update(gpu_memory_gib=41), "82 GiB of GPU memory"),
    (lambda r, p: r["cluster"]["nodes"][0]["sharing"][0].update(replicas=1), "more than its 1 replicas"),
    (lambda r, p: p["assignments"][1].update(gpus=[1]), "which is not shared"),
    (lambda r, p: p["assignments"][1].update(gpu_share=0.25), "takes share 0.25"),
])
def test_checker_catches_broken_sharing_plans(mutate: Any, fragment: str | None) -> None:
    found = _checked(mutate)
    if fragment is None:
        assert found == []
    else:
        assert any(fragment in v for v in found), found


@st.composite
def _cases(draw: st.DrawFn) -> dict[str, Any]:
    gpus = draw(st.integers(1, 3))
    sharing = {g: _ts(draw(st.integers(1, 4)), draw(st.sampled_from(["time-slicing", "mps"])))
               for g in range(gpus) if draw(st.booleans())}
    running = []
    for g in sharing:
        if draw(st.booleans()):
            running.append({"job": f"r{g}", "pods": [{"task": "s", "node": "n1", "gpus": [g], "gpu_share": 0.3,
                                                      "gpu_memory_gib": 20}]})
    jobs = []
    for j in range(draw(st.integers(1, 5))):
        share = draw(st.sampled_from([0.1, 0.25, 0.3, 0.5, 0.81, 1.0]))
        extra = {"gpu_memory_gib": draw(st.sampled_from([5, 30, 60]))} if draw(st.booleans()) else {}
        jobs.append(_job(f"j{j}", share, draw(st.integers(1, 3)), **extra))
    if draw(st.booleans()):
        jobs.append({"name": "whole", "tasks": [{"name": "t", "gpus": 1}]})
    req = _request(sharing, jobs, running, gpus=gpus)
    req["policy"]["time_limit_s"] = 1
    if draw(st.booleans()):
        req["policy"]["allow_sharing_changes"] = True
        req["policy"]["max_sharing_changes"] = draw(st.sampled_from([None, 0, 1]))
        req["policy"]["sharing_default"] = _ts(draw(st.integers(1, 4)), draw(st.sampled_from(["time-slicing", "mps"])))
    return req


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_random_sharing_requests_give_verified_plans(req: dict[str, Any]) -> None:
    p = plan(req)
    assert verify(PlacementRequest.model_validate(req), p) == []
    declared = set(req["cluster"]["nodes"][0]["sharing"])
    converted = {c.gpu for c in p.sharing_changes}
    assert not converted & declared and (not converted or req["policy"].get("allow_sharing_changes"))
    for a in p.assignments:
        shared = a.gpu_share is not None
        assert shared == (a.job != "whole")
        if not shared:
            assert not set(a.gpus) & (declared | converted)
        else:
            assert a.gpus[0] in declared | converted


# --------------------------------------------------------------------------------------------
# Sharing changes: idle whole GPUs turned into shared GPUs (policy.allow_sharing_changes)


def _changes(p: Plan) -> list[tuple[str, int, str, int]]:
    return [(c.node, c.gpu, c.mode, c.replicas) for c in p.sharing_changes]


def _on(req: dict[str, Any], **policy: Any) -> dict[str, Any]:
    req["policy"].update(allow_sharing_changes=True, **policy)
    return req


def test_an_idle_gpu_is_shared_only_when_allowed() -> None:
    jobs = [_job("a", 0.5, 2)]
    off = plan(_request({}, jobs, gpus=2))
    assert _placed(off) == set() and off.sharing_changes == []
    assert "2 idle GPUs on matching nodes could be shared if policy.allow_sharing_changes were on" in \
        off.pending[0].reason
    on = plan(_on(_request({}, jobs, gpus=2)))
    assert _placed(on) == {"a"}
    assert _changes(on) == [("n1", 1, "time-slicing", 8)]  # one GPU holds both halves; the highest index
    assert all(a.gpus == [1] and a.gpu_share == 0.5 for a in on.assignments)
    assert on.objective.terms["sharing_change"] == pytest.approx(-0.01)  # weights.sharing_change per GPU


def test_a_declared_shared_gpu_with_room_is_used_before_any_change() -> None:
    p = plan(_on(_request({0: _ts(4)}, [_job("a", 0.25, 2)], gpus=2)))
    assert _placed(p) == {"a"} and p.sharing_changes == []
    assert {a.gpus[0] for a in p.assignments} == {0}


def test_a_gpu_the_plan_shares_is_filled_before_sharing_another() -> None:
    """Four quarters and two thirds on three idle GPUs: two shared GPUs suffice (0.25 × 4, then 0.3 + 0.3)."""
    p = plan(_on(_request({}, [_job("q", 0.25, 4), _job("t", 0.3, 2)], gpus=3)))
    assert _placed(p) == {"q", "t"} and len(p.sharing_changes) == 2
    assert p.objective.terms["sharing_change"] == pytest.approx(-0.02)


def test_sharing_never_takes_a_gpu_a_whole_gpu_pod_uses() -> None:
    whole = {"name": "w", "priority": 1, "tasks": [{"name": "t", "gpus": 2}]}
    full = plan(_on(_request({}, [whole, _job("a", 0.5)], gpus=2)))
    assert _placed(full) == {"w"} and full.sharing_changes == []  # both GPUs whole for w
    roomy = plan(_on(_request({}, [whole, _job("a", 0.5)], gpus=3)))
    assert _placed(roomy) == {"w", "a"}
    assert _changes(roomy) == [("n1", 2, "time-slicing", 8)]
    assert next(a.gpus for a in roomy.assignments if a.job == "w") == [0, 1]


def test_a_gpu_a_running_pod_holds_is_never_shared() -> None:
    running = [{"job": "old", "pods": [{"task": "w", "node": "n1", "gpus": [1]}]}]
    p = plan(_on(_request({}, [_job("a", 0.5, 2), _job("b", 0.5, 2)], running, gpus=2)))
    assert len(_placed(p)) == 1 and _changes(p) == [("n1", 0, "time-slicing", 8)]


def test_max_sharing_changes_caps_the_gpus_shared() -> None:
    jobs = [_job("a", 0.6), _job("b", 0.6)]
    both = plan(_on(_request({}, jobs, gpus=2)))
    assert _placed(both) == {"a", "b"} and len(both.sharing_changes) == 2
    capped = plan(_on(_request({}, jobs, gpus=2), max_sharing_changes=1))
    assert len(_placed(capped)) == 1 and len(capped.sharing_changes) == 1
    assert "policy.max_sharing_changes (1) is reached" in capped.pending[0].reason
    none = plan(_on(_request({}, jobs, gpus=2), max_sharing_changes=0))
    assert _placed(none) == set() and "policy.max_sharing_changes (0) is reached" in none.pending[0].reason


def test_a_shared_gpu_gets_the_policy_default_and_obeys_its_replicas() -> None:
    """MPS with two replicas: three 0.1 pods need two GPUs although their shares fit one."""
    req = _on(_request({}, [_job("a", 0.1, 3)], gpus=2), sharing_default={"mode": "mps", "replicas": 2})
    p = plan(req)
    assert _placed(p) == {"a"}
    assert _changes(p) == [("n1", 0, "mps", 2), ("n1", 1, "mps", 2)]


def test_a_shared_gpu_holds_no_more_memory_than_the_gpu() -> None:
    p = plan(_on(_request({}, [_job("a", 0.3, 2, gpu_memory_gib=50)], gpus=2)))
    assert _placed(p) == {"a"} and len(p.sharing_changes) == 2  # 2 × 50 GiB > 80: one pod per GPU
    too_big = plan(_on(_request({}, [_job("b", 0.3, gpu_memory_gib=90)], gpus=2)))
    assert _placed(too_big) == set() and too_big.sharing_changes == []


def test_mig_and_sharing_changes_compete_for_the_same_idle_gpu() -> None:
    jobs = [_job("s", 0.5), {"name": "m", "tasks": [{"name": "s", "mig_profile": "1g.10gb"}]}]
    p = plan(_on(_request({}, jobs, gpus=1), allow_mig_changes=True))
    assert len(_placed(p)) == 1 and len(p.sharing_changes) + len(p.mig_changes) == 1
    two = plan(_on(_request({}, jobs + [{"name": "w", "tasks": [{"name": "t", "gpus": 1}]}], gpus=3),
                   allow_mig_changes=True))
    assert _placed(two) == {"s", "m", "w"}
    shared, partitioned = {c.gpu for c in two.sharing_changes}, {c.gpu for c in two.mig_changes}
    whole = next(a.gpus for a in two.assignments if a.job == "w")
    assert len(shared | partitioned | set(whole)) == 3  # three different GPUs


def test_candidates_see_idle_gpus_only_when_sharing_changes_are_on() -> None:
    def task(req: dict[str, Any]) -> problem_mod.TaskInfo:
        return problem_mod.build(PlacementRequest.model_validate(req)).tasks[0]

    running = [{"job": "old", "pods": [{"task": "w", "node": "n1", "gpus": [0]}]}]
    off = task(_request({}, [_job("a", 0.3, 10)], running, gpus=3))
    assert off.candidates.tolist() == []
    on = task(_on(_request({}, [_job("a", 0.3, 10)], running, gpus=3)))
    assert on.candidates.tolist() == [0] and on.max_per_node.tolist() == [6]  # 2 idle GPUs × 3 pods of 0.3
    declared = task(_on(_request({0: _ts(2)}, [_job("a", 0.3, 10)], gpus=3)))
    assert declared.max_per_node.tolist() == [2 + 2 * 3]  # the shared GPU's replicas, then two idle GPUs


def test_deterministic_mode_gives_the_same_plan_with_sharing_changes_twice() -> None:
    jobs = [_job("a", 0.25, 3), _job("b", 0.6, 2), _job("c", 0.4), {"name": "w", "tasks": [{"name": "t", "gpus": 1}]}]
    req = _on(_request({1: _ts(2)}, jobs, gpus=4))
    first, second = plan(req), plan(copy.deepcopy(req))
    assert first.solver.mode == "deterministic"
    assert first.model_dump(exclude={"solver"}) == second.model_dump(exclude={"solver"})
    assert first.sharing_changes


def test_greedy_shares_only_when_allowed_existing_gpus_first_within_the_cap() -> None:
    def greedy_changes(req: dict[str, Any]) -> tuple[set[tuple[int, int]], int]:
        problem = problem_mod.build(PlacementRequest.model_validate(req))
        base = greedy(problem)
        return base.sharing_changes, sum(base.counts.values())

    jobs = [_job("a", 0.5), _job("b", 0.5), _job("c", 0.6)]
    assert greedy_changes(_request({0: _ts()}, jobs, gpus=3)) == (set(), 2)  # a and b on GPU 0, c waits
    assert greedy_changes(_on(_request({0: _ts()}, jobs, gpus=3))) == ({(0, 2)}, 3)  # only c needs a new one
    assert greedy_changes(_on(_request({}, jobs, gpus=3), max_sharing_changes=1)) == ({(0, 2)}, 2)


def test_greedy_hint_with_sharing_changes_is_a_feasible_solution() -> None:
    running = [{"job": "old", "pods": [{"task": "w", "node": "n1", "gpus": [3]}]}]
    jobs = [_job("a", 0.25, 3), _job("b", 0.6, 2), {"name": "w", "tasks": [{"name": "t", "gpus": 2}]},
            {"name": "m", "tasks": [{"name": "s", "mig_profile": "3g.40gb"}]}]
    req = _on(_request({0: _ts(2)}, jobs, running, gpus=8), allow_mig_changes=True)
    feasible, base = greedy_hint_solves(req)
    assert base.sharing_changes  # the greedy shared GPUs, so the hint exercises the slots
    assert feasible


def _checked_changes(mutate: Any) -> list[str]:
    """n1: GPU 0 shared, 1 partitioned, 2 held by a running job, 3 unhealthy, 4 and 5 idle; the plan shares 5
    for a's two halves and gives 4 to w."""
    node = {"name": "n1", "pool": "od", "gpu_model": H100, "gpus": 6, "cpu": 64, "memory_gib": 512,
            "sharing": {0: _ts(2)}, "mig": {1: [{"profile": "1g.10gb", "start": 0}]}, "unhealthy_gpus": [3]}
    running = [{"job": "old", "pods": [{"task": "w", "node": "n1", "gpus": [2]}]}]
    jobs = [_job("a", 0.5, 2, gpu_memory_gib=30), {"name": "w", "tasks": [{"name": "t", "gpus": 1}]}]
    req = {"cluster": {"pools": [{"name": "od"}], "nodes": [node], "running": running}, "jobs": jobs,
           "policy": {"allow_sharing_changes": True}}
    p = {"status": "feasible", "objective": {"total": 0.0}, "assignments": [
        *({"job": "a", "task": "s", "pod": k, "node": "n1", "gpus": [5], "gpu_share": 0.5} for k in range(2)),
        {"job": "w", "task": "t", "pod": 0, "node": "n1", "gpus": [4]}],
        "sharing_changes": [{"node": "n1", "gpu": 5, "mode": "time-slicing", "replicas": 8}]}
    mutate(req, p)
    return verify(PlacementRequest.model_validate(req), Plan.model_validate(p))


def _change(gpu: int, node: str = "n1", mode: str = "time-slicing", replicas: int = 8) -> dict[str, Any]:
    return {"node": node, "gpu": gpu, "mode": mode, "replicas": replicas}


@pytest.mark.parametrize(("mutate", "fragment"), [
    (lambda r, p: None, None),
    (lambda r, p: r["policy"].update(allow_sharing_changes=False), "sharing: the plan shares 1 idle GPU(s) but "
     "policy.allow_sharing_changes is off"),
    (lambda r, p: r["policy"].update(max_sharing_changes=0), "more than policy.max_sharing_changes 0"),
    (lambda r, p: p["sharing_changes"].append(_change(1)), "node n1 GPU 1 is MIG-partitioned"),
    (lambda r, p: p["sharing_changes"].append(_change(0)), "node n1 GPU 0 is already shared"),
    (lambda r, p: p["sharing_changes"].append(_change(3)), "node n1 GPU 3 is unhealthy"),
    (lambda r, p: p["sharing_changes"].append(_change(2)), "node n1 GPU 2 is not idle: running job old holds it"),
    (lambda r, p: p["sharing_changes"].append(_change(5)), "node n1 GPU 5 is shared twice"),
    (lambda r, p: p["sharing_changes"].append(_change(0, node="nx")), "names an unknown node"),
    (lambda r, p: p["sharing_changes"].append(_change(9)), "GPU index out of range 0..5"),
    (lambda r, p: p["sharing_changes"][0].update(mode="mps"), "policy.sharing_default says time-slicing with 8"),
    (lambda r, p: p["assignments"][2].update(gpus=[5]), "takes shared GPU 5 of node n1 whole (the plan shares it)"),
    (lambda r, p: (r["policy"].update(allow_mig_changes=True), p.setdefault("mig_changes", []).append(
        {"node": "n1", "gpu": 5, "layout": [{"profile": "1g.10gb", "start": 0}]})), "re-partitioned by the plan"),
    (lambda r, p: (r["policy"].update(sharing_default=_ts(1)), p["sharing_changes"][0].update(replicas=1)),
     "shared GPU 5 of node n1 has 2 pods, more than its 1 replicas"),
    (lambda r, p: r["jobs"][0]["tasks"][0].update(gpu_share=0.6), "shared GPU 5 of node n1 is given 1.2 of a GPU"),
    (lambda r, p: r["jobs"][0]["tasks"][0].update(gpu_memory_gib=41), "82 GiB of GPU memory"),
    (lambda r, p: p["sharing_changes"].clear(), "is on GPU 5 of node n1, which is not shared"),
    (lambda r, p: r["policy"].update(peak=True, reserve={"od": 1}),
     "reserve: pool od has 2 free GPUs and must keep 1 during peak; the plan takes 2"),
])
def test_checker_catches_illegal_sharing_changes(mutate: Any, fragment: str | None) -> None:
    found = _checked_changes(mutate)
    if fragment is None:
        assert found == []
    else:
        assert any(fragment in v for v in found), found


def test_pending_reason_when_no_idle_gpu_is_left_to_share() -> None:
    running = [{"job": "old", "pods": [{"task": "w", "node": "n1", "gpus": [0, 1]}]}]
    p = plan(_on(_request({}, [_job("a", 0.5)], running, gpus=2)))
    assert p.pending[0].reason == ("no matching node has a shared (time-slicing/MPS) GPU for task 's' nor an idle "
                                   "GPU to share")


def test_kube_export_notes_the_gpus_to_share_before_binding() -> None:
    from placement.kube.exporter import export

    req = _on(_request({}, [_job("a", 0.5)], gpus=1))
    p = plan(req)
    _, notes = export(PlacementRequest.model_validate(req), p, "table")
    assert any(n.startswith("share node n1 GPU 0 (time-slicing, 8 replicas) before binding") for n in notes), notes


def test_the_peak_reserve_is_not_shared_away() -> None:
    """Two idle GPUs, one held back in peak: the plan shares at most the other one."""
    req = _on(_request({}, [_job("a", 0.6), _job("b", 0.6)], gpus=2), peak=True, reserve={"od": 1})
    req["cluster"]["pools"] = [{"name": "od"}]
    req["cluster"]["nodes"][0]["pool"] = "od"
    p = plan(req)
    assert len(_placed(p)) == 1 and len(p.sharing_changes) == 1


def _two_nodes(jobs: list[dict[str, Any]], running: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    req = _on(_request({}, jobs, running, gpus=8))
    second = {**req["cluster"]["nodes"][0], "name": "n2"}
    req["cluster"]["nodes"].append(second)
    return req


def test_a_lone_small_share_pod_is_placed_on_an_empty_cluster() -> None:
    # Worth 0.05; sharing a GPU costs 0.01 and breaking a whole node 0.1 for a whole-GPU pod: the
    # break charge for sharing stays below the pod's net value, so it steers, never blocks.
    p = plan(_two_nodes([_job("tiny", 0.05)]))
    assert _placed(p) == {"tiny"} and len(p.sharing_changes) == 1
    assert p.objective.terms["fragmentation"] == pytest.approx(-0.02)  # half of 0.05 - 0.01
    assert verify(PlacementRequest.model_validate(_two_nodes([_job("tiny", 0.05)])), p) == []


def test_a_gpu_is_shared_on_the_node_already_in_use() -> None:
    running = [{"job": "old", "pods": [{"task": "w", "node": "n2", "gpus": [0]}]}]
    for order in (False, True):
        req = _two_nodes([_job("a", 0.5)], running)
        if order:
            req["cluster"]["nodes"].reverse()
        p = plan(req)
        assert [(c.node, c.gpu) for c in p.sharing_changes] == [("n2", 7)]
        assert p.objective.terms.get("fragmentation", 0.0) == 0.0
