"""Structured validation errors with a JSON path, so every face can say *where* input is wrong.

Cross-field rules (a node's pool must exist, a GPU index must be in range) cannot be expressed
as per-field validators. They raise through `reject`, which produces a pydantic
`ValidationError` whose `loc` is the full path of the offending field; pydantic prefixes the
location of the enclosing model, so the HTTP face can answer 422 with an exact path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

Loc = tuple[str | int, ...]


class ErrorList:
    """Collects (path, reason) pairs so one request reports all of its problems at once."""

    def __init__(self, title: str) -> None:
        self.title = title
        self._errors: list[InitErrorDetails] = []

    def add(self, loc: Sequence[str | int], reason: str, value: Any = None, kind: str = "invalid") -> None:
        self._errors.append(
            InitErrorDetails(
                type=PydanticCustomError(kind, "{reason}", {"reason": reason}),
                loc=tuple(loc),
                input=value,
            )
        )

    def __bool__(self) -> bool:
        return bool(self._errors)

    def raise_if_any(self) -> None:
        if self._errors:
            raise ValidationError.from_exception_data(self.title, self._errors)


def reject(title: str, loc: Sequence[str | int], reason: str, value: Any = None) -> None:
    """Raise a single validation error at `loc`."""
    errors = ErrorList(title)
    errors.add(loc, reason, value)
    errors.raise_if_any()


def format_errors(exc: ValidationError) -> list[str]:
    """One line per error, `path: reason`, for the CLI and logs."""
    lines = []
    for err in exc.errors():
        path = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in err["loc"])
        path = path.replace(".[", "[")
        lines.append(f"{path or '(request)'}: {err['msg']}")
    return lines
