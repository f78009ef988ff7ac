"""Fair share under quotas on real team shapes: SenseTime Helios (Venus) vs greedy priority-then-FIFO.

Why: the fights on shared clusters are over quota and eviction. A FIFO queue gives the cluster to
whoever submits first and most; quota-only admission (Kueue without reclaim) stops at nominal
and never gives borrowed GPUs back. This benchmark measures how far each plan leaves every team
from its fair entitlement (placement/teams.py), on team quota shapes nobody here invented.

Data (real): ``helios/venus_cluster_gpu_number.csv``, GPUs assigned to each of 25 Venus teams per
day (Helios, SC'21, CC BY 4.0). On a snapshot day each team with GPUs becomes a team whose
nominal quota is that day's assignment (borrowing limit: as much again), and the cluster is that
day's total in 8-GPU nodes.

Workload (synthetic, seeded; the trace has no per-team queue): gang sizes are drawn from the
Microsoft ITP trace (``itp/*.csv``, real sizes, ≤ 32 GPUs) when present. Running jobs fill ~80 % of
the cluster with a skew: a few teams borrow far above nominal while others sit idle, the state
quota borrowing leaves behind. Every team then queues about its nominal in new jobs; borrowing
teams submit first (they flood the queue), priorities 0/10/50 in every team. GPU-only pods
(no CPU or memory limits), H100 nodes, no topology: those are not what is measured here.

Planners, all given the same request:
* ``fifo`` — greedy, priority then submission time, best fit, no quotas, no preemption;
* ``fifo+quota`` — the same, refusing a gang over its team's quota (Kueue-like admission, no reclaim);
* ``placement, no preemption`` — our plan with quotas, fair share and aging, evicting nothing;
* ``placement`` — the same with preemption (priority and reclaim) in the one model.

Metrics, per plan: GPUs placed and preempted, utilisation after the plan, and each team's
share of its entitlement (GPUs held / entitlement, teams with an entitlement): min, max, max/min
and Jain's index. Run: ``placement bench teams [--data DIR] [--days 0 60 120 180] [--time-limit 10]``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
from placement_models import PlacementRequest

from placement.api import plan as solve
from placement.baseline import greedy
from placement.holdings import held_after, problem_entitlements
from placement.problem import Problem, build
from placement.solution import Placement
from placement.teams import MILLI, jain

HELIOS_FILE = "venus_cluster_gpu_number.csv"
NOW = datetime(2020, 6, 1, 12, tzinfo=timezone.utc)
GPUS_PER_NODE = 8
RUNNING_FILL = 0.8
MAX_GANG = 32
#: Gang sizes when the ITP trace is absent (powers of two, skewed small like ITP).
FALLBACK_SIZES = (1, 1, 1, 1, 2, 2, 4, 4, 8, 8, 16, 32)


class DataNotFound(FileNotFoundError):
    pass


#: What the data folder must hold, and where each trace is published.
NEEDED = (f"helios/{HELIOS_FILE} from the SenseTime Helios trace (github.com/S-Lab-System-Group/HeliosData) "
          "and, optionally, itp/cluster*.csv from the Microsoft ITP trace (github.com/microsoft/elasticflow-traces, "
          "data/raw-traces.tar.gz) for real gang sizes")


def resolve_data_dir(data: Path | str | None = None) -> Path:
    """The data folder: ``data``, else ``$PLACEMENT_DATA`` (its helios folder is accepted too).

    The data is not shipped; without either, DataNotFound says which files are needed and where from.
    """
    if data:
        bases = [Path(data)]
    elif os.environ.get("PLACEMENT_DATA"):
        bases = [Path(os.environ["PLACEMENT_DATA"])]
    else:
        raise DataNotFound(f"helios data not found: no data folder given. Pass --data DIR or set PLACEMENT_DATA "
                           f"to a folder holding {NEEDED}.")
    tried = []
    for base in bases:
        for root in (base, base.parent):
            tried.append(root / "helios" / HELIOS_FILE)
            if (root / "helios" / HELIOS_FILE).is_file():
                return root
    raise DataNotFound(f"helios data not found (tried {', '.join(map(str, tried))}). Pass --data DIR or set "
                       f"PLACEMENT_DATA to a folder holding {NEEDED}.")


def load_helios(root: Path) -> tuple[list[str], list[str], np.ndarray]:
    """(dates, team names, GPUs[day, team]) from the Venus per-team GPU table."""
    with open(root / "helios" / HELIOS_FILE, newline="") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    teams = [h for h in header[1:] if h != "total"]
    cols = [header.index(t) for t in teams]
    dates = [r[0] for r in rows[1:]]
    gpus = np.array([[int(r[c]) for c in cols] for r in rows[1:]], dtype=np.int64)
    return dates, teams, gpus


def gang_sizes(root: Path) -> np.ndarray:
    sizes: list[int] = []
    for path in sorted((root / "itp").glob("cluster*.csv")):
        with open(path, newline="") as f:
            sizes += [int(r["num_gpu"]) for r in csv.DictReader(f) if 0 < int(r["num_gpu"]) <= MAX_GANG]
    return np.array(sizes or FALLBACK_SIZES, dtype=np.int64)


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _gang(size: int, prefix: str) -> list[dict[str, Any]]:
    """Tasks for a gang: whole 8-GPU pods, plus one pod with the remainder."""
    whole, rest = divmod(size, GPUS_PER_NODE)
    tasks = [{"name": "w8", "replicas": whole, "gpus": GPUS_PER_NODE}] if whole else []
    if rest:
        tasks.append({"name": f"w{rest}", "replicas": 1, "gpus": rest})
    return tasks


def scenario(names: list[str], nominal: np.ndarray, sizes: np.ndarray, seed: int) -> dict[str, Any]:
    """A seeded request: real nominal quotas, a skewed running state, and a queue of about nominal per team."""
    rng = np.random.default_rng(seed)
    keep = nominal > 0
    names = [n for n, k in zip(names, keep, strict=True) if k]
    nominal = nominal[keep]
    n_nodes = math.ceil(nominal.sum() / GPUS_PER_NODE)
    nodes = [{"name": f"n{i:03d}", "gpu_model": "H100-SXM5-80GB", "gpus": GPUS_PER_NODE, "cpu": 128,
              "memory_gib": 1024, "topology": {"rack": f"r{i // 16:02d}"}} for i in range(n_nodes)]
    # Skewed use: a third of the teams borrow (1.5-2.5x nominal), a third sit below (0-0.5x).
    use = rng.choice([0.25, 1.0, 2.0], size=len(names), p=[1 / 3, 1 / 3, 1 / 3]) * rng.uniform(0.6, 1.2, len(names))
    target = use * nominal
    target *= min(1.0, RUNNING_FILL * n_nodes * GPUS_PER_NODE / max(target.sum(), 1))
    free = [list(range(GPUS_PER_NODE)) for _ in range(n_nodes)]
    running: list[dict[str, Any]] = []
    priorities = np.array([0, 10, 50])
    for t in rng.permutation(len(names)):
        held = 0
        while held < target[t]:
            size = int(min(rng.choice(sizes), GPUS_PER_NODE))  # running work: pods up to a node
            node = next((i for i in rng.permutation(n_nodes) if len(free[i]) >= size), None)
            if node is None:
                break
            gpus, free[node] = free[node][:size], free[node][size:]
            started = NOW - timedelta(hours=float(rng.uniform(0.5, 24)))
            job: dict[str, Any] = {
                "job": f"run-{len(running):04d}", "team": names[t],
                "priority": int(rng.choice(priorities, p=[.6, .3, .1])),
                "preemptible": bool(rng.random() < 0.8), "started_at": _iso(started),
                "pods": [{"task": "w", "node": nodes[node]["name"], "gpus": gpus}]}
            if rng.random() < 0.5:
                job["checkpointed_at"] = _iso(NOW - timedelta(minutes=float(rng.uniform(5, 60))))
            running.append(job)
            held += size
    jobs: list[dict[str, Any]] = []
    for t in range(len(names)):
        queued = 0
        # Teams that borrow submit first: FIFO serves the team that floods the queue.
        early = use[t] >= 1.5
        while queued < nominal[t]:
            size = int(rng.choice(sizes))
            hours_ago = rng.uniform(6, 12) if early else rng.uniform(0, 6)
            jobs.append({"name": f"{names[t]}-{len(jobs):04d}", "team": names[t],
                         "priority": int(rng.choice(priorities, p=[.6, .3, .1])),
                         "submitted_at": _iso(NOW - timedelta(hours=float(hours_ago))), "tasks": _gang(size, "w")})
            queued += size
    # A team may at most double its assignment by borrowing (Kueue's borrowingLimit = nominal).
    teams = [{"name": n, "quota": {"gpus": {"nominal": int(q), "borrowing_limit": int(q)}}}
             for n, q in zip(names, nominal, strict=True)]
    return {"cluster": {"nodes": nodes, "running": running}, "jobs": jobs, "teams": teams,
            "policy": {"now": _iso(NOW), "preemption": True, "min_runtime_s": 600}}


def fifo_order(problem: Problem) -> list[int]:
    """Priority first, then submission time (the queue order of Kueue's StrictFIFO and Volcano's fifo)."""
    return sorted(range(len(problem.jobs)), key=lambda j: (-problem.jobs[j].priority,
                                                           problem.jobs[j].submitted_at or NOW, problem.jobs[j].name))


@dataclass
class Outcome:
    planner: str
    placed_gpus: int
    preemptions: int
    preempted_gpus: int
    utilisation: float
    shares: np.ndarray  # held / entitlement per entitled team
    seconds: float

    def row(self) -> dict[str, Any]:
        lo, hi = float(self.shares.min()), float(self.shares.max())
        return {"planner": self.planner, "placed_gpus": self.placed_gpus, "preemptions": self.preemptions,
                "preempted_gpus": self.preempted_gpus, "utilisation": round(self.utilisation, 4),
                "min_share": round(lo, 3), "max_share": round(hi, 3),
                "max_over_min": round(hi / lo, 2) if lo > 0 else math.inf,
                "jain": round(jain(self.shares) or 0.0, 4), "below_half": int((self.shares < 0.5).sum()),
                "seconds": round(self.seconds, 2)}


def _outcome(name: str, problem: Problem, placement: Placement, entitled: np.ndarray, seconds: float) -> Outcome:
    held = held_after(problem, placement) / MILLI  # GPU-equivalents (held_after counts milli-GPU)
    mask = entitled > 1e-9
    placed = int(placement.usage(problem)[:, 0].sum())
    preempted = sum(problem.running[r].gpus for r in placement.evicted)
    return Outcome(name, placed, len(placement.evicted), preempted, float(held.sum() / problem.capacity[:, 0].sum()),
                   held[mask] / entitled[mask], seconds)


def _from_plan(problem: Problem, plan: Any) -> Placement:
    """The plan's placement in problem space (pods per task per node; preempted running jobs)."""
    out = Placement()
    task_of = {(problem.jobs[problem.tasks[t].job].name, problem.tasks[t].name): t for t in range(len(problem.tasks))}
    for a in plan.assignments:
        out.add(task_of[a.job, a.task], problem.node_index[a.node])
    names = {r.spec.job: r.index for r in problem.running}
    out.evicted = {names[p.job] for p in plan.preemptions}
    return out


def run_day(day: int, dates: list[str], names: list[str], gpus: np.ndarray, sizes: np.ndarray, seed: int,
            time_limit: float) -> dict[str, Any]:
    data = scenario(names, gpus[day], sizes, seed + day)
    data["policy"]["time_limit_s"] = time_limit
    request = PlacementRequest.model_validate(data)
    problem = build(request)
    entitled = problem_entitlements(problem)
    unquoted = PlacementRequest.model_validate({**data, "teams": [{"name": t["name"]} for t in data["teams"]]})
    plain = build(unquoted)
    outcomes = []
    start = time.perf_counter()
    outcomes.append(_outcome("fifo", plain, greedy(plain, order=fifo_order(plain)), entitled,
                             time.perf_counter() - start))
    start = time.perf_counter()
    outcomes.append(_outcome("fifo+quota", problem, greedy(problem, order=fifo_order(problem)), entitled,
                             time.perf_counter() - start))
    start = time.perf_counter()
    kept = PlacementRequest.model_validate({**data, "policy": {**data["policy"], "preemption": False}})
    outcomes.append(_outcome("placement, no preemption", problem, _from_plan(problem, solve(kept)), entitled,
                             time.perf_counter() - start))
    start = time.perf_counter()
    plan = solve(request)
    outcomes.append(_outcome("placement", problem, _from_plan(problem, plan), entitled, time.perf_counter() - start))
    return {"day": dates[day], "teams": len(problem.teams.names), "gpus": int(problem.capacity[:, 0].sum()),
            "running_gpus": int(sum(r.gpus for r in problem.running)),
            "queued_gpus": int(sum(problem.job_gpus(j) for j in range(len(problem.jobs)))),
            "pending_jobs": len(problem.jobs), "solver": plan.solver.status, "variables": plan.solver.variables,
            "build_s": plan.solver.build_s, "rows": [o.row() for o in outcomes]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="placement bench teams", description=__doc__.split("\n")[0])
    ap.add_argument("--data", help="folder holding helios/ and optionally itp/ (default: $PLACEMENT_DATA)")
    ap.add_argument("--days", type=int, nargs="*", default=[0, 60, 120, 180], help="snapshot day indices")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    try:
        root = resolve_data_dir(args.data)
    except DataNotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    dates, names, gpus = load_helios(root)
    sizes = gang_sizes(root)
    results = []
    for day in args.days:
        if not 0 <= day < len(dates):
            print(f"error: day {day} out of range 0..{len(dates) - 1}", file=sys.stderr)
            return 2
        result = run_day(day, dates, names, gpus, sizes, args.seed, args.time_limit)
        results.append(result)
        print(f"\n{result['day']}: {result['teams']} teams, {result['gpus']} GPUs, {result['running_gpus']} running, "
              f"{result['queued_gpus']} queued in {result['pending_jobs']} jobs; solver {result['solver']}, "
              f"{result['variables']} variables, build {result['build_s']} s")
        print("| planner | GPUs placed | preemptions (GPUs) | utilisation | min share | max share | max/min | Jain "
              "| teams < ½ | s |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in result["rows"]:
            print(f"| {r['planner']} | {r['placed_gpus']} | {r['preemptions']} ({r['preempted_gpus']}) | "
                  f"{100 * r['utilisation']:.1f} % | {r['min_share']} | {r['max_share']} | {r['max_over_min']} | "
                  f"{r['jain']} | {r['below_half']} | {r['seconds']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
