"""``placement bench scale``: how the whole ``plan()`` call grows in time and memory with the cluster.

Why this exists: a scheduler cycle has a budget, and what breaks first on a big cluster is rarely
the search (it stops at ``policy.time_limit_s``) but what surrounds it: indexing, the greedy, the
model build, decoding and verifying, which the time limit does not bound, and the memory they take.
So every run is one ``plan()`` call on a seeded generated cluster (:func:`placement.generate.generate`)
in a fresh Python process, timed as a caller sees it, with the process's own peak memory.

Why a fresh process per run: peak memory is a high-water mark, so runs in one process would hide
each other behind the biggest. The peak is the child's ``VmHWM`` (``/proc/self/status``): Linux keeps
``ru_maxrss`` across ``exec``, so a child's ``ru_maxrss`` starts at the launching process's own
resident size (measured: a 10 MB child of a 400 MB parent reports 412 MB), which would make small
clusters look as big as the bench. ``ru_maxrss`` is kept in the JSON beside it (``ru_maxrss_mb``),
and used only where ``/proc`` is missing (``rss_source`` says which). Work a call hands to another core
(placement.cores) runs in a forked child of its own: the largest such child's peak (``children_rss_mb``,
its pages shared with the caller counted again) is added, so ``peak_rss_mb`` bounds the pair from above.

Generation and validation of the request run in the child before the clock starts, so the parent
stays small and never holds a big request. Numbers only: benchmarks never assert timings.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from placement.bench.table import cell, markdown, row_cells

#: What the first line of ``--help`` says.
DESCRIPTION = "Time and peak memory of one plan() call on generated clusters, one fresh process per run."

#: The child prints its measurements on one stdout line behind this marker (anything else is noise).
MARKER = "placement-bench-scale:"

#: A child gets this long beyond its time limit before it is killed (imports, build, decode, verify).
HARD_TIMEOUT_FACTOR = 3.0
HARD_TIMEOUT_EXTRA_S = 120.0

#: The child's entry point: ``python -c CHILD_CODE SPEC_JSON``.
CHILD_CODE = "import sys; from placement.bench.scale import child; raise SystemExit(child(sys.argv[1]))"


# ------------------------------------------------------------------------------------------ the child


def _peak_rss_mb() -> tuple[float, float, str]:
    """(peak MB, ru_maxrss MB, source): this process's own high-water mark, and the inherited one."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024, ru, "VmHWM"
    except OSError:
        pass
    return ru, ru, "ru_maxrss"


def _children_rss_mb() -> float:
    """The peak of the largest child this process forked and collected (0 without any)."""
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """Generate, validate, then time one ``plan()`` call and re-verify its plan; run in the child.

    Timed apart so that the whole call is what a caller of ``placement.plan`` waits for, nothing more.
    """
    from placement.api import parse, plan
    from placement.generate import generate
    from placement.verify import verify

    t0 = time.perf_counter()
    data = generate(spec["nodes"], spec["jobs"], spec["seed"])
    data["policy"] = {**data.get("policy", {}), "time_limit_s": spec["time_limit_s"], "workers": spec["workers"]}
    t1 = time.perf_counter()
    request = parse(data)
    changes = spec.get("changes") or []
    if not changes:
        del data  # kept only to derive the changes from
    t2 = time.perf_counter()
    setup_mb = _peak_rss_mb()[0]
    result = plan(request)
    t3 = time.perf_counter()
    violations = verify(request, result)
    t4 = time.perf_counter()
    peak_mb, ru_mb, source = _peak_rss_mb()
    children_mb = _children_rss_mb()
    s = result.solver
    return {
        "changes": _change_calls(request, data, changes, spec["seed"]) if changes else [],
        "gpus": sum(n.gpus for n in request.cluster.nodes),
        "jobs": len(request.jobs),
        "generate_s": round(t1 - t0, 4),
        "validate_s": round(t2 - t1, 4),
        "whole_call_s": round(t3 - t2, 4),
        "verify_s": round(t4 - t3, 4),
        "plan_status": result.status,
        "status": s.status,
        "build_s": s.build_s,
        "first_plan_s": s.first_plan_s,
        "wall_s": s.wall_s,
        "objective": s.objective,
        "bound": s.bound,
        "bound_kind": s.bound_kind,
        "gap": s.gap,
        "phases": dict(s.phases),
        "note": s.note,
        "baseline_objective": s.baseline_objective,
        "winner": s.winner,
        "search": s.search,
        "restricted": s.restricted,
        "variables": s.variables,
        "constraints": s.constraints,
        "verified": not violations,
        "violations": violations[:5],
        "setup_rss_mb": round(setup_mb, 1),
        "peak_rss_mb": round(peak_mb + children_mb, 1),
        "own_rss_mb": round(peak_mb, 1),
        "children_rss_mb": round(children_mb, 1),
        "ru_maxrss_mb": round(ru_mb, 1),
        "rss_source": source,
    }


def _change_calls(request: Any, data: dict[str, Any], shares: list[float], seed: int) -> list[dict[str, Any]]:
    """After the full call (its peak memory already read), each change a loop would send (`share` of the pending
    jobs replaced, `share` of the nodes relabelled: placement.bench.changes) planned against the kept request
    (placement.states), one call each, against the same base."""
    from placement.bench.changes import change_of
    from placement.states import States

    store = States()
    base = store.put(request)
    out = []
    for share in shares:
        change = change_of(data, share, base, seed)
        t0 = time.perf_counter()
        planned = store.plan_change(change)
        out.append({"share": share, "whole_call_s": round(time.perf_counter() - t0, 4),
                    "status": planned.plan.solver.status, "phases": dict(planned.plan.solver.phases)})
    return out


def child(spec_json: str) -> int:
    """The child process's main: one measurement as a MARKER line on stdout; exit 1 on an exception."""
    try:
        out = measure(json.loads(spec_json))
        code = 0
    except Exception as exc:  # reported as the row's error, never a crash of the bench
        out, code = {"error": " ".join(f"{type(exc).__name__}: {exc}".split())[:2000]}, 1  # one line
    print(MARKER + json.dumps(out), flush=True)
    return code


# ------------------------------------------------------------------------------------------ the parent


def hard_timeout_s(time_limit_s: float) -> float:
    return HARD_TIMEOUT_FACTOR * time_limit_s + HARD_TIMEOUT_EXTRA_S


def run_one(nodes: int, jobs_per_node: float, seed: int, time_limit_s: float, workers: int,
            changes: Sequence[float] = ()) -> dict[str, Any]:
    """One row: the child's measurements, or an ``error`` when it raised, was killed or ran out of time. With
    `changes`, the child also plans a change of each share against the kept request (`changes` in the row)."""
    jobs = round(jobs_per_node * nodes)
    spec = {"nodes": nodes, "jobs": jobs, "seed": seed, "time_limit_s": time_limit_s, "workers": workers,
            "changes": list(changes)}
    row: dict[str, Any] = {"nodes": nodes, "seed": seed, "jobs": jobs, "gpus": None, "time_limit_s": time_limit_s,
                           "workers": workers}
    limit = hard_timeout_s(time_limit_s) * (1 + len(changes))
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", CHILD_CODE, json.dumps(spec)], capture_output=True, text=True,
                              timeout=limit, check=False)
    except subprocess.TimeoutExpired:
        row["error"] = f"killed after the hard timeout of {limit:.0f} s (3 × time limit + {HARD_TIMEOUT_EXTRA_S:.0f} s)"
        return row
    row["process_s"] = round(time.perf_counter() - start, 3)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(MARKER)]
    if lines:
        row.update(json.loads(lines[-1][len(MARKER):]))
    if "error" not in row and done.returncode != 0:
        row["error"] = _exit_text(done.returncode, done.stderr)
    elif "error" not in row and not lines:
        row["error"] = "the child reported nothing" + _tail(done.stderr)
    if "error" in row:
        return row
    if not row["verified"]:
        row["error"] = f"plan fails placement.verify: {'; '.join(row['violations'])}"
    row["over_limit_pct"] = round(100 * (row["whole_call_s"] / time_limit_s - 1), 1)
    base = row["baseline_objective"]
    row["gain_over_greedy_pct"] = (None if base in (None, 0) or row["objective"] is None
                                   else round(100 * (row["objective"] - base) / abs(base), 3))
    row["gap_pct"] = None if row["gap"] is None else round(100 * row["gap"], 3)
    # Absolute too: the objective's class weights make it ~1e9, so a few units round to 0.00 % above.
    row["gain_over_greedy"] = (None if base is None or row["objective"] is None
                               else round(row["objective"] - base, 6))
    row["gap_abs"] = None if row["bound"] is None or row["objective"] is None else round(
        max(0.0, row["bound"] - row["objective"]), 6)
    row["greedy_gap_pct"] = (None if row["bound"] in (None, 0) or base is None
                             else round(100 * max(0.0, row["bound"] - base) / abs(row["bound"]), 3))
    for phase, seconds in row.get("phases", {}).items():
        row[f"{phase}_s"] = seconds
    row["node_jobs"] = nodes * row["jobs"]
    return row


def _tail(stderr: str, lines: int = 3) -> str:
    kept = [ln for ln in stderr.strip().splitlines() if ln.strip()][-lines:]
    return (": " + " / ".join(kept))[:600] if kept else ""


def _exit_text(code: int, stderr: str) -> str:
    if code < 0:
        import signal

        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (out of memory?)" if name == "SIGKILL" else ""
        return f"killed by {name}{hint}" + _tail(stderr)
    return f"exited with code {code}" + _tail(stderr)


# ------------------------------------------------------------------------------------------ the report

#: (header, row key, format): the table's columns, left to right.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("nodes", "nodes", "d"),
    ("seed", "seed", "d"),
    ("GPUs", "gpus", "d"),
    ("jobs", "jobs", "d"),
    ("whole call s", "whole_call_s", ".2f"),
    ("time limit s", "time_limit_s", "g"),
    ("over limit %", "over_limit_pct", "+.1f"),
    ("problem s", "problem_s", ".2f"),
    ("greedy s", "greedy_s", ".2f"),
    ("compile s", "compile_s", ".2f"),
    ("bound s", "bound_s", ".2f"),
    ("search s", "search_s", ".2f"),
    ("decode s", "decode_s", ".2f"),
    ("verify s", "verify_s", ".2f"),
    ("status", "status", "s"),
    ("winner", "winner", "s"),
    ("search", "search", "s"),
    ("gain over greedy %", "gain_over_greedy_pct", "+.2f"),
    ("gap %", "gap_pct", ".3f"),
    ("greedy gap %", "greedy_gap_pct", ".3f"),
    ("bound", "bound_kind", "s"),
    ("peak RSS MB", "peak_rss_mb", ".0f"),
)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """A Markdown table, one row per (size, seed); a failed row shows its sizes and ``failed``, then its error."""
    head = [h for h, _, _ in COLUMNS]
    body = []
    for r in rows:
        if r.get("error"):
            cells = [cell(r.get(key), spec) if key in ("nodes", "seed", "gpus", "jobs", "time_limit_s") else "—"
                     for _, key, spec in COLUMNS]
            cells[head.index("status")] = "failed"
        else:
            cells = row_cells(r, COLUMNS)
        body.append(cells)
    out = markdown(head, body, left={"status", "winner", "search", "bound"})
    out += [
        "",
        "whole call: wall clock of placement.plan() in a fresh process, after generation and validation; over "
        "limit: whole call / time limit − 1. problem … verify: plan.solver.phases, the seconds of each phase. "
        "status, winner, search: plan.solver. gain over greedy: (objective − greedy objective) / |greedy "
        "objective|. gap, greedy gap: the plan's and the greedy plan's distance to the bound, a bound for the "
        "whole problem: 'model' is CP-SAT's on the unrestricted model, 'relaxation' the model relaxed over node "
        "classes (placement.search.bound). peak RSS: the child's own high-water mark, plus the largest process it "
        "forked (placement.cores; shared pages counted twice).",
    ]
    out += [f"error at {r['nodes']} nodes, seed {r['seed']}: {r['error']}" for r in rows if r.get("error")]
    return "\n".join(out)


def format_changes(rows: Sequence[dict[str, Any]]) -> str:
    """The change calls as a Markdown table: per row and share, the whole call against the full one."""
    head = ["nodes", "seed", "change %", "whole call s", "full call s", "problem s", "greedy s", "decode s",
            "verify s", "status"]
    body = [[f"{r['nodes']}", f"{r['seed']}", f"{100 * c['share']:g}", f"{c['whole_call_s']:.2f}",
             f"{r['whole_call_s']:.2f}", *(f"{c['phases'].get(k, 0.0):.2f}" for k in ("problem", "greedy", "decode",
                                                                                      "verify")), c["status"]]
            for r in rows if not r.get("error") for c in r.get("changes", [])]
    out = markdown(head, body, left={"status"})
    out += ["", "change: that share of the pending jobs replaced by new ones and of the nodes relabelled, sent "
                "against the request the child kept (placement.states), each against the same base; whole call: "
                "apply the change, then plan() the request it makes."]
    return "\n".join(out)


def _least_squares(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Slope of the least-squares line through (xs, ys); None when xs do not vary."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


def fit(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Growth of whole-call time and peak RSS against nodes × jobs, over the rows that succeeded.

    The log-log slope is the exponent (1 = linear, 2 = quadratic); the linear slope says what each
    million node·jobs adds, the number to extrapolate a budget from. None with fewer than 2 sizes.
    """
    ok = [r for r in rows if not r.get("error") and r.get("node_jobs", 0) > 0]
    if len({r["nodes"] for r in ok}) < 2:
        return None
    xs = [float(r["node_jobs"]) for r in ok]
    out: dict[str, Any] = {"runs": len(ok), "sizes": len({r["nodes"] for r in ok}), "x": "nodes × jobs"}
    for key in ("whole_call_s", "peak_rss_mb"):
        ys = [float(r[key]) for r in ok]
        pos = [(x, y) for x, y in zip(xs, ys, strict=True) if y > 0]
        exponent = _least_squares([math.log(x) for x, _ in pos], [math.log(y) for _, y in pos]) if pos else None
        linear = _least_squares([x / 1e6 for x in xs], ys)
        out[key] = {"exponent": None if exponent is None else round(exponent, 3),
                    "per_million_node_jobs": None if linear is None else round(linear, 4)}
    return out


def _signed(value: float | None) -> str:
    """A slope to read at a glance: +4,240 or +72.1 or +0.0315, never 4.24e+03."""
    if value is None:
        return "—"
    return format(value, "+,.0f" if abs(value) >= 100 else "+.3g" if abs(value) < 1 else "+.1f")


def format_fit(result: dict[str, Any] | None) -> str:
    if result is None:
        return "slope: needs at least 2 sizes that succeeded"
    lines = [f"slope against nodes × jobs ({result['sizes']} sizes, {result['runs']} runs; least squares):"]
    for key, label, unit in (("whole_call_s", "whole call", "s"), ("peak_rss_mb", "peak RSS", "MB")):
        f = result[key]
        lines.append(f"  {label}: ∝ (nodes × jobs)^{cell(f['exponent'], '.2f')} (log-log), "
                     f"{_signed(f['per_million_node_jobs'])} {unit} per million node·jobs (linear)")
    return "\n".join(lines)


def _minor_label(value: float, every: bool) -> str:
    mantissa = round(value / 10 ** math.floor(math.log10(value)), 6) if value > 0 else 0
    return f"{value:g}" if every or mantissa in (2, 5) else ""


def plot(rows: Sequence[dict[str, Any]], time_limit_s: float, path: Path) -> Path:
    """Two panels against nodes, log-log: whole-call time (time limit drawn across) and peak RSS.

    matplotlib is optional: raises ImportError when it is absent, which :func:`main` reports.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    ok = [r for r in rows if not r.get("error")]
    sizes = sorted({r["nodes"] for r in ok})
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(10, 4.2))
    for ax, key, label in ((ax_t, "whole_call_s", "whole plan() call (s)"), (ax_m, "peak_rss_mb", "peak RSS (MB)")):
        ax.scatter([r["nodes"] for r in ok], [r[key] for r in ok], s=18, alpha=0.6)
        means = [sum(r[key] for r in ok if r["nodes"] == n) / sum(1 for r in ok if r["nodes"] == n) for n in sizes]
        ax.plot(sizes, means, marker="o", label="mean over seeds")
        ax.set_xscale("log")
        ax.set_yscale("log")
        # Plain numbers: the nodes asked for on x; on y the 2s and 5s of each decade too, or every
        # tick when the values sit within one decade (a narrow memory range has no power of ten).
        ax.set_xticks(sizes, [str(n) for n in sizes])
        ax.xaxis.set_minor_locator(ticker.NullLocator())
        values = [r[key] for r in ok] + ([time_limit_s] if ax is ax_t else [])
        narrow = bool(values) and max(values) < 10 * min(values)
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(ticker.FuncFormatter(lambda v, _, narrow=narrow: _minor_label(v, narrow)))
        ax.set_xlabel("nodes (8 GPUs each)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, which="both")
    ax_t.axhline(time_limit_s, color="grey", linestyle=":", label=f"time limit {time_limit_s:g} s")
    ax_t.set_title("time of one plan() call")
    ax_m.set_title("peak memory of the process")
    for ax in (ax_t, ax_m):
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ------------------------------------------------------------------------------------------ main


def _ints(text: str, option: str, least: int, example: str) -> list[int]:
    """``1024,4096`` or ``1-3`` (inclusive), each at least ``least``; ValueError naming the option otherwise."""
    out: list[int] = []
    try:
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            lo, dash, hi = part.partition("-")
            out.extend(range(int(lo), int(hi) + 1) if dash and lo else [int(part)])
    except ValueError:
        raise ValueError(f"{option}: {text!r} is not a comma-separated list of integers (e.g. {example})") from None
    if not out:
        raise ValueError(f"{option}: {text!r} names none")
    if min(out) < least:
        raise ValueError(f"{option}: {min(out)} is below {least}")
    return out


def _shares(text: str) -> list[float]:
    """``0.001,0.01`` as shares in (0, 1]; ValueError naming --changes otherwise (empty: none)."""
    try:
        out = [float(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise ValueError(f"--changes: {text!r} is not a comma-separated list of shares (e.g. 0.001,0.01)") from None
    if any(not 0 < x <= 1 for x in out):
        raise ValueError(f"--changes: {text!r}: each share must be above 0 and at most 1")
    return out


def main(argv: list[str] | None = None) -> int:
    """``placement bench scale``: one fresh process per (size, seed), a Markdown table, the slope, JSON, PNG."""
    ap = argparse.ArgumentParser(prog="placement bench scale", description=DESCRIPTION)
    ap.add_argument("--sizes", required=True, help="node counts, comma-separated, e.g. 1024,4096,12500")
    ap.add_argument("--jobs-per-node", type=float, default=1.5,
                    help="pending jobs per node (1.5 ≈ 0.8× the free GPUs; 6 ≈ 3×; default 1.5)")
    ap.add_argument("--seeds", default="1", help="generator seeds, e.g. 1-3 or 1,5 (default: 1)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="policy.time_limit_s per run (default: 10)")
    ap.add_argument("--workers", type=int, default=2, help="policy.workers, CP-SAT threads (default: 2)")
    ap.add_argument("--plot", type=Path, default=None, help="write time and memory against nodes as a PNG here")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows and the slope as JSON here")
    ap.add_argument("--changes", default="", help="after each full call, plan changes of these shares of jobs and "
                    "nodes against the kept state (placement.states), e.g. 0.001,0.01,0.1")
    args = ap.parse_args(argv)
    try:
        sizes = _ints(args.sizes, "--sizes", 1, "1024,4096")
        seeds = _ints(args.seeds, "--seeds", 0, "1-3")
        if not 0 < args.time_limit <= 3600:
            raise ValueError(f"--time-limit: {args.time_limit:g} must be above 0 and at most 3600 s")
        if not 1 <= args.workers <= 64:
            raise ValueError(f"--workers: {args.workers} must be within 1..64")
        if not (args.jobs_per_node >= 0 and math.isfinite(args.jobs_per_node)):
            raise ValueError(f"--jobs-per-node: {args.jobs_per_node:g} must be 0 or more")
        changes = _shares(args.changes)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    rows = []
    for nodes in sizes:
        for seed in seeds:
            row = run_one(nodes, args.jobs_per_node, seed, args.time_limit, args.workers, changes)
            rows.append(row)
            said = (f"failed: {row['error']}" if row.get("error") else
                    f"{row['whole_call_s']:.2f} s, {row['peak_rss_mb']:.0f} MB, {row['status']}")
            print(f"# {nodes} nodes, {row['jobs']} jobs, seed {seed}: {said}", file=sys.stderr, flush=True)

    print(f"placement bench scale: {args.jobs_per_node:g} jobs per node, time limit {args.time_limit:g} s, "
          f"{args.workers} workers, seeds {args.seeds}")
    print(format_table(rows))
    if changes:
        print()
        print(format_changes(rows))
    slope = fit(rows)
    print()
    print(format_fit(slope))
    if args.json is not None:
        doc = {"jobs_per_node": args.jobs_per_node, "time_limit_s": args.time_limit, "workers": args.workers,
               "hard_timeout_s": hard_timeout_s(args.time_limit), "rows": rows, "fit": slope}
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"results written to {args.json}")
    if args.plot is not None:
        try:
            print(f"plot written to {plot(rows, args.time_limit, args.plot)}")
        except ImportError:
            print("plot skipped: matplotlib is not installed (pip install matplotlib)")
    return 1 if any(r.get("error") for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
