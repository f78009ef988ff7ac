"""Import: each Kubernetes field lands in the v1 field with the same meaning; what has none is reported.

Expected values are read off the fixture manifests by hand (the numbers in the comments), not
recomputed with the importer's own helpers.
"""

from __future__ import annotations

from collections import Counter

import pytest
from kube_helpers import BLOCK, H100_NODES, RACK, docs, find, load, reimport
from placement_models import PlacementRequest

from placement import catalog, devices


def _warned(imported, *words: str) -> bool:
    return any(all(w in str(x) for w in words) for x in imported.warnings)


# --------------------------------------------------------------------------------------------
# Nodes


def test_h100_nodes_map_capacity_gfd_labels_pools_taints_and_topology() -> None:
    imp = load("cluster")
    nodes = {n.name: n for n in imp.request.cluster.nodes}
    assert list(nodes) == H100_NODES
    a = nodes[H100_NODES[0]]
    assert a.gpu_model == "H100-SXM5-80GB"  # GFD product NVIDIA-H100-80GB-HBM3, an alias
    assert a.gpus == 8 and not a.mig and not a.sharing and not a.unhealthy_gpus
    assert a.cpu == pytest.approx(191.45)  # allocatable 191450m
    assert a.memory_gib == pytest.approx(2086393864 / 2**20)  # allocatable 2086393864Ki
    assert a.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"  # labels kept for selectors
    assert (a.topology.rack, a.topology.block) == ("nn-7c6d5e4f3a2b10901", "nn-1a2b3c4d5e6f70812")
    assert a.taints == []
    spot = nodes[H100_NODES[2]]
    assert spot.pool == "h100-spot" and a.pool == "h100"
    assert [(t.key, t.value, t.effect) for t in spot.taints] == [("karpenter.sh/capacity-type", "spot", "NoSchedule")]
    pools = {p.name: p.capacity_type for p in imp.request.cluster.pools}
    assert pools == {"h100": "on-demand", "h100-spot": "spot"}
    assert imp.origins.hostnames[H100_NODES[0]] == H100_NODES[0]


def test_prices_go_to_the_named_pools() -> None:
    from kube_helpers import FIXTURES

    from placement.kube import ImportOptions, import_paths

    imp = import_paths([FIXTURES / "cluster"], ImportOptions(prices={"h100": 4.0, "h100-spot": 1.3}))
    assert {p.name: p.gpu_hour_price for p in imp.request.cluster.pools} == {"h100": 4.0, "h100-spot": 1.3}


def test_fewer_allocatable_than_present_gpus_are_unhealthy_and_reported() -> None:
    objects = docs("cluster")
    node = find(objects, "Node", H100_NODES[1])
    node["status"]["allocatable"]["nvidia.com/gpu"] = "6"  # gpu.count label and capacity still say 8
    imp = reimport(objects)
    n = next(n for n in imp.request.cluster.nodes if n.name == H100_NODES[1])
    assert n.gpus == 8 and n.unhealthy_gpus == [6, 7]
    assert _warned(imp, H100_NODES[1], "2 of 8 GPUs are not allocatable")


def test_cordoned_and_not_ready_nodes_get_kubernetes_own_taints() -> None:
    objects = docs("cluster")
    find(objects, "Node", H100_NODES[0])["spec"]["unschedulable"] = True
    ready = find(objects, "Node", H100_NODES[1])["status"]["conditions"]
    next(c for c in ready if c["type"] == "Ready")["status"] = "Unknown"
    nodes = {n.name: n for n in reimport(objects).request.cluster.nodes}
    assert [t.key for t in nodes[H100_NODES[0]].taints] == ["node.kubernetes.io/unschedulable"]
    assert [t.key for t in nodes[H100_NODES[1]].taints] == ["node.kubernetes.io/not-ready"]


def test_mixed_strategy_mig_nodes_rebuild_a_legal_layout_with_the_advertised_counts() -> None:
    imp = load("mig")
    nodes = {n.name: n for n in imp.request.cluster.nodes}
    advertised = {  # status.allocatable of mig/nodes.yaml
        "a100-mig-0": {"1g.10gb": 8, "2g.20gb": 4, "3g.40gb": 4},
        "h100-mig-0": {"1g.10gb": 7, "3g.40gb": 2},
        "a30-single-0": {"1g.6gb": 16},
    }
    for name, counts in advertised.items():
        node = nodes[name]
        geo = catalog.mig_geometry(node.gpu_model)
        layouts = {g: [(i.profile, i.start) for i in layout] for g, layout in node.mig.items()}
        assert Counter(p for layout in layouts.values() for p, _ in layout) == counts, name
        for layout in layouts.values():
            assert devices.layout_problems(geo, layout) == [], (name, layout)
    a100 = nodes["a100-mig-0"]
    assert a100.gpu_model == "A100-SXM4-80GB" and a100.gpus == 8
    assert sorted(a100.mig) == [4, 5, 6, 7]  # allocatable nvidia.com/gpu 4 whole GPUs: 0..3
    balanced = sorted(i.profile for i in a100.mig[4])  # the mig-parted config all-balanced, per GPU
    assert balanced == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    assert sorted(nodes["h100-mig-0"].mig) == [6, 7]
    a30 = nodes["a30-single-0"]  # strategy single: 16 devices of 1g.6gb = 4 GPUs × 4
    assert a30.gpu_model == "A30-24GB" and a30.gpus == 4 and sorted(a30.mig) == [0, 1, 2, 3]
    assert _warned(imp, "a30-single-0", "strategy 'single'")
    assert _warned(imp, "a100-mig-0", "all-balanced")
    assert _warned(imp, "h100-mig-0", "legal packing")


def test_time_sliced_node_shares_every_gpu_with_its_replicas() -> None:
    imp = load("cluster", "kai")
    l40s = next(n for n in imp.request.cluster.nodes if n.name == "l40s-ts-0")
    assert l40s.gpu_model == "L40S-48GB"  # GFD product NVIDIA-L40S-SHARED
    assert l40s.gpus == 2  # 8 allocatable = 2 GPUs × 4 replicas
    assert {g: (s.mode, s.replicas) for g, s in l40s.sharing.items()} == {0: ("time-slicing", 4),
                                                                          1: ("time-slicing", 4)}


def test_nvl72_clique_label_is_the_nvlink_domain_and_kueue_levels_follow_the_topology() -> None:
    imp = load("nvl72")
    nodes = imp.request.cluster.nodes
    assert len(nodes) == 22 and {n.gpu_model for n in nodes} == {"GB200-186GB"}
    domains = Counter(n.topology.nvlink_domain for n in nodes)
    assert domains == {"9e3c1f0a-7b2d-4c8e-a1f5-2d6b8c0e4f71.32766": 18,
                       "9e3c1f0a-7b2d-4c8e-a1f5-2d6b8c0e4f71.32767": 4}
    assert imp.request.cluster.topology_levels == ["nvlink_domain"]  # Topology: clique, then hostname
    job = imp.request.jobs[0]
    assert job.topology is not None and job.topology.required == "nvlink_domain"
    assert job.tasks[0].replicas == 16 and job.tasks[0].gpus == 4


# --------------------------------------------------------------------------------------------
# Volcano


def test_seed_volcano_job_imports_as_the_design_llm_pretrain() -> None:
    imp = load("cluster", "volcano")
    (job,) = imp.request.jobs
    assert job.name == "research/llm-pretrain" and job.team == "research"
    assert job.priority == 100  # priorityClassName train-high
    assert job.pods == 9 and job.needed == 9  # minAvailable 9 = every pod
    worker, launcher = job.tasks
    assert (worker.name, worker.replicas, worker.gpus, worker.cpu, worker.memory_gib) == ("worker", 8, 8, 96, 1024)
    assert worker.node_selector == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert [(t.key, t.operator, t.effect) for t in worker.tolerations] == [("nvidia.com/gpu", "Exists", "NoSchedule")]
    # the launcher's init container (8 CPUs) needs more than its app container (7500m): 8 wins
    assert (launcher.name, launcher.replicas, launcher.gpus, launcher.cpu, launcher.memory_gib) == (
        "launcher", 1, 0, 8, 64)
    assert job.topology is not None and job.topology.required == "block"  # networkTopology hard, tier block
    assert job.spot_ok and job.submitted_at is not None and job.submitted_at.isoformat() == "2026-12-01T08:00:00+00:00"
    origin = imp.origins.jobs[job.name]
    assert (origin.kind, origin.namespace, origin.name) == ("volcano-job", "research", "llm-pretrain")
    assert _warned(imp, "llm-pretrain", "vpc.amazonaws.com/efa", "not modelled")


def test_running_volcano_pods_become_one_preemptible_running_job_with_gpu_indices() -> None:
    imp = load("cluster", "volcano")
    running = {r.job: r for r in imp.request.cluster.running}
    old = running["vision/old-train"]
    assert old.team == "vision" and old.priority == 10 and old.preemptible
    assert [(p.task, p.node, p.gpus, p.cpu, p.memory_gib) for p in old.pods] == [
        ("worker", H100_NODES[0], [0, 1], 24, 256), ("worker", H100_NODES[0], [2, 3], 24, 256)]
    assert old.started_at is not None and old.started_at.isoformat() == "2026-12-01T06:30:00+00:00"
    assert imp.origins.running_pods["vision/old-train"] == [("vision", "old-train-worker-0"),
                                                           ("vision", "old-train-worker-1")]
    assert imp.request.policy.preemption  # a preemptible running job: the cluster's scheduler preempts
    daemon = running["gpu-operator/nvidia-device-plugin-daemonset"]
    assert daemon.team == "unqueued" and not daemon.preemptible and daemon.pods[0].cpu == pytest.approx(0.05)


def test_volcano_queue_capacity_model_maps_to_nominal_lending_and_borrowing() -> None:
    imp = load("cluster", "volcano")
    teams = {t.name: t for t in imp.request.teams}
    research = teams["research"]
    assert research.weight == 2
    q = research.quota.gpus
    # deserved 64 (nominal), guarantee 32 (never lent: lend 64 - 32), capability 96 (borrow 96 - 64)
    assert (q.nominal, q.lending_limit, q.borrowing_limit) == (64, 32, 32)
    assert teams["vision"].quota is None
    # no-queue work holds exactly what it uses and neither lends nor borrows
    assert teams["unqueued"].quota.gpus.model_dump() == {"nominal": 0, "borrowing_limit": 0, "lending_limit": 0}
    assert _warned(imp, "research", "spec.capability.cpu, spec.capability.memory, spec.deserved.cpu", "only GPUs")


# --------------------------------------------------------------------------------------------
# Kueue


def test_kueue_workload_maps_podsets_partial_admission_topology_and_queue() -> None:
    imp = load("cluster", "kueue")
    (job,) = imp.request.jobs
    assert job.name == "research/job-finetune-7b-3c9d1"
    assert job.team == "research-cq"  # queueName research-lq -> LocalQueue -> ClusterQueue
    assert job.priority == 50
    assert [(t.name, t.replicas, t.gpus, t.cpu, t.memory_gib) for t in job.tasks] == [("main", 2, 4, 32, 384)]
    assert job.min_available is None and job.tasks[0].min_replicas == 1 and job.needed == 1  # count 2, minCount 1
    assert job.topology is not None and job.topology.required == RACK
    assert imp.request.cluster.topology_levels == [RACK, BLOCK]  # Topology levels, narrowest first, no hostname
    assert imp.origins.topology_labels == [BLOCK, RACK, "kubernetes.io/hostname"]
    assert imp.origins.jobs[job.name].cluster_queue == "research-cq"


def test_kueue_cluster_queues_become_flavor_quotas_of_one_cohort() -> None:
    imp = load("cluster", "kueue")
    teams = {t.name: t for t in imp.request.teams}
    research = {f.pool: f.gpus.model_dump() for f in teams["research-cq"].quota.flavors}
    serving = {f.pool: f.gpus.model_dump() for f in teams["serving-cq"].quota.flavors}
    # flavor h100-on-demand selects exactly pool h100's GPU nodes, h100-spot pool h100-spot's
    assert research["h100"] == {"nominal": 12, "borrowing_limit": 4, "lending_limit": 6}
    assert research["h100-spot"] == {"nominal": 0, "borrowing_limit": 0, "lending_limit": 0}  # not its flavor
    assert serving["h100"] == {"nominal": 4, "borrowing_limit": None, "lending_limit": None}
    assert serving["h100-spot"] == {"nominal": 8, "borrowing_limit": None, "lending_limit": 0}
    assert teams["research-cq"].weight == 2  # fairSharing.weight
    assert imp.origins.flavor_nodes["h100-spot"] == [H100_NODES[2]]
    # each flavor's cpu and memory quotas are its own, on the nodes its GPU quota counts
    flavor = {f.pool: f for f in teams["research-cq"].quota.flavors}
    assert flavor["h100"].cpu is not None and flavor["h100"].cpu.nominal == 256
    assert flavor["h100"].memory_gib is not None and flavor["h100"].memory_gib.nominal == 2048
    assert flavor["h100-spot"].cpu is not None and flavor["h100-spot"].cpu.model_dump() == {
        "nominal": 0, "borrowing_limit": 0, "lending_limit": 0}  # not its flavor
    assert not _warned(imp, "research-cq", "not honoured")


def test_admitted_kueue_job_runs_under_its_cluster_queue() -> None:
    imp = load("cluster", "kueue")
    (eval_suite,) = imp.request.cluster.running
    assert eval_suite.job == "serving/eval-suite" and eval_suite.team == "serving-cq"
    assert [(p.node, p.gpus) for p in eval_suite.pods] == [(H100_NODES[1], [0, 1])]
    # serving-cq itself never preempts, but its cohort mate research-cq reclaims (reclaimWithinCohort Any)
    assert eval_suite.preemptible


# --------------------------------------------------------------------------------------------
# KAI


def test_kai_queues_podgroup_and_fraction_pods() -> None:
    imp = load("cluster", "kai")
    teams = {t.name: t for t in imp.request.teams}
    # ai-dept is a parent: flattened, reported; the 2 GPUs beyond the 24 of quota are KAI's over-quota pool
    assert set(teams) == {"team-a", "team-b", "kai-unassigned"}
    assert teams["kai-unassigned"].quota.gpus.nominal == 2
    assert teams["team-a"].quota.gpus.model_dump() == {"nominal": 16, "borrowing_limit": 4, "lending_limit": None}
    assert teams["team-a"].weight == 2  # overQuotaWeight
    assert _warned(imp, "ai-dept", "parent queue")
    jobs = {j.name: j for j in imp.request.jobs}
    ddp = jobs["team-a/pg-ddp-resnet-7f2c"]
    assert ddp.team == "team-a" and ddp.priority == 50 and ddp.min_available == 3
    assert [(t.name, t.replicas, t.gpus) for t in ddp.tasks] == [("master", 1, 2), ("worker", 3, 2)]
    assert ddp.topology is not None and ddp.topology.required == RACK
    assert imp.origins.jobs[ddp.name].tasks["worker"].pods == ("ddp-resnet-worker-0", "ddp-resnet-worker-1",
                                                               "ddp-resnet-worker-2")
    nb = jobs["team-b/notebook-bo"].tasks[0]
    assert (nb.gpu_share, nb.gpu_memory_gib, nb.gpus) == (0.25, 10, 0)
    (ana,) = imp.request.cluster.running
    assert ana.team == "team-b" and not ana.preemptible  # KAI: priority 125 >= 100
    assert [(p.node, p.gpus, p.gpu_share) for p in ana.pods] == [("l40s-ts-0", [0], 0.5)]


def test_mig_pods_running_and_pending() -> None:
    imp = load("mig")
    (chat,) = imp.request.cluster.running
    slot = chat.pods[0].mig
    assert chat.pods[0].node == "a100-mig-0" and slot is not None and slot.profile == "1g.10gb"
    (embed,) = imp.request.jobs
    assert embed.name == "serving/embed-large"
    assert [(t.replicas, t.mig_profile) for t in embed.tasks] == [(2, "3g.40gb")]
    assert embed.min_available == 1  # a StatefulSet is no gang: each pod may start alone


def test_request_survives_a_json_round_trip_for_every_fixture() -> None:
    for parts in (("cluster", "volcano"), ("cluster", "kueue"), ("cluster", "kai"), ("mig",), ("nvl72",)):
        request = load(*parts).request
        again = PlacementRequest.model_validate_json(request.model_dump_json())
        assert again == request, parts


def test_volcano_default_minimum_is_the_sum_of_task_minimums() -> None:
    objects = docs("cluster", "volcano")
    job = find(objects, "Job", "llm-pretrain")
    del job["spec"]["minAvailable"]
    job["spec"]["tasks"][0]["minAvailable"] = 6  # workers: 6 of 8; the launcher defaults to its 1 replica
    imp = reimport(objects)
    job = imp.request.jobs[0]
    assert job.min_available is None and job.needed == 7
    assert [(t.name, t.min_replicas) for t in job.tasks] == [("worker", 6), ("launcher", None)]  # launcher: all
    assert not _warned(imp, "llm-pretrain", "spec.tasks[0].minAvailable", "not honoured")


def test_gpu_fraction_running_on_a_whole_gpu_node_holds_that_gpu() -> None:
    objects = docs("cluster", "kai")
    pod = find(objects, "Pod", "notebook-ana")
    pod["spec"]["nodeName"] = H100_NODES[1]
    imp = reimport(objects)
    (ana,) = imp.request.cluster.running
    assert [(p.node, p.gpus, p.gpu_share) for p in ana.pods] == [(H100_NODES[1], [0], None)]
    assert _warned(imp, "notebook-ana", "imported as holding one whole GPU")


def test_work_of_queues_the_input_does_not_have() -> None:
    objects = [d for d in docs("cluster", "kueue") if d["metadata"]["name"] != "serving-lq"]
    imp = reimport(objects)  # the running eval-suite names serving-lq, which is missing: no team, a warning
    (eval_suite,) = imp.request.cluster.running
    assert eval_suite.team == "unqueued"
    assert _warned(imp, "running job serving/eval-suite", "LocalQueue serving/serving-lq is not in the input")
    unqueued = next(t for t in imp.request.teams if t.name == "unqueued")
    # it holds 2 GPUs: its own nominal in every quota scope, never lent, never borrowing
    assert {f.pool: f.gpus.model_dump() for f in unqueued.quota.flavors} == {
        "h100": {"nominal": 2, "borrowing_limit": 0, "lending_limit": 0},
        "h100-spot": {"nominal": 2, "borrowing_limit": 0, "lending_limit": 0}}


def test_pending_daemonset_pods_are_left_to_their_controller() -> None:
    objects = docs("cluster", "volcano")
    pod = find(objects, "Pod", "nvidia-device-plugin-daemonset-x7k2p")
    del pod["spec"]["nodeName"]
    pod["status"] = {"phase": "Pending"}
    imp = reimport(objects)
    assert [j.name for j in imp.request.jobs] == ["research/llm-pretrain"]
    assert _warned(imp, "nvidia-device-plugin-daemonset-x7k2p", "pending DaemonSet pods")


def test_finished_pods_hold_nothing() -> None:
    objects = docs("cluster", "volcano")
    for name in ("old-train-worker-0", "old-train-worker-1"):
        find(objects, "Pod", name)["status"]["phase"] = "Succeeded"
    running = {r.job for r in reimport(objects).request.cluster.running}
    assert "vision/old-train" not in running
