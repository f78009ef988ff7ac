"""Running a sweep: every point solved (or simulated over a trace) on the shared executor, then compared.

Why this exists: the grid says which scenarios; this module says what one point is worth, the same way
on every executor. A point is a plain task (the base request as JSON, the point's changes, the mode), run
by :func:`evaluate`, a module-level function, so a process pool or a Ray worker imports it by name; its
result is a plain dict, so it crosses any process boundary and lands in the JSON unchanged. In
deterministic mode (``policy.deterministic``) a point's result, ``seconds`` aside, is the same on every
executor; the tests compare them.

What each point reports (the JSON keys; the cost, node and objective measures are named and defined in
placement.measures, as what-if names them):

* solve mode: ``status``, ``objective`` with ``objective_comparable`` (the point scores plans as the base
  request does), ``gpus_placed``, ``gpus_unplaced`` (pending GPU demand the plan leaves waiting),
  ``jobs_placed``, ``jobs_pending``, ``utilisation_pct`` (GPUs busy after the plan, running work included,
  over all GPUs), ``spot_share_pct`` (spot GPUs over all GPUs), ``cluster_cost_per_hour`` (every node's
  GPUs at its pool's price, plus nodes the plan provisions), ``placed_cost_per_hour`` and
  ``placed_expected_cost`` (the plan's own cost report: the placed work), ``fairness``, ``nodes_added``
  (by any means: the point's changes and the plan's provisioning) and ``nodes_removed``;
* trace mode (placement.sweep.trace): ``wait_mean_h``, ``wait_p95_h``, ``jct_mean_h``, ``utilisation_pct``,
  ``done``, ``drained``, ``preemptions``, ``reclaims``, ``cluster_cost_per_hour`` and ``cluster_cost_total``
  (over the run), ``nodes_added``, ``nodes_removed``;
* always: ``seconds`` (wall, this point's last attempt), ``attempts``, ``error`` (None unless it failed).

The Pareto front: points no other point beats on both cluster cost per hour and the second measure (mean
wait in trace mode, unplaced GPU demand in solve mode) — the ones worth a decision; the rest cost more for
no gain.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from placement import measures
from placement.executor import Executor, Outcome, resolve, run_all
from placement.io import json_safe
from placement.sweep.grid import Point
from placement.sweep.trace import TraceOptions


@dataclass
class PointTask:
    """Everything one point needs, picklable: the base request (JSON data), the changes, the mode."""

    index: int
    name: str
    base: Any  #: the request's JSON data, or what Executor.share made of it (one copy for every point)
    changes: list[dict[str, Any]]
    trace: Any = None  #: TraceJob list in trace mode (or its shared copy)
    options: TraceOptions | None = None
    #: tests only: "always" raises in every attempt; "once:PATH" raises when PATH does not exist yet (and
    #: creates it), so the retry succeeds; "exit-once:PATH" ends the worker process instead of raising (a
    #: worker lost to the out-of-memory killer). Reachable through the Python API, not the command line.
    fault: str | None = None


def _inject(fault: str | None) -> None:
    if fault is None:
        return
    if fault == "always":
        raise RuntimeError("injected fault (always)")
    kind, _, where = fault.partition(":")
    if kind in ("once", "exit-once"):
        marker = Path(where)
        if not marker.exists():
            marker.write_text("failed once\n")
            if kind == "exit-once":
                os._exit(3)
            raise RuntimeError("injected fault (first attempt)")
        return
    raise ValueError(f"unknown fault {fault!r}")


def _solve_metrics(base: Any, request: Any, plan: Any) -> dict[str, Any]:
    """A solved point's measures; the ones what-if shows too are computed and named by placement.measures."""
    from placement import measures

    spot_pools = {p.name for p in request.cluster.pools if p.capacity_type == "spot"}
    total = sum(n.gpus for n in request.cluster.nodes)
    spot = sum(n.gpus for n in request.cluster.nodes if n.pool in spot_pools)
    templates = {p.name: p.provisionable.node for p in request.cluster.pools if p.provisionable is not None}
    for prov in plan.provisioned:
        gpus = templates[prov.pool].gpus if prov.pool in templates else 0
        total += gpus * len(prov.nodes)
        spot += gpus * len(prov.nodes) if prov.pool in spot_pools else 0
    running = sum(len(pod.gpus) for job in request.cluster.running for pod in job.pods)
    placed = sum(len(a.gpus) for a in plan.assignments)
    demand = sum(t.gpus * t.replicas for job in request.jobs for t in job.tasks)
    cost = plan.cost
    return {
        "status": plan.status, "objective": plan.objective.total,
        "objective_comparable": measures.scores_alike(base, request), "gpus_placed": placed,
        "gpus_unplaced": max(0, demand - placed), "jobs_placed": len({a.job for a in plan.assignments}),
        "jobs_pending": len(plan.pending), "gpus": total,
        "utilisation_pct": 100.0 * (running + placed) / total if total else 0.0,
        "spot_share_pct": 100.0 * spot / total if total else 0.0,
        "cluster_cost_per_hour": measures.cluster_cost_per_hour(request, plan),
        "placed_cost_per_hour": None if cost is None else cost.per_hour,
        "placed_expected_cost": None if cost is None else cost.total,
        "fairness": round(measures.fairness(request, plan), 4),
        "nodes_added": measures.nodes_added(base, request, plan),
        "nodes_removed": measures.nodes_removed(base, request),
    }


def evaluate(task: PointTask) -> dict[str, Any]:
    """One point: apply its changes to the base request, then solve it (or simulate the trace on it)."""
    from placement_models import PlacementRequest

    from placement.whatif import Scenario, apply

    t0 = time.perf_counter()
    _inject(task.fault)
    base = PlacementRequest.model_validate(resolve(task.base))
    request = apply(base, Scenario.model_validate({"name": task.name, "changes": task.changes}))
    trace = None if task.trace is None else resolve(task.trace)
    if trace is None:
        from placement.api import plan

        out = _solve_metrics(base, request, plan(request))
    else:
        from placement.sweep.trace import simulate_point, unsimulated

        kind = unsimulated(task.changes)
        if kind is not None:
            raise ValueError(f"trace mode cannot simulate a {kind} change (trace jobs name no team and take whole "
                             "GPUs); sweep it without --trace")

        out = {"status": "SIMULATED", **simulate_point(request, trace, task.options or TraceOptions())}
        pools = {p.name for p in request.cluster.pools if p.capacity_type == "spot"}
        spot = sum(n.gpus for n in request.cluster.nodes if n.pool in pools)
        out["spot_share_pct"] = 100.0 * spot / out["gpus"] if out["gpus"] else 0.0
        out["nodes_added"] = measures.nodes_added(base, request, None)
        out["nodes_removed"] = measures.nodes_removed(base, request)
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return json_safe(out)  # NaN (no big gang started) as None: equal to itself, and valid JSON


@dataclass
class SweepResult:
    mode: str  #: "solve" or "trace"
    axes: list[str]
    points: list[dict[str, Any]]  #: per point: index, name, values, changes, ok, error, attempts, metrics...
    executor: str
    wall_s: float
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def second_measure(self) -> str:
        return "wait_mean_h" if self.mode == "trace" else "gpus_unplaced"

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [p for p in self.points if not p["ok"]]

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "axes": self.axes, "executor": self.executor, "wall_s": round(self.wall_s, 3),
                "pareto_over": ["cluster_cost_per_hour", self.second_measure], **self.meta,
                "points": [json_safe(p) for p in self.points]}


def pareto(points: list[dict[str, Any]], x: str, y: str) -> set[int]:
    """Indexes of the points that no other point beats on both ``x`` and ``y`` (lower is better on both).

    Points without a number on either measure (failed, or a trace run where nothing started) are left out."""
    usable = [(p[x], p[y], p["index"]) for p in points
              if p.get("ok") and _finite(p.get(x)) and _finite(p.get(y))]
    front: set[int] = set()
    best_y = math.inf
    for _, group in _by_x(sorted(usable)):
        y_min = min(g[1] for g in group)
        if y_min < best_y:
            front.update(g[2] for g in group if g[1] == y_min)
            best_y = y_min
    return front


def _by_x(items: list[tuple[float, float, int]]) -> list[tuple[float, list[tuple[float, float, int]]]]:
    groups: list[tuple[float, list[tuple[float, float, int]]]] = []
    for item in items:
        if groups and groups[-1][0] == item[0]:
            groups[-1][1].append(item)
        else:
            groups.append((item[0], [item]))
    return groups


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def sweep(request: dict[str, Any], points: list[Point], executor: Executor, *, trace: list[Any] | None = None,
          options: TraceOptions | None = None, on_done: Callable[[dict[str, Any], int, int], None] | None = None,
          faults: dict[int, str] | None = None) -> SweepResult:
    """Run every point on ``executor`` (each retried once if it raises); results in the points' order.

    ``request`` is the base request as JSON data (already validated by the caller). ``faults`` maps a point
    index to an injected fault (tests only; see :class:`PointTask`)."""
    shared_base = executor.share(request)
    shared_trace = None if trace is None else executor.share(trace)
    tasks = [PointTask(i, p.name, shared_base, p.changes, shared_trace, options, (faults or {}).get(i))
             for i, p in enumerate(points)]
    rows: list[dict[str, Any] | None] = [None] * len(points)

    def row(outcome: Outcome) -> dict[str, Any]:
        point = points[outcome.index]
        base = {"index": outcome.index, "name": point.name, "values": point.values, "changes": point.changes,
                "ok": outcome.ok, "error": outcome.error, "attempts": outcome.attempts}
        if outcome.ok:
            return {**base, **outcome.value}
        return {**base, "status": "FAILED", "seconds": round(outcome.seconds, 3)}

    def done(outcome: Outcome, finished: int, total: int) -> None:
        rows[outcome.index] = row(outcome)
        if on_done is not None:
            on_done(rows[outcome.index], finished, total)

    t0 = time.perf_counter()
    run_all(evaluate, tasks, executor, retries=1, on_done=done)
    wall = time.perf_counter() - t0
    result = SweepResult("trace" if trace is not None else "solve", _axes(points),
                         [r for r in rows if r is not None], executor.label, wall)
    front = pareto(result.points, "cluster_cost_per_hour", result.second_measure)
    for p in result.points:
        p["pareto"] = p["index"] in front
    return result


def _axes(points: list[Point]) -> list[str]:
    names: list[str] = []
    for p in points:
        for k in p.values:
            if k not in names:
                names.append(k)
    return names


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def render_table(result: SweepResult) -> str:
    """One row per point: its axis values (or its name), then the measures; ``*`` marks the Pareto front. The
    objective column is there only when some point scores plans as the base request does ('-' where it does
    not); a legend under the table says what the cost and node columns count (placement.measures)."""
    label = measures.LABELS
    if result.mode == "trace":
        measured = [("wait h", "wait_mean_h"), ("p95 wait h", "wait_p95_h"), ("JCT h", "jct_mean_h"),
                    ("util %", "utilisation_pct"), ("spot %", "spot_share_pct"),
                    (label["cluster_cost_per_hour"], "cluster_cost_per_hour"), ("done", "done"),
                    ("reclaims", "reclaims")]
    else:
        measured = [("status", "status"), ("placed GPUs", "gpus_placed"), ("unplaced", "gpus_unplaced"),
                    ("util %", "utilisation_pct"), ("spot %", "spot_share_pct"),
                    (label["placed_cost_per_hour"], "placed_cost_per_hour"),
                    (label["cluster_cost_per_hour"], "cluster_cost_per_hour")]
    measured.append((label["nodes_added"], "nodes_added"))
    objective = result.mode == "solve" and any(p["ok"] and p.get("objective_comparable") for p in result.points)
    if objective:
        measured.append((label["objective"], "objective"))
    axis_cols = result.axes or []
    header = ["#", "front", *axis_cols, *([] if axis_cols and all(p["values"] for p in result.points) else ["name"]),
              *[m[0] for m in measured], "s"]
    body = []
    for p in result.points:
        line = [str(p["index"]), "*" if p.get("pareto") else ""]
        line += [_fmt(p["values"].get(a, "")) for a in axis_cols]
        if len(header) - len(measured) - 1 > len(line):
            line.append(p["name"])
        if p["ok"]:
            line += [_fmt(p.get(key)) if key != "objective" or p.get("objective_comparable") else "-"
                     for _, key in measured]
        else:
            line += ["FAILED"] + [""] * (len(measured) - 1)
        line.append(_fmt(p.get("seconds"), 1))
        body.append(line)
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in [header, *body]]
    for p in result.failed:
        lines.append(f"point {p['index']} ({p['name']}) failed after {p['attempts']} attempts: {p['error']}")
    return "\n".join(lines) + "\n" + measures.legend([key for _, key in measured])
