"""Trace mode: each sweep point's cluster replays a trace through the cycle simulator (placement bench cycles).

Why this exists: a snapshot solve says what fits now; capacity questions ("how many spot nodes?") are
about waits over weeks. In trace mode the point's changed request is the cluster and the policy, the
trace is the work: the simulator (placement.bench.cycles.sim) admits arrivals and ends jobs, and every
cycle our optimizer (placement.bench.cycles.ours, a `placement.plan` call) decides which jobs start,
on the point's nodes with their pools, prices and policy.

What maps from the request, and what cannot:

* nodes: one simulated node per request node (on-demand and reserved first, spot last, as the
  simulator reclaims the last ones); every node must have the same GPU count (the simulator's nodes
  are identical); taints, unhealthy GPUs, running jobs and pending jobs of the request are not used
  (the trace brings the work);
* spot: nodes of `capacity_type: spot` pools are reclaimed at their pool's `reclaim_rate_per_h`
  (one rate for all spot pools), down for `--reclaim-down-h`; trace jobs may use spot (`spot_ok`) and
  checkpoint every `--checkpoint-h`;
* policy: the request's policy fields that differ from their defaults (`preset`, weights, `time_limit_s`,
  `workers`, `seed`, `deterministic`, ...) go into every cycle's plan, whose time makes `auto` the
  `completion` preset as in `placement bench cycles`;
* quota and MIG changes have nothing to act on (trace jobs name no team and take whole GPUs):
  the command line refuses such a grid (exit 2), and such a point fails with a message saying so.

Traces: `generated:JOBS[:SEED[:HOURS]]` (synthetic, no files: ITP gang sizes, Poisson arrivals over
HOURS, default 24, log-normal durations, median 30 min), a CSV file with the ITP columns
(`job_id,submission_time,duration,num_gpu`, seconds), or `itp:clusterNN[:A-B]` / `openb:VARIANT` with
`--data DIR` as in `placement bench cycles`.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from placement.bench.cycles.state import TraceJob

#: ITP gang sizes (placement.generate keeps the counts of all ten clusters' 69,351 jobs).
_GENERATED = re.compile(r"^generated:(\d+)(?::(\d+))?(?::(\d+(?:\.\d+)?))?$")
#: Longest generated job: a synthetic trace should drain in a test's time.
MAX_GENERATED_H = 12.0


class TraceError(ValueError):
    """A trace that cannot be read; the message names the --trace value."""


@dataclass(frozen=True)
class TraceOptions:
    """How the simulator runs every point (the same for all of them, so points differ only by their changes)."""

    cycle_s: float = 60.0
    estimates: str = "exact"
    checkpoint_h: float = 1.0
    reclaim_down_h: float = 1.0
    seed: int = 0


def generated(jobs: int, seed: int = 0, hours: float = 24.0) -> list[TraceJob]:
    """A synthetic trace: ITP gang sizes, Poisson arrivals over ``hours``, log-normal durations (median 30
    min, capped at 12 h), all from ``seed``: the same arguments give the same trace on every machine."""
    from placement.generate import ITP_NUM_GPU_COUNTS

    if jobs < 1 or hours <= 0:
        raise TraceError("generated: needs at least one job and a positive span of hours")
    rng = np.random.default_rng(seed)
    sizes = np.array(sorted(ITP_NUM_GPU_COUNTS))
    p = np.array([ITP_NUM_GPU_COUNTS[int(s)] for s in sizes], dtype=float)
    gpus = rng.choice(sizes, size=jobs, p=p / p.sum())
    submit = np.sort(rng.uniform(0.0, hours * 3600.0, size=jobs))
    duration = np.minimum(np.exp(rng.normal(math.log(1800.0), 1.2, size=jobs)), MAX_GENERATED_H * 3600.0)
    return [TraceJob(name=f"g{i:05d}", submit_s=float(round(submit[i] - submit[0], 3)),
                     duration_s=float(round(max(60.0, duration[i]), 3)), gpus=int(gpus[i])) for i in range(jobs)]


def read_csv(path: Path) -> list[TraceJob]:
    """A CSV with the ITP columns ``job_id,submission_time,duration,num_gpu`` (seconds), by submission, t0 = 0."""
    try:
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        jobs = [TraceJob(name=r["job_id"], submit_s=float(r["submission_time"]), duration_s=float(r["duration"]),
                         gpus=int(r["num_gpu"])) for r in rows]
    except KeyError as exc:
        raise TraceError(f"--trace {path}: missing column {exc}; the columns are job_id,submission_time,"
                         "duration,num_gpu") from None
    except ValueError as exc:
        raise TraceError(f"--trace {path}: {exc}") from None
    jobs = sorted((j for j in jobs if j.gpus > 0), key=lambda j: j.submit_s)
    if not jobs:
        raise TraceError(f"--trace {path}: no job asks for GPUs")
    t0 = jobs[0].submit_s
    for j in jobs:
        j.submit_s -= t0
    return jobs


def load_trace(spec: str, data: Path | None = None, limit: int | None = None) -> list[TraceJob]:
    """``--trace`` → jobs (estimates not yet set); TraceError naming the value when it cannot be read."""
    m = _GENERATED.match(spec.strip())
    if m is not None:
        jobs = generated(int(m.group(1)), int(m.group(2) or 0), float(m.group(3) or 24.0))
    elif spec.startswith(("itp:", "openb:")):
        from placement.bench.cycles.traces import DataNotFound, load

        try:
            jobs = load(spec, data)
        except (DataNotFound, ValueError) as exc:
            raise TraceError(f"--trace {spec}: {exc}") from None
    else:
        path = Path(spec)
        if not path.is_file():
            raise TraceError(f"--trace {spec}: not a file, nor generated:JOBS[:SEED[:HOURS]], itp:clusterNN[:A-B] "
                             "or openb:VARIANT")
        jobs = read_csv(path)
    if limit is not None:
        jobs = jobs[: max(1, limit)]
    return jobs


#: What-if change kinds the simulator has nothing to act on: trace jobs name no team and take whole GPUs.
NOT_SIMULATED = ("quota", "mig")


def unsimulated(changes: list[dict[str, Any]]) -> str | None:
    """The first change kind of ``changes`` that trace mode cannot simulate, or None."""
    return next((kind for change in changes for kind in change if kind in NOT_SIMULATED), None)


def sim_cluster(request: Any, options: TraceOptions) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]]]:
    """The simulator's configuration for a (changed) request, the node templates in simulator order, and its pools.

    Raises ValueError when the request's cluster is not one the simulator can model."""
    from placement.bench.cycles.sim import SimConfig

    pools = {p.name: p for p in request.cluster.pools}
    nodes = [n.model_dump(mode="json", exclude_none=True) for n in request.cluster.nodes]
    spot = [n for n in nodes if n.get("pool") in pools and pools[n["pool"]].capacity_type == "spot"]
    rest = [n for n in nodes if n not in spot]
    ordered = rest + spot
    sizes = sorted({n["gpus"] for n in ordered})
    if len(sizes) != 1:
        raise ValueError(f"trace mode needs nodes with one GPU count (the simulator's nodes are identical); "
                         f"this point has {', '.join(map(str, sizes))}")
    rates = sorted({pools[n["pool"]].reclaim_rate_per_h or 0.0 for n in spot})
    if len(rates) > 1:
        raise ValueError(f"trace mode needs one reclaim_rate_per_h for every spot pool; this point has "
                         f"{', '.join(f'{r:g}' for r in rates)}")
    cfg = SimConfig(nodes=len(ordered), gpus_per_node=sizes[0], cycle_s=options.cycle_s,
                    checkpoint_h=options.checkpoint_h, spot_nodes=len(spot), reclaim_per_h=rates[0] if rates else 0.0,
                    reclaim_down_h=options.reclaim_down_h, seed=options.seed)
    return cfg, ordered, [p.model_dump(mode="json", exclude_none=True, exclude={"provisionable"})
                          for p in request.cluster.pools]


def _policy_class() -> type:
    """Ours, on the point's nodes and pools: built on first use so that solve mode never imports the bench."""
    from placement.bench.cycles.ours import Ours

    class PointPolicy(Ours):
        """`placement.plan` every cycle, as the cycles bench runs it, but on the sweep point's own nodes
        (pool, GPU model, labels, topology) and pools (prices, spot), with the point's policy fields."""

        def __init__(self, templates: list[dict[str, Any]], pools: list[dict[str, Any]], policy: dict[str, Any],
                     checkpoint_h: float) -> None:
            fields = {k: v for k, v in policy.items()
                      if k not in ("now", "previous_plan", "time_limit_s", "seed", "workers", "preset")}
            super().__init__(time_limit_s=policy.get("time_limit_s", 1.0), seed=policy.get("seed", 0),
                             workers=policy.get("workers", 1), preset=policy.get("preset", "auto"), policy=fields)
            self.templates = templates
            self.pools = pools
            self.checkpoint_h = checkpoint_h

        def request(self, now_s: float, queue: list[TraceJob], running: list[Any], free: np.ndarray,
                    gpus_per_node: int) -> dict[str, Any]:
            out = super().request(now_s, queue, running, free, gpus_per_node)
            keep = ("pool", "gpu_model", "cpu", "memory_gib", "labels", "topology")
            for node, template in zip(out["cluster"]["nodes"], self.templates, strict=True):
                node.update({k: template[k] for k in keep if k in template})
            out["cluster"]["pools"] = self.pools
            for job in out["jobs"]:
                job["spot_ok"] = True
                if self.checkpoint_h > 0:
                    job["checkpoint_interval_h"] = self.checkpoint_h
            return out

    return PointPolicy


def simulate_point(request: Any, jobs: list[TraceJob], options: TraceOptions) -> dict[str, Any]:
    """Replay ``jobs`` on the point's cluster under our optimizer; the point's trace metrics."""
    from placement.bench.cycles.report import metrics
    from placement.bench.cycles.sim import simulate
    from placement.bench.cycles.traces import with_estimates

    cfg, templates, pools = sim_cluster(request, options)
    # Fields that differ from the request format's defaults: the rest stay as the cycles bench sets them.
    policy_fields = request.policy.model_dump(mode="json", exclude_defaults=True)
    policy = _policy_class()(templates, pools, policy_fields, options.checkpoint_h)
    fits = [j for j in jobs if j.gpus <= cfg.total_gpus]
    if not fits:
        raise ValueError(f"no job of the trace fits this point's {cfg.total_gpus} GPUs")
    result = simulate(with_estimates(fits, options.estimates, seed=options.seed), policy, cfg)
    m = metrics(result)
    price = {p["name"]: p.get("gpu_hour_price") or 0.0 for p in pools}
    per_hour = sum(t["gpus"] * price.get(t.get("pool"), 0.0) for t in templates)
    return {
        "jobs": len(jobs), "jobs_too_wide": len(jobs) - len(fits), "done": m["done"], "drained": m["drained"],
        "wait_mean_h": m["wait_mean_h"], "wait_p95_h": m["wait_p95_h"], "wait_big_mean_h": m["wait_big_mean_h"],
        "jct_mean_h": m["jct_mean_h"], "utilisation_pct": m["util_run_pct"], "run_h": m["run_h"],
        "preemptions": m["preemptions"], "lost_gpu_h": m["lost_gpu_h"], "reclaims": m["reclaims"],
        "nodes": cfg.nodes, "spot_nodes": cfg.spot_nodes, "gpus": cfg.total_gpus,
        "cluster_cost_per_hour": per_hour, "cluster_cost_total": per_hour * m["run_h"],
        "plan_calls": int(len(result.plan_ms)),
    }
