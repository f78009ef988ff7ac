"""Kubernetes in and out: Nodes, Pods, Volcano, Kueue and KAI objects -> a v1 request; a plan -> bindings.

Library:

    from placement.kube import ImportOptions, import_paths, export
    imported = import_paths(["objects/"], ImportOptions(block_label="example.com/block"))
    plan = placement.plan(imported.request)
    document, notes = export(imported.request, plan, "bindings", imported.origins)

Command (`placement kube ...`, dispatched here by placement/cli.py):

    placement kube import PATH... [-o request.json]
    placement kube plan PATH... [--format table|bindings|patches|kueue] [--plan-out plan.json]
    placement kube export REQUEST PLAN [--format ...]     REQUEST: a v1 request or Kubernetes objects

PATH `-` reads the objects from stdin (`kubectl get ... -o json | placement kube plan -`), and
`kubectl placement ...` (placement.kube.plugin, installed as `kubectl-placement`) runs these
commands as a kubectl plugin. Warnings (what the request cannot express) go to stderr, one per
line; invalid objects exit 2 with one line per problem naming the object, the file and the field.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placement.helptext import DefaultsFormatter
from placement.kube.formats import DESCRIPTIONS, FORMATS

if TYPE_CHECKING:
    from placement_models import PlacementRequest, Plan

    from placement.kube.exporter import export, generic_origins
    from placement.kube.importer import (
        Imported,
        ImportOptions,
        Origins,
        import_documents,
        import_objects,
        import_paths,
    )
    from placement.kube.objects import KubeError, KubeWarning
    from placement.kube.quantity import QuantityError, parse_quantity

__all__ = ["FORMATS", "ImportOptions", "Imported", "KubeError", "KubeWarning", "Origins", "QuantityError", "export",
           "generic_origins", "import_documents", "import_objects", "import_paths", "main", "parse_quantity"]

#: The library's names, each loaded from its module on first use: `placement kube --help` (and
#: `kubectl placement --help`) then need neither pydantic nor numpy, and answer at once.
_LAZY = {
    "export": "exporter", "generic_origins": "exporter",
    "Imported": "importer", "ImportOptions": "importer", "Origins": "importer", "import_documents": "importer",
    "import_objects": "importer", "import_paths": "importer",
    "KubeError": "objects", "KubeWarning": "objects",
    "QuantityError": "quantity", "parse_quantity": "quantity",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"placement.kube.{module}"), name)
    globals()[name] = value
    return value


def _options(args: argparse.Namespace) -> ImportOptions:
    from placement.kube.importer import ImportOptions

    prices: dict[str, float] = {}
    for item in args.price or []:
        pool, sep, value = item.partition("=")
        try:
            prices[pool] = float(value)
        except ValueError:
            raise SystemExit(_fail(f"--price {item!r}: expected POOL=PRICE_PER_GPU_HOUR")) from None
        if not sep or not pool or prices[pool] < 0:
            raise SystemExit(_fail(f"--price {item!r}: expected POOL=PRICE_PER_GPU_HOUR (non-negative)"))
    policy: dict[str, Any] = {}
    for key, value in (("time_limit_s", getattr(args, "time_limit", None)), ("workers", getattr(args, "workers", None)),
                       ("seed", getattr(args, "seed", None))):
        if value is not None:
            policy[key] = value
    options = ImportOptions(rack_label=args.rack_label, block_label=args.block_label, prices=prices,
                            ignore_unknown=args.ignore_unknown, policy=policy)
    if args.pool_label:
        options.pool_labels = tuple(args.pool_label)
    return options


def _count(n: int, noun: str) -> str:
    """'1 node', '2 nodes': the summary is read by people."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _import(paths: list[str], options: ImportOptions) -> Imported:
    from placement.kube.importer import import_paths
    from placement.kube.objects import KubeError

    try:
        imported = import_paths(paths, options)
    except KubeError as exc:
        print("error: cannot import the Kubernetes objects:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        raise SystemExit(2) from None
    for w in imported.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return imported


def _write(document: Any, output: str | None) -> None:
    import yaml

    if isinstance(document, str):
        text = document
    elif output and Path(output).suffix.lower() in (".yaml", ".yml"):
        text = yaml.safe_dump(document, sort_keys=False)
    else:
        text = json.dumps(document, indent=2) + "\n"
    if output:
        Path(output).write_text(text)
    else:
        sys.stdout.write(text)


def cmd_import(args: argparse.Namespace) -> int:
    imported = _import(args.paths, _options(args))
    _write(imported.request.model_dump(mode="json", exclude_defaults=True), args.output)
    r = imported.request
    print(f"imported {_count(len(r.cluster.nodes), 'node')}, {_count(len(r.cluster.running), 'running job')}, "
          f"{_count(len(r.jobs), 'pending job')}, {_count(len(r.teams), 'team')}; "
          f"{_count(len(imported.warnings), 'warning')}", file=sys.stderr)
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from placement.api import plan
    from placement.kube.exporter import export

    imported = _import(args.paths, _options(args))
    result = plan(imported.request)
    if args.plan_out:
        Path(args.plan_out).write_text(result.model_dump_json(indent=2) + "\n")
    document, notes = export(imported.request, result, args.format, imported.origins)
    _write(document, args.output)
    if args.format != "table":
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
    return 0


def _is_kube(path: str) -> bool:
    """Kubernetes objects (a folder, or documents with `kind`) rather than one v1 request."""
    import yaml

    p = Path(path)
    if p.is_dir():
        return True
    if p.suffix.lower() == ".gz":
        return False  # a compressed v1 request (the library's NAME.json.gz); load_document reads it
    docs = list(yaml.safe_load_all(p.read_text()))
    return len(docs) != 1 or (isinstance(docs[0], dict) and "kind" in docs[0] and "cluster" not in docs[0])


def cmd_export(args: argparse.Namespace) -> int:
    import yaml
    from placement_models import PlacementRequest, Plan, format_errors
    from pydantic import ValidationError

    from placement.io import load_document
    from placement.kube.exporter import export

    try:
        if _is_kube(args.request):
            imported = _import([args.request], _options(args))
            request, origins = imported.request, imported.origins
        else:
            request, origins = PlacementRequest.model_validate(load_document(args.request)), None
        result = Plan.model_validate(load_document(args.plan))
    except FileNotFoundError as exc:
        return _fail(f"file not found: {exc.filename}")
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        return _fail(f"not valid JSON/YAML: {exc}")
    except ValidationError as exc:
        print("error: invalid input:", file=sys.stderr)
        for line in format_errors(exc):
            print(f"  {line}", file=sys.stderr)
        return 2
    unknown = sorted({a.job for a in result.assignments} - {j.name for j in request.jobs})
    if unknown:
        return _fail(f"the plan places jobs the request does not have: {', '.join(unknown[:5])}")
    document, notes = export(request, result, args.format, origins)
    _write(document, args.output)
    if origins is None and args.format in ("bindings", "patches"):
        _warn_derived(request, result, args.format)
    if args.format != "table":
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
    return 0


def _warn_derived(request: PlacementRequest, result: Plan, fmt: str) -> None:
    """Say when objects name pods the export made up: applied to a cluster, they would fail (or, worse, bind
    pods that happen to have the name), and nothing else in the output tells them apart."""
    from placement.kube.exporter import derived_pods

    made_up = derived_pods(request, result)
    if not made_up:
        return
    what = "Bindings" if fmt == "bindings" else "patches"
    print(f"warning: {len(made_up)} of the {what} name synthetic pods ({', '.join(made_up[:3])}"
          f"{', ...' if len(made_up) > 3 else ''}), marked placement.dev/pod-name: derived: the request does not "
          "carry those pods' names (tasks[].pod_names, which `placement kube import` writes for pods that exist); "
          "import the request again, or pass the Kubernetes objects as REQUEST", file=sys.stderr)


def _import_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rack-label", help="node label whose value is the node's rack, e.g. a topograph label "
                   "(default: none, racks unknown)")
    p.add_argument("--block-label", help="node label whose value is the node's block, e.g. a network spine "
                   "(default: none, blocks unknown)")
    p.add_argument("--pool-label", action="append", help="node label naming the node's pool (repeatable; default: "
                   "Karpenter, GKE, EKS and AKS node-group labels)")
    p.add_argument("--price", action="append", metavar="POOL=PRICE", help="price per GPU-hour of a pool "
                   "(repeatable; default: no prices)")
    p.add_argument("--ignore-unknown", action="store_true", help="skip objects of unknown kinds with a warning "
                   "(default: they are an error)")


def parser(prog: str = "placement kube") -> argparse.ArgumentParser:
    """The commands' parser; `prog` is how the user called them (`kubectl placement` through the plugin), so
    usage lines and errors name the command the user typed."""
    fmt = {"formatter_class": DefaultsFormatter}
    paths = "YAML/JSON files or folders of Kubernetes objects ('-': standard input" + (
        "; kubectl's -f/--filename PATH names them too, and with none, standard input is read)"
        if prog.startswith("kubectl") else ")")
    formats = "; ".join(f"{name}: {text}" for name, text in DESCRIPTIONS.items())
    ap = argparse.ArgumentParser(prog=prog, description="Kubernetes objects in, bindings out.")
    sub = ap.add_subparsers(dest="action", required=True)
    i = sub.add_parser("import", help="Kubernetes objects -> a v1 request (stdout or -o)", **fmt)
    i.add_argument("paths", nargs="+", help=paths)
    i.add_argument("-o", "--output", help="write the request here, .json or .yaml (default: standard output)")
    _import_arguments(i)
    p = sub.add_parser("plan", help="import, plan, and export in one step", **fmt)
    p.add_argument("paths", nargs="+", help=paths)
    p.add_argument("--format", choices=FORMATS, default="table", help=f"what to write ({formats})")
    p.add_argument("-o", "--output", help="write the export here (default: standard output)")
    p.add_argument("--plan-out", help="also write the v1 plan here (default: not written)")
    p.add_argument("--time-limit", type=float, help="seconds for the solve (default: policy.time_limit_s, 10)")
    p.add_argument("--workers", type=int, help="CP-SAT workers (default: policy.workers, 2)")
    p.add_argument("--seed", type=int, help="CP-SAT random seed (default: policy.seed, 0)")
    _import_arguments(p)
    e = sub.add_parser("export", help="write a plan back as Kubernetes objects or a table", **fmt)
    e.add_argument("request", help="the v1 request, or the Kubernetes objects it was imported from")
    e.add_argument("plan", help="the v1 plan")
    e.add_argument("--format", choices=FORMATS, default="bindings", help=f"what to write ({formats})")
    e.add_argument("-o", "--output", help="write the export here (default: standard output)")
    _import_arguments(e)
    return ap


def main(argv: list[str] | None = None, prog: str = "placement kube") -> int:
    handlers = {"import": cmd_import, "plan": cmd_plan, "export": cmd_export}
    try:
        args = parser(prog).parse_args(sys.argv[1:] if argv is None else argv)
        return handlers[args.action](args)
    except SystemExit as exc:  # usage errors and bad input end with their message and a code, not a traceback
        return exc.code if isinstance(exc.code, int) else 2
