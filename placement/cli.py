"""The `placement` command: a thin face that parses, calls the library, and renders."""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import zlib
from typing import Any

import yaml
from placement_models import Plan, format_errors
from pydantic import ValidationError

from placement.io import emit


def _load(path: str, what: str) -> Any:
    from placement.io import load_document

    try:
        return load_document(path)
    except FileNotFoundError:
        raise SystemExit(_fail(f"{what} file not found: {path}")) from None
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise SystemExit(_fail(f"{what} {path} is not valid JSON/YAML: {exc}")) from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise SystemExit(_fail(f"{what} {path} is not a valid gzip file: {exc}")) from None


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _invalid(exc: ValidationError, what: str) -> int:
    print(f"error: invalid {what}:", file=sys.stderr)
    for line in format_errors(exc):
        print(f"  {line}", file=sys.stderr)
    return 2


def _num(x: float | None) -> str:
    """Strict priority classes make objectives large: digits grouped, never an exponent that hides the change."""
    if x is None:
        return "n/a"
    return f"{x:,.3f}".rstrip("0").rstrip(".") if abs(x) >= 1e6 else f"{x:g}"


def summary(plan: Plan) -> str:
    """A few lines a person reads after a solve: what was placed, what waits, how good, how fast."""
    jobs = {a.job for a in plan.assignments}
    whole = sum(len(a.gpus) for a in plan.assignments if a.mig is None and a.gpu_share is None)
    mig = sum(1 for a in plan.assignments if a.mig is not None)
    shared = sum(1 for a in plan.assignments if a.gpu_share is not None)
    gpus = f"{whole} whole GPUs" + (f", {mig} MIG instances" if mig else "") + (
        f", {shared} shared-GPU pods" if shared else "")
    s = plan.solver
    gap = "n/a" if s.gap is None else f"{100 * s.gap:.2f}% (to the {s.bound_kind} bound)"
    lines = [
        f"status {plan.status} ({s.mode}, winner: {s.winner}); objective {_num(plan.objective.total)} "
        f"(greedy {_num(s.baseline_objective)}); gap {gap}",
        f"placed {len(jobs)} jobs, {len(plan.assignments)} pods, {gpus}; pending {len(plan.pending)} jobs",
        "terms: " + ", ".join(f"{k} {_num(v)}" for k, v in plan.objective.terms.items()),
        f"search {s.search}" + (" over a trimmed candidate set" if s.restricted else "") + "; "
        f"model {s.variables} variables, {s.constraints} constraints; first plan {s.first_plan_s}s, "
        f"build {s.build_s}s, total {s.wall_s}s, workers {s.workers}, seed {s.seed}",
    ]
    if s.phases:
        lines.append("phases: " + ", ".join(f"{k} {v:.2f}s" for k, v in s.phases.items()))
    if s.note:
        lines.append(f"note: {s.note}")
    if plan.preemptions or plan.teams:
        fairness = "n/a" if plan.fairness_index is None else f"{plan.fairness_index:g}"
        lines.append(f"preempted {len(plan.preemptions)} jobs; {len(plan.teams)} teams, fairness index (Jain) "
                     f"{fairness}")
    for p in plan.preemptions[:10]:
        lines.append(f"  preempt {p.job}: {p.reason}")
    for p in plan.pending[:10]:
        lines.append(f"  pending {p.job}" + (f" [{p.constraint}]" if p.constraint else "") + f": {p.reason}")
    if len(plan.pending) > 10:
        lines.append(f"  ... and {len(plan.pending) - 10} more pending jobs (see the plan)")
    return "\n".join(lines)


def cmd_solve(args: argparse.Namespace) -> int:
    from placement.api import parse, plan

    data = _load(args.request, "request")
    if isinstance(data, dict):
        policy = data.setdefault("policy", {}) if isinstance(data.get("policy", {}), dict) else None
        if policy is not None:
            for key, value in (("time_limit_s", args.time_limit), ("workers", args.workers), ("seed", args.seed)):
                if value is not None:
                    policy[key] = value
            if args.deterministic:
                policy["deterministic"] = True
    try:
        request = parse(data)
        log = (lambda line: print(line, file=sys.stderr)) if args.verbose else None
        result = plan(request, log=log)
    except ValidationError as exc:
        return _invalid(exc, "request")
    text = result.model_dump_json(indent=2)
    emit(text, args.output)
    print(summary(result), file=sys.stderr)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from placement.api import parse
    from placement.verify import verify

    try:
        request = parse(_load(args.request, "request"))
    except ValidationError as exc:
        return _invalid(exc, "request")
    try:
        plan = Plan.model_validate(_load(args.plan, "plan"))
    except ValidationError as exc:
        return _invalid(exc, "plan")
    violations = verify(request, plan)
    for v in violations:
        print(v)
    if not violations:
        print(f"valid: {len(plan.assignments)} pods of {len({a.job for a in plan.assignments})} jobs, "
              f"{len(plan.pending)} pending", file=sys.stderr)
    return 1 if violations else 0


def cmd_generate(args: argparse.Namespace) -> int:
    from placement.generate import generate

    request = generate(args.nodes, args.jobs, args.seed)
    text = json.dumps(request, indent=1)
    emit(text, args.output)
    return 0


BENCH_HELP = """usage: placement bench TARGET [options]   (placement bench TARGET --help: that bench's options)

targets:
  DIR | FILE       every request in a folder (or one file, .json/.yaml/.json.gz): variables, build s,
                   first plan s, gap, objective vs best known vs greedy (e.g. instances/library)
  generated        seeded generated clusters (--sizes 64,256 --seeds 1-3)
  openb            the FGD paper's protocol on the Alibaba openb traces (--data DIR or PLACEMENT_DATA)
  cycles           the scheduler loop over a real trace (ITP): arrivals, departures, a plan every cycle;
                   wait, completion and utilisation against FIFO, Volcano-, Kueue-, Slurm- and Tiresias-like peers
  topology         NVL72 + HGX racks: solver vs topology-aware greedy
  mig              openb fractions as MIG profiles: GPUs used vs first-fit templates
  teams            Helios quota shapes (data folder needed)
  cost             spot fleet pricing (data folder needed)
  scale            one plan() call per size in a fresh process: whole-call time, peak memory, their slope
                   against nodes × jobs (--sizes 1024,4096 --time-limit 10)"""


NAMED_BENCHES = ("openb", "cycles", "topology", "teams", "mig", "cost", "scale")


def cmd_bench(args: argparse.Namespace, rest: list[str]) -> int:
    if args.target in (None, "-h", "--help"):
        asked = args.target is not None or any(a in ("-h", "--help") for a in rest)
        print(BENCH_HELP, file=sys.stdout if asked else sys.stderr)
        return 0 if asked else 2
    if args.target in NAMED_BENCHES:  # each is placement.bench.<name> with its own main(argv)
        import importlib

        bench = importlib.import_module(f"placement.bench.{args.target}")
        return int(bench.main(rest))
    from placement.bench.instances import main as instances_main

    return instances_main([args.target, *rest])


def cmd_what_if(args: argparse.Namespace) -> int:
    from placement.whatif import run

    return run(args)


def cmd_export(args: argparse.Namespace) -> int:
    from placement.api import parse
    from placement.export import export

    try:
        request = parse(_load(args.request, "request"))
    except ValidationError as exc:
        return _invalid(exc, "request")
    out = export(request, args.output, args.format, hint=not args.no_hint)
    print(f"wrote {out.path} ({out.format}): {out.variables} variables, {out.constraints} constraints"
          f"{', greedy plan as hint' if out.hinted else ''}; objective = plan terms x 1000, maximised",
          file=sys.stderr)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from placement_service.server import run
    except ImportError as exc:
        return _fail(f"the service needs its extras: pip install 'placement[service]' ({exc})")
    run(host=args.host, port=args.port, workers=args.workers)
    return 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="placement", description="Constraint-solver placement for GPU clusters.")
    sub = ap.add_subparsers(dest="command", required=True)

    s = sub.add_parser("solve", help="plan a request; the plan goes to stdout or -o, a summary to stderr")
    s.add_argument("request", help="request file (.json or .yaml)")
    s.add_argument("-o", "--output", help="write the plan here instead of stdout")
    s.add_argument("--time-limit", type=float, help="seconds for the whole solve (overrides policy)")
    s.add_argument("--workers", type=int, help="CP-SAT workers (overrides policy)")
    s.add_argument("--seed", type=int, help="CP-SAT random seed (overrides policy)")
    s.add_argument("--deterministic", action="store_true", help="reproducible mode (deterministic time)")
    s.add_argument("-v", "--verbose", action="store_true", help="CP-SAT progress on stderr")

    v = sub.add_parser("verify", help="check a plan against a request: exit 0 valid, 1 violations, 2 bad input")
    v.add_argument("request")
    v.add_argument("plan")

    g = sub.add_parser("generate", help="a seeded, realistic request (ITP gang sizes, fragmented nodes)")
    g.add_argument("--nodes", type=int, required=True)
    g.add_argument("--jobs", type=int, required=True)
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("-o", "--output")

    e = sub.add_parser("export", help="write a request's CP-SAT model (as plan() builds it) for solver research")
    e.add_argument("request", help="request file (.json or .yaml)")
    e.add_argument("--format", choices=("pb", "pbtxt"), default=None, help="default: from -o's suffix (.pbtxt: text)")
    e.add_argument("-o", "--output", required=True, help="model file to write")
    e.add_argument("--no-hint", action="store_true", help="leave out the greedy plan's solution hint")

    b = sub.add_parser("bench", help="benchmarks: 'bench DIR|FILE|generated ...' or 'bench openb ...'",
                       add_help=False)
    b.add_argument("target", nargs="?", help="'openb', 'mig', 'teams', 'generated', or a folder/file of instances")

    from placement.whatif import add_arguments as what_if_arguments

    what_if_arguments(sub.add_parser("what-if", help="solve changed copies of a request and compare them side by side"))
    sub.add_parser("usage", add_help=False,
                   help="DCGM metrics: 'usage report METRICS ...', 'usage annotate REQ METRICS -o REQ2' (usage -h)")
    sub.add_parser("kube", add_help=False,
                   help="Kubernetes objects: 'kube import DIR -o REQ', 'kube plan DIR', 'kube export REQ PLAN'")

    sv = sub.add_parser("serve", help="the HTTP service (needs the 'service' extra)")
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=8000)
    sv.add_argument("--workers", type=int, default=1,
                    help="server processes, each with its own solver pool (PLACEMENT_MAX_CONCURRENT_SOLVES)")
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = parser()
    args, rest = ap.parse_known_args(argv)
    if args.command == "bench":
        return cmd_bench(args, rest)
    if args.command == "usage":
        from placement.usage import main as usage_main

        return usage_main(rest)
    if args.command == "kube":
        from placement.kube import main as kube_main

        return kube_main(rest)
    if rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    handlers = {"solve": cmd_solve, "verify": cmd_verify, "generate": cmd_generate, "serve": cmd_serve,
                "what-if": cmd_what_if, "export": cmd_export}
    try:
        return handlers[args.command](args)
    except SystemExit as exc:  # bad input files end a command with a message and code 2, not a traceback
        return exc.code if isinstance(exc.code, int) else 2


if __name__ == "__main__":
    sys.exit(main())
