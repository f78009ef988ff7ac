"""The face of what-if: `placement what-if REQUEST --scenario FILE...` (the engine is placement.whatif).

Apart from the engine because the engine defines its scenarios as pydantic models: importing it
loads the wire format (~0.2 s), which `what-if --help` and an argument error should never wait for.
The arguments are parsed first; the engine, OR-Tools and pydantic load only for a real run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from placement.executor import EXECUTOR_HELP

DESCRIPTION = ("What-if: change the request, solve every variant, and show the plans side by side "
               "(scenario files: see placement.whatif).")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("request", help="request file (.json, .yaml, .json.gz)")
    ap.add_argument("--scenario", "-s", nargs="+", required=True, metavar="FILE",
                    help="scenario files (one scenario or a list each)")
    ap.add_argument("--processes", type=int, help="parallel solves (default: one per core; with --executor ray "
                    "and no address: the CPUs of the Ray runtime started here)")
    ap.add_argument("--executor", default="local", help=EXECUTOR_HELP)
    ap.add_argument("--time-limit", type=float, help="seconds per solve (default: the request's policy.time_limit_s)")
    ap.add_argument("--deterministic", action="store_true", help="reproducible solves (deterministic time)")
    ap.add_argument("--json", metavar="OUT", help="also write rows, diffs and plans as JSON here (default: none)")


def with_options(data: Any, time_limit: float | None, deterministic: bool, workers: int | None = None) -> Any:
    """A request document with the command line's policy options set (a malformed one is left to validation)."""
    if isinstance(data, dict):
        policy = data.setdefault("policy", {})
        if isinstance(policy, dict):
            if time_limit is not None:
                policy["time_limit_s"] = time_limit
            if deterministic:
                policy["deterministic"] = True
            if workers is not None:
                policy["workers"] = workers
    return data


def run(args: argparse.Namespace) -> int:
    import yaml
    from placement_models import PlacementRequest, format_errors
    from pydantic import ValidationError

    from placement.executor import ExecutorError, make_executor
    from placement.io import load_document
    from placement.whatif import ScenarioError, load_scenarios, render_diffs, what_if

    try:
        data = with_options(load_document(args.request), args.time_limit, args.deterministic)
        request = PlacementRequest.model_validate(data)
        scenarios = [s for path in args.scenario for s in load_scenarios(path)]
        spec = getattr(args, "executor", None) or "local"
        if spec == "local":
            result = what_if(request, scenarios, args.processes)
        else:
            with make_executor(spec, args.processes, cpus_per_task=request.policy.workers) as executor:
                result = what_if(request, scenarios, args.processes, executor)
    except ValidationError as exc:
        print("error: invalid request or scenario:", file=sys.stderr)
        for line in format_errors(exc):
            print(f"  {line}", file=sys.stderr)
        return 2
    except (ScenarioError, ExecutorError, FileNotFoundError, json.JSONDecodeError, yaml.YAMLError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # a solve failed twice: not the input's fault
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(result.table())
    print()
    print(render_diffs(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result.to_dict(), indent=1) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="placement what-if", description=DESCRIPTION)
    add_arguments(ap)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
