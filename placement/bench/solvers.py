"""`placement bench solvers [DIR|FILE ...]`: who solves the placement model to which gap, CP-SAT or a MIP solver.

For each instance the model is exported as ``placement export REQUEST -o model.mps`` writes it and solved
by HiGHS and SCIP with the same time limit and threads; CP-SAT runs as the product runs it,
``placement.plan`` with ``workers`` = threads (wall clock, not deterministic), so its column is what a
user gets, not a bare solve. Every number is in the plan's units (GPU-equivalents: the MPS objective
divided by the compiler's SCALE, maximised). A MIP solution is read back into a plan through the
product's decode and checked by ``placement.verify`` (`placement.bench.mip`): a solver that reports a
good objective with a plan the verifier refuses has not solved the problem.

Which model each row solves: ``export`` builds the model ``plan()`` compiles in its first round (the same
phases: screen, reservations, greedy, candidate trimming by the time left), with the bench's time limit
and threads in the request's policy, so the ``cpsat-export``, ``highs`` and ``scip`` rows share one model
and compare number for number. The ``cpsat`` row is the whole call: it may solve further rounds
(trimmed again around its best plan) and report the whole problem's bound, so on a trimmed model it can
find more than the export's optimum.

Rows are written to ``--json`` as each instance ends, so a long run stopped midway keeps what it measured.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from placement.api import parse, plan
from placement.bench.instances import SUFFIXES
from placement.bench.mip import PACKAGES, export_mps, read_back, solve_cpsat, solve_guarded
from placement.bench.table import Column, markdown, row_cells
from placement.compile.context import SCALE
from placement.export import ExportError
from placement.io import load_document

#: Every solver, in the table's order.
SOLVERS = ("cpsat", "cpsat-export", "highs", "scip")
#: Instances when no path is given: the seeded library, relative to the working directory.
DEFAULT = Path("instances/library")


class Usage(ValueError):
    """A command line this bench cannot run; main prints it as an ``error:`` line and exits 2."""


def available(name: str) -> bool:
    """Whether the solver's package is importable (CP-SAT always is: it is the product's own)."""
    return name not in PACKAGES or importlib.util.find_spec(PACKAGES[name]) is not None


def instances(targets: Sequence[str]) -> list[Path]:
    """The instance files the targets name: a file itself, a folder's requests (not plans, not best-known
    records), sorted; a path that does not exist is a usage error, raised before anything runs."""
    files: list[Path] = []
    for target in targets:
        path = Path(target)
        if not path.exists():
            raise Usage(f"no such instance file or folder: {target}")
        if path.is_file():
            files.append(path)
            continue
        files += sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES)
                        and not p.name.endswith((".plan.json", ".best.json")))
    return files


def _gap(objective: float | None, bound: float | None) -> float | None:
    """The product's relative gap (placement.search): (bound − objective) / max(1, |bound|), maximising."""
    if objective is None or bound is None:
        return None
    return max(0.0, bound - objective) / max(1.0, abs(bound))


def _limited(data: dict[str, Any], time_limit: float, threads: int) -> dict[str, Any]:
    """The request with the bench's limit and threads (wall clock): the export sizes its model by them as
    ``plan()`` does."""
    return {**data, "policy": {**(data.get("policy") or {}), "time_limit_s": time_limit, "workers": threads,
                               "deterministic": False}}


def run_cpsat(data: dict[str, Any], time_limit: float, threads: int) -> dict[str, Any]:
    """``placement.plan`` with the bench's limit and threads; its plans are verified inside ``plan``."""
    result = plan(parse(_limited(data, time_limit, threads)))
    s = result.solver
    return {"status": result.status, "objective": s.objective, "bound": s.bound, "gap": s.gap,
            "time_s": s.wall_s, "verified": True, "variables": s.variables, "constraints": s.constraints,
            "note": f"bound: {s.bound_kind}" + (", restricted model" if s.restricted else "")}


def run_instance(path: Path, solvers: Sequence[str], time_limit: float, threads: int) -> list[dict[str, Any]]:
    """One row per solver for the instance at `path`; MIP solvers share one export of the model."""
    data = _limited(load_document(path), time_limit, threads)
    request = parse(data)
    gap_limit = request.policy.relative_gap_limit
    rows: list[dict[str, Any]] = []
    mips = [s for s in solvers if s != "cpsat"]
    with tempfile.TemporaryDirectory(prefix="placement-bench-solvers-") as tmp:
        exported = None
        failed = None
        if mips:
            try:
                exported = export_mps(request, Path(tmp))
            except ExportError as exc:
                failed = str(exc)
        for solver in solvers:
            row: dict[str, Any] = {"instance": path.name, "solver": solver}
            if solver == "cpsat":
                row |= run_cpsat(data, time_limit, threads)
            elif exported is None:
                row |= {"status": "not exported", "note": failed}
            else:
                row |= _mip_row(solver, request, exported, time_limit, threads, gap_limit)
                row["restricted"] = exported.ctx.restricted
            rows.append(row)
    return rows


#: Who each row's solver is, for the provenance a record keeps (the package whose version is named).
_WHO = {"cpsat": ("placement.plan, CP-SAT", "ortools"), "cpsat-export": ("CP-SAT on the exported model", "ortools"),
        "highs": ("HiGHS on the exported model", "highspy"), "scip": ("SCIP on the exported model", "pyscipopt")}


def record(path: Path, rows: Sequence[dict[str, Any]], time_limit: float, threads: int) -> dict[str, Any] | None:
    """Merge what the rows of one instance found into its ``NAME.best.json`` beside it (where it has one):
    a plan only where the verifier passed it, a bound only where it holds for the whole request (the plan's
    own bound, or a solver's on an export that kept every node of every task). The record keeps the better
    plan and the tighter bound with who found each (placement.bench.library.merged); returns it."""
    from importlib.metadata import version

    from placement.bench.library import merged

    best = path.with_name(path.name.removesuffix(".gz").removesuffix(".json") + ".best.json")
    if not best.exists():
        return None
    out = json.loads(best.read_text())
    for row in rows:
        name, package = _WHO[row["solver"]]
        who = f"{name} ({package} {version(package)}, {threads} threads, {time_limit:g} s), verified"
        plan_ok = row.get("verified") is True and row.get("objective") is not None
        bound_ok = row.get("bound") is not None and (row["solver"] == "cpsat" or row.get("restricted") is False)
        if not (plan_ok or bound_ok):
            continue
        new = {"objective": row["objective"] if plan_ok else -math.inf, "time_s": row.get("time_s"),
               "workers": threads, "status": row.get("status"), "found_by": who,
               "bound": row["bound"] if bound_ok else None, "bound_kind": "model" if row["solver"] != "cpsat"
               else (row.get("note") or "").removeprefix("bound: ").split(",")[0], "bound_by": who}
        out = merged(out, new)
    best.write_text(json.dumps(out, indent=1) + "\n")
    return out


def _mip_row(solver: str, request: Any, exported: Any, time_limit: float, threads: int,
             gap_limit: float) -> dict[str, Any]:
    """A MIP solver's row: its numbers divided into the plan's units, and the read-back plan's verdict."""
    if solver == "cpsat-export":
        result = solve_cpsat(exported.ctx, time_limit, threads, gap_limit)
    else:
        result = solve_guarded(solver, exported.path, time_limit, threads, gap_limit)
    objective = None if result.objective is None else result.objective / SCALE
    bound = None if result.bound is None else result.bound / SCALE
    row: dict[str, Any] = {"status": result.status, "objective": objective, "bound": bound,
                           "gap": _gap(objective, bound), "time_s": round(result.time_s, 3),
                           "variables": exported.variables, "constraints": exported.constraints,
                           "verified": None, "note": result.note}
    if result.values is not None:
        decoded, violations = read_back(request, exported.ctx, result.values, result.status)
        row["verified"] = not violations
        row["solver_objective"] = objective
        row["objective"] = decoded  # what the plan is worth, as the product scores it (read_back)
        row["gap"] = _gap(decoded, bound)
        if violations:
            row["note"] = f"{len(violations)} violations, first: {violations[0][:300]}"
        elif objective is not None and abs(decoded - objective) > 1e-6 * max(1.0, abs(objective)):
            row["note"] = f"the solver's own value {objective:.6g}; its plan is worth {decoded:.6g}"
    if solver == "scip":
        row["note"] = "; ".join(filter(None, [row.get("note"), "SCIP searches on 1 thread"]))
    return row


#: (header, row key, format): the table's columns, left to right.
COLUMNS: tuple[Column, ...] = (
    ("instance", "instance", "s"),
    ("solver", "solver", "s"),
    ("status", "status", "s"),
    ("objective", "objective", ".3f"),
    ("bound", "bound", ".3f"),
    ("gap %", "gap_pct", ".3f"),
    ("time s", "time_s", ".2f"),
    ("verified", "verified", "s"),
    ("variables", "variables", "d"),
    ("constraints", "constraints", "d"),
    ("note", "note", "s"),
)


def format_table(rows: Sequence[dict[str, Any]], time_limit: float, threads: int) -> str:
    """A Markdown table, one row per (instance, solver), and a footer that says how to read it."""
    body = [row_cells({**r, "gap_pct": None if r.get("gap") is None else 100 * r["gap"]}, COLUMNS) for r in rows]
    out = markdown([h for h, _, _ in COLUMNS], body, left={"instance", "solver", "status", "verified", "note"})
    out += [
        "",
        f"time limit {time_limit:g} s, {threads} threads. objective, bound: the plan's units (GPU-equivalents, "
        "maximised; a MIP's value is the MPS objective / 1000). gap: (bound − objective) / max(1, |bound|). "
        "cpsat: placement.plan (the whole call: further rounds may re-trim the model around its best plan; its "
        "bound is the whole problem's when it has one). cpsat-export, highs, scip: the one model placement export "
        "writes, plan()'s first-round model at this limit (CP-SAT on it through placement.search, no hint; HiGHS "
        "and SCIP from the MPS file, time includes reading). "
        "verified: the solution decoded by the product and passed by placement.verify (— without a solution).",
    ]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    """Parse the command line, run every (instance, solver) one at a time, print the table."""
    ap = argparse.ArgumentParser(prog="placement bench solvers", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("targets", nargs="*", help=f"instance files or folders (default: {DEFAULT}/)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds per solver and instance (default 10)")
    ap.add_argument("--threads", type=int, default=2, help="threads for every solver (default 2)")
    ap.add_argument("--solvers", default=None,
                    help=f"comma-separated, of {','.join(SOLVERS)} (default: those installed)")
    ap.add_argument("--json", help="also write the rows as JSON here")
    ap.add_argument("--record", action="store_true",
                    help="merge verified plans and whole-request bounds into each instance's NAME.best.json")
    args = ap.parse_args(argv)
    try:
        if args.time_limit <= 0 or args.threads < 1:
            raise Usage("--time-limit must be positive and --threads at least 1")
        if args.solvers is None:
            solvers = [s for s in SOLVERS if available(s)]
            for s in SOLVERS:
                if s not in solvers:
                    print(f"note: {s} skipped, {PACKAGES[s]} is not installed "
                          "(pip install 'gpu-placement-planner[solvers]')", file=sys.stderr)
        else:
            solvers = [s.strip() for s in args.solvers.split(",") if s.strip()]
            unknown = [s for s in solvers if s not in SOLVERS]
            if unknown or not solvers:
                raise Usage(f"--solvers takes {', '.join(SOLVERS)}, not {args.solvers!r}")
            missing = [s for s in solvers if not available(s)]
            if missing:
                raise Usage(f"{', '.join(missing)} needs {', '.join(PACKAGES[s] for s in missing)}: "
                            "pip install 'gpu-placement-planner[solvers]'")
        files = instances(args.targets or [str(DEFAULT)])
        if not files:
            raise Usage(f"no instance files in {' '.join(args.targets or [str(DEFAULT)])}")
    except Usage as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    for path in files:
        for row in run_instance(path, solvers, args.time_limit, args.threads):
            rows.append(row)
            gap = "—" if row.get("gap") is None else f"{100 * row['gap']:.3f}%"
            print(f"{path.name} {row['solver']}: {row['status']} gap {gap} verified {row.get('verified')}",
                  file=sys.stderr)
        if args.record:
            record(path, [r for r in rows if r["instance"] == path.name], args.time_limit, args.threads)
        if args.json:  # after every instance: a long run stopped midway keeps its rows
            Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    print(format_table(rows, args.time_limit, args.threads))
    return 0
