"""Request bodies in, responses out: content types, size limits, JSON/YAML, and 422 error paths.

Bodies are read by hand rather than declared as FastAPI body parameters because the service
must (a) refuse a body over the size limit while it streams in, before buffering all of it,
(b) accept YAML as well as JSON, and (c) report validation errors with the library's own full
paths (including cross-field ones raised after field validation), prefixed by ``body`` the way
FastAPI reports them, so a caller can point at the exact field.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml
from fastapi import HTTPException, Request
from pydantic import ValidationError

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


async def read_limited(request: Request, limit: int) -> bytes:
    """The whole body, or 413 as soon as it is known to exceed `limit` (header first, then bytes seen)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:  # a chunked or lying client: stop reading, do not buffer the rest
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader without anchors/aliases: a few hundred bytes of nested aliases ("billion laughs")
    expand into a structure that costs minutes to validate, and requests never need them."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(None, None, "YAML aliases are not accepted", mark)
        return super().compose_node(parent, index)


def invalid(loc: Sequence[str | int], msg: str, kind: str) -> HTTPException:
    """A 422 in the same shape as pydantic errors, for problems found before validation."""
    return HTTPException(422, [{"type": kind, "loc": list(loc), "msg": msg}])


def decode(raw: bytes, kind: str) -> Any:
    """Parse JSON or YAML; a syntax error is a 422 at `body` (CPU-bound: call it off the event loop)."""
    if kind in YAML_TYPES:
        try:
            return yaml.load(raw, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
        except (yaml.YAMLError, RecursionError) as exc:
            raise invalid(["body"], f"invalid YAML: {exc}", "yaml_invalid") from None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise invalid(["body"], f"invalid JSON: {exc}", "json_invalid") from None


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


def validation_errors(exc: ValidationError, prefix: Sequence[str | int] = ("body",)) -> list[dict[str, Any]]:
    """pydantic errors as JSON, each `loc` prefixed, without echoing the (possibly huge) input."""
    # `ctx` is left out: the message already states the bound, and custom errors repeat it there.
    return [{"type": err["type"], "loc": [*prefix, *err["loc"]], "msg": err["msg"]}
            for err in exc.errors(include_url=False, include_input=False)]


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
