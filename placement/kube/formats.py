"""The export formats' names, apart from the exporter so that `placement kube --help` lists them without
loading the wire format and the importer (pydantic, numpy: ~0.5 s of a help that should take 0.05 s)."""

from __future__ import annotations

#: format -> what it writes (the exporter's writers, in this order)
DESCRIPTIONS = {
    "bindings": "a List of v1 Binding objects, one per pod placed",
    "patches": "a nodeAffinity/nodeSelector patch per pod (for a scheduler that binds itself)",
    "kueue": "Kueue Workload admissions (podset assignments per flavor)",
    "table": "a plain-text table of jobs, pods, nodes and GPUs",
}

FORMATS = tuple(DESCRIPTIONS)
