"""What placing a pod costs, in the pools' currency: prices, spot reclaim risk, the peak reserve.

One place for the arithmetic that the compiler (objective terms), the greedy floor (reserve),
decode (the plan's cost report) and the benchmarks all need, so they cannot drift apart.

The cost model, per pod of job j on node n with g GPU-equivalents (a whole-GPU pod its GPUs, a MIG
pod its instance's memory slices over its GPU's, a pod on a shared GPU its share: a fraction of a
GPU pays that fraction of the pool's price, on spot and on-demand pools alike):

* ``compute = price(n) × g × T_j`` — GPU-hours at the node's pool price; ``T_j`` is the job's
  ``expected_runtime_h`` (one hour when unknown, so the figure reads as a rate);
* ``reclaim_risk = lost_h × price(n) × G_j`` on spot nodes, where ``lost_h`` is the expected
  extra running time that reclaims at rate ``λ(n)`` cause. A reclaim stops the *whole gang*
  (``G_j`` GPU-equivalents: its whole GPUs, or what its placed pods take if more, so a gang of MIG
  or shared pods counts its fractions; the model uses the fractions on its candidates), loses the
  work since the last checkpoint (every ``I_j`` hours; a job without checkpoints has
  ``I_j = T_j`` and starts over) and costs a restart of ``RESTART_H``. With
  exponential reclaims each interval takes ``e^{λR}(e^{λI} − 1)/λ`` hours on average, so
  ``lost_h = (T/I)·e^{λR}(e^{λI} − 1)/λ − T``. For ``λI ≪ 1`` this is the familiar
  ``λ × T × (I/2 + R)``; for long intervals it grows exponentially, as a 48-hour job without
  checkpoints on a node reclaimed every 20 hours really does (it needs ~200 hours, not 48 + 58).
  Each spot pod is charged the gang's lost work at its own node's rate: exact for one-node jobs;
  for a gang over k spot nodes the true rate is kλ and the exponential grows faster than k
  times, so big gangs with long intervals are under-charged.

Prices are per GPU-hour; CPU-only pods cost nothing. A pool without ``gpu_hour_price`` is
unpriced (0): the plan says so rather than invent a price.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from placement_models import CostSummary, Job, JobCost, Node, PlacementRequest, Pool

#: Hours of work redone after a reclaim beyond the lost checkpoint interval (reschedule, reload).
RESTART_H = 0.1
#: Runtime assumed for a job that gives no `expected_runtime_h`: its cost then reads per hour.
DEFAULT_RUNTIME_H = 1.0


@dataclass(frozen=True)
class NodePrices:
    """Per node (aligned with `Problem.nodes`): price per GPU-hour, spot flag, reclaims per hour."""

    price: np.ndarray
    spot: np.ndarray
    reclaim: np.ndarray
    pool: tuple[str | None, ...]


def node_prices(pools: Sequence[Pool], nodes: Sequence[Node]) -> NodePrices:
    by_name = {p.name: p for p in pools}
    found = [by_name.get(n.pool) if n.pool else None for n in nodes]
    price = np.array([(p.gpu_hour_price or 0.0) if p else 0.0 for p in found], dtype=float)
    spot = np.array([bool(p and p.capacity_type == "spot") for p in found], dtype=bool)
    reclaim = np.array([(p.reclaim_rate_per_h or 0.0) if p and p.capacity_type == "spot" else 0.0
                        for p in found], dtype=float)
    return NodePrices(price, spot, reclaim, tuple(n.pool for n in nodes))


def priced(request: PlacementRequest) -> bool:
    """Whether cost means anything here: some pool has a price."""
    return any(p.gpu_hour_price for p in request.cluster.pools)


def runtime_h(job: Job) -> float:
    return job.expected_runtime_h if job.expected_runtime_h is not None else DEFAULT_RUNTIME_H


def checkpoint_h(job: Job) -> float:
    """Hours of work between checkpoints: a job without checkpoints starts over after a reclaim."""
    t = runtime_h(job)
    return min(job.checkpoint_interval_h, t) if job.checkpoint_interval_h is not None else t


#: Expected lost hours that stand for "never finishes" (a century): exponential growth past it is not priced.
NEVER_H = 876_000.0


def lost_h(job: Job, reclaim: np.ndarray | float) -> np.ndarray | float:
    """Expected extra hours reclaims at `reclaim` per hour add to the job's run (0 where the rate is 0)."""
    rate = np.asarray(reclaim, dtype=float)
    t, i = runtime_h(job), checkpoint_h(job)
    safe = np.where(rate > 0, rate, 1.0)
    with np.errstate(over="ignore"):  # a long interval at a high rate never ends: capped below
        extra = (t / i) * np.exp(safe * RESTART_H) * np.expm1(safe * i) / safe - t
    out = np.minimum(np.where(rate > 0, extra, 0.0), NEVER_H)
    return float(out) if out.ndim == 0 else out


def job_gpus(job: Job) -> int:
    """Whole GPUs of the job's spec (MIG and shared pods: see `gang_gpus` of the callers)."""
    return sum(t.gpus * t.replicas for t in job.tasks)


def compute_cost(job: Job, pod_gpus: np.ndarray | float, price: np.ndarray | float,
                 speed: np.ndarray | float = 1.0) -> np.ndarray | float:
    """`pod_gpus` in GPU-equivalents: a MIG or shared pod pays its fraction of the GPU-hour price; `speed`: the
    job's on the GPU it runs at (placement.speeds), so a pod pays for the hours the work takes there."""
    return price * pod_gpus * runtime_h(job) / speed


def reclaim_risk(job: Job, price: np.ndarray | float, reclaim: np.ndarray | float,
                 gang_gpus: float | None = None) -> np.ndarray | float:
    """Priced expected lost work of the gang, per pod placed on a node with reclaim rate `reclaim`.

    CPU-only pods (launchers) stop the gang too when reclaimed, so they carry the same risk. `gang_gpus`:
    the gang's GPU-equivalents (default: its whole GPUs).
    """
    return lost_h(job, reclaim) * price * (job_gpus(job) if gang_gpus is None else gang_gpus)


def reserve_allowance(request: PlacementRequest, nodes: Sequence[Node], free_gpus: np.ndarray) -> dict[str, int]:
    """Pool -> GPUs new work may take on the pool's existing nodes during peak (free minus reserve).

    Off-peak the reserve is released (empty map). Nodes a pool adds by provisioning are not
    held back: the reserve protects capacity that exists now.
    """
    policy = request.policy
    if not request.in_peak or not policy.reserve:
        return {}
    real = len(request.cluster.nodes)
    out: dict[str, int] = {}
    for pool, reserve in policy.reserve.items():
        free = int(sum(int(free_gpus[i]) for i in range(real) if nodes[i].pool == pool))
        out[pool] = max(0, free - reserve)
    return out


def held_back(request: PlacementRequest, nodes: Sequence[Node], free: np.ndarray) -> np.ndarray:
    """`free` with each pool's reserve taken away, from its emptiest nodes first (kept whole for inference).

    The greedy floor plans on this, so its plan (the solver's hint and fallback) honours the
    reserve; the solver itself has the exact, pool-level constraint and may use any node.
    """
    allowance = reserve_allowance(request, nodes, free[:, 0])
    out = free.copy()
    real = len(request.cluster.nodes)
    for pool, allowed in allowance.items():
        idx = [i for i in range(real) if nodes[i].pool == pool]
        take = int(out[idx, 0].sum()) - allowed
        for i in sorted(idx, key=lambda i: (-int(out[i, 0]), i)):
            if take <= 0:
                break
            k = min(take, int(out[i, 0]))
            out[i, 0] -= k
            take -= k
    return out


def summary(request: PlacementRequest, nodes: Sequence[Node], pods: Sequence[tuple[Job, int, float]],
            opened: Sequence[int], speeds: Mapping[str, float] | None = None) -> CostSummary | None:
    """The plan's expected cost from (job, node index, pod GPU-equivalents) per placed pod and the added nodes;
    `speeds`: job name -> the speed its gang runs at (its slowest GPU's, placement.speeds; absent: 1.0), so a
    job is billed for the hours its work takes on the GPUs the plan gives it."""
    pace = speeds or {}
    prices = node_prices(request.cluster.pools, nodes)
    if not priced(request):
        return None
    per_job: dict[str, dict[str, float]] = {}
    jobs: dict[str, Job] = {}
    placed: dict[str, float] = {}
    for job, _, g in pods:
        placed[job.name] = placed.get(job.name, 0.0) + g
    for job, n, g in pods:
        row = per_job.setdefault(job.name, {"gpus": 0.0, "spot": 0.0, "hour": 0.0, "compute": 0.0, "risk": 0.0})
        jobs[job.name] = job
        row["gpus"] += g
        row["spot"] += g if prices.spot[n] else 0.0
        row["hour"] += float(prices.price[n]) * g
        row["compute"] += float(compute_cost(job, g, prices.price[n], pace.get(job.name, 1.0)))
        gang = max(float(job_gpus(job)), placed[job.name])
        row["risk"] += float(reclaim_risk(job, prices.price[n], prices.reclaim[n], gang))
    hours = {name: runtime_h(job) / pace.get(name, 1.0) for name, job in jobs.items()}
    rows = [JobCost(job=name, gpus=_r(r["gpus"]), spot_gpus=_r(r["spot"]), runtime_h=hours[name],
                    per_hour=_r(r["hour"]), compute=_r(r["compute"]), reclaim_risk=_r(r["risk"]),
                    total=_r(r["compute"] + r["risk"]))
            for name, r in per_job.items()]
    provisioning = sum(provisioning_charge(request, nodes[n]) for n in opened)
    compute = sum(r["compute"] for r in per_job.values())
    risk = sum(r["risk"] for r in per_job.values())
    return CostSummary(total=_r(compute + risk + provisioning), compute=_r(compute), reclaim_risk=_r(risk),
                       provisioning=_r(provisioning), per_hour=_r(sum(r["hour"] for r in per_job.values())),
                       gpu_hours=_r(sum(r["gpus"] * hours[k] for k, r in per_job.items())), jobs=rows)


def provisioning_charge(request: PlacementRequest, node: Node) -> float:
    """Minimum billing of one added node: its pool's price × its GPUs × `min_billing_h`."""
    pool = next((p for p in request.cluster.pools if p.name == node.pool), None)
    if pool is None or pool.provisionable is None:
        return 0.0
    return (pool.gpu_hour_price or 0.0) * node.gpus * pool.provisionable.min_billing_h


def _r(x: float) -> float:
    return round(float(x), 6)
