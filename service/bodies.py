"""Request bodies in, responses out: content types, size limits, JSON/YAML, and 422 error paths.

Bodies are read by hand rather than declared as FastAPI body parameters because the service
must (a) refuse a body over the size limit while it streams in, before buffering all of it,
(b) accept YAML as well as JSON, and (c) report validation errors with the library's own full
paths (including cross-field ones raised after field validation), prefixed by ``body`` the way
FastAPI reports them, so a caller can point at the exact field.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import yaml
from fastapi import HTTPException, Request
from pydantic import ValidationError

from placement.io import DocumentError, parse_document

JSON_TYPES = ("application/json",)
YAML_TYPES = ("application/yaml", "application/x-yaml")
ACCEPTED_TYPES = JSON_TYPES + YAML_TYPES


def media_type(header: str | None) -> str:
    """`application/json; charset=utf-8` -> `application/json`."""
    return (header or "").split(";", 1)[0].strip().lower()


def check_content_type(request: Request) -> str:
    """The request's media type if we can read it; 415 naming the accepted ones otherwise."""
    kind = media_type(request.headers.get("content-type"))
    if kind not in ACCEPTED_TYPES:
        shown = f"'{kind}'" if kind else "none"
        raise HTTPException(415, f"unsupported content type {shown}; send one of: {', '.join(ACCEPTED_TYPES)}")
    return kind


def _too_large(limit: int) -> HTTPException:
    return HTTPException(413, f"request body exceeds the limit of {limit} bytes")


async def read_limited(request: Request, limit: int, timeout_s: float | None = None) -> bytes:
    """The whole body, or 413 as soon as it is known to exceed `limit` (header first, then bytes seen),
    or 408 when it has not all arrived within `timeout_s` (a slow client must not hold a connection
    and its buffers for as long as it likes)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:  # a chunked or lying client: stop reading, do not buffer the rest
                    raise _too_large(limit)
                chunks.append(chunk)
    except TimeoutError:
        raise HTTPException(408, f"the request body did not arrive within {timeout_s:g}s",
                            headers={"Connection": "close"}) from None
    return b"".join(chunks)


def invalid(loc: Sequence[str | int], msg: str, kind: str) -> HTTPException:
    """A 422 in the same shape as pydantic errors, for problems found before validation."""
    return HTTPException(422, [{"type": kind, "loc": list(loc), "msg": msg}])


def decode(raw: bytes, kind: str, max_bytes: int | None = None) -> Any:
    """Parse JSON or YAML with the library's document parser (the CLI's too: one set of limits on
    size, nesting and YAML aliases); any problem is a 422 at `body`. CPU-bound: call it off the loop."""
    yaml_body = kind in YAML_TYPES
    try:
        return parse_document(raw, ".yaml" if yaml_body else ".json", max_bytes=max_bytes)
    except DocumentError as exc:
        raise invalid(["body"], str(exc), "yaml_invalid" if yaml_body else "json_invalid") from None


def check_limits(data: Any, prefix: Sequence[str | int], max_nodes: int, max_jobs: int) -> None:
    """Refuse oversized requests before validating them; 422 naming the field and the limit."""
    if not isinstance(data, dict):
        return  # validation will say what shape was expected
    cluster = data.get("cluster")
    nodes = cluster.get("nodes") if isinstance(cluster, dict) else None
    jobs = data.get("jobs")
    if isinstance(nodes, list) and len(nodes) > max_nodes:
        raise invalid([*prefix, "cluster", "nodes"], f"at most {max_nodes} nodes per request on this server "
                      f"(got {len(nodes)}); split the cluster or ask the operator", "too_long")
    if isinstance(jobs, list) and len(jobs) > max_jobs:
        raise invalid([*prefix, "jobs"], f"at most {max_jobs} jobs per request on this server (got {len(jobs)})",
                      "too_long")


#: Errors one 422 lists; the rest are counted in a last item (a body of 50,000 bad nodes is answered
#: in milliseconds with what a person can act on, not with a multi-megabyte list).
MAX_ERRORS_SHOWN = 100


def validation_errors(exc: ValidationError, prefix: Sequence[str | int] = ("body",)) -> list[dict[str, Any]]:
    """pydantic errors as JSON, each `loc` prefixed, without echoing the (possibly huge) input."""
    # `ctx` is left out: the message already states the bound, and custom errors repeat it there.
    if exc.error_count() > 50 * MAX_ERRORS_SHOWN:  # listing them would cost more than finding them did
        return [{"type": "too_many_errors", "loc": list(prefix),
                 "msg": f"{exc.error_count()} validation errors; fix the shape of the document and resend"}]
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    shown = [{"type": err["type"], "loc": [*prefix, *err["loc"]], "msg": err["msg"]}
             for err in errors[:MAX_ERRORS_SHOWN]]
    if len(errors) > MAX_ERRORS_SHOWN:
        shown.append({"type": "too_many_errors", "loc": list(prefix),
                      "msg": f"{len(errors) - MAX_ERRORS_SHOWN} more errors not shown"})
    return shown


def unprocessable(exc: ValidationError, prefix: Sequence[str | int] = ("body",)) -> HTTPException:
    return HTTPException(422, validation_errors(exc, prefix))


def wants_yaml(request: Request) -> bool:
    """YAML only when the caller's Accept names a YAML type before any JSON one; JSON otherwise."""
    for part in request.headers.get("accept", "").split(","):
        kind = media_type(part)
        if kind in YAML_TYPES:
            return True
        if kind in JSON_TYPES:
            return False
    return False


def render_yaml(data: Any) -> bytes:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode()
