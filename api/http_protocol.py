"""The HTTP/1.1 connection: uvicorn's httptools protocol with limits on what a client may
hold open or make the server hold in memory.

* **Request head.** A request line and headers over ``max_header_bytes`` in all are answered
  ``431 request_header_too_large`` and the connection is closed as soon as that many bytes
  of an unfinished head have arrived, so no client can make the server buffer more. (The
  parser holds at most one read's worth past the limit.)
* **A request that stops arriving.** Once a request has begun, its head and body must keep
  coming: nothing for ``body_timeout_s`` is answered ``408 request_timeout`` (unless the
  answer has begun) and the connection closed. The route sees the client gone, so a cut-off
  body is never applied. While the server itself pauses reading (the route has not taken
  what came), the client is not waiting on anyone and the clock does not run.

A request that arrives whole in one read, most of them, costs one comparison more than
uvicorn's own protocol; the clock is armed only for requests that span reads.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from segmentstore.contracts.errors import (
    RequestHeaderTooLargeError,
    RequestTimeoutError,
    SegmentStoreError,
)

_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}


def limited_protocol(max_header_bytes: int, body_timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's protocol class (``uvicorn.Config(http=...)``) with these limits."""

    class LimitedHttpToolsProtocol(_LimitedHttpToolsProtocol):
        head_limit = max_header_bytes
        stall_timeout_s = body_timeout_s

    return LimitedHttpToolsProtocol


class _LimitedHttpToolsProtocol(HttpToolsProtocol):
    head_limit = 64 * 1024
    stall_timeout_s = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes = 0  # received while a head was unfinished
        self._in_head = False
        self._in_body = False
        self._last_data_at = 0.0
        self._stall_timer: asyncio.TimerHandle | None = None

    # -- counting ------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if not self._in_body:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._in_head and self._head_bytes > self.head_limit:
            self._refuse(RequestHeaderTooLargeError(self.head_limit))
            return
        if self._in_head or self._in_body:
            self._last_data_at = self.loop.time()
            if self._stall_timer is None and self.parser is not None:
                self._stall_timer = self.loop.call_later(self.stall_timeout_s, self._check_stall)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._in_body = True
        self._head_bytes = 0
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_body = False
        self._cancel_stall_timer()
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_stall_timer()
        super().connection_lost(exc)

    # -- a request that stopped arriving -------------------------------------------------------

    def _cancel_stall_timer(self) -> None:
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None

    def _check_stall(self) -> None:
        self._stall_timer = None
        if not (self._in_head or self._in_body) or self.transport.is_closing():
            return
        now = self.loop.time()
        if self.flow.read_paused:
            self._last_data_at = now  # the server is the one not reading: no client waits
        waited = now - self._last_data_at
        if waited < self.stall_timeout_s:
            self._stall_timer = self.loop.call_later(
                self.stall_timeout_s - waited, self._check_stall
            )
            return
        self._refuse(RequestTimeoutError(round(self.stall_timeout_s * 1000)))

    # -- refusing ------------------------------------------------------------------------------

    def _refuse(self, error: SegmentStoreError) -> None:
        """Answer ``error`` (unless an answer has begun) and close the connection; the route
        of an unfinished request sees its client gone."""
        self._cancel_stall_timer()
        self._in_head = self._in_body = False
        cycle = self.cycle
        answered = cycle is not None and cycle.response_started and not cycle.response_complete
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True
            cycle.message_event.set()
        if not answered:
            self.transport.write(_error_answer(error))
        self.transport.close()


def _error_answer(error: SegmentStoreError) -> bytes:
    status = error.status
    body = json.dumps(
        {"error": {"code": error.code, "message": error.message, **error.fields()}},
        separators=(",", ":"),
    ).encode()
    return b"".join(
        [
            b"HTTP/1.1 %d %s\r\n" % (status, _REASONS[status]),
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            b"connection: close\r\n\r\n",
            body,
        ]
    )
