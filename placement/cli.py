"""The `placement` command: a thin face that parses, calls the library, and renders.

Bad input of any kind ends a command with one `error: ...` line (or a few, one per field) on stderr
and exit code 2, never a traceback: a person reading a traceback cannot tell a broken file from a
broken program. The checks that can be made before the work are made before it: an output path
whose folder does not exist is refused before a solve, not after it, when the plan would be lost.

Imports are lazy: `placement --help` and `placement solve --help` load neither OR-Tools, numpy nor
pydantic, so help and argument errors come back at once; each command imports what it needs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placement.helptext import DefaultsFormatter

if TYPE_CHECKING:
    from placement_models import PlacementRequest, Plan
    from pydantic import ValidationError

#: Largest request, plan or scenario file read (bytes, after gzip). A 12,500-node generated request is
#: about 8 MB; the cap keeps a wrong file (a disk image, a log) from eating the machine's memory.
#: PLACEMENT_MAX_INPUT_BYTES overrides it.
MAX_INPUT_BYTES = 256 * 1024 * 1024

#: The file name standing for standard input (requests and plans) or standard output (-o).
STDIO = "-"


def _max_input_bytes() -> int:
    raw = os.environ.get("PLACEMENT_MAX_INPUT_BYTES")
    if raw is None:
        return MAX_INPUT_BYTES
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(_fail(f"PLACEMENT_MAX_INPUT_BYTES must be a whole number of bytes, not {raw!r}")) from None
    if value < 1:
        raise SystemExit(_fail(f"PLACEMENT_MAX_INPUT_BYTES must be at least 1, not {value}"))
    return value


def _load(path: str, what: str) -> Any:
    """The document at `path` ('-': standard input), or end the command with an error naming the problem."""
    from placement.io import DocumentError, parse_document

    limit = _max_input_bytes()
    if path == STDIO:
        try:
            raw = sys.stdin.buffer.read(limit + 1)  # one byte more than allowed tells "too big" from "just fits"
        except OSError as exc:
            raise SystemExit(_fail(f"cannot read the {what} from standard input: {exc.strerror or exc}")) from None
        try:  # JSON, else YAML; a gzip stream is known by its first two bytes
            return parse_document(raw, ".gz" if raw[:2] == b"\x1f\x8b" else None, max_bytes=limit)
        except DocumentError as exc:
            raise SystemExit(_fail(f"{what} on standard input: {exc}")) from None
    p = Path(path)
    if p.is_dir():
        raise SystemExit(_fail(f"{what} {path} is a folder, not a file"))
    try:
        with p.open("rb") as f:  # read at most the cap: a pipe or a device (/dev/zero) has no size to check first
            raw = f.read(limit + 1)
    except FileNotFoundError:
        raise SystemExit(_fail(f"{what} file not found: {path}")) from None
    except PermissionError:
        raise SystemExit(_fail(f"{what} file {path} cannot be read: permission denied")) from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        reason = getattr(exc, "strerror", None) or exc
        raise SystemExit(_fail(f"{what} file {path!r} cannot be read: {reason}")) from None
    suffix = p.suffix.lower()
    if suffix == ".gz":  # NAME.json.gz, NAME.yaml.gz: the syntax is the suffix before .gz
        suffix = Path(p.stem).suffix.lower() + ".gz"
    try:
        return parse_document(raw, suffix, max_bytes=limit)
    except DocumentError as exc:
        raise SystemExit(_fail(f"{what} {path}: {exc}")) from None


def _check_output(path: str | None, what: str = "output") -> None:
    """Refuse an -o path that cannot be written, before any work is done for it."""
    if path is None or path == STDIO:
        return
    p = Path(path)
    if p.is_dir():
        raise SystemExit(_fail(f"{what} {path} is a folder; give a file name"))
    folder = p.parent
    if not folder.is_dir():
        reason = "is not a folder" if folder.exists() else "does not exist"
        raise SystemExit(_fail(f"cannot write {what} {path}: folder {folder} {reason}"))
    if not os.access(folder, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise SystemExit(_fail(f"cannot write {what} {path}: permission denied"))


def _emit(text: str, output: str | None, what: str = "output") -> None:
    from placement.io import emit

    try:
        emit(text, None if output == STDIO else output)
    except OSError as exc:
        raise SystemExit(_fail(f"cannot write {what} {output}: {exc.strerror or exc}")) from None


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _invalid(exc: ValidationError, what: str) -> int:
    from placement_models import format_errors

    print(f"error: invalid {what}:", file=sys.stderr)
    for line in format_errors(exc):
        print(f"  {line}", file=sys.stderr)
    return 2


def _parse(data: Any, what: str = "request") -> PlacementRequest:
    """A validated request, or end the command with one line per problem (exit 2).

    Validates with the wire format alone, not through `placement.api`: that would load OR-Tools and the
    whole planner (~0.5 s) for `verify`, which never solves."""
    from placement_models import PlacementRequest
    from pydantic import ValidationError

    try:
        return PlacementRequest.model_validate(data)
    except ValidationError as exc:
        raise SystemExit(_invalid(exc, what)) from None


def _known_models(request: PlacementRequest) -> None:
    """Unknown GPU models are bad input for every command, as `solve` reports them (the checker alone would
    call a plan on them valid, or flag only the pods that declare GPU memory)."""
    from placement_models import ErrorList
    from pydantic import ValidationError

    from placement import catalog

    errors = ErrorList("PlacementRequest")
    where: list[tuple[tuple[str | int, ...], str]] = [
        (("cluster", "nodes", i, "gpu_model"), n.gpu_model)
        for i, n in enumerate(request.cluster.nodes) if n.gpu_model is not None
    ]
    where += [
        (("cluster", "pools", i, "provisionable", "node", "gpu_model"), p.provisionable.node.gpu_model)
        for i, p in enumerate(request.cluster.pools)
        if p.provisionable is not None and p.provisionable.node is not None and p.provisionable.node.gpu_model
    ]
    for loc, model in where:
        if catalog.lookup(model) is None:
            errors.add(loc, f"unknown GPU model '{model}' (known: {', '.join(catalog.known_models())})", model)
    try:
        errors.raise_if_any()
    except ValidationError as exc:
        raise SystemExit(_invalid(exc, "request")) from None


def _require_gpus(request: PlacementRequest) -> None:
    """A node that names a GPU model but not `gpus` would have 0 GPUs (the wire format's default): almost always
    a missing field, and planning around it only shows up later as one "GPU index out of range" per pod the
    node runs. So it is bad input, named by its field; `gpus: 0` says a node has no GPUs on purpose."""
    from placement_models import ErrorList
    from pydantic import ValidationError

    errors = ErrorList("PlacementRequest")
    for i, n in enumerate(request.cluster.nodes):
        if n.gpu_model is not None and "gpus" not in n.model_fields_set:
            errors.add(("cluster", "nodes", i, "gpus"), f"node {n.name} names gpu_model '{n.gpu_model}' but not how "
                       "many GPUs it has (write gpus: 0 for a node without GPUs)", None)
    try:
        errors.raise_if_any()
    except ValidationError as exc:
        raise SystemExit(_invalid(exc, "request")) from None


def _count(n: int, noun: str, plural: str | None = None) -> str:
    """'1 GPU', '2 GPUs': summaries are read by people."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def _num(x: float | None) -> str:
    """Strict priority classes make objectives large: digits grouped, never an exponent that hides the change."""
    if x is None:
        return "n/a"
    return f"{x:,.3f}".rstrip("0").rstrip(".") if abs(x) >= 1e6 else f"{x:g}"


def _ended(plan: Plan) -> str | None:
    """Why the solve took what it took, in words: whether more time could have bought a better plan."""
    s = plan.solver
    searched = s.search != "none"
    took = f" after {s.phases['search']:.2f}s of search" if searched and "search" in s.phases else ""
    gap = ""
    if s.bound is not None and s.objective is not None:  # s.gap is rounded to 1e-6: strict weights hide in it
        below = max(0.0, s.bound - s.objective)
        relative = below / max(1.0, abs(s.bound))
        gap = f" ({_num(round(below, 3))} below the {s.bound_kind} bound, {relative:.2g} relative)"
    texts = {
        "optimal": f"search ended: the plan is proven optimal{took}" if searched else
                   "search ended: none needed, the greedy plan is proven optimal",
        "gap_limit": f"search ended early: the plan is proven within policy.relative_gap_limit{gap}{took}"
                     if searched else "search ended: none needed, the greedy plan is proven within "
                                      f"policy.relative_gap_limit{gap}",
        "trimmed_optimal": f"search ended: the trimmed model is solved to optimality{took}; more time would not "
                           f"improve it{gap}",
        "time_limit": f"search ended: time limit{took}; not proven optimal{gap}, more time may find better"
                      if searched else "search ended: no time was left for a search (see the note)",
        "stopped": f"search ended: stopped by the caller{took}",
    }
    return texts.get(s.ended) if s.ended else None


def summary(plan: Plan) -> str:
    """A few lines a person reads after a solve: what was placed, what waits, how good, how fast."""
    jobs = {a.job for a in plan.assignments}
    whole = sum(len(a.gpus) for a in plan.assignments if a.mig is None and a.gpu_share is None)
    mig = sum(1 for a in plan.assignments if a.mig is not None and a.gpu_share is None)
    shared = sum(1 for a in plan.assignments if a.gpu_share is not None and a.mig is None)
    instance = sum(1 for a in plan.assignments if a.gpu_share is not None and a.mig is not None)
    gpus = _count(whole, "whole GPU") + (f", {_count(mig, 'MIG instance')}" if mig else "") + (
        f", {_count(shared, 'shared-GPU pod')}" if shared else "") + (
        f", {_count(instance, 'shared-instance pod')}" if instance else "")
    s = plan.solver
    gap = "n/a" if s.gap is None else f"{100 * s.gap:.2f}% (to the {s.bound_kind} bound)"
    # an unscored plan (no time for the model that scores it) claims no objective
    objective = _num(plan.objective.total) if s.objective is not None or plan.objective.terms else "n/a (unscored)"
    lines = [
        f"status {plan.status} ({s.mode}, winner: {s.winner}); objective {objective} "
        f"(greedy {_num(s.baseline_objective)}); gap {gap}",
        f"placed {_count(len(jobs), 'job')}, {_count(len(plan.assignments), 'pod')}, {gpus}; "
        f"pending {_count(len(plan.pending), 'job')}",
        "terms: " + ", ".join(f"{k} {_num(v)}" for k, v in plan.objective.terms.items()),
        f"search {s.search}" + (" over a trimmed candidate set" if s.restricted else "") + "; "
        f"model {_count(s.variables, 'variable')}, {_count(s.constraints, 'constraint')}; "
        f"first plan {_num(s.first_plan_s)}s, build {_num(s.build_s)}s, total {_num(s.wall_s)}s, "
        f"workers {s.workers}, seed {s.seed}",
    ]
    ended = _ended(plan)
    if ended:
        lines.append(ended)
    if s.phases:
        lines.append("phases: " + ", ".join(f"{k} {v:.2f}s" for k, v in s.phases.items()))
    if s.note:
        lines.append(f"note: {s.note}")
    if plan.preemptions or plan.teams:
        fairness = "n/a" if plan.fairness_index is None else f"{plan.fairness_index:g}"
        lines.append(f"preempted {_count(len(plan.preemptions), 'job')}; {_count(len(plan.teams), 'team')}, "
                     f"fairness index (Jain) {fairness}")
    for p in plan.preemptions[:10]:
        lines.append(f"  preempt {p.job}: {p.reason}")
    for p in plan.pending[:10]:
        lines.append(f"  pending {p.job}" + (f" [{p.constraint}]" if p.constraint else "") + f": {p.reason}")
    if len(plan.pending) > 10:
        lines.append(f"  ... and {len(plan.pending) - 10:,} more pending (see the plan)")
    return "\n".join(lines)


def cmd_solve(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from placement.api import plan

    _check_output(args.output, "plan")
    data = _load(args.request, "request")
    if isinstance(data, dict):
        policy = data.setdefault("policy", {}) if isinstance(data.get("policy", {}), dict) else None
        if policy is not None:
            for key, value in (("time_limit_s", args.time_limit), ("workers", args.workers), ("seed", args.seed)):
                if value is not None:
                    policy[key] = value
            if args.deterministic:
                policy["deterministic"] = True
    request = _parse(data)
    _require_gpus(request)
    try:
        log = (lambda line: print(line, file=sys.stderr)) if args.verbose else None
        result = plan(request, log=log)
    except ValidationError as exc:  # found while indexing, e.g. an unknown GPU model
        return _invalid(exc, "request")
    _emit(result.model_dump_json(indent=2), args.output, "plan")
    print(summary(result), file=sys.stderr)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from placement_models import Plan
    from pydantic import ValidationError

    from placement.verify import verify

    if args.request == STDIO and args.plan == STDIO:
        return _fail("only one of the request and the plan can come from standard input ('-')")
    request = _parse(_load(args.request, "request"))
    _known_models(request)
    _require_gpus(request)
    try:
        plan = Plan.model_validate(_load(args.plan, "plan"))
    except ValidationError as exc:
        return _invalid(exc, "plan")
    violations = verify(request, plan)
    for v in violations:
        print(v)
    if not violations:
        jobs = len({a.job for a in plan.assignments})
        print(f"valid: {_count(len(plan.assignments), 'pod')} of {_count(jobs, 'job')}, {len(plan.pending):,} pending",
              file=sys.stderr)
    return 1 if violations else 0


def cmd_generate(args: argparse.Namespace) -> int:
    import json

    from placement.generate import generate

    _check_output(args.output, "request")
    try:
        request = generate(args.nodes, args.jobs, args.seed)
    except ValueError as exc:
        return _fail(str(exc))
    _emit(json.dumps(request, indent=1), args.output, "request")
    return 0


BENCH_HELP = """usage: placement bench TARGET [options]   (placement bench TARGET --help: that bench's options)

targets (each bench's --help lists its options):
  DIR, FILE        every request in a folder (or one file, .json/.yaml/.json.gz): variables, build s,
                   first plan s, gap, objective vs best known vs greedy (e.g. instances/library)
  generated        seeded generated clusters (--sizes 64,256 --seeds 1-3)
  openb            the FGD paper's protocol on the Alibaba openb traces (data: --data DIR or PLACEMENT_DATA)
  cycles           the scheduler loop over a real trace (ITP; data: --data DIR or PLACEMENT_DATA): arrivals,
                   departures, a plan every cycle; wait, completion and utilisation against FIFO, Volcano-,
                   Kueue-, Slurm- and Tiresias-like peers
  topology         NVL72 + HGX racks: solver vs topology-aware greedy
  mig              openb fractions as MIG profiles: GPUs used vs first-fit templates
                   (data: the openb traces, --data DIR or PLACEMENT_DATA)
  teams            Helios quota shapes (data: --data DIR or PLACEMENT_DATA)
  cost             spot fleet pricing (data: --data DIR or PLACEMENT_DATA)
  scale            one plan() call per size in a fresh process: whole-call time, peak memory, their slope
                   against nodes × jobs (--sizes 1024,4096 --time-limit 10)
  changes          a loop's change against a kept state (placement.states) vs the whole request: bytes sent,
                   read-and-check and whole-call seconds (--nodes 12500 --shares 0.001,0.01,0.1)
  slurm            an ITP slice replayed into a real Slurm (placement.slurm.lab): Slurm's own backfill
                   against placement deciding, numbers from Slurm's job completion log
  solvers          the exported MPS solved by HiGHS and SCIP beside CP-SAT (placement.plan), same time limit
                   and threads; each MIP solution read back into a plan and verified (default: instances/library)
  fleet            Gavel's job mix (OSDI'20) on a third each V100/P100/K80 nodes: our optimizer without and with
                   job speeds against a Gavel-like max-min fairness scheduler; JCT, utilisation, Jain's fairness"""


NAMED_BENCHES = ("openb", "cycles", "topology", "teams", "mig", "cost", "scale", "changes", "slurm", "solvers",
                 "fleet")


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


def cmd_export(args: argparse.Namespace) -> int:
    from placement.export import FORMATS, ExportError, export, format_of

    try:
        fmt = args.format or format_of(args.output)
    except ValueError as exc:
        return _fail(str(exc))
    if fmt not in FORMATS:
        return _fail(f"unknown export format {fmt!r} (known: {', '.join(FORMATS)})")
    if args.output == STDIO:
        return _fail("export writes a file: give -o a file name (standard output is not supported)")
    _check_output(args.output, "model")
    request = _parse(_load(args.request, "request"))
    _require_gpus(request)
    from pydantic import ValidationError

    try:
        out = export(request, args.output, fmt, hint=not args.no_hint)
    except ValidationError as exc:  # found while indexing, e.g. an unknown GPU model
        return _invalid(exc, "request")
    except ExportError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot write model {args.output}: {exc.strerror or exc}")
    hint = ""
    if out.hinted:
        hint = ", greedy plan as hint"
    elif fmt in ("mps", "lp") and not args.no_hint:
        hint = f" (no hint: {fmt.upper()} has none)"
    print(f"wrote {out.path} ({out.format}): {_count(out.variables, 'variable')}, "
          f"{_count(out.constraints, 'constraint')}{hint}; objective = plan terms x 1000, maximised",
          file=sys.stderr)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from placement_service.server import run
    except ImportError as exc:
        return _fail(f"the service needs its extras: pip install 'gpu-placement-planner[service]' ({exc})")
    run(host=args.host, port=args.port, workers=args.workers)
    return 0


def _at_least(least: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least `least` (argparse turns the error into exit 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, not {value}")
        return value

    return parse


#: Subcommands whose module parses its own arguments: name -> (module with main(argv), help line). A new
#: such subcommand is one line here; its module is imported only when it runs, so help stays fast.
DELEGATED: dict[str, tuple[str, str]] = {
    "what-if": ("placement.whatif_cli", "solve changed copies of a request and compare them side by side "
                "('what-if REQUEST --scenario FILE ...'; what-if -h)"),
    "usage": ("placement.usage", "DCGM metrics: 'usage report METRICS ...', 'usage annotate REQ METRICS -o REQ2' "
              "(usage -h)"),
    "kube": ("placement.kube", "Kubernetes objects: 'kube import DIR -o REQ', 'kube plan DIR', "
             "'kube export REQ PLAN'"),
    "sweep": ("placement.sweep.cli", "a grid of what-if changes, each point solved or simulated over a trace, "
              "locally or on Ray ('sweep REQUEST --grid KEY=V1,V2 ...'; sweep -h)"),
    "slurm": ("placement.slurm", "place held Slurm jobs via scontrol ('slurm run [--once] [--dry-run]'; slurm run -h)"),
}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="placement", description="Constraint-solver placement for GPU clusters.")
    sub = ap.add_subparsers(dest="command", required=True)
    fmt = {"formatter_class": DefaultsFormatter}

    s = sub.add_parser("solve", help="plan a request; the plan goes to stdout or -o, a summary to stderr", **fmt)
    s.add_argument("request", help="request file (.json, .yaml, .json.gz; '-': standard input)")
    s.add_argument("-o", "--output", help="write the plan here (default: standard output)")
    s.add_argument("--time-limit", type=float, help="seconds for the whole solve (default: the request's "
                   "policy.time_limit_s, 10)")
    s.add_argument("--workers", type=int, help="CP-SAT workers (default: the request's policy.workers, 2)")
    s.add_argument("--seed", type=int, help="CP-SAT random seed (default: the request's policy.seed, 0)")
    s.add_argument("--deterministic", action="store_true", help="reproducible mode (deterministic time); "
                   "default: the request's policy.deterministic, off")
    s.add_argument("-v", "--verbose", action="store_true", help="CP-SAT progress on stderr (default: off)")

    v = sub.add_parser("verify", help="check a plan against a request: exit 0 valid, 1 violations, 2 bad input",
                       **fmt)
    v.add_argument("request", help="request file ('-': standard input)")
    v.add_argument("plan", help="plan file ('-': standard input)")

    g = sub.add_parser("generate", help="a seeded, realistic request (ITP gang sizes, fragmented nodes)", **fmt)
    g.add_argument("--nodes", type=_at_least(1), required=True, help="nodes in the cluster (required)")
    g.add_argument("--jobs", type=_at_least(0), required=True, help="pending jobs (required)")
    g.add_argument("--seed", type=int, default=1, help="random seed: the same seed, the same request")
    g.add_argument("-o", "--output", help="write the request here (default: standard output)")

    e = sub.add_parser("export", help="write a request's model (as plan() builds it): CP-SAT pb/pbtxt, or MPS/LP "
                                      "for other solvers", **fmt)
    e.add_argument("request", help="request file (.json, .yaml, .json.gz; '-': standard input)")
    e.add_argument("--format", choices=("pb", "pbtxt", "mps", "lp"), default=None,
                   help="default: from -o's suffix (.pbtxt/.txt: CP-SAT text, .mps, .lp, else CP-SAT binary)")
    e.add_argument("-o", "--output", required=True, help="model file to write")
    e.add_argument("--no-hint", action="store_true", help="leave out the greedy plan's solution hint (default: "
                   "the hint is written)")

    b = sub.add_parser("bench", help="benchmarks: 'bench DIR|FILE|generated ...' or 'bench openb ...'",
                       add_help=False)
    b.add_argument("target", nargs="?", help="'openb', 'mig', 'teams', 'generated', or a folder/file of instances")

    for name, (_module, text) in DELEGATED.items():
        sub.add_parser(name, add_help=False, help=text)

    sv = sub.add_parser("serve", help="the HTTP service (needs the 'service' extra)", **fmt)
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    sv.add_argument("--port", type=int, default=8000, help="TCP port to listen on")
    sv.add_argument("--workers", type=_at_least(1), default=1,
                    help="server processes, each with its own solver pool (PLACEMENT_MAX_CONCURRENT_SOLVES)")
    return ap


def _delegate(name: str, rest: list[str]) -> int:
    import importlib

    module = importlib.import_module(DELEGATED[name][0])
    return int(module.main(rest))


def _unexpected(exc: BaseException) -> int:
    """The last line of defence: no input may end in a traceback. PLACEMENT_DEBUG=1 shows it (for a bug report)."""
    from placement.io import DocumentError

    if isinstance(exc, DocumentError):  # a subcommand that reads its own files; the message names the file
        return _fail(str(exc))
    validation = sys.modules.get("pydantic")
    if validation is not None and isinstance(exc, validation.ValidationError):
        return _invalid(exc, "input")
    if isinstance(exc, RecursionError):
        return _fail("the input nests too deeply to process")
    if isinstance(exc, MemoryError):
        return _fail("out of memory: the input is too large for this machine")
    if isinstance(exc, UnicodeError):
        return _fail(f"text that is not valid UTF-8: {exc}")
    if isinstance(exc, IsADirectoryError):
        return _fail(f"{exc.filename} is a folder, not a file")
    if isinstance(exc, OSError):
        where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        return _fail(f"cannot read or write{where}: {exc.strerror or exc}")
    return _fail(f"unexpected {type(exc).__name__}: {exc} (a bug, not your input's fault if the input is valid: "
                 "PLACEMENT_DEBUG=1 shows the traceback for a report)")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = parser()
    args, rest = ap.parse_known_args(argv)
    try:
        if args.command == "bench":
            return cmd_bench(args, rest)
        if args.command in DELEGATED:
            return _delegate(args.command, rest)
        if rest:
            ap.error(f"unrecognized arguments: {' '.join(rest)}")
        handlers = {"solve": cmd_solve, "verify": cmd_verify, "generate": cmd_generate, "serve": cmd_serve,
                    "export": cmd_export}
        try:
            return handlers[args.command](args)
        except SystemExit as exc:  # bad input ends a command with a message and code 2, not a traceback
            return exc.code if isinstance(exc.code, int) else 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if os.environ.get("PLACEMENT_DEBUG"):
            raise
        return _unexpected(exc)


if __name__ == "__main__":
    sys.exit(main())
