"""`placement export REQUEST -o FILE [--format pb|pbtxt|mps|lp]`: a request's model, for solver research.

The model written is the one :func:`placement.plan` solves in its first round, built by the same phases
(:func:`placement.api.first_model`): the request's preset spelled out, overdue jobs evicted, the request
indexed with its right-size offers and without the jobs that can never fit, reservations attached, the
greedy plan computed (it decides which (task, node) pairs stay in big models), the pairs the time limit
affords, interchangeable jobs no optimal plan needs left out, and the constraint modules compile it. In
deterministic mode (``policy.deterministic``) it is the very model; in wall-clock mode its size follows
the time left, as plan()'s does. The objective is maximised; its coefficients are the plan's
objective terms times ``placement.compile.SCALE`` (1000), so ``objective / 1000`` reads in
GPU-equivalents like ``plan.objective.total``.

Formats:

- ``pb`` / ``pbtxt``: the CpModelProto itself (binary or text), with the greedy plan as a complete
  solution hint unless ``hint=False``. Read it back with ``CpModel().proto.parse_text_format``
  (pbtxt) or any protobuf reader, and solve it with ``ortools``.
- ``mps`` / ``lp``: the same model as a mixed-integer linear program (free MPS; CPLEX LP), built
  with OR-Tools' own model builder (:func:`linear_model`), so HiGHS, SCIP, Gurobi, CPLEX or CBC can
  read it. The files are written here from the builder's model rather than by its exporter, which
  prints 6 significant digits: the objective's coefficients have up to 13 (strict priority classes),
  and the rounded file has a different optimum. Every number is written exactly. Variable ``xI`` is variable I of
  the CpModelProto; every constraint the compiler emits is linear or Boolean, and Boolean ones
  (clauses, at-most-one, exactly-one) and enforcement literals become linear rows, enforcement by
  big-M with M computed from the variables' own bounds (so the program has exactly the CP-SAT
  model's integer solutions). The objective is written so that its optimum equals CP-SAT's
  ``objective_value``. A model the format cannot express exactly (a variable or linear domain with
  holes, a non-linear constraint, a number beyond double precision) raises :class:`ExportError`
  naming what is in the way, rather than writing a different problem. Neither format carries a
  solution hint.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

from placement_models import PlacementRequest

from placement import compile as compiler
from placement.api import first_model

if TYPE_CHECKING:
    from ortools.linear_solver.python import model_builder
    from ortools.sat import cp_model_pb2

Format = Literal["pb", "pbtxt", "mps", "lp"]

#: Every format, in the order help lists them.
FORMATS: tuple[Format, ...] = ("pb", "pbtxt", "mps", "lp")

#: Integers a double holds exactly: MPS and LP files carry doubles, CP-SAT int64.
_EXACT = 2**53

#: CP-SAT writes an unbounded side of a domain as int64's extreme; anything this large means "no bound".
_UNBOUNDED = 2**62


class ExportError(ValueError):
    """The model cannot be written in the asked format without changing the problem; the message says why."""


@dataclass(frozen=True)
class Exported:
    """What was written: where, in which format, and how big the model is."""

    path: Path
    format: Format
    variables: int
    constraints: int
    hinted: bool


def format_of(path: str | Path) -> Format:
    """The format a file name asks for: .pbtxt/.txt CP-SAT text, .mps, .lp, anything else CP-SAT binary."""
    suffix = Path(path).suffix.lower()
    return {".pbtxt": "pbtxt", ".txt": "pbtxt", ".mps": "mps", ".lp": "lp"}.get(suffix, "pb")  # type: ignore[return-value]


def build_model(request: PlacementRequest | dict[str, Any], *, hint: bool = True) -> compiler.ModelContext:
    """The model ``plan()`` compiles in its first round (`placement.api.first_model`: presets, overdue eviction,
    right-size offers, the screen, reservations, the greedy plan, pair limits, dominance, candidates, modules),
    with the greedy plan as its hint unless ``hint=False``."""
    ctx, baseline = first_model(request)
    if hint:
        ctx.hint(ctx.assignment_of(baseline))
    return ctx


def export(
    request: PlacementRequest | dict[str, Any], path: str | Path, fmt: Format | None = None, *, hint: bool = True
) -> Exported:
    """Write the request's model to ``path``; ``fmt`` defaults from the suffix (see :func:`format_of`).

    The file appears whole or not at all (written beside it, then renamed), with the mode any new
    file of this process gets (the umask's), not a temporary file's private 0600.
    """
    path = Path(path)
    if fmt is None:
        fmt = format_of(path)
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    linear = fmt in ("mps", "lp")
    ctx = build_model(request, hint=hint and not linear)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _staging(path) as stage:
        # OR-Tools picks text or binary from the file name (text iff it ends with 'txt').
        raw = stage / ("model.pbtxt" if fmt == "pbtxt" else "model.pb")
        if not ctx.model.export_to_file(str(raw)):
            raise OSError(f"OR-Tools could not write the model to {raw}")
        if not linear:
            os.replace(raw, path)
            proto = ctx.model.proto
            return Exported(path, fmt, len(proto.variables), len(proto.constraints), hint)
        model = linear_model(_read_proto(raw))
        out = stage / f"model.{fmt}"
        with out.open("w", encoding="ascii") as f:
            (write_mps if fmt == "mps" else write_lp)(model, f)
        os.replace(out, path)
        return Exported(path, fmt, model.num_variables, model.num_constraints, False)


class _staging:
    """A private folder beside `path` (same file system, so the final rename is atomic), removed after."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> Path:
        self.dir = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.", dir=self.path.parent))
        return self.dir

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def _read_proto(path: Path) -> cp_model_pb2.CpModelProto:
    from ortools.sat import cp_model_pb2

    proto = cp_model_pb2.CpModelProto()
    proto.ParseFromString(path.read_bytes())
    return proto


def linear_model(proto: cp_model_pb2.CpModelProto) -> model_builder.Model:
    """The CP-SAT model as an OR-Tools ``model_builder.Model`` with the same integer solutions and objective.

    Raises :class:`ExportError` for anything that has no exact linear form here.
    """
    from ortools.linear_solver.python import model_builder

    return _Linearizer(proto, model_builder.Model()).run()


class _Linearizer:
    """One pass over the CpModelProto's variables, constraints and objective."""

    def __init__(self, proto: cp_model_pb2.CpModelProto, model: model_builder.Model) -> None:
        self.proto = proto
        self.model = model
        self.lb: list[int] = []
        self.ub: list[int] = []
        self.xs: list[Any] = []
        self.rows: dict[int, int] = {}  # rows written per constraint index, for unique row names

    def run(self) -> model_builder.Model:
        for i, v in enumerate(self.proto.variables):
            dom = list(v.domain)
            if len(dom) != 2:
                raise ExportError(f"variable {i}{_named(v.name)} has the domain {_domain(dom)}, with holes: MPS/LP "
                                  "variables are intervals")
            lo, hi = dom
            if max(abs(lo), abs(hi)) >= _EXACT:
                raise ExportError(f"variable {i}{_named(v.name)} has bounds {lo}..{hi}, beyond what MPS/LP "
                                  "doubles hold exactly")
            self.lb.append(lo)
            self.ub.append(hi)
            self.xs.append(self.model.new_int_var(lo, hi, f"x{i}"))
        handlers: dict[str, Callable[[int, Any, list[int]], None]] = {
            "linear": self._linear, "bool_or": self._bool_or, "bool_and": self._bool_and,
            "at_most_one": self._at_most_one, "exactly_one": self._exactly_one,
        }
        refused: dict[str, int] = {}
        for j, c in enumerate(self.proto.constraints):
            kind = c.WhichOneof("constraint")
            if kind is None:
                continue
            handler = handlers.get(kind)
            if handler is None:
                refused[kind] = refused.get(kind, 0) + 1
                continue
            handler(j, getattr(c, kind), list(c.enforcement_literal))
        if refused:
            kinds = ", ".join(f"{n} {k}" for k, n in sorted(refused.items()))
            raise ExportError(f"the model has constraints with no linear form here ({kinds}); export it as pb "
                              "or pbtxt instead")
        self._objective()
        return self.model

    # -- expressions: (terms {var: coeff}, constant) -------------------------------------------

    def _linear_terms(self, refs: Sequence[int], coeffs: Sequence[int]) -> tuple[dict[int, int], int]:
        """A linear expression; a negative ref -v-1 stands for -x_v (CP-SAT's integer negation)."""
        terms: dict[int, int] = {}
        for ref, c in zip(refs, coeffs, strict=True):
            v, c = (ref, c) if ref >= 0 else (-ref - 1, -c)
            terms[v] = terms.get(v, 0) + c
        return terms, 0

    def _literal_sum(self, lits: Sequence[int], sign: int = 1) -> tuple[dict[int, int], int]:
        """sign × the sum of literals; a negative ref -v-1 is the literal NOT x_v = 1 - x_v."""
        terms: dict[int, int] = {}
        const = 0
        for lit in lits:
            if lit >= 0:
                terms[lit] = terms.get(lit, 0) + sign
            else:
                v = -lit - 1
                terms[v] = terms.get(v, 0) - sign
                const += sign
        return terms, const

    def _slack(self, enforcement: list[int]) -> tuple[dict[int, int], int]:
        """How many enforcement literals are false: 0 exactly when the constraint must hold."""
        return self._literal_sum([-lit - 1 for lit in enforcement])

    def _range(self, terms: dict[int, int], const: int) -> tuple[int, int]:
        lo = const + sum(min(c * self.lb[v], c * self.ub[v]) for v, c in terms.items())
        hi = const + sum(max(c * self.lb[v], c * self.ub[v]) for v, c in terms.items())
        return lo, hi

    def _row(self, j: int, terms: dict[int, int], const: int, lo: float, hi: float, what: str) -> None:
        """lo <= terms + const <= hi as one row (the constant moves to the bounds), named after constraint j
        of the CpModelProto (cJ; cJ_1, cJ_2 ... when one constraint gives several rows)."""
        terms = {v: c for v, c in terms.items() if c}
        for c in terms.values():
            if abs(c) >= _EXACT:
                raise ExportError(f"constraint {j} ({what}) has the coefficient {c}, beyond what MPS/LP doubles "
                                  "hold exactly")
        k = self.rows.get(j, 0)
        self.rows[j] = k + 1
        name = f"c{j}" if k == 0 else f"c{j}_{k}"
        self.model.add_linear_constraint(self._expr(terms), lo - const, hi - const, name=name)

    def _expr(self, terms: dict[int, int]) -> Any:
        from ortools.linear_solver.python import model_builder

        if not terms:
            return model_builder.LinearExpr.constant(0)
        return model_builder.LinearExpr.weighted_sum([self.xs[v] for v in terms], list(terms.values()))

    @staticmethod
    def _add(terms: dict[int, int], scale: int, more: tuple[dict[int, int], int]) -> None:
        """terms += scale × more's terms, in place (the caller adds scale × more's constant itself)."""
        for v, c in more[0].items():
            terms[v] = terms.get(v, 0) + scale * c

    def _at_least(self, j: int, expr: tuple[dict[int, int], int], bound: int, enforcement: list[int],
                  what: str) -> None:
        """expr >= bound, or only when every enforcement literal holds (big-M from the bounds)."""
        terms, const = dict(expr[0]), expr[1]
        lowest, _ = self._range(terms, const)
        if lowest >= bound:
            return  # holds for every value of the variables
        if enforcement:
            m = bound - lowest
            slack = self._slack(enforcement)
            self._add(terms, m, slack)
            const += m * slack[1]
        self._row(j, terms, const, bound, float("inf"), what)

    def _at_most(self, j: int, expr: tuple[dict[int, int], int], bound: int, enforcement: list[int],
                 what: str) -> None:
        terms, const = dict(expr[0]), expr[1]
        _, highest = self._range(terms, const)
        if highest <= bound:
            return
        if enforcement:
            m = highest - bound
            slack = self._slack(enforcement)
            self._add(terms, -m, slack)
            const -= m * slack[1]
        self._row(j, terms, const, float("-inf"), bound, what)

    # -- constraints ---------------------------------------------------------------------------

    def _linear(self, j: int, c: Any, enforcement: list[int]) -> None:
        dom = list(c.domain)
        if len(dom) != 2:
            raise ExportError(f"constraint {j} (linear) has the domain {_domain(dom)}, with holes: an MPS/LP row "
                              "is one interval")
        lo, hi = dom
        expr = self._linear_terms(c.vars, c.coeffs)
        if not enforcement:
            self._row(j, *expr, -float("inf") if lo <= -_UNBOUNDED else lo,
                      float("inf") if hi >= _UNBOUNDED else hi, "linear")
            return
        if lo > -_UNBOUNDED:
            self._at_least(j, expr, lo, enforcement, "linear")
        if hi < _UNBOUNDED:
            self._at_most(j, expr, hi, enforcement, "linear")

    def _bool_or(self, j: int, c: Any, enforcement: list[int]) -> None:
        self._at_least(j, self._literal_sum(c.literals), 1, enforcement, "bool_or")

    def _bool_and(self, j: int, c: Any, enforcement: list[int]) -> None:
        for lit in c.literals:
            self._at_least(j, self._literal_sum([lit]), 1, enforcement, "bool_and")

    def _at_most_one(self, j: int, c: Any, enforcement: list[int]) -> None:
        self._at_most(j, self._literal_sum(c.literals), 1, enforcement, "at_most_one")

    def _exactly_one(self, j: int, c: Any, enforcement: list[int]) -> None:
        if not enforcement:
            self._row(j, *self._literal_sum(c.literals), 1, 1, "exactly_one")
            return
        self._at_least(j, self._literal_sum(c.literals), 1, enforcement, "exactly_one")
        self._at_most(j, self._literal_sum(c.literals), 1, enforcement, "exactly_one")

    # -- objective -----------------------------------------------------------------------------

    def _objective(self) -> None:
        """The optimum of the written program equals CP-SAT's ``objective_value``: CP-SAT minimises
        ``sum + offset`` and reports it times ``scaling_factor`` (-1 for a maximisation), so the
        program optimises the reported value in the direction the scaling's sign gives."""
        p = self.proto
        if p.HasField("floating_point_objective"):
            f = p.floating_point_objective
            terms: dict[int, float] = {}
            for ref, c in zip(f.vars, f.coeffs, strict=True):
                v, c = (ref, c) if ref >= 0 else (-ref - 1, -c)
                terms[v] = terms.get(v, 0.0) + c
            self._set_objective(terms, f.offset, maximize=f.maximize)
            return
        if not p.HasField("objective"):
            return
        o = p.objective
        inner, _ = self._linear_terms(o.vars, o.coeffs)
        dom = list(o.domain)
        if dom:
            if len(dom) != 2:
                raise ExportError(f"the objective's domain {_domain(dom)} has holes: an MPS/LP row is one interval")
            lo, hi = dom
            self._row(len(p.constraints), inner, 0, -float("inf") if lo <= -_UNBOUNDED else lo,
                      float("inf") if hi >= _UNBOUNDED else hi, "objective domain")
        for v, c in inner.items():
            if abs(c) >= _EXACT:
                raise ExportError(f"the objective's coefficient {c} of variable {v} is beyond what MPS/LP doubles "
                                  "hold exactly")
        scale = o.scaling_factor or 1.0
        self._set_objective({v: scale * c for v, c in inner.items()}, scale * o.offset, maximize=scale < 0)

    def _set_objective(self, terms: dict[int, float], offset: float, *, maximize: bool) -> None:
        from ortools.linear_solver.python import model_builder

        expr = model_builder.LinearExpr.weighted_sum([self.xs[v] for v in terms], list(terms.values()),
                                                     constant=offset)
        if maximize:
            self.model.maximize(expr)
        else:
            self.model.minimize(expr)


def _named(name: str) -> str:
    return f" ({name})" if name else ""


def _domain(dom: list[int]) -> str:
    return " ∪ ".join(f"[{dom[k]}, {dom[k + 1]}]" for k in range(0, len(dom), 2)) or "(empty)"


# ------------------------------------------------------------------------------------------------
# Writing the linear model exactly (OR-Tools' own exporter rounds numbers to 6 significant digits)


def _number(x: float) -> str:
    """Shortest text that reads back as exactly `x`; integers without a decimal point."""
    if x == int(x) and abs(x) < _EXACT:
        return str(int(x))
    return repr(float(x))


@dataclass(frozen=True)
class _Row:
    name: str
    cols: list[int]
    coeffs: list[float]
    lo: float
    hi: float


def _rows(model: model_builder.Model) -> Iterator[_Row]:
    """The model's rows; a row bounded on neither side constrains nothing and is left out."""
    h = model.helper
    inf = float("inf")
    for i in range(model.num_constraints):
        lo, hi = h.constraint_lower_bound(i), h.constraint_upper_bound(i)
        if lo == -inf and hi == inf:
            continue
        yield _Row(h.constraint_name(i) or f"r{i}", list(h.constraint_var_indices(i)),
                   list(h.constraint_coefficients(i)), lo, hi)


def write_mps(model: model_builder.Model, out: TextIO) -> None:
    """Free-format MPS: OBJSENSE, integer markers, ranges for two-sided rows, explicit bounds on every column.

    The objective's constant is the negated right-hand side of the objective row, as MPS readers expect.
    """
    h = model.helper
    inf = float("inf")
    n = model.num_variables
    rows = list(_rows(model))
    out.write(f"* placement export: {n} variables, {len(rows)} rows; xI is variable I of the CP-SAT model\n")
    out.write("NAME placement\n")
    out.write(f"OBJSENSE\n    {'MAX' if h.maximize() else 'MIN'}\n")
    out.write("ROWS\n N  obj\n")
    for r in rows:
        kind = "E" if r.lo == r.hi else "G" if r.lo > -inf else "L"
        out.write(f" {kind}  {r.name}\n")
    column: list[list[tuple[str, float]]] = [[] for _ in range(n)]
    for v in range(n):
        c = h.var_objective_coefficient(v)
        if c:
            column[v].append(("obj", c))
    for r in rows:
        for v, c in zip(r.cols, r.coeffs, strict=True):
            if c:
                column[v].append((r.name, c))
    out.write("COLUMNS\n")
    integer = False
    for v in range(n):
        if h.var_is_integral(v) != integer:
            integer = not integer
            out.write("    MARKER 'MARKER' 'INTORG'\n" if integer else "    MARKER 'MARKER' 'INTEND'\n")
        name = h.var_name(v) or f"x{v}"
        entries = column[v] or [("obj", 0.0)]  # a column must appear here to exist
        for row, c in entries:
            out.write(f"    {name} {row} {_number(c)}\n")
    if integer:
        out.write("    MARKER 'MARKER' 'INTEND'\n")
    out.write("RHS\n")
    if h.objective_offset():
        out.write(f"    RHS obj {_number(-h.objective_offset())}\n")
    for r in rows:
        rhs = r.lo if r.lo > -inf else r.hi
        if rhs:
            out.write(f"    RHS {r.name} {_number(rhs)}\n")
    ranged = [r for r in rows if -inf < r.lo < r.hi < inf]
    if ranged:
        out.write("RANGES\n")
        for r in ranged:
            out.write(f"    RNG {r.name} {_number(r.hi - r.lo)}\n")
    out.write("BOUNDS\n")
    for v in range(n):
        name = h.var_name(v) or f"x{v}"
        lo, hi = h.var_lower_bound(v), h.var_upper_bound(v)
        if lo == hi:
            out.write(f" FX BND {name} {_number(lo)}\n")
            continue
        out.write(f" MI BND {name}\n" if lo == -inf else f" LO BND {name} {_number(lo)}\n")
        if hi < inf:
            out.write(f" UP BND {name} {_number(hi)}\n")
        else:
            out.write(f" PL BND {name}\n")
    out.write("ENDATA\n")


def write_lp(model: model_builder.Model, out: TextIO) -> None:
    """CPLEX LP format: two-sided rows become two rows (cJ_ge, cJ_le: the range syntax is not portable), lines
    stay short (readers limit them), every variable gets explicit bounds, integers are listed as Generals."""
    h = model.helper
    inf = float("inf")
    n = model.num_variables
    names = [h.var_name(v) or f"x{v}" for v in range(n)]

    def terms(cols: Sequence[int], coeffs: Sequence[float]) -> Iterator[str]:
        for v, c in zip(cols, coeffs, strict=True):
            if c:
                yield f"{'-' if c < 0 else '+'} {_number(abs(c))} {names[v]}"

    def line(head: str, parts: Iterator[str], tail: str) -> None:
        width = len(head)
        out.write(head)
        for part in parts:
            if width + len(part) > 200:
                out.write("\n   ")
                width = 3
            out.write(f" {part}")
            width += len(part) + 1
        out.write(f" {tail}\n" if tail else "\n")

    out.write(f"\\ placement export: {n} variables; xI is variable I of the CP-SAT model\n")
    out.write("Maximize\n" if h.maximize() else "Minimize\n")
    objective = [(v, h.var_objective_coefficient(v)) for v in range(n)]
    parts = list(terms([v for v, _ in objective], [c for _, c in objective]))
    offset = h.objective_offset()
    if offset:
        parts.append(f"{'-' if offset < 0 else '+'} {_number(abs(offset))}")
    if not parts and n:
        parts = [f"0 {names[0]}"]
    line(" obj:", iter(parts), "")
    out.write("Subject To\n")
    for r in _rows(model):
        body = list(terms(r.cols, r.coeffs))
        if not body:
            if not n:
                continue
            body = [f"0 {names[0]}"]  # a row of constants still says whether the model is feasible
        if r.lo == r.hi:
            line(f" {r.name}:", iter(body), f"= {_number(r.lo)}")
            continue
        both = r.lo > -inf and r.hi < inf
        if r.lo > -inf:
            line(f" {r.name}{'_ge' if both else ''}:", iter(body), f">= {_number(r.lo)}")
        if r.hi < inf:
            line(f" {r.name}{'_le' if both else ''}:", iter(body), f"<= {_number(r.hi)}")
    out.write("Bounds\n")
    for v in range(n):
        lo, hi = h.var_lower_bound(v), h.var_upper_bound(v)
        if lo == hi:
            out.write(f" {names[v]} = {_number(lo)}\n")
        else:
            low = "-inf" if lo == -inf else _number(lo)
            high = "+inf" if hi == inf else _number(hi)
            out.write(f" {low} <= {names[v]} <= {high}\n")
    integers = [names[v] for v in range(n) if h.var_is_integral(v)]
    if integers:
        out.write("Generals\n")
        line("", iter(integers), "")
    out.write("End\n")
