"""`placement slurm run`: the placement brain of a Slurm cluster whose jobs arrive held.

    placement slurm run [--once] [--interval S] [--poll S] [--policy FILE] [--partition P ...] [--dry-run]
                        [--qos-priority QOS=N ...] [--gpu-model NAME]

Slurm is found as every Slurm tool finds it (`SLURM_CONF`, the commands on PATH). Bad options exit 2
with an `error:` line; with `--once` a failing cycle (controller down, a refused update) exits 1 after
saying why; in the loop it is said and tried again next interval. `--dry-run` prints the `scontrol`
commands a cycle would run, one shell line each, and changes nothing.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from placement.slurm.apply import printer
from placement.slurm.commands import Slurm
from placement.slurm.loop import run
from placement.slurm.read import Options


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="placement slurm", description="Place held Slurm jobs with placement.")
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="read the cluster, plan, apply through scontrol; every --interval seconds")
    r.add_argument("--once", action="store_true", help="one cycle, then exit (1 when it failed)")
    r.add_argument("--interval", type=float, default=30.0, help="most seconds between cycles (default 30)")
    r.add_argument("--poll", type=float, default=1.0,
                   help="seconds between looks at the queue (a short squeue) between cycles: a job that ends, "
                        "starts or arrives starts the next cycle at once (default 1; 0: cycle every --interval)")
    r.add_argument("--policy", metavar="FILE", help="a placement policy (JSON or YAML) for every plan")
    r.add_argument("--partition", action="append", default=[], metavar="P",
                   help="place only jobs and nodes of this partition (repeatable; default all)")
    r.add_argument("--qos-priority", action="append", default=[], metavar="QOS=N",
                   help="priority class of a QOS (repeatable; unlisted QOS count 0)")
    r.add_argument("--gpu-model", default="H100-SXM5-80GB",
                   help="GPU model of nodes whose GRES types and features name no known model")
    r.add_argument("--dry-run", action="store_true", help="print the scontrol commands instead of running them")
    r.add_argument("--timeout", type=float, default=20.0, help="seconds one Slurm command may take (default 20)")
    return ap


def _policy(path: str | None) -> dict[str, Any] | str:
    if path is None:
        return {}
    from placement_models import Policy, format_errors
    from pydantic import ValidationError

    from placement.io import DocumentError, load_document

    try:
        doc = load_document(path)
    except (DocumentError, OSError) as exc:
        return f"--policy {path}: {exc}"
    if not isinstance(doc, dict):
        return f"--policy {path}: expected a mapping of policy fields"
    try:
        Policy.model_validate(doc)
    except ValidationError as exc:
        return f"--policy {path}: " + "; ".join(format_errors(exc))
    return doc


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if not (0 < args.interval < math.inf and 0 < args.timeout < math.inf):
        return _fail("--interval and --timeout must be positive")
    if not 0 <= args.poll < math.inf:
        return _fail("--poll must be 0 (off) or positive")
    qos: dict[str, int] = {}
    for item in args.qos_priority:
        name, sep, value = item.partition("=")
        try:
            qos[name] = int(value)
        except ValueError:
            return _fail(f"--qos-priority {item!r}: expected QOS=N (N a whole number)")
        if not sep or not name:
            return _fail(f"--qos-priority {item!r}: expected QOS=N")
    from placement import catalog

    if catalog.lookup(args.gpu_model) is None:
        return _fail(f"--gpu-model {args.gpu_model!r}: unknown (known: {', '.join(catalog.known_models())})")
    policy = _policy(args.policy)
    if isinstance(policy, str):
        return _fail(policy)
    options = Options(partitions=args.partition, qos_priority=qos, policy=policy,
                      gpu_model=catalog.lookup(args.gpu_model).name)  # type: ignore[union-attr]
    slurm = Slurm(timeout_s=args.timeout, dry=printer(print) if args.dry_run else None)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        return run(slurm, options, interval_s=args.interval, once=args.once or args.dry_run, say=say,
                   poll_s=args.poll or None)
    except KeyboardInterrupt:
        return 130
