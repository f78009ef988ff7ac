"""Pending reasons are checked, not trusted: relax the constraint a reason names, plan again, and the job runs.

Every pending job carries `constraint`, the name of what binds (placement_models.PendingConstraint), and a
reason with the numbers. For each name, `relax` writes the request with that constraint lifted for the job:

* `filter` — the job's node_selector, gpu_memory_gib (whole-GPU tasks) dropped, every taint tolerated, spot_ok;
* `mig` — MIG re-partitioning allowed without a cap; `sharing` — sharing idle GPUs allowed without a cap;
* `topology` — the job's topology dropped; `quota` — the job's team's quota raised: a nominal no request here
  reaches on every scope (GPUs cluster-wide and per flavor, CPU, memory), so it never borrows nor hits a cap;
  or else every team's quota dropped (`relaxations`);
* `priority` — the job's priority raised above every other job's, running ones too;
* `preemption` — `policy.preemption: true`; `fairness` — `weights.fairness: 0`;
* `cost` — `weights.cost: 0` and no peak (no reserve, no deferral);
* `capacity`, `gang_size` — the cluster tripled: per node, an empty healthy copy, and one of plain GPUs.

The hand-made cases below assert the job is placed once its constraint is relaxed; the property asserts it
over random requests (see `test_relaxing_the_named_constraint_never_reveals_an_earlier_one`).
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_models import Pending, Plan
from test_api import instances
from test_combined import requests

from placement import plan

H100 = "H100-SXM5-80GB"
A100_40 = "A100-SXM4-40GB"
POLICY = {"deterministic": True, "workers": 1, "time_limit_s": 5}
#: A nominal quota no request here reaches (GPUs, cores, GiB).
BIG = 100_000


def _node(name: str, gpus: int = 8, model: str = H100, **extra: Any) -> dict[str, Any]:
    return {"name": name, "gpu_model": model, "gpus": gpus, "cpu": 96, "memory_gib": 1024, **extra}


def _job(name: str, gpus: int = 8, replicas: int = 1, **extra: Any) -> dict[str, Any]:
    task = {"name": "w", "replicas": replicas, "gpus": gpus, **extra.pop("task", {})}
    return {"name": name, "tasks": [task], **extra}


def _request(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]], running: list[dict[str, Any]] | None = None,
             teams: list[dict[str, Any]] | None = None, **policy: Any) -> dict[str, Any]:
    req: dict[str, Any] = {"cluster": {"nodes": nodes, "running": running or []}, "jobs": jobs,
                           "policy": {**POLICY, **policy}}
    if teams:
        req["teams"] = teams
    return req


def _run(job: str, node: str, gpus: list[int], **extra: Any) -> dict[str, Any]:
    return {"job": job, "pods": [{"task": "w", "node": node, "gpus": gpus}], **extra}


def _placed(p: Plan) -> set[str]:
    return {a.job for a in p.assignments}


def _pending(p: Plan, job: str) -> Pending:
    return next(x for x in p.pending if x.job == job)


# --------------------------------------------------------------------------------------------
# Relaxing one constraint


def relax(req: dict[str, Any], job: str, constraint: str) -> dict[str, Any]:
    """The request with `constraint` lifted for `job` (module docstring)."""
    out = copy.deepcopy(req)
    policy = out.setdefault("policy", {})
    spec = next(j for j in out["jobs"] if j["name"] == job)
    if constraint == "filter":
        spec["spot_ok"] = True
        for task in spec["tasks"]:
            task.pop("node_selector", None)
            task["tolerations"] = [{"operator": "Exists"}]
            if task.get("mig_profile") is None and task.get("gpu_share") is None:
                task.pop("gpu_memory_gib", None)
    elif constraint == "mig":
        policy["allow_mig_changes"] = True
        policy.pop("max_mig_changes", None)
    elif constraint == "sharing":
        policy["allow_sharing_changes"] = True
        policy.pop("max_sharing_changes", None)
    elif constraint == "topology":
        spec.pop("topology", None)
    elif constraint == "quota":  # the job's team within its nominal wherever it may run: no borrowing, no cap
        quotas = [t["quota"] for t in out.get("teams", []) if t.get("quota")]
        flavors = {(f.get("pool"), f.get("gpu_model")) for q in quotas for f in q.get("flavors", [])}
        raised: dict[str, Any] = {"gpus": {"nominal": BIG}, "flavors": [
            {**({"pool": pool} if pool else {}), **({"gpu_model": model} if model else {}), "gpus": {"nominal": BIG}}
            for pool, model in sorted(flavors, key=repr)]}
        for resource in ("cpu", "memory_gib"):
            if any(q.get(resource) for q in quotas):
                raised[resource] = {"nominal": BIG}
        next(t for t in out["teams"] if t["name"] == spec["team"])["quota"] = raised
    elif constraint == "priority":
        others = [j.get("priority", 0) for j in out["jobs"] if j is not spec]
        others += [r.get("priority", 0) for r in out["cluster"].get("running", [])]
        spec["priority"] = max(others, default=0) + 1
    elif constraint == "preemption":
        policy["preemption"] = True
    elif constraint == "fairness":
        policy.setdefault("weights", {})["fairness"] = 0.0
    elif constraint == "cost":
        policy.setdefault("weights", {})["cost"] = 0.0
        policy["peak"] = False
    elif constraint in ("capacity", "gang_size"):  # per node, an empty copy of it and a copy of plain GPUs
        nodes = out["cluster"]["nodes"]
        more = [{**copy.deepcopy(n), "name": f"{n['name']}-more", "unhealthy_gpus": []} for n in nodes]
        plain = [{**n, "name": f"{n['name']}-plain", "mig": {}, "sharing": {}} for n in more]
        nodes += more + plain
    else:
        raise AssertionError(f"no relaxation for {constraint}")
    return out


def relaxations(req: dict[str, Any], job: str, constraint: str) -> list[dict[str, Any]]:
    """`relax`, and for `quota` also every team's quota dropped: raising the job's own nominal leaves other teams'
    work within their nominal ranked above it wherever the job would still borrow (compile/nominal.py)."""
    out = [relax(req, job, constraint)]
    if constraint == "quota":
        dropped = copy.deepcopy(req)
        for team in dropped.get("teams", []):
            team.pop("quota", None)
        out.append(dropped)
    return out


def check(req: dict[str, Any], job: str, constraint: str, *words: str) -> Pending:
    """`job` waits for `constraint` (its reason saying `words`), and runs once the constraint is relaxed."""
    before = plan(req)
    pending = _pending(before, job)
    assert pending.constraint == constraint, pending
    for word in words:
        assert word in pending.reason, (word, pending.reason)
    spec = next(j for j in req["jobs"] if j["name"] == job)
    if any(t.get("mig_profile") or t.get("gpu_share") for t in spec["tasks"]):  # demand as instances or shares
        assert " 0 GPUs" not in pending.reason and not pending.reason.startswith("0 GPUs"), pending.reason
    afters = [plan(r) for r in relaxations(req, job, constraint)]
    assert any(job in _placed(after) for after in afters), (pending, [x for a in afters for x in a.pending
                                                                       if x.job == job])
    return pending


# --------------------------------------------------------------------------------------------
# One hand-made case per constraint


def test_filter_selector_taint_memory_and_spot() -> None:
    nodes = [_node("a", labels={"zone": "x"}), _node("t", taints=[{"key": "gpu", "value": "infer",
                                                                   "effect": "NoSchedule"}])]
    check(_request(nodes, [_job("z", task={"node_selector": {"zone": "y"}})]), "z", "filter",
          "node_selector {'zone': 'y'}", "zone here: x")
    check(_request(nodes[1:], [_job("t")]), "t", "filter", "gpu=infer:NoSchedule")
    check(_request([_node("s", model=A100_40)], [_job("m", task={"gpu_memory_gib": 80})]), "m", "filter",
          "80 GiB of GPU memory", A100_40)
    spot = _request([_node("s", pool="spot")], [_job("j")])
    spot["cluster"]["pools"] = [{"name": "spot", "capacity_type": "spot"}]
    check(spot, "j", "filter", "spot_ok")


def _mig_node(layout: list[tuple[str, int]], name: str = "m", gpus: int = 1) -> dict[str, Any]:
    return _node(name, gpus, mig={0: [{"profile": p, "start": s} for p, s in layout]})


def test_mig_profile_without_a_free_instance_needs_re_partitioning() -> None:
    # one GPU as 3g.40gb (free) + 4g.40gb (held): a 1g.10gb pod needs the free 3g re-partitioned
    running = [{"job": "r", "pods": [{"task": "s", "node": "m", "mig": {"gpu": 0, "profile": "4g.40gb", "start": 0}}]}]
    req = _request([_mig_node([("4g.40gb", 0), ("3g.40gb", 4)])],
                   [{"name": "small", "tasks": [{"name": "s", "mig_profile": "1g.10gb"}]}], running)
    pending = check(req, "small", "mig", "no free 1g.10gb instance", "free instances on matching nodes: 1× 3g.40gb")
    assert "GPU" not in pending.reason.split(";")[0].replace("MIG", "")


def test_mig_pods_are_counted_as_instances_never_as_gpus() -> None:
    # seven 1g.10gb instances, all free: the higher class takes them all; the pending MIG job is outranked
    layout = [("1g.10gb", s) for s in range(7)]
    jobs = [{"name": "hi", "priority": 5, "tasks": [{"name": "s", "replicas": 7, "mig_profile": "1g.10gb"}]},
            {"name": "lo", "tasks": [{"name": "s", "replicas": 2, "mig_profile": "1g.10gb"}]}]
    pending = check(_request([_mig_node(layout)], jobs), "lo", "priority",
                    "outranked by jobs hi (priority 5, 7× MIG 1g.10gb)", "gang of 2×s (MIG 1g.10gb)")
    assert "GPUs" not in pending.reason and "room for 0 of its 2 MIG 1g.10gb pods" in pending.reason, pending.reason


def test_sharing_an_idle_gpu_is_what_a_share_pod_waits_for() -> None:
    req = _request([_node("n", 1)], [{"name": "s", "tasks": [{"name": "s", "gpu_share": 0.25}]}])
    check(req, "s", "sharing", "could be shared if policy.allow_sharing_changes were on")


def test_topology_before_the_plan_and_after_it() -> None:
    # two racks of one 8-GPU node: a 2×8 gang fits the cluster, no rack
    nodes = [_node("a", topology={"rack": "r0"}), _node("b", topology={"rack": "r1"})]
    check(_request(nodes, [_job("g", replicas=2, topology={"required": "rack"})]), "g", "topology",
          "no rack with 16 free GPUs for the gang; the most in one rack is 8 (r0)")
    # r0 = {a0, a1}, r1 = {b0, b1}: hi pins a 4-GPU pod on a1 and one on b1 and takes a0 and b0; the 2×4
    # gang fits the 4 + 4 left, but in no single rack
    nodes = [_node(n, topology={"rack": r}) for n, r in (("a0", "r0"), ("a1", "r0"), ("b0", "r1"), ("b1", "r1"))]
    hi = {"name": "hi", "priority": 5, "tasks": [
        {"name": "w", "replicas": 2, "gpus": 8},
        {"name": "x", "gpus": 4, "node_selector": {"kubernetes.io/hostname": "a1"}},
        {"name": "y", "gpus": 4, "node_selector": {"kubernetes.io/hostname": "b1"}}]}
    check(_request(nodes, [hi, _job("g", 4, replicas=2, topology={"required": "rack"})]), "g", "topology",
          "no rack with 8 free GPUs left after this plan for the gang; the most in one rack is 4",
          "its matching nodes have 8 free GPUs in all")


def test_gang_size_when_the_gang_cannot_fit_even_alone() -> None:
    check(_request([_node("a"), _node("b")], [_job("huge", replicas=3)]), "huge", "gang_size",
          "does not fit even if no other job were placed", "needs 24 GPUs; matching nodes have 16 free")


def _team(name: str, nominal: int | None = None, borrowing: int | None = None) -> dict[str, Any]:
    team: dict[str, Any] = {"name": name}
    if nominal is not None:
        gpus: dict[str, Any] = {"nominal": nominal}
        if borrowing is not None:
            gpus["borrowing_limit"] = borrowing
        team["quota"] = {"gpus": gpus}
    return team


def test_quota_names_the_team_its_use_and_its_limit() -> None:
    req = _request([_node("a"), _node("b")], [_job("a2", team="a")], [_run("a1", "a", list(range(8)), team="a")],
                   [_team("a", 8, 0), _team("b", 8)])
    check(req, "a2", "quota", "quota: a at 8/8 GPUs (nominal 8); needs 8 more")


def test_quota_within_nominal_work_ranks_above_a_borrowing_higher_class() -> None:
    # a (nominal 0) borrows for its priority-5 job; b's priority-0 job is within b's nominal: b goes first
    req = _request([_node("n")], [_job("a1", team="a", priority=5), _job("b1", team="b")], None,
                   [_team("a", 0), _team("b", 8)])
    p = plan(req)
    assert _placed(p) == {"b1"}
    check(req, "a1", "quota", "quota: a at 0 GPUs (nominal 0) needs 8 more")


def test_within_one_teams_nominal_the_higher_class_goes_first() -> None:
    # Kueue admits a ClusterQueue's workloads by priority: the priority-5 4-GPU job takes a's nominal before the
    # priority-0 8-GPU one, which fills more of it but waits for `priority`
    req = _request([_node("n")], [_job("hi", 4, team="a", priority=5), _job("big", team="a")], None,
                   [_team("a", 16)])
    check(req, "big", "priority", "outranked by jobs hi (priority 5, 4 GPUs)")


def test_within_nominal_ranks_by_class_across_teams() -> None:
    # both jobs fit their teams' nominal: b's priority-5 job goes first however much a's would fill
    req = _request([_node("n")], [_job("big", team="a"), _job("hi", 4, team="b", priority=5)], None,
                   [_team("a", 8), _team("b", 4)])
    p = plan(req)
    assert {a.job for a in p.assignments} == {"hi"}
    check(req, "big", "priority", "outranked by jobs hi (priority 5, 4 GPUs)")


def test_borrowing_waits_behind_another_teams_nominal_whatever_the_priority() -> None:
    # b has no nominal: its priority-5 job would borrow (a's nominal is larger than the node, so the cohort has
    # idle nominal to lend), and a's priority-0 job within a's nominal goes first
    req = _request([_node("n")], [_job("lo", team="a"), _job("hi", team="b", priority=5)], None,
                   [_team("a", 16), _team("b")])
    p = plan(req)
    assert {a.job for a in p.assignments} == {"lo"}
    check(req, "hi", "quota", "would borrow above its nominal")


def test_priority_names_the_higher_class_and_what_it_holds() -> None:
    req = _request([_node("n")], [_job("hi", priority=1000), _job("lo")])
    check(req, "lo", "priority", "outranked by jobs hi (priority 1000, 8 GPUs)",
          "does not fit in what this plan leaves on matching nodes (0 GPUs)")


def test_capacity_is_competition_within_a_class() -> None:
    req = _request([_node("n")], [_job("x"), _job("y", 4, replicas=2)])
    p = plan(req)
    (waiting,) = p.pending
    check(req, waiting.job, "capacity", "capacity went to jobs of its own priority (0) that the plan preferred")


def test_fairness_names_held_and_entitled_gpus() -> None:
    # a holds 16 of 24 GPUs (running); the last node goes to b's 6-GPU job, far below b's fair share, rather
    # than a's 8-GPU one (a would hold 24 against 18); without the fairness term the bigger job wins
    nodes = [_node("n0"), _node("n1"), _node("n2")]
    running = [_run("a-run", "n0", list(range(8)), team="a"), {**_run("a-run2", "n1", list(range(8))), "team": "a"}]
    req = _request(nodes, [_job("a1", team="a"), _job("b1", 6, team="b")], running, [_team("a"), _team("b")])
    check(req, "a1", "fairness", "fairness: team a would hold 24 GPUs against a fair share of 18",
          "b at 0 of 6 GPUs without them")


def test_preemption_off_names_the_victims_it_would_take() -> None:
    running = [_run("old", "n", list(range(8)), priority=0, preemptible=True)]
    req = _request([_node("n")], [_job("hi", priority=5)], running)
    check(req, "hi", "preemption", "fits if job old (8 GPUs) were preempted (preemption is off: policy.preemption)")


def test_cost_the_reserve_and_deferral() -> None:
    req = _request([_node("a", pool="od"), _node("b", pool="od")], [_job("train"), _job("offline", deferrable=True)],
                   peak=True, reserve={"od": 8})
    req["cluster"]["pools"] = [{"name": "od", "gpu_hour_price": 4.0}]
    check(req, "offline", "cost", "deferred to off-peak: pool od holds back 8 GPUs")
    req = _request([_node("a", pool="od")], [_job("online"), _job("offline", deferrable=True)], peak=True)
    req["cluster"]["pools"] = [{"name": "od", "gpu_hour_price": 4.0}]
    check(req, "offline", "cost", "deferred to off-peak: during peak (policy.peak) a deferrable job is worth half")


def test_every_pending_job_of_a_plan_names_its_constraint() -> None:
    req = _request([_node("n")], [_job("hi", priority=5), _job("lo"), _job("huge", replicas=2),
                                  _job("picky", task={"node_selector": {"zone": "q"}})])
    p = plan(req)
    assert {x.job: x.constraint for x in p.pending} == {"lo": "priority", "huge": "gang_size", "picky": "filter"}


# --------------------------------------------------------------------------------------------
# The property: relaxing the named constraint never reveals one the explanation ruled out before it

#: For each constraint the property checks: what the job may wait for once it is relaxed, if it still waits.
#: Explain tries causes in order (placement/explain/reasons.py): filters, then whether the gang fits at all
#: (gang_size, preemption), then topology and quota on the free cluster, then what the plan leaves. A reason
#: that names a constraint has found every earlier one satisfied, so once it is relaxed the job is placed or
#: waits for a constraint that comes later (or that the relaxation itself changed: other jobs' plan).
LATER = {
    "filter": {"mig", "sharing", "gang_size", "preemption", "topology", "quota", "priority", "capacity", "fairness",
               "cost", "time_limit", "objective"},
    "preemption": {"topology", "quota", "priority", "capacity", "fairness", "cost", "sharing", "time_limit",
                   "objective"},
    "topology": {"quota", "priority", "capacity", "fairness", "cost", "sharing", "time_limit", "objective"},
    "quota": {"topology", "priority", "capacity", "fairness", "cost", "sharing", "time_limit", "objective"},
    "priority": {"topology", "quota", "cost", "sharing", "time_limit", "objective"},
    "fairness": {"topology", "quota", "priority", "capacity", "cost", "sharing", "time_limit", "objective"},
}


def _relaxations_hold(req: dict[str, Any]) -> None:
    before = plan(req)
    for pending in before.pending:
        assert pending.constraint is not None, pending
        if pending.constraint not in LATER:
            continue
        now = []
        for relaxed in relaxations(req, pending.job, pending.constraint):
            after = plan(relaxed)
            if pending.job in _placed(after):
                break
            now.append(_pending(after, pending.job))
            if now[-1].constraint in LATER[pending.constraint]:
                break
        else:
            raise AssertionError((pending, now))


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(requests(), st.sampled_from([0.2, 1.0]))
def test_relaxing_the_named_constraint_never_reveals_an_earlier_one(data: dict[str, Any], limit: float) -> None:
    """Random requests mixing every concern (tests/test_combined.py), planned in deterministic mode: for every
    pending job whose constraint is filter, quota, priority, topology, preemption or fairness, the plan of the
    request with that constraint relaxed (`relaxations`) places the job, or leaves it waiting for a constraint
    in LATER[constraint].

    Why not "placed" alone: relaxing one job's constraint re-plans everything, and other constraints may bind
    next (a job freed of its selector may then be outranked; the fairness term gone, a tie of equal jobs may go
    either way). Why not "any other constraint": that would pass a misnamed reason. The explanation names the
    first binding cause in a fixed order, so it has found every earlier one satisfied; relaxing the named one
    changes none of those, so the job must now be placed or wait for something later in the order. A `quota`
    job that turns out not to fit the cluster at all (gang_size), a `priority` job that still loses once it is
    the top class for lack of room (gang_size) or to the same class (capacity), a `topology` job that does not
    fit even without its topology: each fails here. All plans must also name a constraint for every job."""
    data["policy"]["time_limit_s"] = limit
    _relaxations_hold(data)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_nodes=3, max_gpus=8, max_jobs=4, max_tasks=2, max_replicas=3))
def test_relaxing_selectors_taints_and_priorities_on_plain_gpu_requests(req: dict[str, Any]) -> None:
    """The same on requests of whole-GPU gangs with selectors, taints, GPU memory and priorities (tests/test_api.py,
    weighted priorities)."""
    req["policy"]["time_limit_s"] = 1.0
    _relaxations_hold(req)


@st.composite
def contention(draw: st.DrawFn) -> dict[str, Any]:
    """Small clusters where jobs compete: two teams (quotas sometimes), classes 0 and 5, running work that may be
    preemptible (preemption on or off), racks, deferrable jobs in peak: every constraint gets its turn."""
    nodes = [_node(f"n{i}", topology={"rack": f"r{i // 2}"}, pool="od") for i in range(draw(st.integers(1, 4)))]
    teams = [{"name": t, "weight": draw(st.sampled_from([1.0, 2.0]))} for t in ("a", "b")]
    for team in teams:
        if draw(st.integers(0, 2)) == 0:
            limits: dict[str, Any] = {"nominal": draw(st.sampled_from([0, 4, 8, 16]))}
            if draw(st.booleans()):
                limits["borrowing_limit"] = draw(st.sampled_from([0, 4, 8]))
            team["quota"] = {"gpus": limits}
    running = []
    for node in nodes:
        held = draw(st.sampled_from([0, 0, 4, 8]))
        if held:
            running.append({"job": f"r-{node['name']}", "team": draw(st.sampled_from(["a", "b"])),
                            "priority": draw(st.sampled_from([0, 5])), "preemptible": draw(st.booleans()),
                            "pods": [{"task": "w", "node": node["name"], "gpus": list(range(held))}]})
    jobs = []
    for j in range(draw(st.integers(1, 5))):
        job = _job(f"j{j}", draw(st.sampled_from([2, 4, 8])), draw(st.integers(1, 3)),
                   team=draw(st.sampled_from(["a", "b"])), priority=draw(st.sampled_from([0, 0, 5])),
                   deferrable=draw(st.booleans()))
        if draw(st.integers(0, 3)) == 0:
            job["topology"] = {"required": draw(st.sampled_from(["rack", "node"]))}
        if draw(st.integers(0, 4)) == 0:
            job["tasks"][0]["node_selector"] = {"kubernetes.io/hostname": nodes[0]["name"]}
        jobs.append(job)
    policy = {"preemption": draw(st.booleans()), "peak": draw(st.integers(0, 3)) == 0, "time_limit_s": 2}
    req = _request(nodes, jobs, running, teams, **policy)
    req["cluster"]["pools"] = [{"name": "od", "gpu_hour_price": 4.0}]
    return req


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(contention())
def test_relaxing_under_contention_for_gpus(req: dict[str, Any]) -> None:
    """The same where teams, classes, quotas, running work and racks compete for a few 8-GPU nodes."""
    _relaxations_hold(req)


def test_explain_top_names_rivals_for_the_first_pending_jobs_only() -> None:
    # two 8-GPU jobs below a higher class on one node: both wait, the older one is explained in full
    req = _request([_node("n")], [_job("hi", priority=1000), _job("old"), _job("new")])
    req["jobs"][1]["submitted_at"] = "2026-12-01T00:00:00Z"
    req["jobs"][2]["submitted_at"] = "2026-12-01T01:00:00Z"
    req["policy"] = {**req.get("policy", {}), "explain_top": 1}
    reasons = {p.job: p for p in plan(req).pending}
    assert "outranked by jobs hi" in reasons["old"].reason
    assert reasons["new"].constraint == "capacity"
    assert "policy.explain_top" in reasons["new"].reason
    req["policy"]["explain_top"] = 100
    assert "outranked by jobs hi" in {p.job: p for p in plan(req).pending}["new"].reason


def test_a_cap_on_mig_changes_is_named_when_lifting_it_would_fit_the_job() -> None:
    # The only GPU is partitioned and idle; a whole-GPU job fits if the GPU may be made whole, which is one change.
    node = {"name": "n1", "gpu_model": "H100-SXM5-80GB", "gpus": 1, "cpu": 64, "memory_gib": 512,
            "mig": {"0": [{"profile": "1g.10gb", "start": s} for s in range(7)]}}
    request = {"cluster": {"nodes": [node]}, "jobs": [{"name": "whole", "tasks": [{"name": "w", "gpus": 1}]}],
               "policy": {"deterministic": True, "time_limit_s": 5, "allow_mig_changes": True,
                          "max_mig_changes": 0}}
    out = plan(request)
    assert not out.assignments
    assert out.pending[0].constraint == "mig" and "max_mig_changes (0) allowed more" in out.pending[0].reason
