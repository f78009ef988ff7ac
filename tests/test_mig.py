"""MIG: hand-checked packings, re-partitioning rules, intake errors, the checker, and random layouts.

Every expected layout below was worked out by hand from docs/hardware.md §1.2 (starts and sizes in
memory slices: 1g {0..6}:1, 1g.20gb {0,2,4,6}:2, 2g {0,2,4}:2, 3g {0,4}:4, 4g {0}:4, 7g {0}:8).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hints import greedy_hint_solves
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_models import PlacementRequest, Plan
from pydantic import ValidationError

from placement import catalog, devices, plan
from placement import problem as problem_mod
from placement.baseline import greedy
from placement.baseline.device_state import GpuState
from placement.baseline.devices import GreedyDevices
from placement.explain import devices as device_reasons
from placement.verify import verify

H100 = "H100-SXM5-80GB"


def _request(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]], running: list[dict[str, Any]] | None = None,
             **policy: Any) -> dict[str, Any]:
    return {"cluster": {"nodes": nodes, "running": running or []}, "jobs": jobs,
            "policy": {"deterministic": True, "time_limit_s": 5, "workers": 1, **policy}}


def _node(name: str = "n1", gpus: int = 1, model: str = H100, **extra: Any) -> dict[str, Any]:
    return {"name": name, "gpu_model": model, "gpus": gpus, "cpu": 64, "memory_gib": 512, **extra}


def _job(name: str, profile: str, replicas: int = 1, **task: Any) -> dict[str, Any]:
    return {"name": name, "tasks": [{"name": "s", "replicas": replicas, "mig_profile": profile, **task}]}


def _slots(p: Plan, job: str | None = None) -> list[tuple[str, int, str, int]]:
    return sorted((a.node, a.mig.gpu, a.mig.profile, a.mig.start) for a in p.assignments
                  if a.mig is not None and (job is None or a.job == job))


def _layout(p: Plan, node: str = "n1", gpu: int = 0) -> list[tuple[str, int]] | None:
    for m in p.mig_changes:
        if (m.node, m.gpu) == (node, gpu):
            return [(i.profile, i.start) for i in m.layout] if m.mig_enabled else None
    raise AssertionError(f"no change for {node} GPU {gpu}: {p.mig_changes}")


def _placed(p: Plan) -> set[str]:
    return {a.job for a in p.assignments}


# --------------------------------------------------------------------------------------------
# Hand-checked packings


def test_seven_1g_pods_on_an_empty_h100_after_repartition() -> None:
    p = plan(_request([_node()], [_job("q", "1g.10gb", 7)], allow_mig_changes=True))
    assert _placed(p) == {"q"}
    assert _layout(p) == [("1g.10gb", s) for s in range(7)]
    assert _slots(p) == [("n1", 0, "1g.10gb", s) for s in range(7)]
    assert p.objective.terms["mig.reconfigure"] == pytest.approx(-0.1)  # one GPU changed, default weight


def test_eighth_1g_pod_waits_on_one_gpu() -> None:
    p = plan(_request([_node()], [_job("q", "1g.10gb", 7), _job("r", "1g.10gb", 1)], allow_mig_changes=True))
    assert _placed(p) == {"q"}  # at most seven 1g instances per GPU
    assert [x.job for x in p.pending] == ["r"]


def test_3g_goes_to_start_4_when_a_1g_queue_waits() -> None:
    """3g at start 4 leaves slices 0-3 for four 1g; at start 0 only three (slice 7 has no 1g start)."""
    jobs = [_job("big", "3g.40gb"), _job("small", "1g.10gb", 4)]
    p = plan(_request([_node()], jobs, allow_mig_changes=True))
    assert _placed(p) == {"big", "small"}
    assert _layout(p) == [("1g.10gb", 0), ("1g.10gb", 1), ("1g.10gb", 2), ("1g.10gb", 3), ("3g.40gb", 4)]


def test_a_running_3g_at_start_0_leaves_room_for_three_1g_only() -> None:
    """The occupied 3g@0 never moves: slices 4, 5, 6 take three 1g, slice 7 cannot take one."""
    node = _node(mig={0: [{"profile": "3g.40gb", "start": 0}]})
    running = [{"job": "old", "pods": [{"task": "s", "node": "n1", "mig": {"gpu": 0, "profile": "3g.40gb",
                                                                        "start": 0}}]}]
    p = plan(_request([node], [_job("three", "1g.10gb", 3), _job("one", "1g.10gb", 1)], running,
                      allow_mig_changes=True))
    assert _placed(p) == {"three"}
    assert _layout(p) == [("3g.40gb", 0), ("1g.10gb", 4), ("1g.10gb", 5), ("1g.10gb", 6)]
    assert "one" in {x.job for x in p.pending}


def test_free_instances_are_used_before_any_change() -> None:
    node = _node(mig={0: [{"profile": "1g.10gb", "start": s} for s in range(7)]})
    p = plan(_request([node], [_job("q", "1g.10gb", 3)], allow_mig_changes=True))
    assert p.mig_changes == []
    assert len(_slots(p)) == 3 and "mig.reconfigure" not in p.objective.terms


def test_without_changes_pods_take_free_instances_only_and_say_why_they_wait() -> None:
    node = _node(mig={0: [{"profile": "1g.10gb", "start": 0}, {"profile": "1g.10gb", "start": 1},
                          {"profile": "2g.20gb", "start": 2}, {"profile": "3g.40gb", "start": 4}]})
    p = plan(_request([node], [_job("a", "1g.10gb", 2), _job("b", "2g.20gb"), _job("c", "4g.40gb")]))
    assert _placed(p) == {"a", "b"} and p.mig_changes == []
    assert _slots(p, "b") == [("n1", 0, "2g.20gb", 2)]
    reason = next(x.reason for x in p.pending if x.job == "c")
    assert "no free 4g.40gb instance and re-partitioning disabled" in reason


def test_plus_me_profiles_are_capped_at_one_per_gpu() -> None:
    one = plan(_request([_node()], [_job("m", "1g.10gb+me", 2)], allow_mig_changes=True))
    assert _placed(one) == set()  # a gang of two +me pods needs two GPUs
    two = plan(_request([_node(gpus=2)], [_job("m", "1g.10gb+me", 2)], allow_mig_changes=True))
    assert _placed(two) == {"m"}
    assert {gpu for _, gpu, _, _ in _slots(two)} == {0, 1}


def test_a_gpu_with_a_running_whole_gpu_pod_is_never_repartitioned() -> None:
    running = [{"job": "train", "pods": [{"task": "w", "node": "n1", "gpus": [0]}]}]
    p = plan(_request([_node(gpus=2)], [_job("q", "1g.10gb", 7), _job("r", "1g.10gb", 7)], running,
                      allow_mig_changes=True))
    assert len(_placed(p)) == 1  # one free GPU: seven 1g, never on GPU 0
    assert [(m.node, m.gpu) for m in p.mig_changes] == [("n1", 1)]
    assert {gpu for _, gpu, _, _ in _slots(p)} == {1}


def test_a30_four_slice_geometry() -> None:
    a30 = _node(model="A30-24GB")
    p = plan(_request([a30], [_job("q", "1g.6gb", 4), _job("r", "1g.6gb", 1)], allow_mig_changes=True))
    assert _placed(p) == {"q"}  # four 1g.6gb, not seven
    assert _layout(p) == [("1g.6gb", s) for s in range(4)]
    p = plan(_request([a30], [_job("a", "2g.12gb"), _job("b", "1g.6gb", 2)], allow_mig_changes=True))
    assert _placed(p) == {"a", "b"}
    assert sorted(_layout(p) or []) == [("1g.6gb", 0), ("1g.6gb", 1), ("2g.12gb", 2)] or \
        sorted(_layout(p) or []) == [("1g.6gb", 2), ("1g.6gb", 3), ("2g.12gb", 0)]
    # both +me profiles need the A30's single media engine set: at most one of them per GPU
    p = plan(_request([a30], [_job("m", "1g.6gb+me"), _job("n", "2g.12gb+me")], allow_mig_changes=True))
    assert len(_placed(p)) == 1


def test_an_idle_partitioned_gpu_is_made_whole_for_a_whole_gpu_pod() -> None:
    node = _node(mig={0: [{"profile": "3g.40gb", "start": 0}, {"profile": "3g.40gb", "start": 4}]})
    whole = [{"name": "w", "tasks": [{"name": "t", "gpus": 1}]}]
    p = plan(_request([node], whole, allow_mig_changes=True))
    assert _placed(p) == {"w"} and _layout(p) is None
    assert p.assignments[0].gpus == [0]
    kept = plan(_request([node], whole))
    assert _placed(kept) == set() and kept.mig_changes == []


def test_a_gpu_with_a_running_instance_is_never_made_whole() -> None:
    node = _node(mig={0: [{"profile": "3g.40gb", "start": 0}, {"profile": "3g.40gb", "start": 4}]})
    running = [{"job": "inf", "pods": [{"task": "s", "node": "n1", "mig": {"gpu": 0, "profile": "3g.40gb",
                                                                        "start": 4}}]}]
    p = plan(_request([node], [{"name": "w", "tasks": [{"name": "t", "gpus": 1}]}], running,
                      allow_mig_changes=True))
    assert _placed(p) == set() and p.mig_changes == []


def test_max_mig_changes_caps_changed_gpus() -> None:
    jobs = [_job("a", "1g.10gb", 7), _job("b", "1g.10gb", 7)]
    both = plan(_request([_node(gpus=2)], jobs, allow_mig_changes=True))
    assert _placed(both) == {"a", "b"} and len(both.mig_changes) == 2
    capped = plan(_request([_node(gpus=2)], jobs, allow_mig_changes=True, max_mig_changes=1))
    assert len(_placed(capped)) == 1 and len(capped.mig_changes) == 1


def test_auto_takes_the_smallest_profile_that_fits_on_each_model() -> None:
    nodes = [_node("h", model=H100), _node("a", model="A100-SXM4-40GB")]
    job = _job("q", "auto", 2, gpu_memory_gib=15)
    p = plan(_request(nodes, [job], allow_mig_changes=True))
    got = {(node, profile) for node, _, profile, _ in _slots(p)}
    assert got <= {("h", "1g.20gb"), ("a", "3g.20gb")} and len(_slots(p)) == 2
    too_big = plan(_request(nodes, [_job("z", "auto", gpu_memory_gib=200)], allow_mig_changes=True))
    assert "no MIG profile" in too_big.pending[0].reason


def test_occupied_instances_stay_when_free_ones_are_rearranged() -> None:
    """1g@3 is busy; a 3g needs slices 0-3 or 4-7: it must go to 4, destroying the free 2g@4 and 1g@6."""
    node = _node(mig={0: [{"profile": "1g.10gb", "start": 3}, {"profile": "2g.20gb", "start": 4},
                          {"profile": "1g.10gb", "start": 6}]})
    running = [{"job": "old", "pods": [{"task": "s", "node": "n1", "mig": {"gpu": 0, "profile": "1g.10gb",
                                                                        "start": 3}}]}]
    p = plan(_request([node], [_job("big", "3g.40gb")], running, allow_mig_changes=True))
    assert _slots(p) == [("n1", 0, "3g.40gb", 4)]
    layout = _layout(p) or []
    assert ("1g.10gb", 3) in layout and ("3g.40gb", 4) in layout


# --------------------------------------------------------------------------------------------
# Intake: bad layouts are rejected with the path of the field


@pytest.mark.parametrize(("layout", "loc", "words"), [
    ([{"profile": "5g.50gb", "start": 0}], ("cluster", "nodes", 0, "mig", 0, 0, "profile"), "no MIG profile"),
    ([{"profile": "3g.40gb", "start": 2}], ("cluster", "nodes", 0, "mig", 0, 0, "start"), "0 or 4"),
    ([{"profile": "2g.20gb", "start": 2}, {"profile": "1g.10gb", "start": 3}],
     ("cluster", "nodes", 0, "mig", 0, 1, "start"), "overlaps 2g.20gb@2"),
    ([{"profile": "1g.10gb+me", "start": 0}, {"profile": "1g.10gb+me", "start": 1}],
     ("cluster", "nodes", 0, "mig", 0, 1, "profile"), "more than 1"),
])
def test_illegal_layouts_are_rejected_with_their_path(layout: list[dict[str, Any]], loc: tuple[Any, ...],
                                                      words: str) -> None:
    req = PlacementRequest.model_validate(_request([_node(mig={0: layout})], []))
    with pytest.raises(ValidationError) as err:
        problem_mod.build(req)
    errors = err.value.errors()
    assert any(e["loc"] == loc and words in e["msg"] for e in errors), errors


@pytest.mark.parametrize(("mutate", "loc"), [
    (lambda r: r["cluster"]["nodes"][0].update(gpu_model="L40S", mig={0: []}), ("cluster", "nodes", 0, "mig")),
    (lambda r: r["cluster"]["nodes"][0].update(mig={3: []}), ("cluster", "nodes", 0, "mig", 3)),
    (lambda r: r["cluster"]["running"].append({"job": "x", "pods": [{"task": "s", "node": "n1", "mig": {
        "gpu": 0, "profile": "1g.10gb", "start": 5}}]}), ("cluster", "running", 0, "pods", 0, "mig")),
    (lambda r: r["cluster"]["running"].append({"job": "x", "pods": [{"task": "s", "node": "n1", "gpus": [0]}]}),
     ("cluster", "running", 0, "pods", 0, "gpus", 0)),
    (lambda r: r["jobs"].append(_job("j", "auto")), ("jobs", 0, "tasks", 0, "gpu_memory_gib")),
    (lambda r: r["jobs"].append(_job("j", "1g.10gb", gpus=1)), ("jobs", 0, "tasks", 0, "mig_profile")),
    (lambda r: r["jobs"].append(_job("j", "1g.10gbb")), ("jobs", 0, "tasks", 0, "mig_profile")),
])
def test_bad_mig_input_names_its_field(mutate: Any, loc: tuple[Any, ...]) -> None:
    req = _request([_node(mig={0: [{"profile": "1g.10gb", "start": 0}]})], [])
    mutate(req)
    with pytest.raises(ValidationError) as err:
        problem_mod.build(PlacementRequest.model_validate(req))
    assert any(e["loc"] == loc for e in err.value.errors()), err.value.errors()


def test_a_profile_no_node_offers_waits_with_a_reason() -> None:
    p = plan(_request([_node(model="L40S")], [_job("q", "1g.10gb")], allow_mig_changes=True))
    assert "offers MIG profile 1g.10gb" in p.pending[0].reason
    p = plan(_request([_node()], [_job("q", "1g.10gb", gpu_memory_gib=12)], allow_mig_changes=True))
    assert "1g.10gb has less than the 12 GiB" in p.pending[0].reason


def test_no_room_with_changes_names_the_running_slices() -> None:
    node = _node(mig={0: [{"profile": "1g.10gb", "start": 3}]})
    running = [{"job": "old", "pods": [{"task": "s", "node": "n1", "mig": {"gpu": 0, "profile": "1g.10gb",
                                                                        "start": 3}}]}]
    p = plan(_request([node], [_job("big", "4g.40gb")], running, allow_mig_changes=True))
    assert "has running instances at the memory slices a 4g.40gb needs" in p.pending[0].reason


# --------------------------------------------------------------------------------------------
# The checker catches hand-broken plans


def _checked(mutate: Any) -> list[str]:
    node = _node(gpus=2, mig={0: [{"profile": "1g.10gb", "start": 0}, {"profile": "3g.40gb", "start": 4}]})
    running = [{"job": "old", "pods": [{"task": "s", "node": "n1", "mig": {"gpu": 0, "profile": "3g.40gb",
                                                                        "start": 4}}]}]
    req = _request([node], [_job("q", "1g.10gb")], running, allow_mig_changes=True)
    good = {"status": "feasible", "assignments": [
        {"job": "q", "task": "s", "pod": 0, "node": "n1", "mig": {"gpu": 0, "profile": "1g.10gb", "start": 0}}],
        "mig_changes": [], "objective": {"total": 0.0}}
    p = copy.deepcopy(good)
    mutate(req, p)
    return verify(PlacementRequest.model_validate(req), Plan.model_validate(p))


@pytest.mark.parametrize(("mutate", "fragment"), [
    (lambda r, p: None, None),
    (lambda r, p: p["assignments"][0]["mig"].update(start=4), "already held by running job old"),
    (lambda r, p: p["assignments"][0]["mig"].update(profile="3g.40gb", start=0), "no 3g.40gb instance"),
    (lambda r, p: p["mig_changes"].append({"node": "n1", "gpu": 0, "layout": [
        {"profile": "1g.10gb", "start": 0}, {"profile": "3g.40gb", "start": 0}]}), "share memory slice 0"),
    (lambda r, p: p["mig_changes"].append({"node": "n1", "gpu": 0, "layout": [
        {"profile": "1g.10gb", "start": 0}]}), "instance 3g.40gb@4 of running job old does not stay"),
    (lambda r, p: p["mig_changes"].append({"node": "n1", "gpu": 1, "layout": [
        {"profile": "1g.10gb", "start": 7}]}), "may not start at memory slice 7"),
    (lambda r, p: (r["policy"].update(allow_mig_changes=False),
                   p["mig_changes"].append({"node": "n1", "gpu": 1, "layout": []})), "allow_mig_changes is off"),
    (lambda r, p: (r["jobs"].append({"name": "w", "tasks": [{"name": "t", "gpus": 1}]}),
                   p["assignments"].append({"job": "w", "task": "t", "pod": 0, "node": "n1", "gpus": [0]})),
     "whole, but the GPU is MIG-partitioned"),
    (lambda r, p: r["jobs"][0]["tasks"][0].update(mig_profile="2g.20gb"), "its task wants 2g.20gb"),
])
def test_checker_catches_broken_mig_plans(mutate: Any, fragment: str | None) -> None:
    found = [v for v in _checked(mutate) if v.startswith("mig: ")]
    if fragment is None:
        assert found == []
    else:
        assert any(fragment in v for v in found), found


# --------------------------------------------------------------------------------------------
# The greedy hint is complete and feasible; random layouts always give verified plans


def _hint_is_feasible(req: dict[str, Any]) -> bool:
    return greedy_hint_solves(req)[0]


def test_greedy_hint_with_repartitions_is_a_feasible_solution() -> None:
    node = _node(gpus=2, mig={0: [{"profile": "3g.40gb", "start": 0}, {"profile": "3g.40gb", "start": 4}]})
    jobs = [_job("a", "1g.10gb", 5), _job("b", "2g.20gb", 2), {"name": "w", "tasks": [{"name": "t", "gpus": 1}]}]
    assert _hint_is_feasible(_request([node, _node("n2", gpus=1)], jobs, allow_mig_changes=True))


PROFILES = ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.10gb+me", "auto"]
LAYOUTS = devices.completions(H100, (), ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb"))


@st.composite
def _cases(draw: st.DrawFn) -> dict[str, Any]:
    nodes, running = [], []
    for n in range(draw(st.integers(1, 2))):
        gpus = draw(st.integers(1, 3))
        mig: dict[int, list[dict[str, Any]]] = {}
        held: list[int] = []
        for g in range(gpus):
            kind = draw(st.sampled_from(["plain", "mig", "mig", "held"]))
            if kind == "mig":
                layout = draw(st.sampled_from(LAYOUTS))
                mig[g] = [{"profile": name, "start": s} for name, s in layout]
                for name, s in layout:
                    if draw(st.booleans()):
                        running.append({"job": f"r{len(running)}", "pods": [
                            {"task": "s", "node": f"n{n}", "mig": {"gpu": g, "profile": name, "start": s}}]})
            elif kind == "held":
                held.append(g)
        if held:
            running.append({"job": f"r{len(running)}", "pods": [{"task": "w", "node": f"n{n}", "gpus": held}]})
        nodes.append(_node(f"n{n}", gpus=gpus, mig=mig))
    jobs = []
    for j in range(draw(st.integers(1, 4))):
        profile = draw(st.sampled_from(PROFILES))
        extra = {"gpu_memory_gib": draw(st.sampled_from([5, 15, 30]))} if profile == "auto" else {}
        jobs.append(_job(f"j{j}", profile, draw(st.integers(1, 4)), **extra))
    if draw(st.booleans()):
        jobs.append({"name": "whole", "tasks": [{"name": "t", "gpus": draw(st.integers(1, 2))}]})
    return _request(nodes, jobs, running, allow_mig_changes=draw(st.booleans()),
                    max_mig_changes=draw(st.sampled_from([None, 1])), time_limit_s=1)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_random_layouts_give_verified_plans_where_no_occupied_instance_moves(req: dict[str, Any]) -> None:
    p = plan(req)  # plan() runs the independent checker and raises on any violation
    assert verify(PlacementRequest.model_validate(req), p) == []
    occupied = {(pod["node"], pod["mig"]["gpu"], pod["mig"]["profile"], pod["mig"]["start"])
                for r in req["cluster"]["running"] for pod in r["pods"] if "mig" in pod}
    for m in p.mig_changes:
        layout = {(i.profile, i.start) for i in m.layout}
        for node, gpu, profile, start in occupied:
            if (node, gpu) == (m.node, m.gpu):
                assert m.mig_enabled and (profile, start) in layout
    assert _hint_is_feasible(req)


# --------------------------------------------------------------------------------------------
# The benchmark's peers and our packing, on a hand-checked mix


def test_bench_mix_against_first_fit_templates(capsys: pytest.CaptureFixture[str]) -> None:
    from placement.bench import mig as bench

    assert [bench.profile_for_milli(m) for m in (50, 142, 143, 428, 571, 572, 810)] == [
        "1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "7g.80gb"]
    mix = ["4g.40gb", "3g.40gb", "2g.20gb", "2g.20gb"]
    # all-balanced (2×1g + 2g + 3g): 4g gets a whole GPU; 3g and the first 2g share GPU 1; the second 2g opens GPU 2
    assert bench.first_fit(mix, "all-balanced") == {"gpus": 3, "partitioned": 2, "whole": 1}
    assert bench.first_fit(mix, "all-1g")["gpus"] == 4
    # ours: 4g@0 + 3g@4 fill one GPU, the two 2g share a second
    assert bench.ours(mix, 5)["gpus"] == 2
    assert bench.lower_bound(mix) == 2
    assert bench.main(["--data", "/nonexistent/placement-data"]) == 2
    assert "openb data not found" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# The greedy's caches answer exactly as the node-by-node scans they replace


def _reference_scans(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make _mig_pod use the node-by-node reference scans, and job_fits fit every job afresh."""

    def best_repartition(self: GreedyDevices, spec: Any, nodes: Any, free: Any,
                         changed_only: bool) -> Any:
        options = [o for o in self._repartition_options(spec, nodes, free) if not changed_only or o[0][1] == 0]
        return min(options) if options else None

    monkeypatch.setattr(GreedyDevices, "_first_fit", GreedyDevices._mig_pod_options)
    monkeypatch.setattr(GreedyDevices, "_best_repartition", best_repartition)
    monkeypatch.setattr(device_reasons, "job_fits", device_reasons._job_fits)


def _greedy_and_reasons(req: dict[str, Any]) -> tuple[Any, ...]:
    from placement_models import SolverStats

    from placement.decode import decode

    problem = problem_mod.build(PlacementRequest.model_validate(req))
    base = greedy(problem)
    out = decode(problem, base, {}, "feasible", SolverStats(status="X"))
    tasks = tuple((t.candidates.tolist(), t.max_per_node.tolist(), t.funnel) for t in problem.tasks)
    return (sorted(base.counts.items()), sorted(base.mig_layouts.items(), key=repr), tasks,
            out.model_dump_json())


def _same_as_reference(req: dict[str, Any]) -> None:
    fast = _greedy_and_reasons(req)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _reference_scans(monkeypatch)
        assert _greedy_and_reasons(req) == fast


def test_cached_scans_match_the_reference_on_a_library_instance() -> None:
    from placement.io import load_document

    _same_as_reference(load_document("instances/library/mig-M.json"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_cached_scans_match_the_reference_on_random_layouts(req: dict[str, Any]) -> None:
    # twice the jobs, some identical but for names: the job_fits memo answers them once
    req = {**req, "jobs": req["jobs"] + [{**copy.deepcopy(j), "name": j["name"] + "-again"} for j in req["jobs"]]}
    _same_as_reference(req)


def test_gpu_layout_cache_follows_changes() -> None:
    g = GpuState(0, (("3g.40gb", 0), ("3g.40gb", 4)), ())
    assert g.layout() == (("3g.40gb", 0), ("3g.40gb", 4)) and not g.changed()
    del g.inst[4]
    g.inst[5], g.inst[4] = "1g.10gb", "1g.10gb"
    g.touch()
    assert g.layout() == (("3g.40gb", 0), ("1g.10gb", 4), ("1g.10gb", 5)) and g.changed()
    other = g.copy()
    other.inst[6] = "1g.10gb"
    other.touch()
    assert len(other.layout()) == 4 and len(g.layout()) == 3


def test_profile_for_is_memoized_per_geometry_and_memory() -> None:
    import dataclasses

    from placement_models import Task

    geo = catalog_geo = catalog.mig_geometry(H100)
    assert geo is not None
    small = Task(name="a", mig_profile="auto", gpu_memory_gib=5)
    big = Task(name="b", mig_profile="auto", gpu_memory_gib=30)
    assert devices.profile_for(small, geo).name == "1g.10gb"  # type: ignore[union-attr]
    assert devices.profile_for(big, geo).name == "3g.40gb"  # type: ignore[union-attr]
    # a geometry that is not the catalog's (same model name) never gets the catalog one's answer
    trimmed = dataclasses.replace(geo, profiles=tuple(p for p in geo.profiles if p.name != "1g.10gb"))
    assert devices.profile_for(small, trimmed).name != "1g.10gb"  # type: ignore[union-attr]
    assert devices.profile_for(small, catalog_geo).name == "1g.10gb"  # type: ignore[union-attr]


def test_a_lone_small_mig_pod_is_placed_on_an_empty_cluster() -> None:
    # A 1g pod is worth 1/8 of a GPU; the re-layout costs 0.1. Breaking a whole node charges at most
    # half of what is left (not the 0.1 a whole-GPU pod pays), so the pod runs instead of waiting.
    req = _request([_node("n1", gpus=8), _node("n2", gpus=8)], [_job("tiny", "1g.10gb")], allow_mig_changes=True)
    p = plan(req)
    assert {a.job for a in p.assignments} == {"tiny"} and len(p.mig_changes) == 1
    assert p.objective.terms["fragmentation"] == pytest.approx(-0.5 * (0.125 - 0.1), abs=1e-3)  # to SCALE
    assert verify(PlacementRequest.model_validate(req), p) == []


def test_a_re_partition_goes_to_the_node_already_in_use() -> None:
    running = [{"job": "old", "pods": [{"task": "w", "node": "n2", "gpus": [0]}]}]
    for reverse in (False, True):
        nodes = [_node("n1", gpus=8), _node("n2", gpus=8)]
        req = _request(nodes[::-1] if reverse else nodes, [_job("a", "3g.40gb")], running, allow_mig_changes=True)
        p = plan(req)
        assert [c.node for c in p.mig_changes] == ["n2"] and _slots(p)[0][0] == "n2"
        assert p.objective.terms.get("fragmentation", 0.0) == 0.0
        assert _hint_is_feasible(req)
