"""Start the service under uvicorn: the function `placement serve` calls.

The app is built by the factory `placement_service.app:create_app` inside each worker process, so settings
come from the environment (PLACEMENT_*) in every worker; `host` and `port` given here override
them. Each worker has its own solver pool and metrics: size `--workers` times
`PLACEMENT_MAX_CONCURRENT_SOLVES` to the cores, not each alone.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import uvicorn
from placement_service.protocol import TimedH11Protocol
from placement_service.settings import Settings
from uvicorn.config import LOGGING_CONFIG


def _log_config() -> dict[str, Any]:
    """uvicorn's logging plus our logger, whose lines carry the request id (so uvicorn's
    access log, which cannot, is switched off)."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["placement"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    return config


def run(host: str | None = None, port: int | None = None, workers: int = 1) -> None:
    """Serve until interrupted; `None` means the value from settings (127.0.0.1:8000 by default)."""
    settings = Settings()
    host = settings.host if host is None else host
    port = settings.port if port is None else port
    if workers < 1:
        raise ValueError("workers must be at least 1")
    if host not in ("127.0.0.1", "::1", "localhost") and settings.api_token is None:
        logging.getLogger("placement.service").warning(
            "serving on %s without PLACEMENT_API_TOKEN: anyone who can reach the port can submit solves", host)
    uvicorn.run(
        "placement_service.app:create_app", factory=True, host=host, port=port, workers=workers,
        log_config=_log_config(), access_log=False, server_header=False, proxy_headers=False,
        http=TimedH11Protocol, limit_concurrency=settings.max_connections, timeout_keep_alive=int(
            max(1, settings.keep_alive_s)), h11_max_incomplete_event_size=16 * 1024,
        # The app drains within drain_grace_s (then stops solves, which return at once); uvicorn cancels
        # what is left only after that and a margin, so no request ends in its plain-text 500.
        timeout_graceful_shutdown=int(settings.drain_grace_s + settings.deadline_margin_s) + 5,
    )
