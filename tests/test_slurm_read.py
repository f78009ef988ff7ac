"""The Slurm face without a running Slurm: its parsers, the request it reads from recorded `squeue --json`,
`sinfo --json` and `scontrol show partition -o` output (tests/data/slurm, recorded from a real 22.05 lab: a
drained node, an exclusive 2-node job, held jobs of every kind), and the commands it derives from a plan."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from placement_models import PlacementRequest, Plan
from placement_models.plan import Assignment, Pending, Preemption

from placement.slurm.apply import plan_steps, tres_for
from placement.slurm.commands import Slurm, SlurmError, parse_keyvalues
from placement.slurm.loop import run
from placement.slurm.read import JobFacts, Options, Snapshot, build
from placement.slurm.syntax import (
    comment_words,
    expand_hostlist,
    gres_items,
    parse_hours,
    user_comment,
    with_note,
)

DATA = Path(__file__).parent / "data" / "slurm"
NOW = datetime(2026, 12, 6, 4, 0, tzinfo=timezone.utc)


def _recorded(options: Options | None = None) -> Snapshot:
    load = lambda name: json.loads((DATA / f"{name}.json").read_text())  # noqa: E731
    return build(load("sinfo"), load("squeue"), load("partitions"), options or Options(now=NOW))


def test_hostlists_gres_durations_and_comments_parse_as_slurm_prints_them() -> None:
    assert expand_hostlist("n[1-3,5],gpu-[08-10]") == ["n1", "n2", "n3", "n5", "gpu-08", "gpu-09", "gpu-10"]
    assert expand_hostlist("") == []
    assert gres_items("gpu:g0:1(IDX:0),gpu:g6:0(IDX:),gpu:2(IDX:3-4)") == [("g0", 1, [0]), ("g6", 0, []),
                                                                           (None, 2, [3, 4])]
    assert gres_items("gres:gpu:8") == [(None, 8, None)]
    assert gres_items("gres/gpu:a100:2,gres/shard:4") == [("a100", 2, None)]
    assert parse_hours("90m") == 1.5 and parse_hours("1.5d") == 36 and parse_hours("2") == 2
    assert parse_hours("soon") is None and parse_hours("0h") is None
    mine = with_note("runtime=2h preemptible", "waiting (capacity): full")
    assert mine == "runtime=2h preemptible; placement: waiting (capacity): full"
    assert user_comment(mine) == "runtime=2h preemptible"
    assert comment_words(mine) == {"runtime": "2h", "preemptible": ""}
    assert with_note(mine, "") == "runtime=2h preemptible" and with_note(None, "x") == "placement: x"
    assert parse_keyvalues("PartitionName=gpu PriorityTier=3 Nodes=n[1-4]")["PriorityTier"] == "3"


def test_the_recorded_cluster_reads_as_a_valid_request() -> None:
    snap = _recorded()
    req = snap.request
    PlacementRequest.model_validate(req)
    nodes = {n["name"]: n for n in req["cluster"]["nodes"]}
    assert set(nodes) == {"n1", "n2"}  # n3 is drained
    assert nodes["n1"]["gpu_model"] == "A100-SXM4-80GB"  # a feature the GPU catalog knows
    assert nodes["n2"]["gpu_model"] == "H100-SXM5-80GB"  # the default
    assert nodes["n1"]["labels"] == {"feature.a100-sxm4-80gb": "yes", "feature.fast": "yes", "partition.gpu": "yes"}
    assert all(snap.pinnable.values())
    running = {r["job"]: r for r in req["cluster"]["running"]}
    assert set(running) == {"2"}  # job 1 runs on the drained node only
    assert [(p["node"], p["gpus"]) for p in running["2"]["pods"]] == [("n1", list(range(8))), ("n2", list(range(8)))]
    jobs = {j["name"]: j for j in req["jobs"]}
    assert set(jobs) == {"3", "4", "6"}
    assert "only features joined by &" in snap.skipped["5"]  # an OR constraint is not read (said, not guessed)
    three = jobs["3"]
    assert three["priority"] == 90 and three["team"] == "research"  # tier 1 × 100 − nice 10
    assert three["expected_runtime_h"] == 0.5 and three["max_runtime_h"] == 1.0  # --time-min, then the limit
    assert three["tasks"][0]["node_selector"] == {"feature.fast": "yes", "partition.gpu": "yes"}
    four = jobs["4"]["tasks"][0]  # --gpus=6 -N2: three per node, one node each (over half a node's memory)
    assert (four["replicas"], four["gpus"], four["cpu"]) == (2, 3, 2.0) and four["memory_gib"] > 31
    assert (jobs["6"]["tasks"][0]["replicas"], jobs["6"]["tasks"][0]["gpus"]) == (4, 8)
    assert snap.jobs["4"].state == "held" and snap.jobs["4"].tres_per_job == "gres:gpu:6"
    assert req["policy"]["now"] == NOW.isoformat()


def test_a_partition_filter_reads_only_its_nodes_and_jobs() -> None:
    snap = _recorded(Options(partitions=["other"], now=NOW))
    assert snap.request["cluster"]["nodes"] == [] and snap.request["jobs"] == []


def _plan(**fields) -> Plan:
    return Plan(status="feasible", **fields)


def test_a_plan_becomes_full_node_lists_pinned_gpus_releases_and_comments() -> None:
    snap = _recorded()
    plan = _plan(assignments=[Assignment(job="4", task="main", pod=0, node="n1", gpus=[0, 1, 2]),
                              Assignment(job="4", task="main", pod=1, node="n2", gpus=[0, 1, 2])],
                 pending=[Pending(job="6", reason="needs 4 nodes", constraint="gang_size",
                                  estimated_start=datetime(2027, 12, 6, tzinfo=timezone.utc)),  # beyond HORIZON
                          Pending(job="3", reason="full", constraint="capacity",
                                  estimated_start=datetime(2026, 12, 6, 5, 30, tzinfo=timezone.utc))],
                 preemptions=[Preemption(job="2", reason="r", for_job="4", rule="within_team")])
    steps = {s.job: s.commands for s in plan_steps(snap, plan)}
    assert steps["2"] == [("scontrol", "requeuehold", "2")]
    assert steps["4"] == [
        ("scontrol", "update", "JobId=4", "NumNodes=2", "ReqNodeList=n1,n2", "StartTime=now"),
        ("scontrol", "update", "JobId=4", "Comment=placement: starting, gpus per node 3"),
        ("scontrol", "update", "JobId=4", "TresPerJob="),
        ("scontrol", "update", "JobId=4", "TresPerNode="),
        ("scontrol", "update", "JobId=4", "TresPerNode=gres:gpu:g0:1,gres:gpu:g1:1,gres:gpu:g2:1"),
        ("scontrol", "release", "4")]
    assert steps["6"] == [("scontrol", "update", "JobId=6", "Comment=placement: waiting (gang_size): needs 4 nodes")]
    assert steps["3"] == [("scontrol", "update", "JobId=3",
                           "Comment=placement: waiting (capacity): full; est. start 2026-12-06T05:30Z")]


def test_what_already_stands_issues_nothing_and_what_moved_is_taken_back() -> None:
    base = dict(comment="", node_count=1, tres_per_job="", gpus_per_node=1)
    jobs = {"7": JobFacts("7", "released", req_nodes=["n1"], tres_per_node="gres:gpu:g3:1", **base),
            "8": JobFacts("8", "released", req_nodes=["n1"], tres_per_node="gres:gpu:g4:1", **base),
            "9": JobFacts("9", "running", req_nodes=[], tres_per_node="", **{**base, "comment": "x; placement: w"}),
            "10": JobFacts("10", "held", req_nodes=["n1"], tres_per_node="gres:gpu:g5:1", **base)}
    snap = Snapshot({}, jobs, {"n1": True, "n2": True})
    plan = _plan(assignments=[Assignment(job="7", task="main", pod=0, node="n1", gpus=[3]),
                              Assignment(job="8", task="main", pod=0, node="n2", gpus=[4]),
                              Assignment(job="10", task="main", pod=0, node="n1", gpus=[5])])
    steps = {s.job: s.commands for s in plan_steps(snap, plan)}
    assert "7" not in steps  # released where the plan wants it: Slurm starts it, nothing to say
    assert steps["8"][0] == ("scontrol", "uhold", "8") and steps["8"][-1] == ("scontrol", "release", "8")
    assert steps["9"] == [("scontrol", "update", "JobId=9", "Comment=x")]  # running: the stale note goes
    assert steps["10"] == [("scontrol", "release", "10")]  # updated before a crash, never released


def test_two_slots_on_one_node_never_start_and_uneven_gpus_fall_back_to_a_count() -> None:
    snap = _recorded()
    plan = _plan(assignments=[Assignment(job="4", task="main", pod=0, node="n1", gpus=[0, 1, 2]),
                              Assignment(job="4", task="main", pod=1, node="n1", gpus=[3, 4, 5])])
    steps = {s.job: s.commands for s in plan_steps(snap, plan)}
    assert [c[1] for c in steps["4"]] == ["update"] and "node slots" in steps["4"][0][-1]
    assert tres_for({"n1": [0, 1], "n2": [2, 3]}, {"n1": True, "n2": True}) == "gres:gpu:2"
    assert tres_for({"n1": [0, 1]}, {"n1": False}) == "gres:gpu:2"
    assert tres_for({"n1": []}, {"n1": True}) == ""


def test_failing_commands_are_slurm_errors_and_the_loop_goes_on() -> None:
    with pytest.raises(SlurmError, match="not found"):
        Slurm(env={"PATH": "/nonexistent"}).run(["squeue-that-is-not-there", "--json"])
    with pytest.raises(SlurmError, match="exit code 1"):
        Slurm().run(["false"])
    with pytest.raises(SlurmError, match="not JSON"):
        Slurm().run_json(["echo", "hello"], "jobs")
    said, slept = [], []
    broken = Slurm(env={"PATH": "/nonexistent"})
    assert run(broken, Options(), interval_s=5, once=True, say=said.append) == 1
    assert run(broken, Options(), interval_s=5, once=False, say=said.append, cycles=2, sleep=slept.append) == 1
    assert len(said) == 3 and all(s.startswith("error: ") for s in said) and len(slept) == 1


def test_a_job_whose_gpu_request_was_cleared_before_a_kill_keeps_its_gpus() -> None:
    """Killed between `TresPerNode=` and setting the chosen indices: the note written first still says it."""
    load = lambda name: json.loads((DATA / f"{name}.json").read_text())  # noqa: E731
    jobs = load("squeue")
    three = next(j for j in jobs if j["job_id"] == 3)
    three.update(tres_per_node="", comment="placement: starting, gpus per node 1")
    snap = build(load("sinfo"), jobs, load("partitions"), Options(now=NOW))
    assert next(j for j in snap.request["jobs"] if j["name"] == "3")["tasks"][0]["gpus"] == 1


def test_a_job_released_moments_ago_is_read_as_running_where_it_was_let_go() -> None:
    """Slurm starts a released job a moment later; a plan made meanwhile must not move it (it would, again and
    again, with a placer cycling faster than Slurm starts). After the grace period it is placed again."""
    load = lambda name: json.loads((DATA / f"{name}.json").read_text())  # noqa: E731
    parts = load("partitions")
    # n2 as if the exclusive job on it had ended, but for GPU 0 (still busy in Slurm's gres_used)
    nodes = [{**n, "gres_used": "gpu:g0:1(IDX:0),gpu:g1:0(IDX:N/A)", "alloc_cpus": 1} if n["name"] == "n2" else n
             for n in load("sinfo")]
    jobs = [j for j in load("squeue") if "n2" not in expand_hostlist(j.get("nodes") or "")]
    held = next(j for j in jobs if j["job_state"] == "PENDING" and j["state_reason"] == "JobHeldUser"
                and (j.get("tres_per_node") or "").startswith("gres:gpu:") and int(j.get("node_count") or 1) == 1)

    def released(ago_s: float, tres: str) -> dict:
        return {**held, "job_id": 990, "state_reason": "None", "priority": 1000, "required_nodes": "n2",
                "tres_per_node": tres, "eligible_time": int(NOW.timestamp() - ago_s), "dependency": ""}

    fresh = build(nodes, [*jobs, released(5, "gres:gpu:2")], parts, Options(now=NOW))
    run_ = {r["job"]: r for r in fresh.request["cluster"]["running"]}
    assert "990" in run_ and "990" not in {j["name"] for j in fresh.request["jobs"]}
    assert [p["node"] for p in run_["990"]["pods"]] == ["n2"]
    assert run_["990"]["pods"][0]["gpus"] == [1, 2]  # the lowest free: GPU 0 is busy
    assert fresh.jobs["990"].state == "released"
    pinned = build(nodes, [*jobs, released(5, "gres:gpu:g6:1,gres:gpu:g7:1")], parts, Options(now=NOW))
    assert {r["job"]: r for r in pinned.request["cluster"]["running"]}["990"]["pods"][0]["gpus"] == [6, 7]
    on_busy = build(nodes, [*jobs, released(5, "gres:gpu:g0:1")], parts, Options(now=NOW))
    assert "990" in {j["name"] for j in on_busy.request["jobs"]}  # its GPU is not free: placed again
    stale = build(nodes, [*jobs, released(120, "gres:gpu:2")], parts, Options(now=NOW))
    assert "990" in {j["name"] for j in stale.request["jobs"]}
    assert not build(nodes, jobs, parts, Options(now=NOW, pin_gpus=False)).pinnable["n2"]
