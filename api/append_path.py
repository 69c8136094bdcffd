"""The appends (``:append``, ``:appendEvents``): their options, the store call and the answer.

Three ways serve them and all three call :func:`append_answer`: the front door
(:mod:`segmentstore.api.front_door`) for most requests, :class:`AppendFastPath` for those the
front door leaves to the app (forwarded ones in a cluster, chunked bodies), inside the same
middlewares (metrics, auth, body limits, path checks), and the FastAPI routes of
``api.routes.data``, which stay for the OpenAPI document. Errors come from the one table
(:func:`segmentstore.api.errors.error_response`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from segmentstore.api.errors import RefusedBody, error_response
from segmentstore.api.metrics import Metrics
from segmentstore.contracts.errors import InvalidArgumentError, SegmentStoreError
from segmentstore.store import SegmentStore

SEGMENTS = "/v1/segments/"
APPEND = ":append"
APPEND_EVENTS = ":appendEvents"
_JSON_HEADERS = [(b"content-type", b"application/json")]
_JSON = json.JSONEncoder(separators=(",", ":"))  # one encoder, not one per answer


@dataclass(frozen=True, slots=True)
class AppendOptions:
    expected_offset: int | None = None
    writer_id: str | None = None
    writer_seq: int | None = None
    writer_prev_seq: int | None = None


def _optional_int(what: str, text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise InvalidArgumentError(f"{what} must be an integer, not {text[:64]!r}") from None


def parse_options(query_string: bytes, headers: Iterable[tuple[bytes, bytes]]) -> AppendOptions:
    """``expected_offset`` from the query; ``Writer-Id``, ``Writer-Seq`` and ``Writer-Prev-Seq``
    from the headers."""
    if not query_string:
        expected = None
    else:
        query = dict(parse_qsl(query_string.decode("latin-1"), keep_blank_values=True))
        expected = _optional_int("expected_offset", query.get("expected_offset"))
    writer_id = writer_seq = prev_seq = None
    for key, value in headers:
        if key == b"writer-id":
            writer_id = value.decode("latin-1")
        elif key == b"writer-seq":
            writer_seq = _optional_int("Writer-Seq", value.decode("latin-1"))
        elif key == b"writer-prev-seq":
            prev_seq = _optional_int("Writer-Prev-Seq", value.decode("latin-1"))
    return AppendOptions(expected, writer_id, writer_seq, prev_seq)


async def append_answer(
    store: SegmentStore,
    metrics: Metrics,
    name: str,
    body: bytes,
    options: AppendOptions,
    events: bool,
) -> dict[str, Any]:
    """Append ``body`` (bytes, or framed events) and return the JSON answer of docs/api.md."""
    if events:
        result = await store.append_events(
            name,
            body,
            options.expected_offset,
            writer_id=options.writer_id,
            writer_seq=options.writer_seq,
            writer_prev_seq=options.writer_prev_seq,
        )
    else:
        result = await store.append(
            name,
            body,
            options.expected_offset,
            writer_id=options.writer_id,
            writer_seq=options.writer_seq,
            writer_prev_seq=options.writer_prev_seq,
        )
    if result.duplicate:
        return {"offset": None, "length": result.length, "duplicate": True}
    metrics.appended(len(body), result.events or 0)
    answer: dict[str, Any] = {"offset": result.offset, "length": result.length}
    if events:
        answer["events"] = result.events
    return answer


@dataclass(frozen=True, slots=True)
class _Route:
    """What the metrics middleware reads from a matched route: its template."""

    path_format: str


_APPEND_ROUTE = _Route(SEGMENTS + "{name}" + APPEND)
_APPEND_EVENTS_ROUTE = _Route(SEGMENTS + "{name}" + APPEND_EVENTS)


class AppendFastPath:
    def __init__(self, app: ASGIApp, store: SegmentStore, metrics: Metrics) -> None:
        self.app = app
        self.store = store
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            path: str = scope["path"]
            if path.startswith(SEGMENTS):
                if path.endswith(APPEND):
                    scope["route"] = _APPEND_ROUTE
                    name = path[len(SEGMENTS) : -len(APPEND)]
                    await self._append(name, False, scope, receive, send)
                    return
                if path.endswith(APPEND_EVENTS):
                    scope["route"] = _APPEND_EVENTS_ROUTE
                    name = path[len(SEGMENTS) : -len(APPEND_EVENTS)]
                    await self._append(name, True, scope, receive, send)
                    return
        await self.app(scope, receive, send)

    async def _append(
        self, name: str, events: bool, scope: Scope, receive: Receive, send: Send
    ) -> None:
        try:
            options = parse_options(scope["query_string"], scope["headers"])
            body = await read_body(receive)
            if body is None:
                return  # the client went away
            answer = await append_answer(self.store, self.metrics, name, body, options, events)
        except SegmentStoreError as error:
            await error_response(error)(scope, receive, send)
            return
        except RefusedBody as error:
            await error_response(error.error)(scope, receive, send)
            return
        content = encode_answer(answer)
        headers = [*_JSON_HEADERS, (b"content-length", str(len(content)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": content})


def encode_answer(answer: dict[str, Any]) -> bytes:
    offset, length, events = answer["offset"], answer["length"], answer.get("events")
    # The common answers, formatted directly: the JSON encoder costs more than the append.
    if type(offset) is int and type(length) is int:
        if type(events) is int:
            return b'{"offset":%d,"length":%d,"events":%d}' % (offset, length, events)
        if "events" not in answer:
            return b'{"offset":%d,"length":%d}' % (offset, length)
    return _JSON.encode(answer).encode()


async def read_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
