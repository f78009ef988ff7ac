"""The exported MIP solved by HiGHS or SCIP, and the solution read back into a verified plan.

A MIP solver's answer is only comparable with CP-SAT's if it is a plan the product would accept: the
column values (``xI`` is variable I of the CP-SAT model, as ``placement export`` writes them) go back
through the search layer's own reading of a solution (``placement.search.placement_from``), the
product's decode and the independent verifier. No second decoder exists here, so a MIP solution that
decodes is checked by exactly the rules a CP-SAT plan is.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from placement_models import PlacementRequest, SolverStats

from placement import compile as compiler
from placement.decode import decode
from placement.export import build_model, linear_model, write_mps
from placement.search import placement_from
from placement.verify import verify

#: The MIP solvers this bench drives, and the Python package each needs.
PACKAGES = {"highs": "highspy", "scip": "pyscipopt"}


@dataclass
class MipResult:
    """One solver's run on one exported model, in the model's own units (objective × SCALE)."""

    status: str
    objective: float | None = None
    bound: float | None = None
    time_s: float = 0.0
    values: dict[int, int] | None = None
    note: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Exported:
    """The compiled model (kept to decode solutions against) and its MPS file."""

    ctx: compiler.ModelContext
    path: Path
    variables: int
    constraints: int


def export_mps(request: PlacementRequest, folder: Path) -> Exported:
    """Write the request's model as ``placement export -o model.mps`` does: the same steps (``build_model``
    without a hint, ``linear_model``, ``write_mps``) in one build, so the context that decodes the answer
    is the very one whose variables the file names (a second build would have to be trusted to match)."""
    from ortools.sat import cp_model_pb2

    ctx = build_model(request, hint=False)
    raw = folder / "model.pb"  # the live model's proto is OR-Tools' C++ view; export reads the file back too
    if not ctx.model.export_to_file(str(raw)):
        raise OSError(f"OR-Tools could not write the model to {raw}")
    proto = cp_model_pb2.CpModelProto()
    proto.ParseFromString(raw.read_bytes())
    model = linear_model(proto)
    path = folder / "model.mps"
    with path.open("w", encoding="ascii") as f:
        write_mps(model, f)
    return Exported(ctx, path, model.num_variables, model.num_constraints)


def _column_index(name: str) -> int | None:
    """The CP-SAT variable a column stands for (``xI`` → I); anything else is not one of ours."""
    return int(name[1:]) if name.startswith("x") and name[1:].isdigit() else None


def _values(names: list[str], values: list[float]) -> dict[int, int]:
    """Column values as the integers CP-SAT would have assigned (MIP solvers return doubles within their
    integrality tolerance)."""
    out: dict[int, int] = {}
    for name, value in zip(names, values, strict=True):
        i = _column_index(name)
        if i is not None:
            out[i] = round(value)
    return out


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """File descriptor 1 points at stderr for the block: C++ code writes there past Python's sys.stdout, and the
    bench's stdout is the table a reader pipes into a file."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def solve_highs(path: Path, time_limit: float, threads: int, gap: float) -> MipResult:
    """HiGHS on the MPS file: its status, incumbent, dual bound and the incumbent's column values."""
    import highspy

    with _stdout_to_stderr():  # HiGHS prints its banner on creation, before output_flag can be unset
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("threads", int(threads))
    h.setOptionValue("mip_rel_gap", float(gap))  # the same stopping rule as the plan's CP-SAT search
    began = time.perf_counter()
    if h.readModel(str(path)) != highspy.HighsStatus.kOk:
        return MipResult("error", note="HiGHS could not read the MPS file", time_s=time.perf_counter() - began)
    h.run()
    took = time.perf_counter() - began
    status = h.getModelStatus()
    info = h.getInfo()
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    named = {
        highspy.HighsModelStatus.kOptimal: "optimal",
        highspy.HighsModelStatus.kInfeasible: "infeasible",
        highspy.HighsModelStatus.kTimeLimit: "feasible" if has_solution else "no_solution",
    }
    out = MipResult(named.get(status, h.modelStatusToString(status)), time_s=took)
    if has_solution:
        out.objective = info.objective_function_value
        lp = h.getLp()
        out.values = _values(list(lp.col_names_), list(h.getSolution().col_value))
    bound = info.mip_dual_bound
    if bound == bound and abs(bound) < float("inf"):
        out.bound = bound
    return out


def solve_scip(path: Path, time_limit: float, threads: int, gap: float) -> MipResult:
    """SCIP on the MPS file. SCIP's branch and bound runs on one thread (its concurrent mode is a build
    option of SCIP, not of the wheel), so `threads` is recorded, not used."""
    import pyscipopt

    m = pyscipopt.Model()
    m.hideOutput()
    began = time.perf_counter()
    m.readProblem(str(path))
    m.setParam("limits/time", float(time_limit))
    m.setParam("limits/gap", float(gap))
    m.optimize()
    took = time.perf_counter() - began
    raw = m.getStatus()
    has_solution = m.getNSols() > 0
    named = {"optimal": "optimal", "gaplimit": "optimal", "infeasible": "infeasible",
             "timelimit": "feasible" if has_solution else "no_solution"}
    out = MipResult(named.get(raw, raw), time_s=took, extra={"threads_used": 1})
    if has_solution:
        sol = m.getBestSol()
        out.objective = m.getSolObjVal(sol)
        variables = m.getVars()
        out.values = _values([v.name for v in variables], [m.getSolVal(sol, v) for v in variables])
    bound = m.getDualbound()
    if abs(bound) < 1e19:  # SCIP's infinity
        out.bound = bound
    return out


def solve_cpsat(ctx: compiler.ModelContext, time_limit: float, threads: int, gap: float) -> MipResult:
    """CP-SAT on the exported model itself, through the search layer's own single solve: the row that
    compares solvers on one model, where ``placement.plan``'s row compares them with the product (whose
    model may differ: it screens jobs that never fit, which changes strict priority weights)."""
    from placement_models import Policy

    from placement.search import solve

    policy = Policy(time_limit_s=time_limit, workers=threads, relative_gap_limit=gap, deterministic=False)
    found = solve.run(ctx, policy, time_limit)
    named = {"OPTIMAL": "optimal", "FEASIBLE": "feasible", "INFEASIBLE": "infeasible", "UNKNOWN": "no_solution"}
    out = MipResult(named.get(found.status, found.status.lower()), time_s=found.wall_s, values=found.values)
    # solve.run reports GPU-equivalents; rows carry the model's units until the caller divides
    out.objective = None if found.objective is None else found.objective * compiler.SCALE
    out.bound = None if found.bound is None else found.bound * compiler.SCALE
    return out


SOLVE = {"highs": solve_highs, "scip": solve_scip}

#: A MIP solver still running this long past its time limit (plus the slack) is stopped: SCIP's presolve and
#: some heuristics check the limit rarely (mig-M ran past ten minutes of a 10 s limit), and a bench must end.
OVERRUN_FACTOR = 2.0
OVERRUN_SLACK_S = 30.0


def _child(solver: str, path: Path, time_limit: float, threads: int, gap: float, out: Any) -> None:
    out.send(SOLVE[solver](path, time_limit, threads, gap))
    out.close()


def solve_guarded(solver: str, path: Path, time_limit: float, threads: int, gap: float) -> MipResult:
    """`SOLVE[solver]` in a child process, stopped when it runs past OVERRUN_FACTOR × the limit plus
    OVERRUN_SLACK_S (status `overran`, no solution): the solver's own limit is what the row measures, the
    guard only keeps one instance from stalling the bench."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    began = time.perf_counter()
    child = context.Process(target=_child, args=(solver, path, time_limit, threads, gap, send), daemon=True)
    child.start()
    send.close()
    deadline = OVERRUN_FACTOR * time_limit + OVERRUN_SLACK_S
    result = receive.recv() if receive.poll(deadline) else None
    if result is None:
        child.kill()
    child.join()
    if result is None:
        took = time.perf_counter() - began
        return MipResult("overran", time_s=took, note=f"{solver} ran {took:.0f} s on a {time_limit:g} s limit; stopped")
    return result  # type: ignore[no-any-return]


def read_back(request: PlacementRequest, ctx: compiler.ModelContext, values: dict[int, int],
              status: str) -> tuple[float, list[str]]:
    """The MIP solution as a plan, through the product's own path: `placement_from` (what the search does
    with CP-SAT's values), every variable's value as the product derives it from that placement
    (`assignment_of`: a solver at its limit may leave a penalty flag set or a quota credit unclaimed that the
    placement does not call for, and the product never reports those), the objective's named terms,
    `decode`, then `verify` against the request. A solution is `optimal` only where the model saw every node
    of every task (a trimmed model's optimum says nothing of the whole request).

    Returns the decoded plan's objective (GPU-equivalents) and the verifier's violations (empty: valid).
    A column the file did not carry (there are none today) reads as 0, as `placement_from` assumes.
    """
    full = {i: values.get(i, 0) for i in range(max(values, default=-1) + 1)}
    placement = placement_from(ctx, full)
    derived = ctx.assignment_of(placement)
    terms = ctx.objective.values(lambda v: derived[v.index])
    stats = SolverStats(status=status.upper(), objective=round(sum(terms.values()), 6))
    proven = status == "optimal" and not ctx.restricted
    plan = decode(ctx.problem, placement, terms, "optimal" if proven else "feasible", stats)
    return plan.objective.total, verify(request, plan)
