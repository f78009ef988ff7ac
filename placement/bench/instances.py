"""`placement bench DIR|FILE|generated`: solve instances and report model size, speed and quality.

For every instance: the model's size and build time beside the solve time (a model too big for a
cycle shows in its size first), the time to the first plan (the greedy one), the status and gap,
and the plan against the greedy baseline in both objective and GPUs placed. Numbers only:
benchmarks never assert timings.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from placement.api import parse, plan
from placement.io import load_document

#: Instance files a folder contributes (``.json.gz``: the library's gzipped XL instances).
SUFFIXES = (".json", ".yaml", ".yml", ".json.gz")


def _is_instance(path: Path) -> bool:
    name = path.name
    return name.endswith(SUFFIXES) and not name.endswith((".plan.json", ".best.json"))


def _instances(target: str, args: argparse.Namespace) -> Iterator[tuple[str, dict[str, Any]]]:
    if target == "generated":
        from placement.generate import generate

        for nodes in args.sizes:
            for seed in args.seeds:
                jobs = max(1, round(args.jobs_per_node * nodes))
                yield f"gen-{nodes}n-{jobs}j-s{seed}", generate(nodes, jobs, seed)
        return
    path = Path(target)
    if not path.exists():
        raise SystemExit(f"error: no such instance file or folder: {target}")
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and _is_instance(p))
    for f in files:
        data = load_document(f)
        if isinstance(data, dict) and "cluster" in data:
            yield str(f), data


def _ranges(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        if "-" in part:
            lo, hi = part.split("-")
            out.extend(range(int(lo), int(hi) + 1))
        elif part:
            out.append(int(part))
    return out


def run_one(name: str, data: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    data = dict(data)
    policy = dict(data.get("policy") or {})
    policy.update(time_limit_s=args.time_limit, workers=args.workers, seed=policy.get("seed", 0))
    if args.deterministic:
        policy["deterministic"] = True
    data["policy"] = policy
    request = parse(data)
    result = plan(request)
    gpus = sum(len(a.gpus) for a in result.assignments)
    s = result.solver
    row = {
        "instance": name,
        "nodes": len(request.cluster.nodes),
        "jobs": len(request.jobs),
        "variables": s.variables,
        "constraints": s.constraints,
        "build_s": s.build_s,
        "first_plan_s": s.first_plan_s,
        "wall_s": s.wall_s,
        "status": result.status,
        "gap_pct": None if s.gap is None else round(100 * s.gap, 3),
        "objective": result.objective.total,
        "greedy_objective": s.baseline_objective,
        "vs_greedy_pct": _pct(result.objective.total, s.baseline_objective),
        "gpus_placed": gpus,
        "greedy_gpus_placed": _greedy_gpus(request),
        "winner": s.winner,
    }
    best = _best_known(name)
    if best is not None:
        row["best_known"] = best.get("objective")
        row["best_bound"] = best.get("bound")
    return row


def _pct(value: float, base: float | None) -> float | None:
    if base is None or base == 0:
        return None
    return round(100 * (value - base) / abs(base), 3)


def _greedy_gpus(request: Any) -> int:
    from placement import problem as problem_mod
    from placement.baseline import greedy

    problem = problem_mod.build(request)
    return int(greedy(problem).usage(problem)[:, 0].sum())


def _best_known(name: str) -> dict[str, Any] | None:
    """Best known objective and bound stored beside an instance file as NAME.best.json.

    NAME is the file name without its suffix: ``gangs-L.json`` and ``gangs-XL.json.gz`` pair with
    ``gangs-L.best.json`` and ``gangs-XL.best.json``.
    """
    path = Path(name)
    stem = Path(path.stem).stem if path.suffix == ".gz" else path.stem
    best = path.with_name(stem + ".best.json")
    if path.exists() and best.exists():
        return json.loads(best.read_text())
    return None


COLUMNS = (
    "instance",
    "nodes",
    "jobs",
    "variables",
    "constraints",
    "build_s",
    "first_plan_s",
    "wall_s",
    "status",
    "gap_pct",
    "objective",
    "greedy_objective",
    "vs_greedy_pct",
    "gpus_placed",
    "greedy_gpus_placed",
    "winner",
)


def table(rows: list[dict[str, Any]]) -> str:
    cols = [c for c in COLUMNS if any(c in r for r in rows)] + [
        c for c in ("best_known", "best_bound") if any(c in r for r in rows)
    ]
    cells = [[str(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="placement bench", description=__doc__)
    ap.add_argument("target", help="a folder or file of requests, or 'generated'")
    ap.add_argument("--sizes", type=_ranges, default=[64, 256, 1024], help="generated: node counts, e.g. 64,256")
    ap.add_argument("--seeds", type=_ranges, default=[1, 2, 3], help="generated: seeds, e.g. 1-3")
    ap.add_argument(
        "--jobs-per-node",
        type=float,
        default=1.5,
        help="generated: pending jobs per node (1.5 ≈ 0.8× free GPUs; 6 ≈ 3×)",
    )
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--json", help="also write the rows as JSON here")
    args = ap.parse_args(argv)
    rows = []
    for name, data in _instances(args.target, args):
        row = run_one(name, data, args)
        rows.append(row)
        gap = "n/a" if row["gap_pct"] is None else f"{row['gap_pct']}%"
        print(f"{name}: {row['status']} gap {gap} vs greedy {row['vs_greedy_pct']}%", file=sys.stderr)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0
