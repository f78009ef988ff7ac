"""Synthetic, seeded v1 requests that look like a busy whole-GPU training cluster.

Benchmarks and demos need requests of any size that resemble production: 8-GPU HGX nodes in
racks, a cluster already half full of running work that leaves many nodes partly used
(fragmentation is what makes placement hard), and a queue whose gang sizes follow a real trace
rather than a guess. Everything is drawn from one ``numpy.random.Generator`` seeded by the
caller and timestamps are relative to a fixed reference time, so a seed names one request
forever (benchmarks can be rerun and compared across commits).

Only whole-GPU fields of the v1 wire format are emitted: no MIG, sharing, prices, spot pools,
quotas or job topology requirements, which ``models.PlacementRequest`` rejects for now.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np

#: Empirical gang sizes (GPUs per job -> number of jobs) over all 10 clusters of the Microsoft
#: ITP training traces (2021; 69,351 jobs), as released with ElasticFlow (ASPLOS 2023) under the
#: MIT licence: the ``num_gpu`` column of ``cluster01.csv`` .. ``cluster10.csv``, counted once
#: when this module was written. Embedded because the trace files do not ship with the package.
ITP_NUM_GPU_COUNTS: dict[int, int] = {1: 57682, 2: 1483, 4: 2371, 8: 7009, 16: 381, 32: 354, 64: 71}

_ITP_SIZES = np.array(sorted(ITP_NUM_GPU_COUNTS), dtype=np.int64)
_ITP_P = np.array([ITP_NUM_GPU_COUNTS[int(g)] for g in _ITP_SIZES], dtype=float)
_ITP_P /= _ITP_P.sum()

#: Mean GPUs per pending job under the ITP mix (about 2.14), after rounding >8 up to whole nodes.
MEAN_JOB_GPUS: float = float(np.where(_ITP_SIZES > 8, -(-_ITP_SIZES // 8) * 8, _ITP_SIZES) @ _ITP_P)

#: Fixed "now": timestamps are offsets from it, so output never depends on the wall clock.
REFERENCE_TIME = datetime(2026, 12, 2, 0, 0, 0, tzinfo=timezone.utc)

#: Largest request generated: 8x the biggest cluster benchmarked (12,500 nodes), and about a gigabyte of
#: dicts; beyond it a typo (an extra zero or three) would only exhaust the machine's memory.
MAX_NODES = 100_000
MAX_JOBS = 1_000_000

GPUS_PER_NODE = 8
RACK_SIZE = 16
RACKS_PER_BLOCK = 4
A100_SHARE = 0.25

_H100 = {"pool": "h100", "gpu_model": "H100-SXM5-80GB", "cpu": 192, "memory_gib": 2048}
_A100 = {"pool": "a100", "gpu_model": "A100-SXM4-80GB", "cpu": 128, "memory_gib": 1024}

_TEAMS = ["research", "vision", "nlp", "speech", "serving"]
_TEAM_P = [0.35, 0.25, 0.2, 0.1, 0.1]
_PRIORITIES = [0, 10, 50, 100]
_PRIORITY_P = [0.55, 0.25, 0.15, 0.05]

# Per-GPU CPU and memory requests. The largest (16 CPU, 128 GiB per GPU) times 8 GPUs equals an
# A100 node exactly, so every pod fits an empty node of either model: infeasibility then comes
# from the running work and the queue, never from an impossible request.
_CPU_PER_GPU = [8, 12, 16]
_CPU_PER_GPU_P = [0.3, 0.5, 0.2]
_MEM_PER_GPU = [64, 96, 128]
_MEM_PER_GPU_P = [0.3, 0.3, 0.4]

_INFERENCE_TAINT = {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}
_INFERENCE_TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoSchedule"}

# Running work is not the ITP queue mix: what is still running after a day is weighted towards
# bigger, longer jobs, and a mix of sizes is what fragments nodes. (GPUs per pod, pods)
_RUNNING_KINDS: list[tuple[int, int]] = [(1, 1), (2, 1), (4, 1), (8, 1), (4, 2), (8, 2), (8, 4)]
_RUNNING_P = [0.35, 0.2, 0.2, 0.1, 0.08, 0.05, 0.02]


def generate(nodes: int, jobs: int, seed: int, *, running_share: float = 0.5) -> dict[str, Any]:
    """Return a v1 request dict with ``nodes`` 8-GPU nodes and ``jobs`` pending jobs.

    ``running_share`` is the fraction of healthy GPUs already held by running pods (0 gives an
    empty cluster). Pending gang sizes follow ``ITP_NUM_GPU_COUNTS``, so expected pending demand
    is about ``MEAN_JOB_GPUS * jobs`` (~2.14 GPUs a job) against about
    ``8 * nodes * (1 - running_share)`` free GPUs. At the default share that means
    ``jobs ≈ 1.9 * nodes`` just saturates the free GPUs (1.5 × nodes gives ~0.8×), and
    ``jobs ≈ 5.6-7.5 * nodes`` gives 3-4× demand over free GPUs. The ITP mix is heavy-tailed
    (83% single-GPU jobs, 1% of 16-64), so small queues vary a lot between seeds.
    """
    if nodes < 1:
        raise ValueError(f"nodes must be at least 1, not {nodes}")
    if nodes > MAX_NODES:
        raise ValueError(f"nodes must be at most {MAX_NODES:,}, not {nodes:,}")
    if jobs < 0:
        raise ValueError(f"jobs must be non-negative, not {jobs}")
    if jobs > MAX_JOBS:
        raise ValueError(f"jobs must be at most {MAX_JOBS:,}, not {jobs:,}")
    if not 0.0 <= running_share <= 1.0:
        raise ValueError("running_share must be within [0, 1]")
    rng = np.random.default_rng(seed)
    node_list = _nodes(rng, nodes)
    running = _running(rng, node_list, running_share)
    has_a100 = any(n["pool"] == "a100" for n in node_list)
    pending = [_job(rng, i, has_a100) for i in range(jobs)]
    pools = [
        {"name": p, "capacity_type": "on-demand"} for p in ("h100", "a100") if any(n["pool"] == p for n in node_list)
    ]
    return {
        "api_version": "placement/v1",
        "cluster": {"pools": pools, "nodes": node_list, "running": running},
        "jobs": pending,
        "policy": {"time_limit_s": 10, "workers": 2, "seed": 0},
    }


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _nodes(rng: np.random.Generator, count: int) -> list[dict[str, Any]]:
    """HGX nodes; A100s are the last quarter so they fill whole racks, as hardware generations do."""
    n_a100 = round(count * A100_SHARE) if count >= 4 else 0
    n_racks = math.ceil(count / RACK_SIZE)
    rack_w = max(2, len(str(n_racks - 1)))
    block_w = max(2, len(str((n_racks - 1) // RACKS_PER_BLOCK)))
    node_w = max(3, len(str(count - 1)))
    n_h100 = count - n_a100
    # A few inference-dedicated H100s, a few nodes with one failed GPU (~1%).
    n_taint = max(1, round(0.03 * n_h100)) if n_h100 >= 8 else 0
    tainted = set(rng.choice(n_h100, size=n_taint, replace=False).tolist()) if n_taint else set()
    n_bad = max(1, round(0.01 * count)) if count >= 8 else 0
    bad = set(rng.choice(count, size=n_bad, replace=False).tolist()) if n_bad else set()
    out: list[dict[str, Any]] = []
    for i in range(count):
        shape = _A100 if i >= n_h100 else _H100
        rack = i // RACK_SIZE
        node: dict[str, Any] = {
            "name": f"n{i:0{node_w}d}",
            "pool": shape["pool"],
            "gpu_model": shape["gpu_model"],
            "gpus": GPUS_PER_NODE,
            "cpu": shape["cpu"],
            "memory_gib": shape["memory_gib"],
            "topology": {
                "nvlink": "nvswitch",
                "rack": f"r{rack:0{rack_w}d}",
                "block": f"b{rack // RACKS_PER_BLOCK:0{block_w}d}",
            },
        }
        if i in tainted:
            node["labels"] = {"dedicated": "inference"}
            node["taints"] = [dict(_INFERENCE_TAINT)]
        if i in bad:
            node["unhealthy_gpus"] = [int(rng.integers(GPUS_PER_NODE))]
        out.append(node)
    return out


def _pick(rng: np.random.Generator, values: list[Any], p: list[float]) -> Any:
    """One draw from a small categorical table, as a plain Python value (JSON-serialisable)."""
    return values[int(rng.choice(len(values), p=p))]


def _running(rng: np.random.Generator, node_list: list[dict[str, Any]], share: float) -> list[dict[str, Any]]:
    """Running jobs holding about ``share`` of healthy GPUs, spread so that many nodes are partial.

    Jobs are drawn until the target is reached, then placed biggest first (as an operator's
    cluster got there: multi-node gangs need whole free nodes). Single-node pods go to a random
    fitting node, preferring already partly used ones 60% of the time: pure spreading would leave
    no whole node free, pure packing no partial node, and real schedulers sit in between.
    """
    n = len(node_list)
    free_idx: list[list[int]] = [
        [g for g in range(GPUS_PER_NODE) if g not in node.get("unhealthy_gpus", [])] for node in node_list
    ]
    healthy = np.array([len(f) for f in free_idx], dtype=np.int64)
    free = healthy.copy()
    rack = np.arange(n) // RACK_SIZE
    target = int(round(share * int(healthy.sum())))

    drawn: list[tuple[int, int]] = []
    total = 0
    while total < target:
        per_pod, pods = _RUNNING_KINDS[int(rng.choice(len(_RUNNING_KINDS), p=_RUNNING_P))]
        if per_pod * pods > target - total:
            # Land on the target with one pod of 1/2/4/8 GPUs rather than overshoot it.
            per_pod, pods = 1 << (min(target - total, GPUS_PER_NODE).bit_length() - 1), 1
        drawn.append((per_pod, pods))
        total += per_pod * pods
    multi = sorted((k for k in range(len(drawn)) if drawn[k][1] > 1), key=lambda k: -drawn[k][0] * drawn[k][1])
    order = multi + [k for k in range(len(drawn)) if drawn[k][1] == 1]

    by_draw: dict[int, tuple[int, list[int]]] = {}
    for k in order:
        per_pod, pods = drawn[k]
        chosen = _place_running(rng, free, healthy, rack, per_pod, pods)
        if chosen is None:
            continue
        for j in chosen:
            free[j] -= per_pod
        by_draw[k] = (per_pod, chosen)
    placed = [by_draw[k] for k in sorted(by_draw)]

    out: list[dict[str, Any]] = []
    for num, (per_pod, chosen) in enumerate(placed):
        team = _pick(rng, _TEAMS, _TEAM_P)
        priority = _pick(rng, _PRIORITIES, _PRIORITY_P)
        cpu_g = _pick(rng, _CPU_PER_GPU, _CPU_PER_GPU_P)
        mem_g = _pick(rng, _MEM_PER_GPU, _MEM_PER_GPU_P)
        pods_out = []
        for j in chosen:
            gpus, free_idx[j] = free_idx[j][:per_pod], free_idx[j][per_pod:]
            pods_out.append(
                {
                    "task": "worker",
                    "node": node_list[j]["name"],
                    "gpus": gpus,
                    "cpu": cpu_g * per_pod,
                    "memory_gib": mem_g * per_pod,
                }
            )
        started = REFERENCE_TIME - timedelta(seconds=int(rng.integers(600, 3 * 86400)))
        job: dict[str, Any] = {"job": f"run-{num:05d}", "team": team, "priority": priority}
        if priority == 0 and rng.random() < 0.5:
            job["preemptible"] = True
        job["pods"] = pods_out
        job["started_at"] = _iso(started)
        out.append(job)
    return out


def _place_running(
    rng: np.random.Generator, free: np.ndarray, healthy: np.ndarray, rack: np.ndarray, per_pod: int, pods: int
) -> list[int] | None:
    """Node indices for one running job's pods (distinct nodes), or None when it does not fit."""
    if pods == 1:
        fits = np.flatnonzero(free >= per_pod)
        if fits.size == 0:
            return None
        partial = fits[free[fits] < healthy[fits]]
        pool = partial if partial.size and rng.random() < 0.2 else fits
        return [int(rng.choice(pool))]
    fits = np.flatnonzero(free >= per_pod)
    if fits.size < pods:
        return None
    # Gangs land within one rack when some rack has room, as a topology-aware scheduler would.
    racks, counts = np.unique(rack[fits], return_counts=True)
    roomy = racks[counts >= pods]
    if roomy.size:
        fits = fits[rack[fits] == int(rng.choice(roomy))]
    return sorted(int(j) for j in rng.choice(fits, size=pods, replace=False))


def _job(rng: np.random.Generator, i: int, has_a100: bool) -> dict[str, Any]:
    """One pending job with an ITP gang size; >8 GPUs become whole-node workers (+ maybe a launcher)."""
    g = int(rng.choice(_ITP_SIZES, p=_ITP_P))
    team = _pick(rng, _TEAMS, _TEAM_P)
    priority = _pick(rng, _PRIORITIES, _PRIORITY_P)
    cpu_g = _pick(rng, _CPU_PER_GPU, _CPU_PER_GPU_P)
    mem_g = _pick(rng, _MEM_PER_GPU, _MEM_PER_GPU_P)
    if g <= GPUS_PER_NODE:
        replicas, per_pod = 1, g
    else:
        replicas, per_pod = math.ceil(g / GPUS_PER_NODE), GPUS_PER_NODE
    task: dict[str, Any] = {
        "name": "worker" if replicas > 1 else "main",
        "replicas": replicas,
        "gpus": per_pod,
        "cpu": cpu_g * per_pod,
        "memory_gib": mem_g * per_pod,
    }
    u = rng.random()
    if has_a100 and u < 0.1:
        task["node_selector"] = {"placement/pool": "a100"}
    elif u < 0.2:
        task["node_selector"] = {"placement/pool": "h100"}
    # Serving teams mostly own the inference nodes; a few others may borrow them too.
    if rng.random() < (0.4 if team == "serving" else 0.02):
        task["tolerations"] = [dict(_INFERENCE_TOLERATION)]
    tasks = [task]
    if replicas > 1 and rng.random() < 0.5:
        tasks.append({"name": "launcher", "replicas": 1, "gpus": 0, "cpu": 8, "memory_gib": 64})
    submitted = REFERENCE_TIME - timedelta(seconds=int(rng.integers(0, 86400)))
    job: dict[str, Any] = {
        "name": f"job-{i:05d}",
        "team": team,
        "priority": priority,
        "submitted_at": _iso(submitted),
    }
    if priority == 0 and rng.random() < 0.3:
        job["preemptible"] = True
    # Elastic jobs (e.g. 4 of 8 workers) can start with half their workers plus the launcher.
    if replicas > 1 and rng.random() < 0.2:
        job["min_available"] = max(1, replicas // 2) + (len(tasks) - 1)
    job["tasks"] = tasks
    return job
