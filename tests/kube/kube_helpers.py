"""Shared by the kube tests: fixture paths, import options, and small object builders."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from placement.kube import ImportOptions, import_documents, import_paths
from placement.kube.importer import Imported

FIXTURES = Path(__file__).parent / "fixtures"
RACK = "topology.k8s.aws/network-node-layer-3"
BLOCK = "topology.k8s.aws/network-node-layer-2"
H100_NODES = ["ip-10-1-7-21.ec2.internal", "ip-10-1-7-58.ec2.internal", "ip-10-1-9-143.ec2.internal"]


def options(**policy: Any) -> ImportOptions:
    """The AWS network-node labels as rack and block; a short, reproducible solve."""
    return ImportOptions(rack_label=RACK, block_label=BLOCK,
                         policy={"time_limit_s": 5, "deterministic": True, "workers": 2, **policy})


def load(*parts: str, **policy: Any) -> Imported:
    return import_paths([FIXTURES / p for p in parts], options(**policy))


def docs(*parts: str) -> list[dict[str, Any]]:
    """Every object of the fixture folders/files, as dicts (Lists flattened), for tests that edit them."""
    out: list[dict[str, Any]] = []
    for part in parts:
        p = FIXTURES / part
        files = sorted(f for f in p.rglob("*") if f.suffix in (".json", ".yaml")) if p.is_dir() else [p]
        for f in files:
            loaded = [json.loads(f.read_text())] if f.suffix == ".json" else list(yaml.safe_load_all(f.read_text()))
            for d in loaded:
                if d is None:
                    continue
                out.extend(d["items"] if d.get("kind", "").endswith("List") else [d])
    return copy.deepcopy(out)


def reimport(objects: list[dict[str, Any]], **policy: Any) -> Imported:
    return import_documents(objects, options(**policy))


def h100_node(name: str, rack: str, block: str = "nn-1a2b3c4d5e6f70812") -> dict[str, Any]:
    """One more on-demand H100 node like the fixture's first, in the given rack and block."""
    node = next(d for d in docs("cluster") if d["metadata"]["name"] == H100_NODES[0])
    node["metadata"]["name"] = name
    node["metadata"]["labels"].update({"kubernetes.io/hostname": name, RACK: rack, BLOCK: block})
    return node


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in objects if d["kind"] == kind and d["metadata"]["name"] == name)
