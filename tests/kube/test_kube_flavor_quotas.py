"""Kueue ClusterQueues with cpu and memory quotas per ResourceFlavor: imported as the flavor's own quota (not
dropped), on the nodes the flavor selects, and honoured by the plan and the verifier.
"""

from __future__ import annotations

from typing import Any

from kube_helpers import docs, find, reimport

from placement import plan, verify

CLUSTER = ("kueue-upstream/nodes.yaml", "kueue-upstream/queues.yaml", "kueue-upstream/job.yaml")
TAS_NODES = {"gpu-a-0", "gpu-a-1", "gpu-b-0", "gpu-b-1"}


def _cpu_node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "node-type": "cpu"}},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _cpu_job(name: str, pods: int) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "cpu-lq"}},
            "spec": {"parallelism": pods, "completions": pods, "suspend": True,
                     "template": {"spec": {"containers": [container], "restartPolicy": "Never"}}}}


def _cpu_queue(cpu: str, memory: str) -> list[dict[str, Any]]:
    """A CPU-only flavor on the CPU nodes (Kueue's usual default-flavor, here with a label), a ClusterQueue with
    cpu and memory quotas on it, and its LocalQueue."""
    return [
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "cpu-flavor"},
         "spec": {"nodeLabels": {"node-type": "cpu"}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cpu-queue"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{
             "coveredResources": ["cpu", "memory"],
             "flavors": [{"name": "cpu-flavor", "resources": [{"name": "cpu", "nominalQuota": cpu},
                                                               {"name": "memory", "nominalQuota": memory}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
         "metadata": {"name": "cpu-lq", "namespace": "default"}, "spec": {"clusterQueue": "cpu-queue"}},
    ]


def test_gpu_flavor_cpu_quota_is_the_flavors_own() -> None:
    objects = docs(*CLUSTER)
    cq = find(objects, "ClusterQueue", "cluster-queue")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 2
    imported = reimport(objects)
    (team,) = imported.request.teams
    (flavor,) = team.quota.flavors
    assert flavor.pool == "tas-flavor" and team.quota.cpu is None
    assert flavor.cpu is not None and flavor.cpu.model_dump() == {"nominal": 2, "borrowing_limit": 0,
                                                                  "lending_limit": 0}  # no cohort: limits 0
    assert flavor.memory_gib is not None and flavor.memory_gib.nominal == 7000
    assert not any("not honoured" in str(w) for w in imported.warnings)
    result = plan(imported.request)
    assert verify(imported.request, result) == []
    assert len(result.assignments) == 2  # 2 cores: the 2-pod job fits, the 3-pod one does not
    (pending,) = result.pending
    assert pending.job.startswith("default/sample-job-")
    assert "cpu" in pending.reason and "on pool tas-flavor" in pending.reason


def test_cpu_only_flavor_gets_a_pool_and_caps_its_queue_there() -> None:
    objects = [*docs(*CLUSTER[:2]), _cpu_node("cpu-0"), _cpu_node("cpu-1"), *_cpu_queue("3", "64Gi"),
               _cpu_job("small", 2), _cpu_job("big", 2)]
    imported = reimport(objects)
    pools = {n.name: n.pool for n in imported.request.cluster.nodes}
    assert pools["cpu-0"] == pools["cpu-1"] == "cpu-flavor" and pools["gpu-other-0"] != "cpu-flavor"
    teams = {t.name: t for t in imported.request.teams}
    mine = {f.pool: f for f in teams["cpu-queue"].quota.flavors}
    flavor = mine["cpu-flavor"]
    assert (flavor.gpus, flavor.cpu.nominal, flavor.memory_gib.nominal) == (None, 3, 64)
    # a ClusterQueue cannot use a flavor it does not list: cluster-queue has no cpu there, cpu-queue no GPUs
    zero = {"nominal": 0, "borrowing_limit": 0, "lending_limit": 0}
    assert mine["tas-flavor"].gpus.model_dump() == zero and mine["tas-flavor"].cpu.model_dump() == zero
    other = {f.pool: f for f in teams["cluster-queue"].quota.flavors}
    assert other["cpu-flavor"].cpu.model_dump() == zero and other["cpu-flavor"].gpus is None
    result = plan(imported.request)
    assert verify(imported.request, result) == []
    placed = {a.job for a in result.assignments}
    assert len(placed) == 1 and {a.node for a in result.assignments} <= {"cpu-0", "cpu-1"}
    (pending,) = result.pending
    assert pending.reason.startswith("quota: team cpu-queue: cpu 2 of 3 used on pool cpu-flavor")
