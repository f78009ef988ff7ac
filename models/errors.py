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


#: Errors one ErrorList reports; beyond it they are counted, not built (a request with 200,000 bad
#: pods would otherwise build, send and print 200,000 of them, and no one reads past the first).
MAX_ERRORS = 1_000


class ErrorList:
    """Collects (path, reason) pairs so one request reports its problems at once (up to MAX_ERRORS)."""

    def __init__(self, title: str) -> None:
        self.title = title
        self._errors: list[InitErrorDetails] = []
        self._dropped = 0

    def add(self, loc: Sequence[str | int], reason: str, value: Any = None, kind: str = "invalid") -> None:
        if len(self._errors) >= MAX_ERRORS:
            self._dropped += 1
            return
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
            errors = self._errors
            if self._dropped:
                errors = [*errors, InitErrorDetails(
                    type=PydanticCustomError("too_many_errors", "{count} more errors not shown",
                                             {"count": self._dropped}), loc=(), input=None)]
            raise ValidationError.from_exception_data(self.title, errors)


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
