"""Workloads as their users write them: Kueue's samples (Job, plain pod groups, JobSet, Kubeflow jobs,
LeaderWorkerSet, Deployment, StatefulSet), generateName, Volcano's unnamed tasks, and ResourceFlavor
node labels; each imported, planned, and checked against what Kueue or Volcano would admit.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kube_helpers import docs, find, load, reimport

from placement import plan, verify
from placement.kube import KubeError

CLUSTER = ("kueue-upstream/nodes.yaml", "kueue-upstream/queues.yaml")
TAS_NODES = {"gpu-a-0", "gpu-a-1", "gpu-b-0", "gpu-b-1"}
RACKS = {"gpu-a-0": "rack-a", "gpu-a-1": "rack-a", "gpu-b-0": "rack-b", "gpu-b-1": "rack-b"}


def _kueue(*files: str) -> Any:
    return load(*CLUSTER, *(f"kueue-upstream/{f}" for f in files))


def _job(imported: Any, prefix: str) -> Any:
    (job,) = [j for j in imported.request.jobs if j.name.startswith(prefix)]
    return job


def _warned(imported: Any, *parts: str) -> bool:
    return any(all(p in str(w) for p in parts) for w in imported.warnings)


# --------------------------------------------------------------------------------------------
# batch/v1 Job, generateName, ResourceFlavor node labels


def test_generate_name_gives_a_stable_name_and_a_warning() -> None:
    first, again = _kueue("job.yaml"), _kueue("job.yaml")
    job = _job(first, "default/sample-job-")
    assert len(job.name) == len("default/sample-job-") + 5
    assert [j.name for j in first.request.jobs] == [j.name for j in again.request.jobs]
    assert _warned(first, "sample-job-", "metadata.generateName")


def test_suspended_kueue_job_is_one_pod_set_admitted_whole_on_its_flavor() -> None:
    imported = _kueue("job.yaml")
    job = _job(imported, "default/sample-job-")
    (task,) = job.tasks
    assert (task.name, task.replicas, task.cpu) == ("main", 3, 1)
    assert job.team == "cluster-queue" and job.min_available is None  # Kueue admits the pod set whole
    assert task.node_selector == {"cloud.provider.com/node-group": "tas-node-group"}  # the flavor's nodeLabels
    result = plan(imported.request)
    assert verify(imported.request, result) == []
    assert {a.node for a in result.assignments} <= TAS_NODES  # never gpu-other-0
    assert result.pending == []


def test_flavor_with_node_labels_gets_a_pool_so_its_quota_is_honoured() -> None:
    imported = _kueue()
    pools = {n.name: n.pool for n in imported.request.cluster.nodes}
    assert {pools[n] for n in TAS_NODES} == {"tas-flavor"} and pools["gpu-other-0"] != "tas-flavor"
    (team,) = imported.request.teams
    assert [(f.pool, f.gpus.nominal) for f in team.quota.flavors] == [("tas-flavor", 32)]
    assert not _warned(imported, "its GPU quota is not honoured")


def test_flavor_tolerations_are_given_to_the_pods_it_admits() -> None:
    objects = docs(*CLUSTER, "kueue-upstream/job.yaml")
    taint = {"key": "example.com/reserved", "value": "ml", "effect": "NoSchedule"}
    for d in objects:
        if d["kind"] == "Node" and d["metadata"]["name"] in TAS_NODES:
            d.setdefault("spec", {})["taints"] = [taint]
    flavor = find(objects, "ResourceFlavor", "tas-flavor")
    flavor["spec"]["nodeTaints"] = [taint]
    assert len(plan(reimport(objects).request).pending) == 2  # the taint keeps the jobs off the TAS nodes
    flavor["spec"]["tolerations"] = [{"key": "example.com/reserved", "operator": "Equal", "value": "ml",
                                      "effect": "NoSchedule"}]
    imported = reimport(objects)
    assert all(t.tolerations for j in imported.request.jobs for t in j.tasks)
    result = plan(imported.request)
    assert result.pending == [] and {a.node for a in result.assignments} <= TAS_NODES


def test_tas_required_rack_keeps_the_job_in_one_rack() -> None:
    imported = _kueue("job.yaml")
    job = _job(imported, "default/tas-sample-required-")
    assert job.topology is not None and job.topology.required == "cloud.provider.com/topology-rack"
    result = plan(imported.request)
    placed = [a for a in result.assignments if a.job == job.name]
    assert len(placed) == 2 and len({RACKS[a.node] for a in placed}) == 1


def test_flavor_quota_caps_what_the_queue_runs() -> None:
    objects = docs(*CLUSTER, "kueue-upstream/job.yaml")
    cq = find(objects, "ClusterQueue", "cluster-queue")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] = 8
    imported = reimport(objects)
    result = plan(imported.request)
    assert [p.job for p in result.pending] == [_job(imported, "default/tas-sample-required-").name]


def test_flavor_cpu_quota_on_every_node_is_a_cluster_cpu_quota() -> None:
    objects = docs(*CLUSTER, "kueue-upstream/job.yaml")
    flavor = find(objects, "ResourceFlavor", "tas-flavor")
    del flavor["spec"]["nodeLabels"]  # Kueue's default-flavor: every node
    cq = find(objects, "ClusterQueue", "cluster-queue")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 4
    imported = reimport(objects)
    (team,) = imported.request.teams
    assert team.quota.cpu is not None and team.quota.cpu.nominal == 4
    assert team.quota.memory_gib is not None and team.quota.memory_gib.nominal == 7000
    result = plan(imported.request)
    placed = Counter(a.job for a in result.assignments)
    assert sum(placed.values()) == 2  # 4 cores: the 2-pod job fits, the 3-pod one (3 more cores) does not
    assert [p.job for p in result.pending] == [_job(imported, "default/sample-job-").name]


# --------------------------------------------------------------------------------------------
# Kueue plain pod groups, JobSet, Kubeflow, LeaderWorkerSet, Deployment, StatefulSet


def test_kueue_pod_group_is_one_gang() -> None:
    imported = _kueue("pod-group.yaml")
    (job,) = imported.request.jobs
    assert job.name == "default/sample-group" and job.min_available is None
    assert sum(t.replicas for t in job.tasks) == 2
    result = plan(imported.request)
    assert len(result.assignments) == 2 and {a.node for a in result.assignments} <= TAS_NODES


def test_kueue_pod_group_short_of_its_total_count_warns() -> None:
    objects = [d for d in docs(*CLUSTER, "kueue-upstream/pod-group.yaml")
               if d["metadata"].get("generateName") != "sample-worker-"]
    imported = reimport(objects)
    assert _warned(imported, "pod-group-total-count", "2 pods in the group, 1 in the input")


def test_jobset_pod_sets_and_exclusive_racks() -> None:
    imported = _kueue("jobset.yaml")
    job = _job(imported, "default/sleep-job-")
    assert [(t.name, t.replicas, t.gpus) for t in job.tasks] == [("workers", 4, 8), ("driver", 1, 0)]
    assert job.topology is not None and job.topology.slice is not None
    assert (job.topology.slice.size, job.topology.slice.required) == (2, "cloud.provider.com/topology-rack")
    result = plan(imported.request)
    workers = [a for a in result.assignments if a.task == "workers"]
    assert len(workers) == 4
    by_slice = Counter(RACKS[a.node] for a in workers)
    assert by_slice == {"rack-a": 2, "rack-b": 2}  # each child Job's 2 pods in one rack


def test_pytorchjob_and_mpijob_are_gangs_of_their_replica_types() -> None:
    imported = _kueue("pytorchjob.yaml")
    torch = _job(imported, "default/pytorch-simple")
    assert [(t.name, t.replicas, t.gpus) for t in torch.tasks] == [("master", 1, 8), ("worker", 3, 8)]
    mpi = _job(imported, "default/pi")
    assert [(t.name, t.replicas, t.gpus) for t in mpi.tasks] == [("launcher", 1, 0), ("worker", 2, 1)]
    assert torch.min_available is None and mpi.min_available is None
    result = plan(imported.request)
    # 32 GPUs of quota: the PyTorchJob takes them all, the MPIJob waits whole (not 1 of its 2 workers)
    assert Counter(a.job for a in result.assignments) == {torch.name: 4}
    assert [p.job for p in result.pending] == [mpi.name]


def test_pytorchjob_too_big_for_the_quota_places_no_pod() -> None:
    objects = docs(*CLUSTER, "kueue-upstream/pytorchjob.yaml")
    find(objects, "PyTorchJob", "pytorch-simple")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 4
    imported = reimport(objects)
    result = plan(imported.request)
    assert not any(a.job == "default/pytorch-simple" for a in result.assignments)  # 40 GPUs > 32: none


def test_leaderworkerset_groups_are_jobs_each_in_one_rack() -> None:
    imported = _kueue("serving.yaml")
    groups = [j for j in imported.request.jobs if j.name.startswith("default/vllm-")]
    assert [j.name for j in groups] == ["default/vllm-0", "default/vllm-1"]
    assert all([(t.name, t.replicas) for t in j.tasks] == [("leader", 1), ("worker", 1)] for j in groups)
    result = plan(imported.request)
    for j in groups:
        placed = [a for a in result.assignments if a.job == j.name]
        assert len(placed) == 2 and len({RACKS[a.node] for a in placed}) == 1


def test_deployment_pods_start_alone_statefulset_under_kueue_is_a_gang() -> None:
    imported = _kueue("serving.yaml")
    deploy = _job(imported, "default/sample-deployment")
    sts = _job(imported, "default/nginx-statefulset")
    assert deploy.min_available == 1 and deploy.tasks[0].replicas == 3
    assert sts.min_available is None and sts.tasks[0].replicas == 3


def test_job_outside_kueue_starts_pod_by_pod_and_a_suspended_one_waits() -> None:
    objects = docs(*CLUSTER, "kueue-upstream/job.yaml")
    sample = next(d for d in objects if d["metadata"].get("generateName") == "sample-job-")
    del sample["metadata"]["labels"]
    imported = reimport(objects)
    assert _warned(imported, "sample-job-", "spec.suspend", "nothing will start it")
    sample["spec"]["suspend"] = False
    job = _job(reimport(objects), "default/sample-job-")
    assert job.min_available == 1 and job.team == "unqueued"  # outside every Kueue quota


def test_controller_with_pods_in_the_input_is_read_from_its_pods() -> None:
    objects = docs(*CLUSTER, "kueue-upstream/serving.yaml")
    objects.append({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "nginx-statefulset-0", "namespace": "default",
                                 "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                                      "name": "nginx-statefulset", "controller": True}]},
                    "spec": {"nodeName": "gpu-a-0", "containers": [{"name": "nginx",
                                                                     "resources": {"requests": {"cpu": "100m"}}}]},
                    "status": {"phase": "Running"}})
    imported = reimport(objects)
    assert not any(j.name.startswith("default/nginx-statefulset") for j in imported.request.jobs)
    assert [r.job for r in imported.request.cluster.running] == ["default/nginx-statefulset"]


# --------------------------------------------------------------------------------------------
# Volcano's unnamed tasks


def test_volcano_tasks_without_names_get_the_webhooks_defaults() -> None:
    imported = load("kueue-upstream/nodes.yaml", "volcano-docs")
    (job,) = imported.request.jobs
    assert [(t.name, t.replicas) for t in job.tasks] == [("default0", 2), ("default1", 1)]
    assert job.min_available is None  # minAvailable 3 = every pod
    result = plan(imported.request)
    assert len(result.assignments) == 3


# --------------------------------------------------------------------------------------------
# Refusals name the object, the file and the field


def _error(objects: list[dict[str, Any]]) -> str:
    try:
        reimport(objects)
    except KubeError as exc:
        return str(exc)
    raise AssertionError("imported")


def test_broken_workloads_name_object_file_and_field() -> None:
    objects = docs(*CLUSTER, "kueue-upstream/pytorchjob.yaml")
    find(objects, "PyTorchJob", "pytorch-simple")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "three"
    assert "PyTorchJob default/pytorch-simple (input #" in (message := _error(objects))
    assert "spec.pytorchReplicaSpecs.Worker.replicas: expected an integer" in message
    objects = docs(*CLUSTER, "kueue-upstream/jobset.yaml")
    jobset = next(d for d in objects if d["kind"] == "JobSet")
    jobset["spec"]["replicatedJobs"] = []
    assert "spec.replicatedJobs: required" in _error(objects)
    objects = docs(*CLUSTER, "kueue-upstream/pod-group.yaml")
    for d in objects:
        d["metadata"].get("annotations", {}).pop("kueue.x-k8s.io/pod-group-total-count", None)
    message = _error(objects)
    assert "Pod default/sample-" in message and "kueue.x-k8s.io/pod-group-total-count: required" in message
