"""uvicorn's HTTP/1.1 protocol (h11) with a deadline on reading a request's headers.

uvicorn closes a keep-alive connection that stays idle between requests, but it has no setting
for a client that connects and then sends nothing, or sends its headers a byte at a time: each
such connection would be held for ever. Here every connection must complete a request's headers
within `header_timeout_s` of connecting (or of the first byte of its next request), or it is
closed. Headers that grow past 16 KiB are refused sooner, by h11 itself (400).
"""

from __future__ import annotations

import asyncio
import logging

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)


class HeaderDeadlineProtocol(H11Protocol):
    """H11Protocol that closes a connection whose request headers take too long."""

    header_timeout_s = 10.0
    deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:  # part of a request's headers, not all of them
            self.arm()
        else:
            self.disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm()
        super().connection_lost(exc)

    def arm(self) -> None:
        if self.deadline is None:
            self.deadline = self.loop.call_later(self.header_timeout_s, self.drop)

    def disarm(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def drop(self) -> None:
        self.deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            log.info(
                "closed a connection that sent no complete headers in %gs", self.header_timeout_s
            )
            self.transport.close()


def with_header_timeout(seconds: float) -> type[HeaderDeadlineProtocol]:
    """The protocol class to give `uvicorn.Config(http=...)`, with its deadline set."""
    return type("HeaderDeadlineProtocol", (HeaderDeadlineProtocol,), {"header_timeout_s": seconds})
