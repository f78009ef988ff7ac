"""Request rewrites from metrics: observations onto jobs, and idle cards taken out (the reclaim what-if).

`annotate` writes, for each running and pending job the metrics saw (matched by name, as the
report attributes pods), `observed_gpu_memory_gib` = the peak memory any one of its GPUs held
(rounded up to 1 MiB: a right-sized instance must never be sized below what was seen) and
`observed_sm_util` = its mean GPU utilisation as a fraction. It edits the request as the caller
wrote it (plain data: field order, YAML or JSON, everything else left alone) and validates the
result before it is written.

`reclaimed` is the request with every idle card that is free in it marked out of service
(`unhealthy_gpus`): "remove these idle GPUs: what is still placed?". Cards a running job holds
stay: taking them would mean preempting that job, which is its owner's call.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

from placement_models import PlacementRequest

from placement.usage.report import Analysis

MIB = 1 / 1024.0


@dataclass
class Annotated:
    data: dict[str, Any]  # the request, as plain data, with observations written
    pending: list[str] = field(default_factory=list)  # pending jobs given observations
    running: list[str] = field(default_factory=list)
    unseen_right_size: list[str] = field(default_factory=list)  # opted in, but no metrics: no offer


def observations(analysis: Analysis) -> dict[str, tuple[float, float | None]]:
    """Job -> (peak GiB of one GPU, rounded up to 1 MiB; mean utilisation 0..1) for jobs with memory samples."""
    out = {}
    for job in analysis.jobs:
        peak = job.stats.mem_peak
        if peak is None:
            continue
        gib = math.ceil(peak / MIB - 1e-9) * MIB
        util = None if job.stats.mean_sm is None else round(min(1.0, max(0.0, job.stats.mean_sm / 100.0)), 4)
        out[job.name] = (round(gib, 6), util)
    return out


def annotate(data: dict[str, Any], analysis: Analysis) -> Annotated:
    """Write observations onto the request's jobs; raises pydantic's ValidationError if the result is invalid."""
    if not isinstance(data, dict):
        raise ValueError("the request file does not hold a mapping (a request object)")
    seen = observations(analysis)
    out = Annotated(copy.deepcopy(data))
    cluster = out.data.get("cluster") if isinstance(out.data.get("cluster"), dict) else {}
    for kind, jobs, key, names in (("running", cluster.get("running") or [], "job", out.running),
                                   ("pending", out.data.get("jobs") or [], "name", out.pending)):
        for job in jobs:
            if not isinstance(job, dict) or job.get(key) not in seen:
                if kind == "pending" and isinstance(job, dict) and job.get("right_size"):
                    out.unseen_right_size.append(str(job.get(key)))
                continue
            gib, util = seen[job[key]]
            job["observed_gpu_memory_gib"] = gib
            if util is None:
                job.pop("observed_sm_util", None)
            else:
                job["observed_sm_util"] = util
            names.append(job[key])
    PlacementRequest.model_validate(out.data)
    return out


def idle_free_cards(analysis: Analysis) -> list[tuple[str, int]]:
    """(node, GPU index) of whole cards idle most of the window and free in the request (not MIG instances)."""
    return sorted({(g.node, g.info.gpu) for g in analysis.idle
                   if g.free_in_request and g.info.gpu is not None and g.info.instance is None})


def reclaimed(request: PlacementRequest, cards: list[tuple[str, int]]) -> PlacementRequest:
    """The request with `cards` out of service (unhealthy_gpus), as the what-if's changed cluster."""
    data = request.model_dump(mode="json")
    out_of_service: dict[str, set[int]] = {}
    for node, gpu in cards:
        out_of_service.setdefault(node, set()).add(gpu)
    for node in data["cluster"]["nodes"]:
        extra = out_of_service.get(node["name"])
        if extra:
            node["unhealthy_gpus"] = sorted(set(node.get("unhealthy_gpus") or []) | extra)
    return PlacementRequest.model_validate(data)
