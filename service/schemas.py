"""Wire shapes that exist only at the HTTP face: verify and what-if bodies, errors, health, and the
OpenAPI fragments the routes declare with them."""

from __future__ import annotations

from typing import Any

from placement_models import PlacementRequest, Plan
from placement_models.base import SPACE
from placement_service import bodies
from pydantic import BaseModel, ConfigDict, Field

from placement import catalog, whatif


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


def _any_case(text: str) -> str:
    """`text` as a regex matching it in any letter case, without `(?i)` (not in every JSON Schema dialect)."""
    out = []
    for c in text:
        if c.lower() != c.upper():
            out.append(f"[{c.lower()}{c.upper()}]")
        else:
            out.append("\\" + c if c in ".+*?()[]{}|^$\\" else c)
    return "".join(out)


def gpu_model_pattern() -> str:
    """What `catalog.lookup` accepts as a node's GPU model, as a schema pattern: a name or alias in any
    case, with whitespace around and GPU Feature Discovery's `-MIG-...`/`-SHARED` suffixes. Built from the
    catalog's own alias index (`_table`: it lists no aliases publicly), so a new alias is in the document."""
    names = "|".join(_any_case(name) for name in sorted(catalog._table()[1]))
    return rf"^[{SPACE}]*({names})(-{_any_case('mig')}-.*|-{_any_case('shared')})?[{SPACE}]*$"


def _one_of(fields: list[str]) -> dict[str, Any]:
    """Exactly one of `fields` is given (not null): what-if's `Change` holds one kind of change."""
    return {"anyOf": [{"required": [f], "properties": {f: {"not": {"type": "null"}},
                                                        **{o: {"type": "null"} for o in fields if o != f}}}
                      for f in fields]}


def _add_rule(schema: dict[str, Any], rule: dict[str, Any]) -> None:
    """`rule` joins the schema's `allOf` (a new list: the model's own may be shared with its config)."""
    schema["allOf"] = [*schema.get("allOf", []), rule]


def state_domain_checks(components: dict[str, Any], max_time_limit_s: float, max_solver_workers: int) -> None:
    """The checks of the domain layer and of this server a schema can state, added where the models' own
    schemas cannot know them: a node's GPU model is one the catalog knows, what-if's rules for a scenario
    (its models are the library's, so their schemas are completed here), and a deterministic solve's
    limits (refused over this server's maximum, not clamped: see app.applied_limit)."""
    policy = components["Policy"]
    limits = {"time_limit_s": max_time_limit_s, "workers": max_solver_workers}
    within = {"properties": {field: {"maximum": limit} for field, limit in limits.items()},
              "required": [field for field, limit in limits.items() if policy["properties"][field]["default"] > limit]}
    _add_rule(policy, {"anyOf": [{"properties": {"deterministic": {"const": False}}}, within]})
    pattern = gpu_model_pattern()
    for name in ("Node", "NodeTemplate"):
        for branch in components[name]["properties"]["gpu_model"].get("anyOf", []):
            if branch.get("type") == "string":
                branch["pattern"] = pattern
    change = components["Change"]
    _add_rule(change, _one_of(list(change["properties"])))
    for shape in ("AddNodes", "Provision"):  # a copy of a node or a template, not both
        _add_rule(components[shape], {"anyOf": [{"properties": {"like": {"type": "null"}}},
                                                {"properties": {"node": {"type": "null"}}}]})
    components["Scenario"]["properties"]["name"]["not"] = {"const": "base"}  # the base request's column
