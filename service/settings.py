"""Service settings, read from the environment (prefix ``PLACEMENT_``) so a pod spec can tune them.

Every limit here exists because the service is called by schedulers every cycle: one caller
must not be able to hold the solver longer than the operator allows (`max_time_limit_s`, and
`max_what_if_s` / `max_scenarios` for what-if, whose solves run one after another),
starve the machine of cores (`max_concurrent_solves`, `max_solver_workers`), queue work it
will never see answered (`max_queue`), or send a body that costs more to parse than to solve
(`max_body_bytes`, `max_nodes`, `max_jobs`).
"""

from __future__ import annotations

import json
import os
from typing import Annotated, Any

from placement_models.base import MAX_JOBS, MAX_NODES
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


def available_cores() -> int:
    """Cores this process may run on: the affinity mask, not the host's count, inside containers."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


class Settings(BaseSettings):
    """Limits and switches of one service process (each uvicorn worker applies them on its own)."""

    model_config = SettingsConfigDict(env_prefix="PLACEMENT_", extra="ignore")

    host: str = Field("127.0.0.1", description="bind address; loopback unless an operator opens it")
    port: int = Field(8000, ge=0, le=65535)
    max_time_limit_s: float = Field(10.0, gt=0, le=3600, description="clamp for policy.time_limit_s")
    deadline_margin_s: float = Field(
        0.5, gt=0, le=60, description="grace after the time limit for decode and verification; then 504"
    )
    max_concurrent_solves: int = Field(default_factory=available_cores, ge=1, le=256)
    #: queued requests beyond the running ones; what cannot finish by its deadline is shed (503) anyway, so the
    #: queue only bounds memory: a burst of a scheduler's small calls waits its turn rather than being refused
    max_queue: int = Field(default_factory=lambda: max(64, 8 * available_cores()), ge=0, le=10_000)
    max_solver_workers: int = Field(
        default_factory=available_cores, ge=1, le=64, description="clamp for policy.workers (CP-SAT threads)"
    )
    max_scenarios: int = Field(8, ge=1, le=64, description="scenarios per what-if request (the base not counted)")
    max_what_if_s: float = Field(
        60.0, gt=0, le=3600,
        description="bound on a what-if's total solve time: the clamped limits of the base and every scenario",
    )
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024, le=256 * 1024 * 1024)
    max_nodes: int = Field(5_000, ge=1, le=MAX_NODES, description="per request; the wire format allows "
                           f"{MAX_NODES}")
    max_jobs: int = Field(5_000, ge=1, le=MAX_JOBS, description=f"per request; the wire format allows {MAX_JOBS}")
    max_states: int = Field(16, ge=1, le=1_000, description="cluster states kept for `POST /v1/changes` (least "
                            "recently used first out); each is one request's size in memory")
    header_timeout_s: float = Field(5.0, gt=0, le=600, description="a request's headers must arrive within this "
                                    "after the connection opens or the last response ends; else it is closed")
    body_timeout_s: float = Field(10.0, gt=0, le=600, description="the body must arrive within this; else 408")
    keep_alive_s: float = Field(5.0, gt=0, le=600, description="idle keep-alive connections are closed after this")
    max_connections: int = Field(1_000, ge=1, le=100_000, description="open connections and requests at once "
                                 "(uvicorn's limit_concurrency): beyond it new ones get 503")
    drain_grace_s: float = Field(
        20.0, gt=0, le=3600, description="on SIGTERM: stop admitting (503), let in-flight work finish for this "
        "long, then stop it (solves return their best plan) and answer; give the pod a longer "
        "terminationGracePeriodSeconds")
    api_token: SecretStr | None = Field(None, description="bearer token; unset means no authentication")
    cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)

    @field_validator("api_token", mode="before")
    @classmethod
    def _empty_token_is_none(cls, v: Any) -> Any:
        # PLACEMENT_API_TOKEN="" in a manifest means "no token", not "the empty token".
        if v is None or (isinstance(v, str) and not v.strip()):
            return None
        return v

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _origins(cls, v: Any) -> Any:
        # Accept a JSON list or the comma-separated form operators actually type in env vars.
        if isinstance(v, str):
            text = v.strip()
            if text.startswith("["):
                return json.loads(text)
            return [o.strip() for o in text.split(",") if o.strip()]
        return v
