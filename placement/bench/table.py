"""Markdown tables of benchmark rows: the one renderer the benches share.

Each bench declares its columns as (header, row key, format spec) and writes its own footer; the
cells, widths and alignment are the same everywhere: text columns to the left, numbers to the right.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Any

#: (header, row key, format spec): spec "s" prints the value as text, anything else goes to `format`
Column = tuple[str, str, str]


def cell(value: Any, spec: str) -> str:
    """One cell: "—" for a missing or NaN value, yes/no for a flag, else the value formatted by `spec`."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value) if spec == "s" else format(value, spec)


def row_cells(row: dict[str, Any], columns: Sequence[Column]) -> list[str]:
    return [cell(row.get(key), spec) for _, key, spec in columns]


def markdown(head: Sequence[str], body: Sequence[Sequence[str]], left: Collection[str]) -> list[str]:
    """The table's lines: header, rule, one line per body row; the columns named in `left` are text
    (left-aligned), the others numbers (right-aligned). A "|" inside a cell is escaped."""
    body = [[c.replace("|", "\\|") for c in cells] for cells in body]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) if h in left else c.rjust(w)
                                 for h, c, w in zip(head, cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) if h in left else "-" * (w + 1) + ":"
                          for h, w in zip(head, widths, strict=True)) + "|"
    return [line(head), rule, *(line(b) for b in body)]
