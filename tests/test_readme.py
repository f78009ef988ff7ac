"""The README's complete request plans as printed: a new user copies it first, so it must never drift."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from placement_models import PlacementRequest

from placement.api import plan
from placement.io import parse_document
from placement.verify import verify

README = Path(__file__).resolve().parents[1] / "README.md"


def _request_block() -> str:
    """The first YAML block of the README: the complete request right after the two commands."""
    blocks = re.findall(r"```yaml\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README has no YAML block"
    return blocks[0]


def test_the_readme_request_plans_as_printed_and_verifies() -> None:
    text = _request_block()
    data = parse_document(text.encode(), ".yaml")  # as `placement solve request.yaml` reads it
    request = PlacementRequest.model_validate(data)
    result = plan(request)
    assert verify(request, result) == []
    assert result.assignments and not result.pending
    placed = {a.job for a in result.assignments}
    assert {"llm-finetune", "chat-serve", "notebook"} <= placed
    assert any(a.mig is not None for a in result.assignments if a.job == "chat-serve")
    gang_nodes = {a.node for a in result.assignments if a.job == "llm-finetune"}
    racks = {n.topology.rack for n in request.cluster.nodes if n.name in gang_nodes}
    assert len(racks) == 1  # topology.required: rack


def test_the_readme_request_shows_what_a_first_request_gets_wrong() -> None:
    """What the first tries of a new user missed: declared pools, `job` and `pods[].task` on running work,
    teams as a list of {name, ...}, and a gang and a MIG job to copy."""
    data = yaml.safe_load(_request_block())
    pools = {p["name"] for p in data["cluster"]["pools"]}
    nodes = data["cluster"]["nodes"]
    assert nodes and all(n["pool"] in pools for n in nodes)
    assert all({"pool", "gpu_model", "gpus", "cpu", "memory_gib", "labels", "topology"} <= set(n) for n in nodes)
    assert any("mig" in n for n in nodes)
    running = data["cluster"]["running"]
    assert running and all("job" in r and all("task" in p for p in r["pods"]) for r in running)
    assert isinstance(data["teams"], list) and len(data["teams"]) == 2
    assert all("name" in t and "quota" in t for t in data["teams"])
    assert any(sum(t.get("replicas", 1) for t in j["tasks"]) > 1 and "topology" in j for j in data["jobs"])
    assert any(t.get("mig_profile") for j in data["jobs"] for t in j["tasks"])
    assert "#" in _request_block()  # commented
