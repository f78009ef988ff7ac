"""Topology and quota objects as upstream publishes them: Volcano HyperNodes, a Kueue Topology with
only hostnames, Kueue Cohorts with their own quota, ClusterQueue preemption rules.
"""

from __future__ import annotations

from typing import Any

import pytest
from kube_helpers import docs, find, load, reimport

from placement import plan, verify
from placement.kube import KubeError, import_documents

NODES = "kueue-upstream/nodes.yaml"


def _warned(imported: Any, *parts: str) -> bool:
    return any(all(p in str(w) for p in parts) for w in imported.warnings)


# --------------------------------------------------------------------------------------------
# Volcano HyperNodes


def test_hypernode_tiers_become_levels_and_hold_the_jobs() -> None:
    imported = load(NODES, "volcano-hypernodes")
    request = imported.request
    assert request.cluster.topology_levels == ["topology.volcano.sh/hypernode-tier-1",
                                               "topology.volcano.sh/hypernode-tier-2"]
    labels = {n.name: n.labels for n in request.cluster.nodes}
    assert labels["gpu-b-1"]["topology.volcano.sh/hypernode-tier-1"] == "s1"  # by name pattern
    assert labels["gpu-a-0"]["topology.volcano.sh/hypernode-tier-2"] == "s2"  # through s0
    jobs = {j.name: j for j in request.jobs}
    assert jobs["default/network-topology-job"].topology.required == "topology.volcano.sh/hypernode-tier-1"
    assert not _warned(imported, "tier 1 is taken as")
    result = plan(request)
    assert verify(request, result) == [] and result.pending == []
    tier1 = {labels[a.node]["topology.volcano.sh/hypernode-tier-1"] for a in result.assignments
             if a.job == "default/network-topology-job"}
    assert len(tier1) == 1  # one tier-1 hypernode
    assert all(a.node != "gpu-other-0" for a in result.assignments)


def test_hypernode_cycles_and_missing_members_name_the_object() -> None:
    objects = docs(NODES, "volcano-hypernodes")
    find(objects, "HyperNode", "s2")["spec"]["members"][1]["selector"]["exactMatch"]["name"] = "s9"
    with pytest.raises(KubeError) as exc:
        import_documents(objects)
    assert "HyperNode s2 (input #" in str(exc.value) and "spec.members[1].selector.exactMatch.name" in str(exc.value)


# --------------------------------------------------------------------------------------------
# Kueue Topology with hostnames only


def test_topology_with_only_hostnames_is_the_node_level() -> None:
    objects = docs(NODES, "kueue-upstream/queues.yaml", "kueue-upstream/job.yaml")
    find(objects, "Topology", "default")["spec"]["levels"] = [{"nodeLabel": "kubernetes.io/hostname"}]
    job = next(d for d in objects if d["metadata"].get("generateName") == "tas-sample-required-")
    job["spec"]["template"]["metadata"]["annotations"] = {
        "kueue.x-k8s.io/podset-required-topology": "kubernetes.io/hostname"}
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 4
    imported = reimport(objects)
    assert imported.request.cluster.topology_levels == ["kubernetes.io/hostname"]
    (tas,) = [j for j in imported.request.jobs if j.name.startswith("default/tas-sample-required-")]
    assert tas.topology.required == "node"
    result = plan(imported.request)
    assert len({a.node for a in result.assignments if a.job == tas.name}) == 1


def test_topology_with_hostname_above_another_level_names_the_object() -> None:
    objects = docs(NODES, "kueue-upstream/queues.yaml")
    find(objects, "Topology", "default")["spec"]["levels"].reverse()
    with pytest.raises(KubeError) as exc:
        import_documents(objects)
    assert "Topology (kueue.x-k8s.io) default (input #" in str(exc.value) and "spec.levels" in str(exc.value)


# --------------------------------------------------------------------------------------------
# Kueue Cohorts and preemption


def test_cohort_quota_is_lent_to_its_cluster_queues() -> None:
    imported = load(NODES, "kueue-cohorts")
    request = imported.request
    assert {t.name: t.cohort for t in request.teams} == {"team-a-cq": "ml-org", "team-b-cq": "ml-org"}
    (cohort,) = request.cohorts
    assert cohort.name == "ml-org" and cohort.parent is None and cohort.quota.gpus.nominal == 16
    assert not _warned(imported, "flattened")
    result = plan(imported.request)
    assert verify(imported.request, result) == []
    assert {a.job for a in result.assignments} == {"team-a/train-a"}  # the cohort's 16 GPUs, first come
    assert [p.job for p in result.pending] == ["team-b/train-b"]


def test_without_the_cohort_object_nobody_has_quota() -> None:
    objects = [d for d in docs(NODES, "kueue-cohorts") if d["kind"] != "Cohort"]
    result = plan(reimport(objects).request)
    assert result.assignments == []


def test_cluster_queue_preemption_becomes_the_teams_rules() -> None:
    imported = load(NODES, "kueue-cohorts")
    teams = {t.name: t for t in imported.request.teams}
    rules = teams["team-a-cq"].preemption
    assert rules.within_team == "lower_priority" and rules.reclaim_within_cohort == "any"
    assert rules.borrow_within_cohort.policy == "lower_priority"
    assert rules.borrow_within_cohort.max_priority_threshold == 100
    never = teams["team-b-cq"].preemption
    assert (never.within_team, never.reclaim_within_cohort) == ("never", "never")  # Kueue's defaults


def test_a_topology_the_wire_format_refuses_names_the_topology_object() -> None:
    objects = docs(NODES, "kueue-upstream/queues.yaml")
    find(objects, "Topology", "default")["spec"]["levels"] = [
        {"nodeLabel": f"example.com/level-{i}"} for i in range(17)] + [{"nodeLabel": "kubernetes.io/hostname"}]
    with pytest.raises(KubeError) as exc:
        import_documents(objects)
    assert str(exc.value).startswith("Topology (kueue.x-k8s.io) default (input #")
    assert "cluster.topology_levels" in str(exc.value)
