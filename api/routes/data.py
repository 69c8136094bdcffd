"""Segment data: ``:append``, ``:appendEvents``, ``:read``, ``:readEvents`` and a segment's info.

These are most of a busy service's requests, and each is served by its one handler here. The
gate (:mod:`segmentstore.api.gate`) hands a request to it as soon as the request has passed
the checks every request passes (auth, the body limit, path checks, cluster routing): through
FastAPI's routing, validation and response classes a request cost several times what the
store does for an append (docs/benchmarks.md). What FastAPI would have done for them is done
from each route's declarations (:mod:`.data_route`): the same entries that the handler parses
its parameters by describe them in the OpenAPI document.

Bodies are raw bytes (the gate has capped them); answers are raw bytes too. Reads carry the
segment's state in headers, taken just after the read, so a client never needs a second
request to know where it stands.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from starlette.types import Receive, Scope, Send

from segmentstore.api.errors import RefusedBody, error_response
from segmentstore.api.head import RequestHead
from segmentstore.api.metrics import Metrics
from segmentstore.api.routes.data_route import (
    OCTET_STREAM,
    SEGMENTS,
    DataRequest,
    DataRoute,
    header_int,
    query_ints,
)
from segmentstore.api.routes.data_schema import (
    APPEND,
    APPEND_EVENTS,
    INFO,
    READ,
    READ_EVENTS,
)
from segmentstore.contracts.errors import SegmentStoreError
from segmentstore.store import SegmentStore

_JSON = (b"content-type", b"application/json")
_OCTETS = (b"content-type", OCTET_STREAM.encode())
_TRUE, _FALSE = b"true", b"false"
_ENCODER = json.JSONEncoder(separators=(",", ":"))  # one encoder, not one per answer


class DataRoutes:
    """The data routes over ``store``, and which of them a request is for."""

    def __init__(self, store: SegmentStore, metrics: Metrics) -> None:
        self._store = store
        self._metrics = metrics
        self._max_wait_ms = store.settings.store.max_wait_ms
        self.append = DataRoute("POST", ":append", partial(self._append, False), metrics, **APPEND)
        self.append_events = DataRoute(
            "POST", ":appendEvents", partial(self._append, True), metrics, **APPEND_EVENTS
        )
        self.read = DataRoute("GET", ":read", partial(self._read, False), metrics, **READ)
        self.read_events = DataRoute(
            "GET", ":readEvents", partial(self._read, True), metrics, **READ_EVENTS
        )
        self.info = DataRoute("GET", "", self._info, metrics, **INFO)
        self.all = (self.append, self.append_events, self.read, self.read_events, self.info)

    def match(self, method: str, path: str, head: RequestHead) -> DataRequest | None:
        """The data request ``method`` on ``path`` is, None if it is for another route. A
        ``GET`` of a name with an unknown action is another route's (``400``)."""
        if not path.startswith(SEGMENTS):
            return None
        if method == "POST":
            if path.endswith(":append"):
                return DataRequest(self.append, path[len(SEGMENTS) : -7], head)
            if path.endswith(":appendEvents"):
                return DataRequest(self.append_events, path[len(SEGMENTS) : -13], head)
        elif method == "GET":
            if path.endswith(":read"):
                return DataRequest(self.read, path[len(SEGMENTS) : -5], head)
            if path.endswith(":readEvents"):
                return DataRequest(self.read_events, path[len(SEGMENTS) : -11], head)
            if ":" not in path:
                return DataRequest(self.info, path[len(SEGMENTS) :], head)
        return None

    # -- appends ----------------------------------------------------------------------------

    async def _append(
        self, events: bool, request: DataRequest, scope: Scope, receive: Receive, send: Send
    ) -> None:
        head = request.head
        try:
            expected = query_ints(scope["query_string"], request.route.query).get("expected_offset")
            writer_id = None if head.writer_id is None else head.writer_id.decode("latin-1")
            writer_seq = header_int("Writer-Seq", head.writer_seq)
            prev_seq = header_int("Writer-Prev-Seq", head.writer_prev_seq)
            body = await read_body(receive)
            if body is None:
                return  # the client went away: nothing to answer
            append = self._store.append_events if events else self._store.append
            result = await append(
                request.name,
                body,
                expected,
                writer_id=writer_id,
                writer_seq=writer_seq,
                writer_prev_seq=prev_seq,
            )
        except SegmentStoreError as error:
            await error_response(error)(scope, receive, send)
            return
        except RefusedBody as error:  # too large, or not the body a forwarding node signed
            await error_response(error.error)(scope, receive, send)
            return
        if result.duplicate or result.offset is None:
            answer = {"offset": None, "length": result.length, "duplicate": True}
            content = _ENCODER.encode(answer).encode()
        else:
            self._metrics.appended(len(body), result.events or 0)
            # Formatted directly: the JSON encoder costs more than the append.
            offset, length = result.offset, result.length
            if events:
                content = b'{"offset":%d,"length":%d,"events":%d}' % (
                    offset, length, result.events or 0
                )  # fmt: skip
            else:
                content = b'{"offset":%d,"length":%d}' % (offset, length)
        await _respond(send, 200, [_JSON, (b"content-length", b"%d" % len(content))], content)

    # -- reads ------------------------------------------------------------------------------

    async def _read(
        self, events: bool, request: DataRequest, scope: Scope, receive: Receive, send: Send
    ) -> None:
        name = request.name
        store = self._store
        try:
            query = query_ints(scope["query_string"], request.route.query)
            offset = query["offset"]
            limit = query.get("max_bytes" if events else "max_length")
            # "cap 60000": a longer wait is shortened, like max_length; a negative one is
            # refused by the store.
            wait_ms = min(query.get("wait_ms", 0), self._max_wait_ms)
            if events:
                result = await store.read_events(name, offset, limit, wait_ms)
                data: bytes | memoryview = result.data
                next_offset = result.next_offset
            else:
                data = await store.read(name, offset, limit, wait_ms)
                # A memoryview may point into the cache, whose block can be reused once this
                # coroutine yields: the server may still be sending it then.
                if not isinstance(data, bytes):
                    data = bytes(data)
            info = await store.get_info(name)
        except SegmentStoreError as error:
            await error_response(error)(scope, receive, send)
            return
        headers = [
            (b"segment-read-offset", b"%d" % offset),
            (b"segment-start-offset", b"%d" % info.start_offset),
            (b"segment-length", b"%d" % info.length),
            (b"segment-sealed", _TRUE if info.sealed else _FALSE),
        ]
        if events:
            headers.append((b"segment-next-offset", b"%d" % next_offset))
        if not data:
            await _respond(send, 204, headers, b"")
            return
        headers += ((b"content-length", b"%d" % len(data)), _OCTETS)
        await _respond(send, 200, headers, data)

    async def _info(self, request: DataRequest, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            info = await self._store.get_info(request.name)
        except SegmentStoreError as error:
            await error_response(error)(scope, receive, send)
            return
        content = dumps(info.to_dict())
        await _respond(send, 200, [(b"content-length", b"%d" % len(content)), _JSON], content)


async def read_body(receive: Receive) -> bytes | None:
    """The whole body; None if the client went away before it came."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def dumps(content: Any) -> bytes:
    # As Starlette's JSONResponse renders it, so that every route answers JSON alike.
    return json.dumps(
        content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode("utf-8")


async def _respond(
    send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes | memoryview
) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
