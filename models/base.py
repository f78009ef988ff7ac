"""The base every request model shares: strict fields and timestamps read as UTC.

Kept apart so the cluster, jobs, teams and policy modules depend on it and not on each other.
"""

from __future__ import annotations

from datetime import datetime, timezone

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Unknown fields are errors: a misspelt field must not be silently dropped."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def as_utc(v: datetime | None) -> datetime | None:
    """Timestamps without a zone are UTC, so every comparison between them is defined."""
    if v is not None and v.tzinfo is None:
        return v.replace(tzinfo=timezone.utc)
    return v
