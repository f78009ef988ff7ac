"""Speed per GPU model, resolved: each job's table under catalog names, and what a placement makes of it.

A request names GPU models as users write them (`V100`, `Tesla-V100-SXM2-16GB`); nodes are indexed under
the catalog's canonical names (`Problem.gpu_models`). So every job's table (its own `speeds`, or its
`workload`'s) is read once here into canonical names, unknown models rejected with the field that names
them. The rules (placement_models.speeds): runtime estimates are for throughput 1.0; a model absent from a
table, or a node without a GPU model, counts as 1.0; a gang runs at its slowest member.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from placement_models import PlacementRequest
from placement_models.errors import ErrorList

from placement import catalog

#: canonical GPU model -> relative throughput
Table = Mapping[str, float]


@dataclass(frozen=True)
class Speeds:
    """The speed tables of a request's jobs, under catalog names (None: the job declares none)."""

    pending: tuple[Table | None, ...] = ()  #: per `request.jobs`
    running: tuple[Table | None, ...] = ()  #: per `request.cluster.running`
    #: the GPU models of the nodes with GPUs, added ones included (None: a GPU node without a model)
    models: frozenset[str | None] = frozenset()
    #: per running job, the speed it runs at: its table's on its slowest GPU node (1.0 without a table)
    running_pace: tuple[float, ...] = ()

    @property
    def any(self) -> bool:
        return any(t is not None for t in self.pending) or any(t is not None for t in self.running)


def resolve(request: PlacementRequest, models: frozenset[str | None] = frozenset(),
            running_models: Sequence[Sequence[str | None]] = ()) -> Speeds:
    """Every job's table in canonical names; a model the catalog does not know is an error naming its field.
    `models`: the GPU models of the GPU nodes; `running_models`: per running job, those of the GPU nodes it holds."""
    errors = ErrorList("PlacementRequest")
    named = {w.name: _canonical(errors, ("workloads", k, "speeds"), w.speeds) for k, w in enumerate(request.workloads)}
    if not named and not any(j.speeds for j in request.jobs) and not any(r.speeds for r in request.cluster.running):
        return Speeds(pending=(None,) * len(request.jobs), running=(None,) * len(request.cluster.running),
                      models=models, running_pace=(1.0,) * len(request.cluster.running))

    def table(loc: tuple[str | int, ...], speeds: Mapping[str, float] | None, workload: str | None) -> Table | None:
        if speeds is not None:
            return _canonical(errors, (*loc, "speeds"), speeds)
        return named.get(workload) if workload is not None else None

    pending = tuple(table(("jobs", i), j.speeds, j.workload) for i, j in enumerate(request.jobs))
    running = tuple(table(("cluster", "running", i), r.speeds, r.workload)
                    for i, r in enumerate(request.cluster.running))
    errors.raise_if_any()
    paces = tuple(slowest(table, held) if table is not None else 1.0
                  for table, held in zip(running, running_models or [()] * len(running), strict=True))
    return Speeds(pending=pending, running=running, models=models, running_pace=paces)


def _canonical(errors: ErrorList, loc: tuple[str | int, ...], speeds: Mapping[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, value in speeds.items():
        found = catalog.lookup(name)
        if found is None:
            errors.add((*loc, name), f"unknown GPU model '{name}' (known: {', '.join(catalog.known_models())})", name)
        elif found.name in out and out[found.name] != value:
            errors.add((*loc, name), f"'{name}' is {found.name}, already given speed {out[found.name]:g}", value)
        else:
            out[found.name] = float(value)
    return out


def speed(table: Table | None, model: str | None) -> float:
    """Throughput on a GPU of `model` (canonical), relative to the runtime estimates' reference."""
    if table is None or model is None:
        return 1.0
    return table.get(model, 1.0)


def slowest(table: Table | None, models: Iterable[str | None]) -> float:
    """The speed a gang on GPUs of these models runs at: its slowest member's (1.0 with no model)."""
    return min((speed(table, m) for m in models), default=1.0)


def scaled_runtime(hours: float, table: Table | None, models: Iterable[str | None]) -> float:
    """Hours a job estimated at `hours` (at throughput 1.0) runs on GPUs of these models."""
    return hours / slowest(table, models)


def best(table: Table | None, models: Iterable[str | None]) -> float:
    """The job's best speed over these GPU models (1.0 with no model)."""
    return max((speed(table, m) for m in models), default=1.0)


def normalised(table: Table | None, model: str | None, models: Iterable[str | None]) -> float:
    """Speed on `model` over the best on `models` (the cluster's): 1.0 on the job's best GPU, or without a table."""
    return speed(table, model) / best(table, models) if table is not None else 1.0
