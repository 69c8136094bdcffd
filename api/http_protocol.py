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

On a node of several workers, a request for another worker's container is relayed to it
unparsed (:mod:`.worker_relay`), or, for a connection that keeps asking that worker or a
request too large to relay, the connection moves there before it is parsed
(:mod:`.worker_handoff`). The limits are each
worker's: a connection holds a slot of the worker that holds it, so one handed on gives its
slot back here as it closes this end and takes one in the sibling (which answers ``429`` if it
has none left); the sibling's head clock starts again, with the bytes read here.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from segmentstore.api.connection_limits import ConnectionLimits
from segmentstore.api.worker_relay import MAX_RELAYED_BYTES, request_extent
from segmentstore.contracts.errors import (
    ContainerUnavailableError,
    RequestHeaderTooLargeError,
    RequestTimeoutError,
    SegmentStoreError,
    ThrottledError,
)

if TYPE_CHECKING:
    from segmentstore.api.worker_handoff import ConnectionHandOff
    from segmentstore.api.worker_relay import RequestRelay, Upstream

_REASONS = {
    408: b"Request Timeout",
    429: b"Too Many Requests",
    431: b"Request Header Fields Too Large",
    503: b"Service Unavailable",
}
_RETRY_AFTER_S = 1
# A connection whose requests went to the same sibling this many times in a row moves there:
# what it asks next is most likely that sibling's too, and a moved connection costs nothing
# more, where each relayed request costs this worker a write and a read.
MOVE_AFTER = 8
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
    hand_off: ConnectionHandOff | None = None,
    relay: RequestRelay | None = None,
) -> type[asyncio.Protocol]:
    """uvicorn's protocol class (``uvicorn.Config(http=...)``) with these limits; with
    ``hand_off`` and ``relay``, a request for a sibling worker's container is relayed there or
    its connection moves there."""

    class LimitedHttpToolsProtocol(_LimitedHttpToolsProtocol):
        head_limit = max_header_bytes
        stall_timeout_s = body_timeout_s
        head_deadline_s = head_timeout_s
        connection_limits = limits
        worker_hand_off = hand_off
        worker_relay = relay

    return LimitedHttpToolsProtocol


class _LimitedHttpToolsProtocol(HttpToolsProtocol):
    head_limit = 64 * 1024
    stall_timeout_s = 30.0
    head_deadline_s = 10.0
    connection_limits: ConnectionLimits | None = None
    worker_hand_off: ConnectionHandOff | None = None
    worker_relay: RequestRelay | None = None

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
        # What another worker read of a connection it handed here: this one's first read.
        self.initial = b""
        self._relayed: Upstream | None = None  # the relay connection of a request under way
        self._relay_container = 0
        self._relay_left = 0  # bytes of that request still to come from the client
        self._relay_stash = b""  # what the client sent after it, before its answer
        self._streak_worker = -1  # the sibling this connection's last requests went to
        self._streak = 0  # how many in a row
        self._stop_after_relay = False  # the server stops: close once the answer is relayed

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
        if self.initial:
            data, self.initial = self.initial, b""
            self._take(data)  # served here whoever owns it now: a connection never bounces

    def connection_lost(self, exc: Exception | None) -> None:
        if self._relayed is not None:
            self._relayed.abandon()
            self._relayed = None
        self._cancel_stall_timer()
        self._cancel_head_timer()
        if self._admitted is not None and self.connection_limits is not None:
            self.connection_limits.release(self._admitted)
            self._admitted = None
        super().connection_lost(exc)

    # -- moving to the worker that owns the request's container ---------------------------------

    def data_received(self, data: bytes) -> None:
        if self._relayed is not None:
            self._relay_more(data)
            return
        hand_off = self.worker_hand_off
        if hand_off is None or not self._between_requests():
            self._take(data)
            return
        found = hand_off.route(data)
        if found is None:
            self._streak = 0
            self._take(data)
            return
        container, index = found
        if self._relay(container, index, data):
            return
        self._streak = 0
        transport = self.transport
        sock = transport.get_extra_info("socket")
        if (
            sock is None
            or transport.get_write_buffer_size()
            or not hand_off.hand_on(index, sock, data)
        ):
            self._take(data)
            return
        # The socket lives on in the sibling: closing this end sends nothing to the client,
        # and gives this worker's slot back (connection_lost).
        self._unset_keepalive_if_required()
        transport.close()

    # -- relaying a request to the worker that owns its container -------------------------------

    def _relay(self, container: int, index: int, data: bytes) -> bool:
        """Whether the request that ``data`` begins went to sibling ``index`` by the relay."""
        relay = self.worker_relay
        if relay is None:
            return False
        self._streak = self._streak + 1 if self._streak_worker == index else 1
        self._streak_worker = index
        if self._streak >= MOVE_AFTER:
            return False
        extent = request_extent(data)
        if extent is None or extent < len(data) or extent > MAX_RELAYED_BYTES:
            return False
        upstream = relay.relay(index, data, self)
        if upstream is None:
            return False
        self._relayed = upstream
        self._relay_container = container
        self._relay_left = extent - len(data)
        self._unset_keepalive_if_required()
        self._cancel_head_timer()
        return True

    def _relay_more(self, data: bytes) -> None:
        assert self._relayed is not None
        left = self._relay_left
        if left:
            part = data[:left] if len(data) > left else data
            self._relay_left -= len(part)
            self._relayed.send(part)
            data = data[len(part) :]
        if data:  # the client's next request, sent before this one's answer: kept for then
            self._relay_stash += data
            self.transport.pause_reading()

    def relay_finished(self, keep_alive: bool) -> bool:
        """The relayed answer was written whole; whether the relay connection may carry another
        request (all of this one was sent)."""
        self._relayed = None
        self.server_state.total_requests += 1
        whole = not self._relay_left
        if not keep_alive or not whole or self._stop_after_relay:
            # As the owner closes its end; mid-body, the connection cannot go on; or the
            # server is stopping and was waiting for this answer.
            self.transport.close()
            return whole
        if self.transport.is_closing():
            return whole
        stash, self._relay_stash = self._relay_stash, b""
        if stash:
            self.transport.resume_reading()
            self.data_received(stash)
        else:
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )
        return whole

    def relay_failed(self, answered: bool) -> None:
        """The owner went away before its answer was whole: ``503`` if none of it was written
        (a retry is safe: a writer's is answered ``duplicate`` if this one was applied)."""
        self._relayed = None
        if not answered and not self.transport.is_closing():
            error = ContainerUnavailableError(
                self._relay_container, "the worker that serves it is restarting"
            )
            self.transport.write(_error_answer(error))
        self.transport.close()

    def shutdown(self) -> None:
        """The server stops: a connection waiting for a relayed answer closes once it has it,
        as one waiting for its own answer does."""
        if self._relayed is not None:
            self._stop_after_relay = True
            return
        super().shutdown()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._relayed is not None:
            self._relayed.pause()

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._relayed is not None:
            self._relayed.resume()

    def _between_requests(self) -> bool:
        """Nothing of an earlier request unread or unanswered: the next read begins one."""
        cycle = self.cycle
        return (
            not self._in_head
            and not self._in_body
            and (cycle is None or cycle.response_complete)
            and not self.pipeline
            and self.scheme == "http"
        )

    # -- counting ------------------------------------------------------------------------------

    def _take(self, data: bytes) -> None:
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
    retry = b"retry-after: %d\r\n" % _RETRY_AFTER_S if error.retry_after else b""
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
