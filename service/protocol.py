"""uvicorn's h11 protocol with a header timeout, so a slow client cannot hold a connection forever.

uvicorn times out idle keep-alive connections but not a request whose headers trickle in a byte
at a time ("slowloris"): a thousand such connections would be held for as long as the clients
like. Here a connection must deliver a request's complete headers within `header_timeout_s` of
opening, or of its previous response ending, else it is closed. The body has its own timeout in
the app (`bodies.read_limited`), which can answer 408 since a request exists by then.
"""

from __future__ import annotations

import asyncio
from functools import cache
from typing import Any

from placement_service.settings import Settings
from uvicorn.protocols.http.h11_impl import H11Protocol


@cache
def _header_timeout_s() -> float:
    # Read once per worker process, from the same environment as the app's settings.
    return Settings().header_timeout_s


class TimedH11Protocol(H11Protocol):
    """H11Protocol plus the header timer: armed while no request is in progress on the connection."""

    header_timeout_s: float | None = None  # None: from the settings (tests set it on a subclass)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None

    def _timeout(self) -> float:
        return self.header_timeout_s if self.header_timeout_s is not None else _header_timeout_s()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._waiting_for_headers():
            if self._header_timer is None:
                self._arm()
        else:
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._disarm()  # the keep-alive timer covers an idle connection; data re-arms ours

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _waiting_for_headers(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self._timeout(), self._expire)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expire(self) -> None:
        self._header_timer = None
        if self._waiting_for_headers() and not self.transport.is_closing():
            self.transport.close()
