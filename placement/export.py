"""`placement export REQUEST --format pb|pbtxt -o FILE`: the CP-SAT model of a request, for solver research.

The model written is exactly the one :func:`placement.plan` solves: the request is validated and
indexed, the greedy plan computed (it decides which (task, node) pairs stay in big models), and
the constraint modules compile it. By default the greedy plan is included as a complete solution
hint, as ``plan()`` gives it; ``--no-hint`` leaves it out. The objective is maximised; its
coefficients are the plan's objective terms times ``placement.compile.SCALE`` (1000), so
``objective / 1000`` reads in GPU-equivalents like ``plan.objective.total``. The CpModelProto
can be read back with ``CpModel().proto.parse_text_format`` (pbtxt) or any protobuf reader, and
solved with ``ortools``' ``solve`` / ``fzn-cp-sat``-style drivers.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from placement_models import PlacementRequest

from placement import candidates, pricing
from placement import compile as compiler
from placement import problem as problem_mod
from placement.baseline import greedy

Format = Literal["pb", "pbtxt"]


@dataclass(frozen=True)
class Exported:
    """What was written: where, in which format, and how big the model is."""

    path: Path
    format: Format
    variables: int
    constraints: int
    hinted: bool


def build_model(request: PlacementRequest | dict[str, Any], *, hint: bool = True) -> compiler.ModelContext:
    """Compile a request the way ``plan()`` does (greedy, candidate pairs, modules, hint)."""
    from placement.api import parse

    req = parse(request)
    problem = problem_mod.build(req)
    baseline = greedy(problem, pricing.held_back(req, problem.nodes, problem.free))
    ctx = compiler.build(problem, candidates.select(problem, baseline))
    if hint:
        ctx.hint(ctx.assignment_of(baseline))
    return ctx


def export(
    request: PlacementRequest | dict[str, Any], path: str | Path, fmt: Format | None = None, *, hint: bool = True
) -> Exported:
    """Write the request's CP-SAT model to ``path``; ``fmt`` defaults from the suffix (.pbtxt/.txt: text)."""
    path = Path(path)
    if fmt is None:
        fmt = "pbtxt" if path.suffix.lower() in (".pbtxt", ".txt") else "pb"
    if fmt not in ("pb", "pbtxt"):
        raise ValueError(f"format must be 'pb' or 'pbtxt', not {fmt!r}")
    ctx = build_model(request, hint=hint)
    # OR-Tools picks text or binary from the file name (text iff it ends with 'txt'): write to a
    # temporary name that says what we want, then move it where asked.
    suffix = ".pbtxt" if fmt == "pbtxt" else ".pb"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=suffix, dir=path.parent)
    os.close(fd)
    try:
        if not ctx.model.export_to_file(tmp):
            raise OSError(f"OR-Tools could not write the model to {tmp}")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    proto = ctx.model.proto
    return Exported(path, fmt, len(proto.variables), len(proto.constraints), hint)
