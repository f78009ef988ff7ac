"""openb CSV rows → v1 requests: the mapping on tiny CSVs, validated by models and verified by plan()."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from placement_models import PlacementRequest
from pydantic import ValidationError

from placement.api import plan
from placement.bench.openb.trace import NODE_FILE, DataNotFound
from placement.bench.openb_requests import (
    MODEL_LABEL,
    OPENB_GPU_MODELS,
    load_request,
    request_from_rows,
    spec_label,
)
from placement.verify import verify

NODES = [
    {"sn": "n-t4", "cpu_milli": "32000", "memory_mib": "131072", "gpu": "2", "model": "T4"},
    {"sn": "n-g2", "cpu_milli": "96000", "memory_mib": "786432", "gpu": "8", "model": "G2"},
    {"sn": "n-cpu", "cpu_milli": "64000", "memory_mib": "262144", "gpu": "0", "model": ""},
]


def _pod(name: str, cpu: int, num: int, milli: int, spec: str = "", mem: int = 4096) -> dict[str, str]:
    return {
        "name": name,
        "cpu_milli": str(cpu),
        "memory_mib": str(mem),
        "num_gpu": str(num),
        "gpu_milli": str(milli),
        "gpu_spec": spec,
    }


PODS = [
    _pod("p-whole", 8000, 1, 1000),
    _pod("p-share", 4000, 1, 250, "T4"),
    _pod("p-share2", 4000, 1, 500),
    _pod("p-multi", 16000, 4, 1000, "G2"),
    _pod("p-either", 2000, 1, 1000, "T4|V100M16|T4"),
    _pod("p-cpu", 1500, 0, 0, mem=1536),
]


def test_rows_map_to_a_valid_request() -> None:
    req = request_from_rows(NODES, PODS, shared_gpus="auto")
    model = PlacementRequest.model_validate(req)
    nodes = {n.name: n for n in model.cluster.nodes}
    assert nodes["n-t4"].gpu_model == OPENB_GPU_MODELS["T4"] and nodes["n-t4"].cpu == 32
    assert nodes["n-g2"].labels[MODEL_LABEL] == "G2" and nodes["n-g2"].memory_gib == 768
    assert nodes["n-cpu"].gpus == 0 and nodes["n-cpu"].gpu_model is None
    # Share pods ask for 750 of 6750 GPU milli (1/9): ceil(gpus/9) shared GPUs, the highest indices.
    assert sorted(nodes["n-g2"].sharing) == [7] and sorted(nodes["n-t4"].sharing) == [1]
    assert nodes["n-g2"].sharing[7].mode == "time-slicing" and nodes["n-g2"].sharing[7].replicas == 4
    # A multi-model spec becomes one label, set on the nodes of those models only.
    key = spec_label(("T4", "V100M16"))
    assert nodes["n-t4"].labels[key] == "true" and key not in nodes["n-g2"].labels
    tasks = {j.name: j.tasks[0] for j in model.jobs}
    assert tasks["p-whole"].gpus == 1 and tasks["p-whole"].cpu == 8
    assert tasks["p-share"].gpu_share == 0.25 and tasks["p-share"].node_selector == {MODEL_LABEL: "T4"}
    assert tasks["p-multi"].gpus == 4 and tasks["p-multi"].node_selector == {MODEL_LABEL: "G2"}
    assert tasks["p-either"].node_selector == {key: "true"}
    assert tasks["p-cpu"].gpus == 0 and tasks["p-cpu"].memory_gib == 1.5 and not tasks["p-cpu"].node_selector


@pytest.mark.parametrize("mode", ["on-demand", "auto"])
def test_plan_places_every_pod_and_verifies(mode: str) -> None:
    req = request_from_rows(NODES, PODS, shared_gpus=mode, policy={"time_limit_s": 5, "workers": 1, "seed": 0})
    result = plan(req)
    assert verify(PlacementRequest.model_validate(req), result) == []
    where = {a.job: a for a in result.assignments}
    assert set(where) == {p["name"] for p in PODS}
    assert where["p-share"].node == "n-t4" and where["p-multi"].node == "n-g2"
    assert where["p-either"].node == "n-t4"
    shared = {(c.node, c.gpu) for c in result.sharing_changes}
    assert {(a.node, a.gpus[0]) for a in result.assignments if a.gpu_share is not None} <= shared | {
        ("n-t4", 1), ("n-g2", 7)}  # what the plan shares on demand, or what "auto" declares
    assert bool(shared) == (mode == "on-demand")


def test_on_demand_declares_no_shared_gpu_and_lets_the_plan_share() -> None:
    req = request_from_rows(NODES, PODS, policy={"time_limit_s": 5, "workers": 1})
    model = PlacementRequest.model_validate(req)
    assert all(not n.sharing for n in model.cluster.nodes)
    assert model.policy.allow_sharing_changes and model.policy.time_limit_s == 5
    # replicas as for declared GPUs: enough for the smallest share (1000 // 250)
    assert (model.policy.sharing_default.mode, model.policy.sharing_default.replicas) == ("time-slicing", 4)
    kept = request_from_rows(NODES, PODS, policy={"allow_sharing_changes": False})
    assert kept["policy"]["allow_sharing_changes"] is False  # a caller's own setting wins


@pytest.mark.parametrize("mode,expected", [("all", [0, 1]), ("none", []), (1, [1]), ("on-demand", [])])
def test_shared_gpus_modes(mode: object, expected: list[int]) -> None:
    req = request_from_rows(NODES[:1], [_pod("s", 1000, 1, 300), _pod("w", 1000, 1, 1000)], shared_gpus=mode)
    node = PlacementRequest.model_validate(req).cluster.nodes[0]
    assert sorted(node.sharing) == expected


def test_unknown_model_and_bad_mode_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="no stand-in"):
        request_from_rows([{**NODES[0], "model": "Z9"}], PODS[:1])
    with pytest.raises(ValueError, match="shared_gpus"):
        request_from_rows(NODES, PODS, shared_gpus="some")  # type: ignore[arg-type]


def test_a_share_pod_on_a_node_without_shared_gpus_stays_pending() -> None:
    req = request_from_rows(
        NODES[:1], [_pod("s", 1000, 1, 300)], shared_gpus="none", policy={"time_limit_s": 2, "workers": 1}
    )
    result = plan(req)
    assert not result.assignments and [p.job for p in result.pending] == ["s"]
    assert "could be shared if policy.allow_sharing_changes were on" in result.pending[0].reason


def test_on_demand_shares_an_idle_gpu_for_the_share_pods() -> None:
    """The T4 node's two GPUs: 0.3 + 0.6 share one (the highest index, shared by the plan), w takes the other."""
    pods = [_pod("s1", 1000, 1, 300), _pod("s2", 1000, 1, 600), _pod("w", 1000, 1, 1000)]
    req = request_from_rows(NODES[:1], pods, policy={"time_limit_s": 2, "workers": 1, "deterministic": True})
    result = plan(req)
    assert verify(PlacementRequest.model_validate(req), result) == []
    where = {a.job: a.gpus for a in result.assignments}
    assert where == {"s1": [1], "s2": [1], "w": [0]}
    assert [(c.node, c.gpu, c.mode, c.replicas) for c in result.sharing_changes] == [("n-t4", 1, "time-slicing", 3)]


def test_load_request_from_files_and_missing_data(tmp_path: Path) -> None:
    folder = tmp_path / "openb"
    folder.mkdir()
    with (folder / NODE_FILE).open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(NODES[0]))
        w.writeheader()
        w.writerows(NODES[:2])
    with (folder / "openb_pod_list_tiny.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(PODS[0]))
        w.writeheader()
        w.writerows(PODS)
    req = load_request("tiny", tmp_path, pods=3, nodes=1)
    assert [n["name"] for n in req["cluster"]["nodes"]] == ["n-g2"] and len(req["jobs"]) == 3
    seeded = load_request("tiny", folder, pods=4, seed=42)
    assert len(seeded["jobs"]) == 4 and seeded == load_request("tiny", folder, pods=4, seed=42)
    PlacementRequest.model_validate(seeded)
    with pytest.raises(DataNotFound, match="PLACEMENT_DATA"):
        load_request("tiny", tmp_path / "nowhere")


def test_invalid_rows_are_rejected_by_the_models() -> None:
    req = request_from_rows(NODES, PODS)
    req["jobs"][0]["tasks"][0]["gpu_share"] = 0.5  # a share on a whole-GPU task: the models say no
    with pytest.raises(ValidationError):
        PlacementRequest.model_validate(req)
