"""Plans from imported objects, and their way back: bindings, Kueue admissions, patches, tables.

The round trips apply an export to the objects the way the cluster would (the API server binds
the pods, a controller creates the pods it owns, Kueue records the admission) and import again:
the work the plan placed must come back as running work on the same nodes.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

from kube_helpers import BLOCK, H100_NODES, docs, find, h100_node, load, reimport
from placement_models import Plan

from placement import plan, verify
from placement.kube import export

SEED = "research/llm-pretrain"


def _placed(p: Plan, job: str) -> list[Any]:
    return [a for a in p.assignments if a.job == job]


def _without_old_train(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in objects if "old-train" not in d["metadata"]["name"]]


def _big_cluster(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Seven more on-demand H100 nodes in the seed's block (two racks) and two in another block."""
    extra = [h100_node(f"h100-b1-{i}", "nn-rack-a" if i < 4 else "nn-rack-b") for i in range(7)]
    extra += [h100_node(f"h100-b2-{i}", "nn-rack-c", block="nn-other-block") for i in range(2)]
    return objects + extra


# --------------------------------------------------------------------------------------------
# The seed job: one gang of 9 pods


def test_seed_job_pends_whole_on_the_three_node_cluster() -> None:
    imported = load("cluster", "volcano")
    result = plan(imported.request)
    assert _placed(result, SEED) == []  # 64 GPUs asked, 24 exist: not one pod of the gang is placed
    assert [p.job for p in result.pending] == [SEED]
    assert verify(imported.request, result) == []


def test_seed_job_places_as_one_nine_pod_gang_inside_one_block() -> None:
    imported = reimport(_big_cluster(_without_old_train(docs("cluster", "volcano"))))
    request = imported.request
    result = plan(request)
    assert verify(request, result) == []
    pods = _placed(result, SEED)
    assert Counter(a.task for a in pods) == {"worker": 8, "launcher": 1}
    workers = [a for a in pods if a.task == "worker"]
    assert all(len(a.gpus) == 8 for a in workers) and len({a.node for a in workers}) == 8
    blocks = {n.name: n.topology.block for n in request.cluster.nodes}
    assert {blocks[a.node] for a in pods} == {"nn-1a2b3c4d5e6f70812"}  # required: block, never nn-other-block
    assert all(a.node != H100_NODES[2] for a in pods)  # the spot node's taint is not tolerated
    assert result.pending == []


def test_seed_job_with_a_running_borrower_is_still_all_or_nothing() -> None:
    """old-train (vision) borrows research's lendable quota: placing the seed must reclaim it whole."""
    imported = reimport(_big_cluster(docs("cluster", "volcano")))
    result = plan(imported.request)
    assert verify(imported.request, result) == []
    placed = _placed(result, SEED)
    assert len(placed) == 9
    assert [p.job for p in result.preemptions] == ["vision/old-train"]


# --------------------------------------------------------------------------------------------
# Round trips through the exports


def _apply_bindings(objects: list[dict[str, Any]], bindings: dict[str, Any]) -> list[dict[str, Any]]:
    """What the API server and the Volcano controller would do with the bindings."""
    out = copy.deepcopy(objects)
    pods = {(d["metadata"].get("namespace", "default"), d["metadata"]["name"]): d for d in out if d["kind"] == "Pod"}
    for b in bindings["items"]:
        if b["kind"] != "Binding":
            continue
        meta = b["metadata"]
        key = (meta["namespace"], meta["name"])
        pod = pods.get(key) or _volcano_pod(out, meta)
        pod["metadata"].setdefault("annotations", {}).update(meta["annotations"])
        pod["spec"]["nodeName"] = b["target"]["name"]
        pod["status"] = {"phase": "Running", "startTime": "2026-12-01T12:00:00Z"}
    return out


def _volcano_pod(objects: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    """The pod the Volcano controller creates for `<job>-<task>-<index>` from the task's template."""
    job_name = meta["annotations"]["placement.dev/job"].split("/", 1)[1]
    task = meta["annotations"]["placement.dev/task"]
    job = find(objects, "Job", job_name)
    template = copy.deepcopy(next(t for t in job["spec"]["tasks"] if t["name"] == task)["template"])
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                        "labels": {"volcano.sh/job-name": job_name, "volcano.sh/task-spec": task},
                        "annotations": {"volcano.sh/job-name": job_name, "volcano.sh/task-spec": task}},
           "spec": {**template["spec"], "priorityClassName": job["spec"].get("priorityClassName")}}
    objects.append(pod)
    job.setdefault("status", {})["state"] = {"phase": "Running"}
    return pod


def _by_task_node(pods: list[Any]) -> Counter[tuple[str, str]]:
    return Counter((p.task, p.node) for p in pods)


def test_volcano_bindings_round_trip_into_running_work_on_the_same_nodes() -> None:
    objects = _big_cluster(_without_old_train(docs("cluster", "volcano")))
    imported = reimport(objects)
    result = plan(imported.request)
    bindings, notes = export(imported.request, result, "bindings", imported.origins)
    assert notes == []
    names = sorted(b["metadata"]["name"] for b in bindings["items"])
    assert names == ["llm-pretrain-launcher-0", *[f"llm-pretrain-worker-{i}" for i in range(8)]]  # Volcano's naming
    assert all("placement.dev/pod-name" not in b["metadata"]["annotations"] for b in bindings["items"])
    again = reimport(_apply_bindings(objects, bindings))
    assert again.request.jobs == []  # nothing waits any more
    running = next(r for r in again.request.cluster.running if r.job == SEED)
    assert running.team == "research" and running.priority == 100
    assert _by_task_node(running.pods) == _by_task_node(_placed(result, SEED))
    assert sum(len(p.gpus) for p in running.pods) == 64


def test_kai_bindings_name_the_existing_pods_and_round_trip() -> None:
    objects = docs("cluster", "kai")
    imported = reimport(objects)
    result = plan(imported.request)
    assert verify(imported.request, result) == []
    bindings, _ = export(imported.request, result, "bindings", imported.origins)
    bound = {b["metadata"]["name"]: b for b in bindings["items"]}
    assert set(bound) == {"ddp-resnet-master-0", "ddp-resnet-worker-0", "ddp-resnet-worker-1", "ddp-resnet-worker-2",
                          "notebook-bo"}
    share = bound["notebook-bo"]["metadata"]["annotations"]["placement.dev/gpu-share"]
    assert bound["notebook-bo"]["target"]["name"] == "l40s-ts-0" and share.endswith("share=0.25")
    again = reimport(_apply_bindings(objects, bindings))
    assert again.request.jobs == []
    running = {r.job: r for r in again.request.cluster.running}
    assert _by_task_node(running["team-a/pg-ddp-resnet-7f2c"].pods) == _by_task_node(
        _placed(result, "team-a/pg-ddp-resnet-7f2c"))
    assert running["team-b/notebook-bo"].pods[0].gpu_share == 0.25


def test_kueue_admission_round_trip_for_the_nvl72_job() -> None:
    objects = docs("nvl72")
    imported = reimport(objects)
    result = plan(imported.request)
    assert verify(imported.request, result) == []
    document, _ = export(imported.request, result, "kueue", imported.origins)
    (workload,) = document["items"]
    admission = workload["status"]["admission"]
    assert admission["clusterQueue"] == "frontier"
    (podset,) = admission["podSetAssignments"]
    assert podset["name"] == "workers" and podset["count"] == 16
    assert podset["flavors"] == {"cpu": "gb200", "memory": "gb200", "nvidia.com/gpu": "gb200"}
    assert podset["resourceUsage"] == {"cpu": "1024", "memory": "8Ti", "nvidia.com/gpu": "64"}
    ta = podset["topologyAssignment"]
    assert ta["levels"] == ["kubernetes.io/hostname"]  # the Topology's lowest level is the hostname
    assert sum(d["count"] for d in ta["domains"]) == 16
    cliques = {n.name: n.topology.nvlink_domain for n in imported.request.cluster.nodes}
    assert len({cliques[d["values"][0]] for d in ta["domains"]}) == 1  # required: one NVLink clique
    # Kueue records the admission: the workload no longer waits
    find(objects, "Workload", workload["metadata"]["name"])["status"] = workload["status"]
    again = reimport(objects)
    assert again.request.jobs == []
    assert any("admitted, but none of its pods" in str(w) for w in again.warnings)


def test_kueue_topology_assignment_at_a_level_without_hostname() -> None:
    objects = docs("cluster", "kai")  # the KAI Topology has no hostname level
    imported = reimport(objects)
    result = plan(imported.request)
    document, _ = export(imported.request, result, "kueue", imported.origins)
    assert document["items"] == []  # KAI jobs are not Kueue workloads
    from placement.kube import generic_origins

    generic = generic_origins(imported.request)
    generic.topology_labels = imported.origins.topology_labels
    document, _ = export(imported.request, result, "kueue", generic)
    ddp = next(w for w in document["items"] if w["metadata"]["name"] == "pg-ddp-resnet-7f2c")
    for podset in ddp["status"]["admission"]["podSetAssignments"]:
        assert podset["topologyAssignment"]["levels"] == [BLOCK, "topology.k8s.aws/network-node-layer-3"]
        for d in podset["topologyAssignment"]["domains"]:
            assert d["values"] == ["nn-1a2b3c4d5e6f70812", "nn-7c6d5e4f3a2b10901"]


def test_patches_and_table_and_evictions() -> None:
    imported = reimport(_big_cluster(docs("cluster", "volcano")))
    result = plan(imported.request)
    patches, _ = export(imported.request, result, "patches", imported.origins)
    assert len(patches["items"]) == 9
    for item in patches["items"]:
        assert item["patch"]["spec"]["nodeSelector"]["kubernetes.io/hostname"] == item["nodeName"]
    bindings, _ = export(imported.request, result, "bindings", imported.origins)
    evictions = sorted(b["metadata"]["name"] for b in bindings["items"] if b["kind"] == "Eviction")
    assert evictions == ["old-train-worker-0", "old-train-worker-1"]
    alone, _ = export(imported.request, result, "bindings")  # the request carries the running pods' names too
    assert sorted(b["metadata"]["name"] for b in alone["items"] if b["kind"] == "Eviction") == evictions
    assert [b["metadata"]["name"] for b in alone["items"]] == [b["metadata"]["name"] for b in bindings["items"]]
    text, _ = export(imported.request, result, "table", imported.origins)
    assert "llm-pretrain-worker-0" in text and "preempt   vision/old-train" in text


def test_export_without_origins_derives_names_from_the_v1_job_names() -> None:
    imported = load("cluster", "kai")
    result = plan(imported.request)
    # a request written by hand (or by an older import): no pod names, no namespace
    jobs = [j.model_copy(update={"namespace": None, "tasks": [t.model_copy(update={"pod_names": None})
                                                               for t in j.tasks]}) for j in imported.request.jobs]
    bare = imported.request.model_copy(update={"jobs": jobs})
    bindings, notes = export(bare, result, "bindings")  # as `kube export request.json plan.json`
    job = "team-a/pg-ddp-resnet-7f2c"
    ddp = [b for b in bindings["items"] if b["metadata"]["annotations"]["placement.dev/job"] == job]
    assert {b["metadata"]["namespace"] for b in ddp} == {"team-a"}
    assert sorted(b["metadata"]["name"] for b in ddp) == ["pg-ddp-resnet-7f2c-master-0", "pg-ddp-resnet-7f2c-worker-0",
                                                          "pg-ddp-resnet-7f2c-worker-1", "pg-ddp-resnet-7f2c-worker-2"]
    assert all(b["metadata"]["annotations"]["placement.dev/pod-name"] == "derived" for b in ddp)
    gpus = sorted(b["metadata"]["annotations"]["placement.dev/gpus"] for b in ddp)
    assert all(len(g.split(",")) == 2 for g in gpus)
    assert notes == []


def test_mig_bindings_round_trip_onto_instances_of_the_same_profile() -> None:
    objects = docs("mig")
    imported = reimport(objects)
    result = plan(imported.request)
    assert verify(imported.request, result) == []
    placed = _placed(result, "serving/embed-large")
    assert len(placed) == 2 and all(a.mig is not None and a.mig.profile == "3g.40gb" for a in placed)
    bindings, _ = export(imported.request, result, "bindings", imported.origins)
    assert {b["metadata"]["name"] for b in bindings["items"]} == {"embed-large-0", "embed-large-1"}
    again = reimport(_apply_bindings(objects, bindings))
    assert again.request.jobs == []
    embed = next(r for r in again.request.cluster.running if r.job == "serving/embed-large")
    assert Counter((p.node, p.mig.profile) for p in embed.pods) == Counter((a.node, "3g.40gb") for a in placed)
