"""openb CSV rows → a v1 placement request.

The replay harness (:mod:`placement.bench.openb`) works on numpy arrays for speed; this module is
the other door: it turns the same node and pod rows into a ``placement/v1`` request that
:func:`placement.plan` solves and :func:`placement.verify` checks, so the real trace's shapes can
be fed to the whole pipeline (and the replay's choices compared with a plan's).

Mapping, row by row:

* node ``sn,cpu_milli,memory_mib,gpu,model`` → ``Node(name=sn, gpus=gpu, cpu=cpu_milli/1000,
  memory_gib=memory_mib/1024, gpu_model=<catalog stand-in>, labels={"openb/gpu-model": model}``,
  plus one ``openb/gpu-spec-<A>_<B>: "true"`` label per multi-model ``gpu_spec`` the pods use,
  set on nodes whose model is in that list);
* pod ``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec`` → a one-pod job named after the pod:
  ``cpu``/``memory_gib`` as for nodes; ``num_gpu`` whole GPUs when ``gpu_milli`` is 1000;
  ``gpu_share = gpu_milli/1000`` when ``gpu_milli < 1000`` (one GPU, shared); ``gpu_spec`` with one
  model → ``node_selector {"openb/gpu-model": model}``, with several → the spec's label above.

**GPU models.** The trace names seven models, three of them undisclosed codes (G1/G2/G3). The GPU
catalog (``placement/catalog``) is deliberately not extended with codes nobody can look up:
:data:`OPENB_GPU_MODELS` maps each openb code to a catalog model used as a *stand-in*, and the
real code stays in the ``openb/gpu-model`` label that every ``gpu_spec`` selector reads. The
stand-in only decides one thing, the GPU memory a shared pod gets by default (its share of the
GPU's memory), which scales with the share, so it never changes what fits.

**Sharing.** In v1 a GPU listed in a node's ``sharing`` takes only ``gpu_share`` pods, and a GPU
not listed takes only whole-GPU pods unless the plan shares it. The openb cluster, like HAMi and
KAI, shares any idle GPU on demand, so ``shared_gpus="on-demand"`` (default, and the way to feed
openb to :func:`placement.plan`) declares no shared GPU and turns on
``policy.allow_sharing_changes``: the plan decides which idle GPUs to share, paying
``weights.sharing_change`` for each. The older modes pre-declare shared GPUs, guessing which:
``"auto"`` shares, on each GPU node, ceil(gpus × s) GPUs (the highest indices; whole-GPU pods use
the lowest first), s being the share pods' part of the pods' GPU demand; ``"all"``, ``"none"``, or
an int per node. Shared GPUs, declared or shared by the plan (``policy.sharing_default``), use
time-slicing with enough replicas for the smallest share (1000 // min gpu_milli, at most 128), so
replicas never bind before the milli do.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from placement.bench.openb.trace import (
    GPU_MILLI,
    NODE_FILE,
    DataNotFound,
    Pod,
    resolve_data_dir,
    trace_file,
    trace_from_rows,
)
from placement.io import emit

#: openb GPU model code → catalog model used as its stand-in (see the module docstring).
#: Known models map to their catalog entry; P100 (not in the catalog) to the V100 with the same
#: 16 GB; the undisclosed codes G1/G2/G3 to one generic data-centre stand-in, the A100-SXM4-80GB.
#: The stand-in never decides feasibility: selectors read the real code from the node label.
OPENB_GPU_MODELS: dict[str, str] = {
    "A10": "A10-24GB",
    "T4": "T4-16GB",
    "V100M16": "V100-SXM2-16GB",
    "V100M32": "V100-SXM2-32GB",
    "P100": "V100-SXM2-16GB",  # stand-in: P100 16 GB is not in the catalog
    "G1": "A100-SXM4-80GB",  # stand-in: undisclosed code
    "G2": "A100-SXM4-80GB",  # stand-in: undisclosed code
    "G3": "A100-SXM4-80GB",  # stand-in: undisclosed code
}
#: Node label holding the openb model code (what ``gpu_spec`` selectors match).
MODEL_LABEL = "openb/gpu-model"
SPEC_LABEL_PREFIX = "openb/gpu-spec-"

SharedGpus = Literal["on-demand", "auto", "all", "none"] | int


def spec_label(spec: Sequence[str]) -> str:
    """Label key of a multi-model ``gpu_spec`` (``A10|T4`` → ``openb/gpu-spec-A10_T4``)."""
    return SPEC_LABEL_PREFIX + "_".join(sorted(set(spec)))


def _pods_of(rows: Sequence[dict[str, str]]) -> list[Pod]:
    """Pods in the order given (the loader of the replay sorts by name; a request keeps row order)."""
    by_name = {p.name: p for p in trace_from_rows("rows", rows).pods}
    return [by_name[r["name"]] for r in rows]


def _share_count(gpus: int, mode: SharedGpus, fraction: float) -> int:
    if mode == "on-demand" or gpus == 0:
        return 0  # the plan shares GPUs itself (policy.allow_sharing_changes)
    if mode == "all":
        return gpus
    if mode == "none":
        return 0
    if mode == "auto":
        return min(gpus, math.ceil(gpus * fraction)) if fraction > 0 else 0
    if isinstance(mode, int) and not isinstance(mode, bool) and mode >= 0:
        return min(gpus, mode)
    raise ValueError(f"shared_gpus must be 'on-demand', 'auto', 'all', 'none' or a non-negative int, not {mode!r}")


def stand_in(model: str) -> str:
    """The catalog model standing in for an openb model code; a clear error for an unknown code."""
    try:
        return OPENB_GPU_MODELS[model]
    except KeyError:
        known = ", ".join(sorted(OPENB_GPU_MODELS))
        raise ValueError(
            f"openb GPU model {model!r} has no stand-in (known: {known}); add it to OPENB_GPU_MODELS"
        ) from None


def request_from_rows(
    node_rows: Sequence[dict[str, str]],
    pod_rows: Sequence[dict[str, str]],
    *,
    shared_gpus: SharedGpus = "on-demand",
    policy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A v1 request dict (validate it with ``models.PlacementRequest``) from openb CSV rows.

    Every pod becomes a pending one-pod job; nodes start empty. ``policy`` replaces the default
    ``{"time_limit_s": 10, "workers": 2, "seed": 0}``; ``"on-demand"`` adds ``allow_sharing_changes``
    and ``sharing_default`` to it unless it sets them.
    """
    pods = _pods_of(pod_rows)
    share_milli = sum(p.demand for p in pods if p.is_share)
    gpu_milli = sum(p.demand for p in pods)
    fraction = share_milli / gpu_milli if gpu_milli else 0.0
    shares = [p.gpu_milli for p in pods if p.is_share]
    replicas = min(128, max(2, GPU_MILLI // min(shares))) if shares else 2
    multi_specs = sorted({p.spec for p in pods if p.num_gpu > 0 and len(p.spec) > 1})

    nodes: list[dict[str, Any]] = []
    for r in sorted(node_rows, key=lambda r: r["sn"]):
        gpus, model = int(r["gpu"]), r["model"]
        node: dict[str, Any] = {
            "name": r["sn"],
            "gpus": gpus,
            "cpu": int(r["cpu_milli"]) / 1000,
            "memory_gib": int(r["memory_mib"]) / 1024,
        }
        if gpus:
            node["gpu_model"] = stand_in(model)
            labels = {MODEL_LABEL: model}
            labels.update({spec_label(s): "true" for s in multi_specs if model in s})
            node["labels"] = labels
            k = _share_count(gpus, shared_gpus, fraction) if shares else 0
            if k:
                node["sharing"] = {
                    str(g): {"mode": "time-slicing", "replicas": replicas} for g in range(gpus - k, gpus)
                }
        nodes.append(node)

    jobs = [_job(p) for p in pods]
    out = dict(policy) if policy is not None else {"time_limit_s": 10, "workers": 2, "seed": 0}
    if shared_gpus == "on-demand":
        out.setdefault("allow_sharing_changes", True)
        out.setdefault("sharing_default", {"mode": "time-slicing", "replicas": replicas})
    return {"api_version": "placement/v1", "cluster": {"nodes": nodes}, "jobs": jobs, "policy": out}


def _job(p: Pod) -> dict[str, Any]:
    task: dict[str, Any] = {"name": "pod", "replicas": 1, "cpu": p.cpu / 1000, "memory_gib": p.mem / 1024}
    if p.is_share:
        task["gpu_share"] = p.gpu_milli / GPU_MILLI
    elif p.num_gpu:
        if p.gpu_milli != GPU_MILLI:
            raise ValueError(f"pod {p.name}: {p.num_gpu} GPUs of {p.gpu_milli} milli each cannot be expressed in v1")
        task["gpus"] = p.num_gpu
    if p.num_gpu and p.spec:
        task["node_selector"] = {MODEL_LABEL: p.spec[0]} if len(p.spec) == 1 else {spec_label(p.spec): "true"}
    return {"name": p.name, "tasks": [task]}


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def load_request(
    trace: str = "default",
    data: Path | str | None = None,
    *,
    pods: int | None = None,
    nodes: int | None = None,
    seed: int | None = None,
    shared_gpus: SharedGpus = "on-demand",
    policy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A request from the openb files: the first ``pods`` pods of ``trace`` on ``nodes`` GPU nodes.

    With ``seed`` the pods are the first ones of the protocol's seeded arrival order (shuffled
    name order, without the 130 % copies) and the nodes a seeded sample; without it, file order
    and the first nodes by name. Raises :class:`placement.bench.openb.DataNotFound` when the data
    is missing, naming where it looked.
    """
    folder = resolve_data_dir(data)
    node_rows = sorted(_read(folder / NODE_FILE), key=lambda r: r["sn"])
    pod_rows = _read(trace_file(trace, folder))
    if seed is not None:
        rng = np.random.default_rng(seed)
        pod_rows = sorted(pod_rows, key=lambda r: r["name"])
        pod_rows = [pod_rows[i] for i in rng.permutation(len(pod_rows))]
        if nodes is not None:
            keep = sorted(rng.choice(len(node_rows), size=min(nodes, len(node_rows)), replace=False).tolist())
            node_rows = [node_rows[i] for i in keep]
    elif nodes is not None:
        node_rows = node_rows[:nodes]
    if pods is not None:
        pod_rows = pod_rows[:pods]
    return request_from_rows(node_rows, pod_rows, shared_gpus=shared_gpus, policy=policy)


def main(argv: list[str] | None = None) -> int:
    """``python -m placement.bench.openb_requests --trace default --pods 200 --nodes 64 -o req.json``."""
    ap = argparse.ArgumentParser(description="openb CSVs → a placement/v1 request (JSON)")
    ap.add_argument("--trace", default="default")
    ap.add_argument("--data", default=None, help="openb folder (default: $PLACEMENT_DATA)")
    ap.add_argument("--pods", type=int, default=None)
    ap.add_argument("--nodes", type=int, default=None)
    ap.add_argument("--seed", type=int, default=None, help="protocol's shuffled order and a seeded node sample")
    ap.add_argument("--shared-gpus", default="on-demand",
                    help="on-demand (the plan shares idle GPUs) | auto | all | none | N per node")
    ap.add_argument("-o", "--output", default=None)
    args = ap.parse_args(argv)
    shared: SharedGpus = int(args.shared_gpus) if args.shared_gpus.isdigit() else args.shared_gpus
    try:
        req = load_request(args.trace, args.data, pods=args.pods, nodes=args.nodes, seed=args.seed, shared_gpus=shared)
    except (DataNotFound, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(req, indent=1)
    emit(text, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
