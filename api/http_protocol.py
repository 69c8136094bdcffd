"""The HTTP/1.1 connection: uvicorn's httptools protocol with limits on what a client may
hold open or make the server hold in memory.

* **Request head.** A request line and headers over ``max_header_bytes`` in all are answered
  ``431 request_header_too_large`` and the connection is closed, however the bytes arrive:
  as soon as that many bytes of an unfinished head have arrived (so no client can make the
  server buffer more; the parser holds at most one read's worth past the limit), and when a
  head that came whole in one read is over it (its size counted from what the parser saw:
  the request line, each header as ``name: value`` and the line ends).
* **A head that takes too long.** A connection must send a whole head within
  ``head_timeout_s`` of opening, and each later request within that long of its first byte:
  a head still unfinished then is answered ``408 request_timeout``, a connection that sent
  nothing is closed. A client that sends one byte every few seconds cannot hold a
  connection any longer than one that sends nothing.
* **A request that stops arriving.** Once a request has begun, its head and body must keep
  coming: nothing for ``body_timeout_s`` is answered ``408 request_timeout`` (unless the
  answer has begun) and the connection closed. The route sees the client gone, so a cut-off
  body is never applied. While the server itself pauses reading (the route has not taken
  what came), the client is not waiting on anyone and the clock does not run.
* **Connections.** Past the node's cap, or its cap for one client address
  (:mod:`segmentstore.api.connection_limits`), a new connection is answered
  ``429 throttled`` with ``Retry-After`` at once and closed.

A request that arrives whole in one read, most of them, costs a few comparisons more than
uvicorn's own protocol; the stall clock is armed only for requests that span reads.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from segmentstore.api.connection_limits import ConnectionLimits
from segmentstore.contracts.errors import (
    RequestHeaderTooLargeError,
    RequestTimeoutError,
    SegmentStoreError,
    ThrottledError,
)

_REASONS = {
    408: b"Request Timeout",
    429: b"Too Many Requests",
    431: b"Request Header Fields Too Large",
}
_RETRY_AFTER_S = 1
# What a head holds besides its method, target, header names and values: " " and
# " HTTP/1.1\r\n" on the request line, ": " and "\r\n" per header, the blank line.
_REQUEST_LINE_EXTRA = len(b"  HTTP/1.1\r\n")
_HEADER_EXTRA = len(b": \r\n")
_HEAD_END = len(b"\r\n")


class _HeadTooLarge(SegmentStoreError):
    """Raised inside the parser to stop it at a head over the limit (answered 431 by the
    connection itself; never an answer of its own)."""

    code = "head_too_large"
    on_the_wire = False


def limited_protocol(
    max_header_bytes: int,
    body_timeout_s: float,
    head_timeout_s: float = 10.0,
    limits: ConnectionLimits | None = None,
) -> type[asyncio.Protocol]:
    """uvicorn's protocol class (``uvicorn.Config(http=...)``) with these limits."""

    class LimitedHttpToolsProtocol(_LimitedHttpToolsProtocol):
        head_limit = max_header_bytes
        stall_timeout_s = body_timeout_s
        head_deadline_s = head_timeout_s
        connection_limits = limits

    return LimitedHttpToolsProtocol


class _LimitedHttpToolsProtocol(HttpToolsProtocol):
    head_limit = 64 * 1024
    stall_timeout_s = 30.0
    head_deadline_s = 10.0
    connection_limits: ConnectionLimits | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes = 0  # received while a head was unfinished
        self._in_head = False
        self._in_body = False
        self._last_data_at = 0.0
        self._stall_timer: asyncio.TimerHandle | None = None
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_too_large = False
        self._admitted: str | None = None  # the client address whose slot this holds

    # -- connections ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        limits = self.connection_limits
        if limits is not None:
            address = self.client[0] if self.client else ""
            cap = limits.admit(address)
            if cap is not None:
                mine = "the node's" if cap == "node" else "one address's"
                error = ThrottledError(
                    f"{mine} cap on open connections is reached; try again later",
                    _RETRY_AFTER_S * 1000,
                )
                self.transport.write(_error_answer(error))
                self.transport.close()
                return
            self._admitted = address
        self._head_timer = self.loop.call_later(self.head_deadline_s, self._head_overdue)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_stall_timer()
        self._cancel_head_timer()
        if self._admitted is not None and self.connection_limits is not None:
            self.connection_limits.release(self._admitted)
            self._admitted = None
        super().connection_lost(exc)

    # -- counting ------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if not self._in_body:
            self._head_bytes += len(data)
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if self._head_too_large:
                self._refuse(RequestHeaderTooLargeError(self.head_limit))
                return
            message = "Invalid HTTP request received."
            self.logger.warning(message)
            self.send_400_response(message)
            return
        except httptools.HttpParserUpgrade:
            self._unsupported_upgrade_warning()  # no websockets here (ws="none")
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
        if self._head_timer is None:  # a later request of a kept-alive connection
            self._head_timer = self.loop.call_later(self.head_deadline_s, self._head_overdue)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._in_body = True
        self._head_bytes = 0
        self._cancel_head_timer()
        if self._head_size() > self.head_limit:
            # A head that came whole in one read is over the limit: stop the parser here,
            # before the request is made (data_received answers 431).
            self._head_too_large = True
            raise _HeadTooLarge(f"the request's head is over {self.head_limit} bytes")
        super().on_headers_complete()

    def _head_size(self) -> int:
        method = self.parser.get_method()
        size = len(method) + len(self.url) + _REQUEST_LINE_EXTRA + _HEAD_END
        return size + sum(len(k) + len(v) + _HEADER_EXTRA for k, v in self.headers)

    def on_message_complete(self) -> None:
        self._in_body = False
        self._cancel_stall_timer()
        super().on_message_complete()

    # -- a head that takes too long ------------------------------------------------------------

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_overdue(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self._in_body:
            return
        if self._in_head:
            self._refuse(RequestTimeoutError(round(self.head_deadline_s * 1000), head=True))
        elif self.cycle is None:
            self.transport.close()  # a connection that never sent a byte

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
    retry = b"retry-after: %d\r\n" % _RETRY_AFTER_S if status == 429 else b""
    return b"".join(
        [
            b"HTTP/1.1 %d %s\r\n" % (status, _REASONS[status]),
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            retry,
            b"connection: close\r\n\r\n",
            body,
        ]
    )
