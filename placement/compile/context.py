"""The model context: one CP-SAT model, the shared decision variables, and the named objective.

Constraint modules (gang, capacity, ...) receive the context, add their own constraints and
auxiliary variables, and register *named* objective terms. They meet only through what the
context owns, so a concern can be added without touching the others, and the plan can report
its score term by term.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from placement.compile import terms
from placement.problem import Problem
from placement.solution import Placement

#: Objective coefficients are integers: weights are in GPU-equivalents, scaled by this factor.
SCALE = 1000
#: What may break a whole free node (`ModelContext.broken`): whole-GPU pods, MIG pods or layouts, shared GPUs.
BY_GPU_PODS, BY_MIG, BY_SHARING = "gpus", "mig", "shared"
#: Largest |objective| CP-SAT is asked to reach: well inside 64-bit integers, with room for its own sums.
MAX_OBJECTIVE = 2**60


@dataclass
class Term:
    """A named linear objective term: Σ coef·var, in GPU-equivalents, already weighted."""

    name: str
    variables: list[cp_model.IntVar] = field(default_factory=list)
    coefs: list[int] = field(default_factory=list)  # scaled integers
    #: per variable, for placement rows whose coefficient varies by node: the most it can be on any node of
    #: the task, seen by the model or not (scaled); None where it is the same on every node
    ceilings: list[int | None] = field(default_factory=list)

    def value(self, value_of: Callable[[cp_model.IntVar], int]) -> float:
        return sum(c * value_of(v) for v, c in zip(self.variables, self.coefs, strict=True)) / SCALE


class ObjectiveRegistry:
    """Named terms that add up to the maximised objective."""

    def __init__(self) -> None:
        self.terms: dict[str, Term] = {}
        self.caps: dict[str, int] = {}  # scaled, see cap()

    def add(self, name: str, variables: list[cp_model.IntVar], coefs: list[float] | np.ndarray,
            weight: float = 1.0, *, ceiling: float | None = None) -> None:
        """Add Σ coef·weight·var to term `name`. A row of one task's placement variables whose coefficient
        varies by node gives `ceiling`, the most it can be on any node (the whole-problem bound,
        placement.search.bound, credits that to nodes a restricted model did not give the task)."""
        term = self.terms.setdefault(terms.check(name), Term(name))
        top = None if ceiling is None else round(float(ceiling) * weight * SCALE)
        for v, c in zip(variables, coefs, strict=True):
            scaled = round(float(c) * weight * SCALE)
            if scaled or (top is not None and top > 0):
                term.variables.append(v)
                term.coefs.append(scaled)
                term.ceilings.append(top)

    def cap(self, name: str, most: float, weight: float = 1.0) -> None:
        """Declare the most term `name` adds in any plan of the whole request, this model's pairs or not. A
        term whose own variables' domains follow the model's pairs (a trimmed model's team totals) must
        declare it when it can be positive: the whole-problem bound (placement.search.bound) reads it."""
        self.caps[terms.check(name)] = self.caps.get(name, 0) + max(0, round(float(most) * weight * SCALE))

    def expression(self, model: cp_model.CpModel) -> cp_model.LinearExprT:
        """The objective CP-SAT maximises: the terms' sum, divided through when extreme weights would take its
        range past 64-bit integers (CP-SAT's arithmetic); the terms themselves keep their values for reports."""
        variables = [v for t in self.terms.values() for v in t.variables]
        coefs = [c for t in self.terms.values() for c in t.coefs]
        reach = _reach(model, variables, coefs)
        if reach > MAX_OBJECTIVE:
            div = -(-reach // MAX_OBJECTIVE)
            coefs = [c // div if c >= 0 else -(-c // div) for c in coefs]
        return cp_model.LinearExpr.weighted_sum(variables, coefs)

    def values(self, value_of: Callable[[cp_model.IntVar], int]) -> dict[str, float]:
        return {name: term.value(value_of) for name, term in self.terms.items()}


def _reach(model: cp_model.CpModel, variables: list[cp_model.IntVar], coefs: list[int]) -> int:
    """Σ |coef| × the largest |value| of its variable: how far the objective may range. Estimated in floats over
    the model's domains read once (variables by index); counted exactly in integers only near the limit."""
    domains = model.proto.variables
    # the domain is sorted intervals: its widest value is at one end (CP-SAT's repeated field reads no
    # negative index, so the last one is counted from the front)
    ends = np.fromiter((max(abs(d[0]), abs(d[len(d) - 1])) if len(d) else 0 for d in (v.domain for v in domains)),
                       dtype=np.float64, count=len(domains))
    index = np.fromiter((v.index for v in variables), dtype=np.int64, count=len(variables))
    if index.size and index.min() < 0:  # a negated literal: read its own domain
        return sum(abs(c) * max(abs(int(d)) for d in v.proto.domain) for v, c in zip(variables, coefs, strict=True))
    rough = float(np.abs(np.asarray(coefs, dtype=np.float64)) @ ends[index]) if index.size else 0.0
    if rough <= MAX_OBJECTIVE / 2:  # float error is far below this margin
        return int(rough)
    return sum(abs(c) * max(abs(int(d)) for d in domains[i].domain) for i, c in zip(index.tolist(), coefs, strict=True))


class ModelContext:
    """Owns the model and the variables every module shares.

    `x[t]` holds, per candidate node of task t (aligned with `candidates[t]`), an integer: how many
    of the task's identical pods go there. `placed[j]` says whether job j runs in this plan.

    `evicted[r]` (running job r, an index into `problem.running`) is true when the plan preempts
    it, whole. Only running jobs that could be preempted at all have one (preemption on, the job
    preemptible and past its minimum runtime, some pending job that could justify it); every
    other running job is kept, a constant. Three modules read it: capacity credits r's resources
    on its nodes (`released`), quota counts a team's kept running GPUs, and preemption says when
    it may be true and what it costs.
    """

    def __init__(self, problem: Problem, candidates: list[np.ndarray] | None = None,
                 idle: frozenset[int] = frozenset()) -> None:
        self.problem = problem
        #: the model scores plans but CP-SAT's objective is not set (`placement.compile.build`): never searched
        self.scores_only = False
        #: tasks of jobs no optimal plan needs (placement.compile.dominance): no candidate node, yet the model
        #: is not restricted by them, its optimum is the whole problem's
        self.idle = idle
        self.model = cp_model.CpModel()
        self.objective = ObjectiveRegistry()
        self.candidates: list[np.ndarray] = candidates or [t.candidates for t in problem.tasks]
        self.x: list[list[cp_model.IntVar]] = []
        self.upper: list[list[int]] = []  # each x variable's upper bound, aligned with x
        self._hint_rules: list[Callable[[ModelContext, Placement, dict[int, int]], None]] = []
        self._read_rules: list[Callable[[ModelContext, dict[int, int], Placement], None]] = []
        self._late_read_rules: list[Callable[[ModelContext, dict[int, int], Placement], None]] = []
        for t, task in enumerate(problem.tasks):
            # candidates are ascending subsets of the task's own (placement.candidates)
            at = np.minimum(np.searchsorted(task.candidates, self.candidates[t]), max(0, task.candidates.size - 1))
            if not np.array_equal(task.candidates[at] if task.candidates.size else at, self.candidates[t]):
                raise ValueError(f"candidate nodes of task {t} are not among its own candidates")
            bounds = task.max_per_node[at].tolist() if task.candidates.size else []
            self.upper.append(bounds)
            self.x.append([
                self.model.new_int_var(0, ub, f"x[{t},{int(n)}]")
                for ub, n in zip(bounds, self.candidates[t], strict=True)
            ])
        self._per_node: list[list[tuple[cp_model.IntVar, int, int]]] | None = None
        #: priority level -> (variable, milli-GPU per unit) of the jobs counted within their teams' nominal
        #: (compile/nominal.py): strict classes compare plans tier by tier with them
        self.in_nominal: dict[int, list[tuple[cp_model.IntVar, int]]] = {}
        self._demands: list[list[int]] | None = None
        #: node -> (count of its idle whole GPUs the plan partitions, upper bound), from compile/mig.py, then
        #: the ones it shares, from compile/sharing.py: rules that count whole free GPUs (the peak reserve)
        #: must see them go
        self.partitioned: dict[int, list[tuple[cp_model.IntVar, int]]] = {}
        #: node -> its GPUs whole after the plan, as (constant, variables adding one each), from compile/mig.py
        #: where MIG configurations decide it; elsewhere problem.free[n, 0]. Whatever takes whole GPUs
        #: (whole-GPU pods, GPUs the plan shares) stays within it
        self.whole_after: dict[int, tuple[int, list[cp_model.IntVar]]] = {}
        #: node -> the new shared MIG instances the plan may make there, from compile/mig_sharing.py: (profile,
        #: its `open` boolean, the tasks that may share it); compile/mig.py draws each open one from the node's
        #: instances of that profile on GPUs whose layout changes
        self.new_instances: dict[int, list[tuple[str, cp_model.IntVar, tuple[int, ...]]]] = {}
        #: nodes whose healthy GPUs are all free before the plan: the whole nodes big gangs need
        self.whole_free: np.ndarray = problem.gpu_empty()
        #: kind -> node -> true when the plan breaks into the whole free node (`break_flag`): whole-GPU pods
        #: (BY_GPU_PODS, compile/fragmentation.py), MIG pods or new layouts (BY_MIG, compile/mig.py), GPUs the
        #: plan shares (BY_SHARING, compile/sharing.py); every flag is charged to the `fragmentation` term,
        #: each kind at its own rate, and hinted by compile/fragmentation.py
        self.broken: dict[str, dict[int, cp_model.IntVar]] = {}
        #: per job with a speed table that loses speed somewhere: (speed, flag) per step, slowest last — the flag is
        #: 1 exactly when a pod sits on a GPU that slow or slower (compile/throughput.py); its best speed
        self.slow: dict[int, list[tuple[float, cp_model.IntVar]]] = {}
        self.best_speed: dict[int, float] = {}
        self.placed = [self.model.new_bool_var(f"placed[{j}]") for j in range(len(problem.jobs))]
        #: running jobs some pending job could justify preempting (Problem.preemptable): compile/preemption.py
        #: weighs their evictions; `evicted` adds the jobs that may move (their twins: placement.migration)
        self.victims: list[int] = problem.preemptable()
        self.evicted: dict[int, cp_model.IntVar] = {
            r: self.model.new_bool_var(f"evicted[{r}]") for r in sorted(set(self.victims) | set(problem.twins.values()))
        }
        self._released: dict[int, list[tuple[cp_model.IntVar, np.ndarray]]] | None = None

    def break_flag(self, kind: str, n: int, name: str) -> cp_model.IntVar:
        """A new boolean that the plan's `kind` of pods breaks whole free node n, kept in `broken` (one builder
        for every kind; the caller's rows say what forces it, and its charge)."""
        flag = self.model.new_bool_var(name)
        self.broken.setdefault(kind, {})[n] = flag
        return flag

    @property
    def demands(self) -> list[list[int]]:
        """Per task, its pod's demand (GPUs, milli-CPU, MiB) as Python ints: rows built per node read it
        for every pair, where numpy scalars cost a hundred times more."""
        if self._demands is None:
            self._demands = [task.demand.tolist() for task in self.problem.tasks]
        return self._demands

    @property
    def restricted(self) -> bool:
        """Did some task see only part of its candidate nodes (placement.candidates trimmed the model)? Idle
        tasks do not count: leaving them out keeps the optimum."""
        return any(c.size < t.candidates.size for i, (c, t) in enumerate(zip(self.candidates, self.problem.tasks,
                                                                             strict=True)) if i not in self.idle)

    def task_pods(self, t: int) -> cp_model.LinearExprT:
        return cp_model.LinearExpr.sum(self.x[t])

    def node_terms(self) -> list[list[tuple[cp_model.IntVar, int, int]]]:
        """Per node, the (variable, task, upper bound) triples that may put pods there."""
        if self._per_node is None:
            per_node: list[list[tuple[cp_model.IntVar, int, int]]] = [[] for _ in range(self.problem.n_nodes)]
            for t, cand in enumerate(self.candidates):
                for var, n, ub in zip(self.x[t], cand.tolist(), self.upper[t], strict=True):
                    per_node[n].append((var, t, ub))
            self._per_node = per_node
        return self._per_node

    def released(self, n: int) -> list[tuple[cp_model.IntVar, np.ndarray]]:
        """(evicted var, resources freed on node n) for each running job on n that the plan may preempt."""
        if self._released is None:
            per: dict[int, list[tuple[cp_model.IntVar, np.ndarray]]] = {}
            for r, var in self.evicted.items():
                info = self.problem.running[r]
                for k, node in enumerate(info.nodes.tolist()):
                    per.setdefault(node, []).append((var, info.use[k]))
            self._released = per
        return self._released.get(n, [])

    def on_hint(self, rule: Callable[[ModelContext, Placement, dict[int, int]], None]) -> None:
        """Register how a module derives its auxiliary variables' values from a placement."""
        self._hint_rules.append(rule)

    def on_read(self, rule: Callable[[ModelContext, dict[int, int], Placement], None], late: bool = False) -> None:
        """Register how a module writes its choices beyond pod counts (e.g. MIG layouts) into a placement
        read from solver values: the inverse of its hint rule. A `late` rule runs after every other, for a
        module that reads what a later module's rule writes (the instances a shared MIG slot becomes are
        known once MIG's layouts are)."""
        (self._late_read_rules if late else self._read_rules).append(rule)

    def read_extras(self, values: dict[int, int], placement: Placement) -> None:
        for rule in self._read_rules + self._late_read_rules:
            rule(self, values, placement)

    def assignment_of(self, placement: Placement) -> dict[int, int]:
        """Every variable's value for a given placement: primaries first, then each module's auxiliaries.

        Used as the complete solution hint (docs/solver.md §1) and to score the greedy plan with
        exactly the solver's objective.
        """
        values: dict[int, int] = {}
        for t, cand in enumerate(self.candidates):
            for var, n in zip(self.x[t], cand.tolist(), strict=True):
                values[var.index] = placement.counts.get((t, n), 0)
        jobs = placement.placed_jobs(self.problem)
        for j, var in enumerate(self.placed):
            values[var.index] = int(j in jobs)
        for r, var in self.evicted.items():
            values[var.index] = int(r in placement.evicted)
        for rule in self._hint_rules:
            rule(self, placement, values)
        return values

    def hint(self, values: dict[int, int]) -> None:
        self.model.clear_hints()
        for index, value in values.items():
            self.model.add_hint(self.model.get_int_var_from_proto_index(index), value)
