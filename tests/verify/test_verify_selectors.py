"""Selectors and taints: the labels a selector matches, and which taint effects block a pod."""

from __future__ import annotations

from placement_models import Node
from verify_cases import H100, build, node_spec

from placement.verify import effective_labels, verify


def test_prefer_no_schedule_never_blocks() -> None:
    req, plan = build()
    n003 = next(n for n in req.cluster.nodes if n.name == "n003")
    assert n003.taints[0].effect == "PreferNoSchedule"
    assert not any(v.startswith("taints:") for v in verify(req, plan))


def test_effective_labels_derive_then_let_explicit_labels_win() -> None:
    node = Node.model_validate(node_spec("n9", gpu_model="nvidia-h100-80gb-hbm3", labels={"placement/pool": "custom"}))
    assert effective_labels(node) == {
        "kubernetes.io/hostname": "n9",
        "placement/pool": "custom",
        "placement/gpu-model": H100,  # canonical name, from an alias in any case
    }
    bare = Node.model_validate({"name": "cpu1", "cpu": 8, "memory_gib": 32})
    assert effective_labels(bare) == {"kubernetes.io/hostname": "cpu1"}
