"""The instance library's table, MIPLIB-like: one row per stored instance, from the files themselves.

Why this exists: a solver researcher picks instances by status (solved or not), size and structure, and
the README's table must say the same as the ``.best.json`` files beside the instances. So the table is
rendered from them (``python -m placement.bench.library --table``) rather than typed, and the status and
structure tags are derived here, one rule each:

* status: ``optimal`` when the recorded bound equals the best objective (a relative gap of at most
  :data:`OPTIMAL_GAP`); ``best known`` when a bound is within :data:`CLOSE_GAP` of it; ``open`` otherwise,
  or with no bound at all. Every bound the planner reports is valid for the whole request (CP-SAT's on an
  untrimmed model, else the class relaxation of ``placement.search.bound``); each record says which in
  ``bound_kind``.
* tags: what in the request shapes the model (gangs, MIG, topology, quotas, preemption, prices, ...).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from placement.bench.table import Column, markdown, row_cells
from placement.io import load_document

#: Relative gap at or below which a record counts as solved to optimality (the search's own tolerance).
OPTIMAL_GAP = 1e-6
#: Relative gap at or below which the best known plan counts as nearly closed.
CLOSE_GAP = 0.01


def gap(best: dict[str, Any]) -> float | None:
    """(bound − objective) / max(1, |bound|), maximising; None without a bound."""
    bound, objective = best.get("bound"), best.get("objective")
    if bound is None or objective is None:
        return None
    return max(0.0, bound - objective) / max(1.0, abs(bound))


def status(best: dict[str, Any]) -> str:
    """optimal, best known or open (module docstring)."""
    g = gap(best)
    if g is None:
        return "open"
    if g <= OPTIMAL_GAP:
        return "optimal"
    return "best known" if g <= CLOSE_GAP else "open"


def tags(request: dict[str, Any]) -> list[str]:
    """The structures of a request that shape its model, in a fixed order."""
    cluster, jobs, policy = request["cluster"], request.get("jobs", []), request.get("policy") or {}
    tasks = [t for j in jobs for t in j["tasks"]]
    pools = cluster.get("pools", [])
    preset = policy.get("preset", "auto")
    carries_time = policy.get("now") is not None and any(j.get("submitted_at") for j in jobs)
    checks = {
        "gangs": any(sum(t.get("replicas", 1) for t in j["tasks"] if t.get("gpus", 0)) > 1 for j in jobs),
        "elastic": any(j.get("min_available") for j in jobs),
        "classes": len({j.get("priority", 0) for j in jobs}) > 1,
        "mig": any(n.get("mig") for n in cluster["nodes"]) or any(t.get("mig_profile") for t in tasks),
        "topology": any(j.get("topology") for j in jobs),
        "quotas": any(t.get("quota") for t in request.get("teams", [])),
        "cohorts": bool(request.get("cohorts")),
        "preemption": bool(policy.get("preemption")) or any(t.get("preemption") for t in request.get("teams", [])),
        "spot": any(p.get("capacity_type") == "spot" for p in pools),
        "prices": any(p.get("gpu_hour_price") is not None for p in pools),
        "provisioning": any(p.get("provisionable") for p in pools),
        "off-peak": bool(policy.get("off_peak") or policy.get("peak")),
        "reserve": bool(policy.get("reserve")),
        "deferral": any(j.get("deferrable") for j in jobs),
        "turnaround": preset in ("completion", "las", "bounded-wait") or (preset == "auto" and carries_time),
        "reservation": preset == "bounded-wait" or policy.get("reserve_after_h") is not None
        or policy.get("max_wait_h") is not None,
    }
    return [name for name, on in checks.items() if on]


def rows(folder: Path, names: list[str]) -> list[dict[str, Any]]:
    """One row per instance of ``names`` (FAMILY-SIZE, in the table's order) stored in ``folder`` with its record
    (``NAME.json`` or ``NAME.json.gz`` beside ``NAME.best.json``)."""
    out = []
    for name in names:
        path = next((p for p in (folder / f"{name}.json", folder / f"{name}.json.gz") if p.exists()), None)
        best_path = folder / f"{name}.best.json"
        if path is None or not best_path.exists():
            continue
        request = load_document(path)
        best = json.loads(best_path.read_text())
        g = gap(best)
        running = request["cluster"].get("running", [])
        out.append({
            "instance": name,
            "nodes": len(request["cluster"]["nodes"]),
            "jobs": len(request.get("jobs", [])),
            "running": len(running),
            "variables": best.get("variables"),
            "constraints": best.get("constraints"),
            "status": status(best),
            "objective": best.get("objective"),
            "bound": best.get("bound"),
            "gap": None if g is None else 100.0 * g,
            "found_by": _who(best),
            "bound_by": best.get("bound_by") or (_who(best) if best.get("bound") is not None else None),
            "tags": ", ".join(tags(request) + (["restricted"] if best.get("restricted") else [])),
        })
    return out


def _who(best: dict[str, Any]) -> str:
    if best.get("found_by"):
        return str(best["found_by"])
    return f"placement.plan ({best.get('workers', '?')} workers, {best.get('time_s', '?')} s)"


#: The table's columns.
COLUMNS: list[Column] = [
    ("instance", "instance", "s"), ("nodes", "nodes", "d"), ("jobs", "jobs", "d"), ("running", "running", "d"),
    ("variables", "variables", "d"), ("constraints", "constraints", "d"), ("status", "status", "s"),
    ("objective", "objective", ".3f"), ("bound", "bound", ".3f"), ("gap %", "gap", ".3f"),
    ("found by", "found_by", "s"), ("bound by", "bound_by", "s"), ("tags", "tags", "s"),
]


def markdown_table(folder: Path, names: list[str]) -> str:
    """The README's table of the instances ``names`` stored in ``folder``."""
    body = [row_cells(row, COLUMNS) for row in rows(folder, names)]
    return "\n".join(markdown([h for h, _, _ in COLUMNS], body, {"instance", "status", "found by", "bound by", "tags"}))
