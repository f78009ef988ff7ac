"""A sweep's points: a grid of axes (every combination of their values) and/or a list of what-if scenarios.

Why this exists: capacity questions come as sweeps ("spot nodes 0..64 × spot price × MIG layout"), and
writing hundreds of what-if scenario files by hand is how mistakes get in. A grid names each axis once,
with the change it makes (in the what-if format, placement.whatif) and the values it takes; every point
is one what-if scenario, checked before anything is solved, so a typo fails in a second with the field
named, not after an hour of solves. A file (YAML or JSON):

```yaml
axes:                                   # every combination: 4 × 2 × 2 = 16 points
  spot_nodes:                           # the axis name: a column of the table and a key in the JSON
    change: {add_nodes: {pool: h100-spot, count: $value, like: s00}}   # one change or a list of them
    values: [0, 4, 8, 16]
  spot_price:
    change: {pool: {name: h100-spot, gpu_hour_price: $value}}
    values: [0.9, 1.3]
  layout:                               # no 'change': each value is a named list of changes
    values:
      whole: []
      mig-n03: [{mig: {node: n03, layout: {"0": [{profile: 3g.40gb, start: 0}]}}}]
points:                                 # optional: more points, what-if scenarios as they are
  - name: lose-rack
    changes: [{remove_rack: r00}]
```

`$value` is replaced by the axis value (a string that is exactly `$value` takes the value's type; inside a
longer string it is substituted as text). On the command line, `--grid KEY=V1,V2,...` adds an axis without
a file; the keys are shortcuts for the common changes (values are read as YAML scalars):

    add_nodes.POOL=0,4,8        {add_nodes: {pool: POOL, count: V}}   (nodes shaped like the pool's first)
    provision.POOL=1,4          {provision: {pool: POOL, max_nodes: V}}
    price.POOL=0.9,1.3          {pool: {name: POOL, gpu_hour_price: V}}
    reclaim.POOL=0.02,0.2       {pool: {name: POOL, reclaim_rate_per_h: V}}
    policy.weights.cost=0,0.1   {policy: {weights: {cost: V}}}       (any policy field, dotted)
    peak=true,false             {peak: V}
    remove_rack=r00,r01         {remove_rack: V}

A sweep has at most :data:`MAX_POINTS` points (10,000): past that, split it; the bound keeps a typo such
as an extra axis from queuing a million solves.
"""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from placement_models import format_errors
from pydantic import ValidationError

from placement.whatif import Change, Scenario

#: The most points one sweep may have.
MAX_POINTS = 10_000
PLACEHOLDER = "$value"


class GridError(ValueError):
    """A grid that cannot be expanded; the message starts with the field to blame (``axes.spot_nodes.values``)."""


@dataclass
class Axis:
    """One dimension of the grid: its name, the labels of its values, and the changes each value makes."""

    name: str
    labels: list[Any]
    changes: list[list[dict[str, Any]]]  #: per value, the what-if changes (plain data)


@dataclass
class Point:
    """One scenario of the sweep: its name, the axis values that made it (empty for a listed point), its changes."""

    name: str
    values: dict[str, Any] = field(default_factory=dict)
    changes: list[dict[str, Any]] = field(default_factory=list)

    def scenario(self) -> Scenario:
        return Scenario.model_validate({"name": self.name, "changes": self.changes})


@dataclass
class Grid:
    axes: list[Axis] = field(default_factory=list)
    listed: list[Point] = field(default_factory=list)

    @property
    def size(self) -> int:
        return (math.prod(len(a.labels) for a in self.axes) if self.axes else 0) + len(self.listed)

    def points(self) -> list[Point]:
        """The grid's points (first axis slowest), then the listed ones; each validated as a what-if scenario."""
        if self.size == 0:
            raise GridError("grid: no points (give axes, points, or --grid KEY=V1,V2)")
        if self.size > MAX_POINTS:
            shape = " × ".join(f"{a.name} {len(a.labels)}" for a in self.axes)
            raise GridError(f"grid: {self.size:,} points ({shape}{' + ' if self.axes and self.listed else ''}"
                            f"{f'{len(self.listed)} listed' if self.listed else ''}); a sweep has at most "
                            f"{MAX_POINTS:,}: split it")
        out: list[Point] = []
        if self.axes:
            for combo in itertools.product(*[range(len(a.labels)) for a in self.axes]):
                values = {a.name: a.labels[k] for a, k in zip(self.axes, combo, strict=True)}
                changes = [c for a, k in zip(self.axes, combo, strict=True) for c in a.changes[k]]
                name = ",".join(f"{k}={_label(v)}" for k, v in values.items())
                out.append(Point(name, values, changes))
        out.extend(self.listed)
        names = [p.name for p in out]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise GridError(f"points: two points are named {dup!r}; names must be unique")
        return out


def _label(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def substitute(template: Any, value: Any) -> Any:
    """The template with every ``$value`` replaced by ``value`` (typed when the whole string is the placeholder)."""
    if isinstance(template, str):
        if template == PLACEHOLDER:
            return copy.deepcopy(value)
        return template.replace(PLACEHOLDER, _label(value)) if PLACEHOLDER in template else template
    if isinstance(template, dict):
        return {k: substitute(v, value) for k, v in template.items()}
    if isinstance(template, list):
        return [substitute(v, value) for v in template]
    return template


def _changes(raw: Any, where: str) -> list[dict[str, Any]]:
    """A change or a list of changes, each checked against the what-if format (GridError naming ``where``)."""
    items = raw if isinstance(raw, list) else [raw]
    out = []
    for i, item in enumerate(items):
        spot = f"{where}[{i}]" if isinstance(raw, list) else where
        if not isinstance(item, dict):
            raise GridError(f"{spot}: a change is a mapping such as {{add_nodes: {{pool: P, count: 4}}}}, "
                            f"got {item!r}")
        try:
            Change.model_validate(item)
        except ValidationError as exc:
            raise GridError(f"{spot}: " + "; ".join(format_errors(exc))) from None
        out.append(item)
    return out


def _mentions_placeholder(template: Any) -> bool:
    if isinstance(template, str):
        return PLACEHOLDER in template
    if isinstance(template, dict):
        return any(_mentions_placeholder(v) for v in template.values())
    if isinstance(template, list):
        return any(_mentions_placeholder(v) for v in template)
    return False


def _drop_empty(change: dict[str, Any]) -> list[dict[str, Any]]:
    """``add_nodes`` with count 0 is no change at all: dropped, so the point equals the untouched request."""
    body = change.get("add_nodes")
    if isinstance(body, dict) and body.get("count") == 0:
        return []
    return [change]


def axis_from(name: str, spec: Any) -> Axis:
    """One axis of a grid file (GridError naming ``axes.NAME...``)."""
    where = f"axes.{name}"
    if not isinstance(spec, dict):
        raise GridError(f"{where}: an axis is a mapping with 'values' (and 'change'), got {spec!r}")
    unknown = set(spec) - {"change", "values"}
    if unknown:
        raise GridError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}; an axis has 'change' and 'values'")
    values = spec.get("values")
    template = spec.get("change")
    if template is None:
        if not isinstance(values, dict) or not values:
            raise GridError(f"{where}.values: without 'change', values is a non-empty mapping of name -> list of "
                            "changes")
        labels = list(values)
        changes = [[c for c in _changes(v, f"{where}.values.{k}") for c in _drop_empty(c)] if v else []
                   for k, v in values.items()]
        return Axis(name, labels, changes)
    if not _mentions_placeholder(template):
        raise GridError(f"{where}.change: has no {PLACEHOLDER} for the axis' values to go in")
    if isinstance(values, dict):
        labels, raw = list(values), list(values.values())
    elif isinstance(values, list):
        labels, raw = list(values), list(values)
    else:
        raise GridError(f"{where}.values: a non-empty list (or a mapping name -> value), got {values!r}")
    if not raw:
        raise GridError(f"{where}.values: empty; an axis needs at least one value")
    if len({_label(v) for v in labels}) != len(labels):
        raise GridError(f"{where}.values: repeated value; each value of an axis must differ")
    changes = []
    for label, value in zip(labels, raw, strict=True):
        checked = _changes(substitute(template, value), f"{where} (value {_label(label)})")
        changes.append([c for c in checked for c in _drop_empty(c)])
    return Axis(name, labels, changes)


def grid_from(data: Any, source: str = "grid") -> Grid:
    """A grid file's content → a Grid (GridError naming the field)."""
    if not isinstance(data, dict):
        raise GridError(f"{source}: a grid is a mapping with 'axes' and/or 'points'")
    unknown = set(data) - {"axes", "points"}
    if unknown:
        raise GridError(f"{source}: unknown field(s) {', '.join(sorted(unknown))}; a grid has 'axes' and 'points'")
    axes_raw = data.get("axes") or {}
    if not isinstance(axes_raw, dict):
        raise GridError("axes: a mapping of axis name -> {change, values}")
    axes = [axis_from(str(name), spec) for name, spec in axes_raw.items()]
    listed = []
    points_raw = data.get("points") or []
    if not isinstance(points_raw, list):
        raise GridError("points: a list of scenarios ({name, changes})")
    for i, item in enumerate(points_raw):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise GridError(f"points[{i}]: a scenario is a mapping with a 'name' and 'changes'")
        extra = set(item) - {"name", "changes"}
        if extra:
            raise GridError(f"points[{i}]: unknown field(s) {', '.join(sorted(extra))}")
        listed.append(Point(item["name"], {}, _changes(item.get("changes") or [], f"points[{i}].changes")
                            if item.get("changes") else []))
    return Grid(axes, listed)


_SHORTCUTS = {
    "add_nodes": lambda key: {"add_nodes": {"pool": key, "count": PLACEHOLDER}},
    "provision": lambda key: {"provision": {"pool": key, "max_nodes": PLACEHOLDER}},
    "price": lambda key: {"pool": {"name": key, "gpu_hour_price": PLACEHOLDER}},
    "reclaim": lambda key: {"pool": {"name": key, "reclaim_rate_per_h": PLACEHOLDER}},
}


def _policy_template(path: str) -> dict[str, Any]:
    inner: Any = PLACEHOLDER
    for part in reversed(path.split(".")):
        inner = {part: inner}
    return {"policy": inner}


def axis_from_shortcut(text: str) -> Axis:
    """``KEY=V1,V2,...`` → an axis named KEY (GridError naming ``--grid KEY``)."""
    key, sep, rest = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise GridError(f"--grid {text!r}: expected KEY=V1,V2,... (e.g. add_nodes.h100-spot=0,4,8) or a grid file")
    head, _, tail = key.partition(".")
    if head in _SHORTCUTS and tail:
        template: Any = _SHORTCUTS[head](tail)
    elif head == "policy" and tail:
        template = _policy_template(tail)
    elif key in ("peak", "remove_rack"):
        template = {key: PLACEHOLDER}
    else:
        raise GridError(f"--grid {key}: unknown shortcut; use add_nodes.POOL, provision.POOL, price.POOL, "
                        "reclaim.POOL, policy.FIELD[.FIELD], peak or remove_rack (or a grid file for anything else)")
    try:
        values = [yaml.safe_load(v.strip()) for v in rest.split(",") if v.strip()]
    except yaml.YAMLError as exc:
        raise GridError(f"--grid {key}: cannot read the values {rest!r}: {exc}") from None
    if not values:
        raise GridError(f"--grid {key}: no values after '='")
    try:
        return axis_from(key, {"change": template, "values": values})
    except GridError as exc:
        raise GridError(f"--grid {key}: {str(exc).split(': ', 1)[-1]}") from None


def load_grid(specs: list[str]) -> Grid:
    """Every ``--grid`` argument (a file, or a KEY=V1,V2 shortcut) combined into one grid: all axes multiply."""
    from placement.io import load_document

    grid = Grid()
    for spec in specs:
        path = Path(spec)
        if path.suffix.lower() in (".yaml", ".yml", ".json") or path.is_file():
            if not path.is_file():
                raise GridError(f"--grid {spec}: no such file")
            try:
                data = load_document(path)
            except (yaml.YAMLError, ValueError, OSError) as exc:
                raise GridError(f"--grid {spec}: cannot read it: {exc}") from None
            part = grid_from(data, str(path))
        else:
            part = Grid([axis_from_shortcut(spec)])
        grid.axes.extend(part.axes)
        grid.listed.extend(part.listed)
    names = [a.name for a in grid.axes]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise GridError(f"axes.{dup}: given twice")
    return grid
