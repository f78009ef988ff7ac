"""Run CP-SAT on a compiled model: all solver parameters live here, in one place.

Two modes (docs/solver.md §7): *wall-clock* for the periodic scheduler cycle (use every second
it is given; repeats may differ), and *deterministic* for what-if, tests and benchmarks (the
budget is CP-SAT's deterministic time with interleaved workers: the same request, seed and
workers give the same plan, at the price of a slower search). Every plan says which it came from.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ortools.sat.python import cp_model
from placement_models import Policy

from placement.compile.context import SCALE, ModelContext

#: Above this many variables, probing in presolve costs more than it finds (docs/solver.md §2).
PROBING_OFF_ABOVE = 20_000


@dataclass
class SolveResult:
    status: str
    values: dict[int, int] | None  # variable index -> value of the best solution, None if none
    objective: float | None  # in GPU-equivalents
    bound: float | None
    wall_s: float
    mode: str
    #: the search ended because its plan came within `policy.relative_gap_limit` of a bound given by the caller
    gap_stop: bool = False


class _WithinGap(cp_model.CpSolverSolutionCallback):
    """Stops the search at the first solution within the relative gap limit of a bound CP-SAT does not know.

    CP-SAT's own `relative_gap_limit` compares with CP-SAT's own bound, which for a trimmed model bounds only
    the kept (task, node) pairs and can stay far above the plan for the whole run: a 256-node request whose
    plan the class relaxation (placement.search.bound) proves within 1e-8 searched its full 10 s.
    The test is the gap `SolverStats.gap` reports: (bound - objective) / max(1, |bound|).
    """

    def __init__(self, bound: float, limit: float) -> None:
        super().__init__()
        self.bound = bound
        self.limit = limit
        self.hit = False

    def on_solution_callback(self) -> None:
        if self.bound - self.objective_value / SCALE <= self.limit * max(1.0, abs(self.bound)):
            self.hit = True
            self.stop_search()


def parameters(policy: Policy, budget_s: float, n_vars: int, share: float = 1.0) -> cp_model.SatParameters:
    p = cp_model.SatParameters()
    p.num_workers = policy.workers
    p.random_seed = policy.seed
    p.relative_gap_limit = policy.relative_gap_limit
    if policy.deterministic:
        p.interleave_search = True
        p.max_deterministic_time = policy.time_limit_s * share
        # A safety net only: a deterministic run normally stops on deterministic time.
        p.max_time_in_seconds = 10 * policy.time_limit_s + 5
    else:
        p.max_time_in_seconds = max(0.05, budget_s)
    if n_vars > PROBING_OFF_ABOVE:
        p.cp_model_probing_level = 0
    return p


def run(ctx: ModelContext, policy: Policy, budget_s: float, *, share: float = 1.0,
        log: Callable[[str], None] | None = None, stop: threading.Event | None = None,
        bound: float | None = None) -> SolveResult:
    """Solve with the hint already set on the model; `stop` ends the search early from another thread.

    `bound` (GPU-equivalents) is a bound on every valid plan from outside the model: in wall-clock mode the
    search also ends once a plan is within `policy.relative_gap_limit` of it. Not in deterministic mode,
    where a stop requested from a callback lands wherever the threads happen to be, so the plan could vary
    between runs; there CP-SAT's own bound and the deterministic checks between phases decide.
    """
    n_vars = len(ctx.model.proto.variables)
    solver = cp_model.CpSolver()
    solver.parameters.copy_from(parameters(policy, budget_s, n_vars, share))
    if log is not None:
        solver.parameters.log_search_progress = True
        solver.parameters.log_to_stdout = False
        solver.log_callback = log
    watcher = None
    if stop is not None:
        done = threading.Event()

        def watch() -> None:
            while not done.wait(0.05):
                if stop.is_set():
                    solver.stop_search()
                    return

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
    within = None
    if bound is not None and policy.relative_gap_limit > 0 and not policy.deterministic:
        within = _WithinGap(bound, policy.relative_gap_limit)
    start = time.perf_counter()
    code = solver.solve(ctx.model, within)
    wall = time.perf_counter() - start
    if watcher is not None:
        done.set()
        watcher.join()
    status = solver.status_name(code)
    mode = "deterministic" if policy.deterministic else "wall-clock"
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return SolveResult(status, None, None, None, wall, mode)
    proto = solver.response_proto
    values = dict(enumerate(proto.solution))
    bound = solver.best_objective_bound / SCALE
    if code == cp_model.OPTIMAL and policy.relative_gap_limit == 0:
        # a proof: with no gap limit, OPTIMAL means the objective is the model's best; the bound CP-SAT reports
        # with it may lag (seen 20 units above a proven optimum in interleaved, deterministic search)
        bound = min(bound, solver.objective_value / SCALE)
    return SolveResult(status, values, solver.objective_value / SCALE, bound,
                       wall, mode, gap_stop=within is not None and within.hit)
