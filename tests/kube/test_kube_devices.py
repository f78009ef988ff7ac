"""What `nvidia.com/gpu` means where a pod lands (device-plugin sharing, MIG strategies), and KAI's
queues, priorities and GPU sharing, on manifests in the shape their docs publish.

Each test imports, plans, and checks the placements are the ones the device plugin and the
scheduler would give: shared replicas on time-sliced and MPS nodes, MIG instances under strategy
single, KAI fractions on any GPU, KAI's over-quota use of idle GPUs, and shares of MIG instances the
device plugin shares (time-slicing/MPS on MIG), imported as shared instances.
"""

from __future__ import annotations

import pytest
from kube_helpers import docs, find, load, reimport

from placement import plan, verify
from placement.kube import KubeError, export, import_documents


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
# Sharing on MIG devices (time-slicing/MPS on MIG instances): shared instances, pods take shares


def _instances(imported, node: str) -> list[tuple[int, str, int, str | None, int | None]]:  # type: ignore[no-untyped-def]
    (n,) = [n for n in imported.request.cluster.nodes if n.name == node]
    return [(g, i.profile, i.start, i.sharing.mode if i.sharing else None, i.sharing.replicas if i.sharing else None)
            for g, layout in sorted(n.mig.items()) for i in layout]


def test_time_sliced_mig_devices_under_strategy_single_import_as_shared_instances_and_shares() -> None:
    # 28 nvidia.com/gpu = 7 instances x 4 replicas; two running pods hold a replica each, a third waits
    imported = load("mig-shared/single.yaml")
    assert _instances(imported, "a100-ts-single-0") == [(0, "1g.5gb", s, "time-slicing", 4) for s in range(7)]
    (running,) = imported.request.cluster.running
    assert [(p.mig.start, p.gpu_share) for p in running.pods] == [(0, 0.25), (0, 0.25)]  # type: ignore[union-attr]
    (task,) = _jobs(imported)["lab/notebook-7c9d5"].tasks
    assert (task.mig_profile, task.gpu_share, task.gpus) == ("1g.5gb", 0.25, 0)
    assert _warned(imported, "MIG 1g.5gb devices shared 4 ways (time-slicing)")
    result = plan(imported.request)
    assert verify(imported.request, result) == [] and not result.pending
    (a,) = [a for a in result.assignments if a.job == "lab/notebook-7c9d5"]
    assert a.mig is not None and a.gpu_share == 0.25 and (a.mig.gpu, a.mig.start) == (0, 0)  # best fit: the fullest


def test_time_sliced_mig_devices_under_strategy_mixed_hold_the_running_shares() -> None:
    # three running pods on two 3g.40gb instances shared 2 ways: half an instance each
    imported = load("mig-shared/mixed.yaml")
    assert _instances(imported, "a100-ts-mixed-0") == [(0, "3g.40gb", 0, "time-slicing", 2),
                                                       (0, "3g.40gb", 4, "time-slicing", 2)]
    (running,) = imported.request.cluster.running
    assert sorted((p.mig.start, p.gpu_share) for p in running.pods) == [(0, 0.5), (0, 0.5), (4, 0.5)]  # type: ignore[union-attr]
    assert verify(imported.request, plan(imported.request)) == []


def test_renamed_shared_mig_resources_import_and_their_pods_share_by_mps() -> None:
    imported = load("mig-shared/renamed.yaml")
    assert _instances(imported, "h100-mps-mixed-0") == [(0, "1g.10gb", s, "mps", 3) for s in range(7)]
    (task,) = _jobs(imported)["research/embed-batch"].tasks
    assert (task.replicas, task.mig_profile, task.gpu_share) == (3, "1g.10gb", pytest.approx(1 / 3))
    result = plan(imported.request)
    assert verify(imported.request, result) == [] and not result.pending
    assert all(a.mig is not None and a.mig.profile == "1g.10gb" for a in result.assignments)


def test_every_node_with_shared_mig_devices_imports_in_one_run_beside_the_device_plugin_nodes() -> None:
    imported = load("device-plugin", "mig-shared")
    shared = {n.name for n in imported.request.cluster.nodes if any(i.sharing for lay in n.mig.values() for i in lay)}
    assert shared == {"a100-ts-mixed-0", "a100-ts-single-0", "h100-mps-mixed-0", "a100-80-mixed-0",
                      "a100-80-single-0"}
    assert verify(imported.request, plan(imported.request)) == []


def test_a_shared_mig_product_without_replicas_takes_them_from_the_count_or_names_the_label() -> None:
    objects = docs("mig-shared/single.yaml")
    node = find(objects, "Node", "a100-ts-single-0")
    del node["metadata"]["labels"]["nvidia.com/gpu.replicas"]
    imported = reimport(objects)  # 28 devices offered over the 7 GFD counts: 4 ways
    assert _instances(imported, "a100-ts-single-0")[0] == (0, "1g.5gb", 0, "time-slicing", 4)
    node["status"]["allocatable"]["nvidia.com/gpu"] = "7"
    with pytest.raises(KubeError) as exc:
        reimport(objects)
    assert "metadata.labels.nvidia.com/gpu.product: 'NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED': MIG devices shared" \
        in str(exc.value)


def test_an_offer_that_is_no_whole_number_of_shared_devices_names_the_resource() -> None:
    objects = docs("mig-shared/mixed.yaml")
    find(objects, "Node", "a100-ts-mixed-0")["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] = "3"
    with pytest.raises(KubeError) as exc:
        reimport(objects)
    assert ("status.allocatable.nvidia.com/mig-3g.40gb: 3 devices offered is not a whole number of MIG devices "
            "shared 2 ways") in str(exc.value)


def test_a_pod_asking_several_replicas_of_a_shared_mig_device_takes_that_share_up_to_the_replicas() -> None:
    objects = docs("mig-shared/renamed.yaml")
    job = find(objects, "Job", "embed-batch")
    limits = job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    limits["nvidia.com/mig-1g.10gb.shared"] = 2
    (task,) = _jobs(reimport(objects))["research/embed-batch"].tasks
    assert task.gpu_share == pytest.approx(2 / 3)
    limits["nvidia.com/mig-1g.10gb.shared"] = 4
    with pytest.raises(KubeError) as exc:
        reimport(objects)
    assert "4 replicas of an instance shared 3 ways" in str(exc.value)


def test_a_pod_whose_nodes_offer_its_profile_whole_and_shared_takes_a_whole_instance_and_says_so() -> None:
    objects = docs("mig/nodes.yaml") + docs("mig-shared/renamed.yaml")
    objects = [d for d in objects if d["kind"] == "Node"]
    node = next(d for d in objects if d["metadata"]["name"] == "h100-mps-mixed-0")
    node["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = node["status"]["allocatable"].pop(
        "nvidia.com/mig-1g.10gb.shared")  # shared, not renamed: the same resource name as on the unshared node
    objects.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "anywhere"},
                    "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/mig-1g.10gb": 1}}}]}})
    imported = reimport(objects)
    (task,) = _jobs(imported)["default/anywhere"].tasks
    assert (task.mig_profile, task.gpu_share) == ("1g.10gb", None)
    assert _warned(imported, "default/anywhere", "offer it whole and shared", "imported as a whole instance")


def test_shared_mig_end_to_end_import_plan_verify_export() -> None:
    # the device plugin's timeSlicing on nvidia.com/mig-1g.10gb (4 replicas, strategy mixed) and on the MIG
    # devices of a strategy-single node (2 replicas): import, plan, verify, bind
    imported = load("mig-shared/time-slicing-1g10gb.yaml")
    assert _instances(imported, "a100-80-mixed-0") == [(1, "1g.10gb", s, "time-slicing", 4) for s in range(7)]
    jobs = _jobs(imported)
    assert [(t.mig_profile, t.gpu_share) for t in jobs["research/embed-batch"].tasks] == [("1g.10gb", 0.25)]
    assert [(t.mig_profile, t.gpu_share) for t in jobs["lab/notebook-bob"].tasks] == [("1g.10gb", 0.5)]
    result = plan(imported.request)
    assert verify(imported.request, result) == [] and result.pending == []
    held: dict[tuple[str, int, int], float] = {}
    for r in imported.request.cluster.running:
        for p in r.pods:
            assert p.mig is not None and p.gpu_share is not None
            held[p.node, p.mig.gpu, p.mig.start] = held.get((p.node, p.mig.gpu, p.mig.start), 0.0) + p.gpu_share
    for a in result.assignments:
        assert a.mig is not None and a.gpu_share is not None and a.gpus == []
        key = (a.node, a.mig.gpu, a.mig.start)
        held[key] = held.get(key, 0.0) + a.gpu_share
    assert max(held.values()) <= 1.0 + 1e-9  # no instance over-committed, running shares counted
    embed = [a for a in result.assignments if a.job == "research/embed-batch"]
    assert len(embed) == 10 and {a.node for a in embed} == {"a100-80-mixed-0"}
    document, notes = export(imported.request, result, "bindings", imported.origins)
    bound = {b["metadata"]["name"]: b for b in document["items"]}
    assert set(bound) >= {"notebook-bob", "notebook-carol"} and len(bound) == 12
    annotations = bound["notebook-bob"]["metadata"]["annotations"]
    assert bound["notebook-bob"]["target"]["name"] == "a100-80-single-0"
    assert annotations["placement.dev/mig"].startswith("gpu=") and "profile=1g.10gb" in annotations["placement.dev/mig"]
    assert annotations["placement.dev/gpu-share"].endswith("share=0.5")
    assert notes == []  # only declared shared instances used: nothing to re-partition or share first


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
