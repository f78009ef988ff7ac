"""Wire shapes that exist only at the HTTP face: verify and what-if bodies, errors, health, and the
OpenAPI fragments the routes declare with them."""

from __future__ import annotations

from typing import Any

from placement_models import PlacementRequest, Plan
from placement_service import bodies
from pydantic import BaseModel, ConfigDict, Field

from placement import whatif


class VerifyBody(BaseModel):
    """A request and a plan for it, checked by the independent verifier."""

    model_config = ConfigDict(extra="forbid")

    request: PlacementRequest
    plan: Plan


class VerifyResult(BaseModel):
    valid: bool
    violations: list[str] = Field(description="one '<rule>: <what>' line per broken rule; empty when valid")


class WhatIfBody(BaseModel):
    """A base request and the scenarios (named lists of changes) to solve beside it."""

    model_config = ConfigDict(extra="forbid")

    request: PlacementRequest
    scenarios: list[whatif.Scenario] = Field(min_length=1)


class WhatIfColumn(BaseModel):
    """One column of the side-by-side table: the library's row and diff, plus the plan itself.

    The row and diff are `placement.whatif`'s own dataclasses, so this shape cannot drift from
    what `placement what-if --json` writes (plus the time limit this server applied).
    """

    name: str
    time_limit_s: float = Field(description="the limit applied to this solve after clamping")
    row: whatif.Row
    diff: whatif.Diff | None = Field(description="jobs placed, pending or moved compared with base; null for base")
    plan: Plan


class WhatIfResult(BaseModel):
    scenarios: list[WhatIfColumn] = Field(description="base first, then the scenarios in the order sent")


class ErrorItem(BaseModel):
    type: str
    loc: list[str | int] = Field(description="path of the offending field, starting with 'body'")
    msg: str


class ErrorBody(BaseModel):
    detail: str | list[ErrorItem]
    request_id: str = Field(description="also in the X-Request-ID header and in the server's log lines")


class Health(BaseModel):
    status: str
    in_flight: int | None = None
    capacity: int | None = None


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    what = {
        401: "missing or wrong bearer token", 408: "the body did not arrive within the body timeout",
        413: "body over the size limit", 415: "unsupported content type",
        422: "invalid request, with field paths", 500: "unexpected error; quote the request id",
        503: "solver pool and queue full, or shutting down; see Retry-After",
        504: "no plan, not even the greedy one, within the time limit plus the margin",
    }
    return {c: {"model": ErrorBody, "description": what[c]} for c in codes}


def body_doc(schema: str, description: str) -> dict[str, Any]:
    ref = {"$ref": f"#/components/schemas/{schema}"}
    content = {kind: {"schema": ref} for kind in bodies.ACCEPTED_TYPES}
    return {"requestBody": {"required": True, "description": description, "content": content}}
