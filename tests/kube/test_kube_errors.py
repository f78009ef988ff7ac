"""Unknown or malformed objects: clear errors that name the object (kind, namespace/name, file) and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_helpers import FIXTURES, H100_NODES, docs, find, reimport

from placement.kube import ImportOptions, KubeError, import_documents, import_paths


def _error(objects: list[dict[str, Any]], **options: Any) -> str:
    with pytest.raises(KubeError) as err:
        import_documents(objects, ImportOptions(**options))
    return str(err.value)


def _node(**status: Any) -> dict[str, Any]:
    node = find(docs("cluster"), "Node", H100_NODES[0])
    node["metadata"]["name"] = "n1"
    node["status"]["allocatable"].update(status)
    return node


def test_unknown_kind_names_the_object_unless_ignored() -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "web", "namespace": "shop"}}
    message = _error([_node(), deployment])
    assert "DaemonSet shop/web" in message and "unknown kind apps/v1 DaemonSet" in message
    imported = import_documents([_node(), deployment], ImportOptions(ignore_unknown=True))
    assert any("DaemonSet shop/web" in str(w) and "ignored" in str(w) for w in imported.warnings)


def test_unsupported_api_version_says_which_versions_are_read() -> None:
    job = {"apiVersion": "batch.volcano.sh/v2", "kind": "Job", "metadata": {"name": "j", "namespace": "x"}}
    message = _error([_node(), job])
    assert "Job (batch.volcano.sh) x/j" in message and "batch.volcano.sh/v1alpha1" in message


@pytest.mark.parametrize(("doc", "words"), [
    ({"kind": "Node", "metadata": {"name": "n9"}}, ["Node n9", "apiVersion", "required"]),
    ({"apiVersion": "v1", "kind": "Node", "metadata": {}}, ["Node (unnamed)", "metadata.name", "required"]),
    (["not", "an", "object"], ["not a Kubernetes object", "list"]),
])
def test_documents_without_identity_are_rejected(doc: Any, words: list[str]) -> None:
    message = _error([doc])
    assert all(w in message for w in words), message


def test_bad_quantity_names_node_and_field() -> None:
    message = _error([_node(cpu="lots")])
    assert "Node n1" in message and "status.allocatable.cpu" in message and "'lots' is not a Kubernetes quantity" \
        in message


def test_unknown_gpu_product_names_the_node() -> None:
    node = _node()
    node["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-H300-SXM-999GB"
    message = _error([node])
    assert "Node n1" in message and "nvidia.com/gpu.product" in message
    assert "unknown GPU model 'NVIDIA-H300-SXM-999GB' on node 'n1'" in message


def test_gpus_without_a_product_label_ask_for_gfd() -> None:
    node = _node()
    del node["metadata"]["labels"]["nvidia.com/gpu.product"]
    assert "has no 'nvidia.com/gpu.product' label" in _error([node])


def test_invalid_single_strategy_mig_is_named() -> None:
    node = _node()
    node["metadata"]["labels"].update({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-INVALID",
                                       "nvidia.com/mig.strategy": "single"})
    assert "invalid MIG 'single' configuration" in _error([node])


def test_mig_profile_the_model_does_not_have() -> None:
    message = _error([_node(**{"nvidia.com/gpu": "7", "nvidia.com/mig-1g.5gb": "7"})])
    assert "Node n1" in message and "H100-SXM5-80GB has no MIG profile '1g.5gb'" in message


def test_mig_counts_that_cannot_fit_the_mig_gpus() -> None:
    # 8 GPUs, 7 whole: one MIG GPU cannot hold two 7g.80gb instances
    message = _error([_node(**{"nvidia.com/gpu": "7", "nvidia.com/mig-7g.80gb": "2"})])
    assert "do not fit the 1 MIG-enabled GPU(s)" in message


def test_bad_taint_effect() -> None:
    node = _node()
    node["spec"]["taints"] = [{"key": "dedicated", "value": "x", "effect": "NoPlease"}]
    message = _error([node])
    assert "Node n1" in message and "spec.taints[0].effect" in message and "'NoPlease' is not a taint effect" \
        in message


def test_seed_job_errors_name_the_file_and_point_into_the_task(tmp_path: Path) -> None:
    job = find(docs("volcano"), "Job", "llm-pretrain")
    job["spec"]["tasks"][0]["replicas"] = "eight"
    (tmp_path / "jobs.yaml").write_text(yaml.safe_dump_all([{"apiVersion": "v1", "kind": "Namespace",
                                                               "metadata": {"name": "research"}}, job]))
    with pytest.raises(KubeError) as err:
        import_paths([FIXTURES / "cluster", tmp_path / "jobs.yaml"], ImportOptions(ignore_unknown=True))
    assert str(err.value) == ("Job (batch.volcano.sh) research/llm-pretrain (jobs.yaml #2): spec.tasks[0].replicas: "
                              'expected an integer, got str ("eight")')


def test_min_available_above_the_pods() -> None:
    objects = docs("cluster", "volcano")
    find(objects, "Job", "llm-pretrain")["spec"]["minAvailable"] = 12
    assert "spec.minAvailable: 12 exceeds the 9 pods of the job" in _error(objects)


def test_bad_memory_in_a_template_names_the_container_field() -> None:
    objects = docs("cluster", "volcano")
    job = find(objects, "Job", "llm-pretrain")
    job["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] = "64 GiB"
    message = _error(objects)
    assert "spec.tasks[1].template.spec.containers[0].resources.requests.memory" in message


def test_pods_mixing_gpu_kinds_cannot_be_expressed() -> None:
    objects = docs("mig")
    pod = find(objects, "Pod", "embed-large-0")
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 1
    message = _error(objects)
    assert "Pod serving/embed-large-0" in message and "nvidia.com/gpu and a MIG instance" in message


def test_extended_resource_request_must_equal_its_limit() -> None:
    objects = docs("cluster", "volcano")
    pod = find(objects, "Pod", "old-train-worker-0")
    pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    message = _error(objects)
    assert "Pod vision/old-train-worker-0" in message and "differs from the limit 2" in message


def test_workload_whose_local_queue_is_missing() -> None:
    objects = [d for d in docs("cluster", "kueue") if d["metadata"]["name"] != "research-lq"]
    message = _error(objects)
    assert "Workload research/job-finetune-7b-3c9d1" in message and "LocalQueue research/research-lq" in message


def test_topology_request_at_an_unknown_level() -> None:
    objects = docs("cluster", "kueue")
    find(objects, "Workload", "job-finetune-7b-3c9d1")["spec"]["podSets"][0]["topologyRequest"]["required"] = \
        "example.com/pod"
    message = _error(objects)
    assert "spec.podSets[0].topologyRequest.required" in message
    assert "'example.com/pod' is not a topology level" in message


def test_cluster_queue_naming_a_missing_flavor() -> None:
    objects = [d for d in docs("cluster", "kueue") if d["metadata"]["name"] != "h100-spot"]
    message = _error(objects)
    assert "ClusterQueue serving-cq" in message and "ResourceFlavor 'h100-spot' is not in the input" in message


def test_running_pod_that_cannot_fit_its_node() -> None:
    objects = docs("cluster", "volcano")
    for name in ("old-train-worker-0", "old-train-worker-1"):
        pod = find(objects, "Pod", name)
        for key in ("requests", "limits"):
            pod["spec"]["containers"][0]["resources"][key]["nvidia.com/gpu"] = "6"
    message = _error(objects)
    assert "Pod vision/old-train-worker-1" in message and "has no 6 free whole GPUs left" in message


def test_every_broken_object_is_reported_in_one_run() -> None:
    bad_node = _node(memory="a lot")
    other = _node()
    other["metadata"]["name"] = "n2"
    other["spec"]["taints"] = [{"key": "", "effect": "NoSchedule"}]
    lines = _error([bad_node, other]).splitlines()
    assert len(lines) == 2
    assert "Node n1" in lines[0] and "Node n2" in lines[1]


def test_files_that_are_not_yaml_and_missing_paths(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: [unclosed\n")
    with pytest.raises(KubeError, match="broken.yaml: not valid YAML/JSON"):
        import_paths([broken])
    with pytest.raises(KubeError, match="no such file or folder"):
        import_paths([tmp_path / "missing"])


def test_price_for_a_pool_that_does_not_exist() -> None:
    message = _error([_node()], prices={"h200": 3.0})
    assert "prices" in message and "h200" in message and "no such pool" in message


def test_no_nodes_is_an_error() -> None:
    assert "no Node objects" in _error([find(docs("volcano"), "Queue", "research")])


def test_reimport_helper_accepts_the_fixtures() -> None:
    assert reimport(docs("cluster", "volcano")).request.jobs[0].name == "research/llm-pretrain"
