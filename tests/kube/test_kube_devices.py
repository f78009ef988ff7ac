"""What `nvidia.com/gpu` means where a pod lands (device-plugin sharing, MIG strategies), and KAI's
queues, priorities and GPU sharing, on manifests in the shape their docs publish.

Each test imports, plans, and checks the placements are the ones the device plugin and the
scheduler would give: shared replicas on time-sliced and MPS nodes, MIG instances under strategy
single, KAI fractions on any GPU, KAI's over-quota use of idle GPUs. MIG devices the device plugin
shares (time-slicing/MPS on MIG instances) have no v1 form: those nodes and pods are refused.
"""

from __future__ import annotations

import pytest
from kube_helpers import docs, find, load, reimport

from placement import plan, verify
from placement.kube import KubeError, import_documents


def _jobs(imported):  # type: ignore[no-untyped-def]
    return {j.name: j for j in imported.request.jobs}


def _warned(imported, *parts: str) -> bool:  # type: ignore[no-untyped-def]
    return any(all(p in str(w) for p in parts) for w in imported.warnings)


# --------------------------------------------------------------------------------------------
# Device plugin: time-slicing, MPS, MIG single


def test_time_sliced_gpu_request_is_a_shared_replica_and_all_five_pods_run() -> None:
    imported = load("device-plugin")
    job = _jobs(imported)["default/time-slicing-verification"]
    (task,) = job.tasks
    assert (task.replicas, task.gpus, task.gpu_share) == (5, 0, 0.25)  # 1 of a T4's 4 replicas
    assert job.min_available == 1  # a Deployment's pods start one by one
    result = plan(imported.request)
    assert verify(imported.request, result) == []
    placed = [a for a in result.assignments if a.job == job.name]
    assert len(placed) == 5 and {a.node for a in placed} == {"t4-ts-0"}
    assert all(a.gpu_share == 0.25 for a in placed)


def test_mps_replica_is_one_fifth_of_an_l4() -> None:
    imported = load("device-plugin")
    (task,) = _jobs(imported)["default/mps-vectoradd"].tasks
    assert (task.gpus, task.gpu_share) == (0, 0.2)
    result = plan(imported.request)
    (a,) = [a for a in result.assignments if a.job == "default/mps-vectoradd"]
    assert a.node == "l4-mps-0"


def test_mig_single_strategy_gpu_request_takes_one_instance() -> None:
    imported = load("device-plugin")
    (task,) = _jobs(imported)["default/cuda-vectoradd"].tasks
    assert (task.gpus, task.mig_profile) == (0, "1g.5gb")
    result = plan(imported.request)
    (a,) = [a for a in result.assignments if a.job == "default/cuda-vectoradd"]
    assert a.node == "a100-single-0" and a.mig is not None and a.mig.profile == "1g.5gb"
    assert [p.job for p in result.pending] == []


def test_an_unknown_mig_profile_blames_the_product_label() -> None:
    objects = docs("device-plugin/nodes.yaml")
    node = find(objects, "Node", "a100-single-0")
    node["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-40GB-MIG-9g.99gb"
    with pytest.raises(KubeError) as exc:
        import_documents(objects)
    message = str(exc.value)
    assert "Node a100-single-0 (input #" in message and "metadata.labels.nvidia.com/gpu.product:" in message
    assert "no MIG profile '9g.99gb'" in message


# --------------------------------------------------------------------------------------------
# Sharing on MIG devices (time-slicing/MPS on MIG instances): no v1 form, so refused


def _refused(*parts: str) -> list[str]:
    with pytest.raises(KubeError) as exc:
        load(*parts)
    return [str(p) for p in exc.value.problems]


def test_time_sliced_mig_devices_under_strategy_single_refuse_the_node_and_name_the_replicas_label() -> None:
    # 28 nvidia.com/gpu = 7 instances x 4 replicas, two running pods hold a replica each: not expressible
    (problem,) = _refused("mig-shared/single.yaml")
    assert problem.startswith("Node a100-ts-single-0 (single.yaml #1): metadata.labels.nvidia.com/gpu.replicas: "
                              "MIG devices shared 4 ways"), problem
    assert "cannot express pods sharing one MIG instance" in problem
    assert "leave the node out of the input" in problem


def test_time_sliced_mig_devices_under_strategy_mixed_refuse_the_node_and_name_the_profile_replicas_label() -> None:
    # three running pods on two 3g.40gb instances shared 2 ways: refused for the node, not for the third pod
    (problem,) = _refused("mig-shared/mixed.yaml")
    assert problem.startswith("Node a100-ts-mixed-0 (mixed.yaml #1): metadata.labels.nvidia.com/mig-3g.40gb.replicas: "
                              "MIG devices shared 2 ways"), problem


def test_renamed_shared_mig_resources_refuse_the_node_and_name_the_allocatable_resource() -> None:
    (problem,) = _refused("mig-shared/renamed.yaml")
    assert problem.startswith("Node h100-mps-mixed-0 (renamed.yaml #1): "
                              "status.allocatable.nvidia.com/mig-1g.10gb.shared: MIG devices shared 3 ways"), problem


def test_every_node_with_shared_mig_devices_is_named_in_one_run() -> None:
    problems = _refused("device-plugin/nodes.yaml", "mig-shared")
    assert sorted(p.split(":")[0] for p in problems) == ["Node a100-ts-mixed-0 (mixed.yaml #1)",
                                                         "Node a100-ts-single-0 (single.yaml #1)",
                                                         "Node h100-mps-mixed-0 (renamed.yaml #1)"]


def test_a_shared_mig_product_without_replicas_is_refused_too() -> None:
    objects = docs("mig-shared/single.yaml")
    node = find(objects, "Node", "a100-ts-single-0")
    del node["metadata"]["labels"]["nvidia.com/gpu.replicas"]
    node["status"]["allocatable"]["nvidia.com/gpu"] = "7"
    with pytest.raises(KubeError) as exc:
        reimport(objects)
    assert "metadata.labels.nvidia.com/gpu.product: MIG devices shared by time-slicing or MPS" in str(exc.value)


def test_a_pod_asking_for_a_shared_mig_device_is_refused_naming_its_container_field() -> None:
    objects = docs("device-plugin/nodes.yaml") + [d for d in docs("mig-shared/renamed.yaml") if d["kind"] != "Node"]
    with pytest.raises(KubeError) as exc:
        reimport(objects)
    message = str(exc.value)
    assert ("Job (batch) research/embed-batch (input #" in message
            and "spec.template.spec.containers[0].resources.limits.nvidia.com/mig-1g.10gb.shared: a shared MIG "
            "device (1g.10gb shared by time-slicing or MPS)" in message), message


def test_without_the_shared_mig_node_its_pods_are_ignored_and_the_rest_plans() -> None:
    # the refusal's advice: leave the node out; pods bound to it are ignored, the waiting one finds no node
    objects = docs("device-plugin") + [d for d in docs("mig-shared/single.yaml") if d["kind"] != "Node"]
    imported = reimport(objects)
    assert "a100-ts-single-0" not in {n.name for n in imported.request.cluster.nodes}
    assert _warned(imported, "lab/notebook-7c9d5-aaaaa", "bound to node 'a100-ts-single-0'", "ignored")
    assert not any(r.job.startswith("lab/") for r in imported.request.cluster.running)
    result = plan(imported.request)
    assert verify(imported.request, result) == []
    assert not any(a.job.startswith("lab/") for a in result.assignments)
    assert any(p.job.startswith("lab/") for p in result.pending)


def test_a_pod_whose_nodes_mix_kinds_takes_whole_gpus_and_says_so() -> None:
    objects = docs("device-plugin/nodes.yaml")
    objects.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "anywhere"},
                    "spec": {"tolerations": [{"operator": "Exists"}],
                             "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}})
    imported = reimport(objects)
    (task,) = _jobs(imported)["default/anywhere"].tasks
    assert task.gpus == 1 and task.gpu_share is None
    assert _warned(imported, "default/anywhere", "placed on whole-GPU nodes only")


# --------------------------------------------------------------------------------------------
# KAI: quickstart queues, priority classes by label, GPU sharing


def test_kai_quickstart_queues_use_idle_gpus_over_quota() -> None:
    imported = load("kai-quickstart")
    teams = {t.name: t for t in imported.request.teams}
    assert teams["test"].quota.gpus.nominal == 0 and teams["test"].quota.gpus.borrowing_limit is None
    assert teams["kai-unassigned"].quota.gpus.nominal == 4  # every GPU: no queue has a quota
    result = plan(imported.request)
    assert verify(imported.request, result) == []
    assert result.pending == []  # quota 0 + limit -1: idle GPUs are usable over quota
    assert {a.job for a in result.assignments} == set(_jobs(imported))


def test_kai_limit_caps_over_quota_use() -> None:
    objects = docs("kai-quickstart")
    find(objects, "Queue", "test")["spec"]["resources"]["gpu"]["limit"] = 1
    imported = reimport(objects)
    result = plan(imported.request)
    whole = {a.job for a in result.assignments if a.gpus and a.gpu_share is None}
    assert len(whole) <= 1


def test_kai_priority_class_label_sets_the_priority() -> None:
    imported = load("kai-quickstart")
    jobs = _jobs(imported)
    assert jobs["default/train-pod"].priority == 50
    assert jobs["default/inference-pod"].priority == 125
    assert jobs["default/gpu-pod"].priority == 0
    assert _warned(imported, "train-pod", "KAI's default value 50")


def test_kai_priority_label_uses_the_clusters_priority_class_when_given() -> None:
    objects = docs("kai-quickstart") + [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                         "metadata": {"name": "train"}, "value": 40}]
    assert _jobs(reimport(objects))["default/train-pod"].priority == 40


def test_kai_fraction_and_memory_pods_share_a_whole_gpu_without_options() -> None:
    imported = load("kai-quickstart")
    jobs = _jobs(imported)
    assert jobs["default/gpu-sharing"].tasks[0].gpu_share == 0.5
    memory = jobs["default/gpu-sharing-memory"].tasks[0]
    assert memory.gpu_memory_gib == pytest.approx(2000 / 1024) and memory.gpu_share == pytest.approx(2000 / 1024 / 24)
    assert imported.request.policy.allow_sharing_changes  # KAI splits any GPU itself
    result = plan(imported.request)
    shared = [a for a in result.assignments if a.gpu_share is not None]
    assert {a.job for a in shared} == {"default/gpu-sharing", "default/gpu-sharing-memory"}
    assert result.sharing_changes  # the GPUs KAI will split
