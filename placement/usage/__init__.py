"""Utilisation governance: DCGM metrics → a report, and observations that feed the next plan.

    placement usage report METRICS [--request REQ] [-o REPORT.md] [--html REPORT.html] [--plots DIR]
                                   [--what-if] ...
    placement usage annotate REQ METRICS -o REQ2
    placement usage speeds RUNS.csv [--reference MODEL] [--request REQ -o REQ2]

`metrics` streams DCGM CSV or Prometheus text into bounded statistics, `report` reads them per
GPU, node, team and job (reclaim and right-sizing candidates, optional matplotlib PNGs),
`annotate` writes observations onto a request so the solver can act on them
(placement/compile/usage.py); `speeds` learns each workload's speed per GPU model from logged run
rates (placement/usage/speeds.py). This package is a face: the library never imports it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

EXIT_BAD_INPUT = 2


def _common(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--format", choices=("auto", "csv", "prom"), default="auto",
                    help="metrics format (auto: by the first meaningful line)")
    ap.add_argument("--chunk-rows", type=int, default=None,
                    help="input lines per chunk (the memory bound; default 10,000)")
    ap.add_argument("--scrape-interval", type=float, default=15.0,
                    help="seconds between Prometheus scrapes whose samples carry no timestamp")
    ap.add_argument("--idle-below", type=float, default=20.0, help="SM %% under which a sample is idle (default 20)")
    ap.add_argument("--idle-share", type=float, default=0.75,
                    help="a card idle for at least this share of its samples is a reclaim candidate (default 0.75)")
    ap.add_argument("--memory-below", type=float, default=0.30,
                    help="a job peaking under this share of its declared GPU memory is right-sized (default 0.3)")
    ap.add_argument("--headroom", type=float, default=None,
                    help="suggested MIG instance holds peak × this (default: the request's right_size_headroom, "
                         "else 1.25)")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="placement usage", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="action", required=True)
    r = sub.add_parser("report", help="utilisation report (Markdown, HTML, PNG plots)")
    r.add_argument("metrics", help="DCGM CSV or Prometheus text file (.gz accepted)")
    r.add_argument("--request", help="the request: names jobs and teams, declared memory, what is free")
    r.add_argument("-o", "--output", help="Markdown report here (default: stdout)")
    r.add_argument("--html", help="also write the report as HTML here")
    r.add_argument("--plots", metavar="DIR", help="write PNG plots here (needs matplotlib: "
                   "gpu-placement-planner[report])")
    r.add_argument("--max-rows", type=int, default=50, help="rows per table, lowest utilisation first (0: all)")
    r.add_argument("--bucket-h", type=float, default=1.0, help="heat-map time bucket in hours (grows for long windows)")
    r.add_argument("--what-if", action="store_true",
                   help="with --request: plan the request as is and without the idle free cards, side by side")
    _common(r)
    a = sub.add_parser("annotate", help="write observed_gpu_memory_gib / observed_sm_util onto a request's jobs")
    a.add_argument("request", help="request file (.json or .yaml)")
    a.add_argument("metrics", help="DCGM CSV or Prometheus text file (.gz accepted)")
    a.add_argument("-o", "--output", required=True, help="annotated request (.json, or .yaml/.yml)")
    _common(a)
    s = sub.add_parser("speeds", help="learn workloads' speed per GPU model from logged run rates")
    s.add_argument("runs", help="CSV with workload, gpu_model, throughput[, gpus] per run")
    s.add_argument("--reference", help="GPU model of speed 1.0 (default: the one most workloads ran on)")
    s.add_argument("--request", help="a request to add the workloads to (replacing ones of the same name)")
    s.add_argument("-o", "--output", help="write the request (with --request) or the workloads here "
                   "(default: stdout)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    # Only after parsing: `usage --help` and argument errors come back without loading pydantic (~0.2 s).
    import yaml
    from placement_models import format_errors
    from pydantic import ValidationError

    from placement.usage.metrics import MetricsError

    try:
        if args.action == "speeds":
            return _speeds(args)
        return _report(args) if args.action == "report" else _annotate(args)
    except ValidationError as exc:
        print("error: invalid request:", file=sys.stderr)
        for line in format_errors(exc):
            print(f"  {line}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (MetricsError, ValueError, FileNotFoundError, yaml.YAMLError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _load_request(path: str) -> tuple[Any, Any]:
    """(plain data, validated request)."""
    from placement_models import PlacementRequest

    from placement.io import load_document

    if not Path(path).is_file():
        raise FileNotFoundError(f"request file not found: {path}")
    try:
        data = load_document(path)
    except json.JSONDecodeError as exc:
        raise ValueError(f"request {path} is not valid JSON/YAML: {exc}") from None
    return data, PlacementRequest.model_validate(data)


def _analyse(args: argparse.Namespace, request: Any) -> Any:
    from placement.usage.metrics import CHUNK_ROWS, Usage, open_metrics
    from placement.usage.report import Options, analyse

    headroom = args.headroom if args.headroom is not None else (
        request.policy.right_size_headroom if request is not None else 1.25)
    options = Options(idle_below=args.idle_below, idle_share=args.idle_share, memory_below=args.memory_below,
                      headroom=headroom, max_rows=getattr(args, "max_rows", 50))
    options.check()
    start = time.perf_counter()
    reader = open_metrics(args.metrics, args.format, args.chunk_rows or CHUNK_ROWS, args.scrape_interval)
    usage = Usage.read(reader, bucket_s=3600.0 * getattr(args, "bucket_h", 1.0))
    seconds = time.perf_counter() - start
    print(f"read {usage.rows:,} samples in {usage.chunks:,} chunks from {args.metrics} in {seconds:.1f} s "
          f"({usage.rows / max(seconds, 1e-9):,.0f}/s); {len(usage.devices)} GPUs, {len(usage.workloads)} pods",
          file=sys.stderr)
    return analyse(usage, request, options)


def _report(args: argparse.Namespace) -> int:
    from placement.usage import report

    if args.what_if and not args.request:
        raise ValueError("--what-if needs --request (the plan it changes)")
    request = _load_request(args.request)[1] if args.request else None
    analysis = _analyse(args, request)
    images, note = ({}, None)
    if args.plots:
        images, note = report.plots(analysis, Path(args.plots))
        if images and args.output:  # links relative to the report
            base = Path(args.output).resolve().parent
            images = {k: _relative(Path(v), base) for k, v in images.items()}
        print(note, file=sys.stderr)
    extra = _what_if(request, analysis) if args.what_if else None
    parts = report.blocks(analysis, images, note, extra)
    text = report.markdown(parts)
    if args.output:
        Path(args.output).write_text(text)
    else:
        print(text)
    if args.html:
        Path(args.html).write_text(report.to_html(parts))
    return 0


def _relative(path: Path, base: Path) -> str:
    try:
        return str(path.resolve().relative_to(base))
    except ValueError:
        return str(path.resolve())


def _what_if(request: Any, analysis: Any) -> list[Any]:
    """Plan the request as is and without its idle free cards; the side-by-side table and what changed."""
    from placement.api import plan
    from placement.usage.annotate import idle_free_cards, reclaimed
    from placement.usage.report import Block
    from placement.whatif import diff, summarise

    cards = idle_free_cards(analysis)
    out = [Block("h2", f"What-if: remove the {len(cards)} idle free cards")]
    if not cards:
        return [*out, Block("p", "No idle card is free in the request: nothing to remove.")]
    changed = reclaimed(request, cards)
    base, after = plan(request), plan(changed)
    name = f"without {len(cards)} idle GPUs"
    rows = [summarise("as is", request, base), summarise(name, changed, after)]
    d = diff(base, after, request)
    out.append(Block("p", "Removed (marked out of service): " + ", ".join(f"{n}/gpu{g}" for n, g in cards) + "."))
    measures = (("status", "status"), ("GPUs placed", "gpus_placed"), ("jobs placed", "jobs_placed"),
                ("jobs pending", "jobs_pending"), ("objective", "objective"))
    out.append(Block("table", headers=["", "as is", name],
                     rows=[[label, *(f"{getattr(r, attr):g}" if isinstance(getattr(r, attr), float)
                                     else str(getattr(r, attr)) for r in rows)] for label, attr in measures]))
    verdict = ("Everything placed before is still placed." if not d.pending else
               f"No longer placed: {', '.join(d.pending)}.")
    moved = f" Moved: {', '.join(d.moved)}." if d.moved else ""
    out.append(Block("p", verdict + moved))
    return out


def _annotate(args: argparse.Namespace) -> int:
    import yaml

    from placement.usage.annotate import annotate

    data, request = _load_request(args.request)
    result = annotate(data, _analyse(args, request))
    out = Path(args.output)
    if out.suffix.lower() in (".yaml", ".yml"):
        out.write_text(yaml.safe_dump(result.data, sort_keys=False))
    else:
        out.write_text(json.dumps(result.data, indent=1) + "\n")
    print(f"annotated {len(result.running)} running and {len(result.pending)} pending jobs -> {out}",
          file=sys.stderr)
    if result.unseen_right_size:
        print(f"no metrics for right_size jobs (no offer until they are seen): {', '.join(result.unseen_right_size)}",
              file=sys.stderr)
    return 0


def _speeds(args: argparse.Namespace) -> int:
    import yaml
    from placement_models import PlacementRequest

    from placement.io import emit, load_document
    from placement.usage.speeds import learn, merged, read_runs

    if not Path(args.runs).is_file():
        raise FileNotFoundError(f"runs file not found: {args.runs}")
    learned = learn(read_runs(args.runs), args.reference)
    for name in learned.skipped:
        print(f"warning: workload {name} never ran on {learned.reference}: left out", file=sys.stderr)
    if args.request is not None:  # read as data: its jobs may name workloads only the runs give
        if not Path(args.request).is_file():
            raise FileNotFoundError(f"request file not found: {args.request}")
        out: Any = merged(load_document(args.request), learned)
        PlacementRequest.model_validate(out)  # the whole request, checked as the planner reads it
    else:
        out = {"workloads": learned.workloads}
    as_yaml = args.output is not None and Path(args.output).suffix.lower() in (".yaml", ".yml")
    emit(yaml.safe_dump(out, sort_keys=False) if as_yaml else json.dumps(out, indent=1), args.output)
    return 0
