"""The data routes served before anything else: the service's hot path.

``:append``, ``:appendEvents``, ``:read``, ``:readEvents`` and a segment's info are most of a
busy service's requests. Through FastAPI each of them passed three of FastAPI's own wrappers,
five middlewares and the router, each wrapping ``send`` or scanning the headers again; together
they cost several times what the store does for an append (docs/benchmarks.md has the
profile). :class:`FrontDoor` answers such a request with one look at its path and one pass over
its headers, and leaves everything else to the app behind it, unchanged.

It answers a request only when nothing about it needs the middlewares: a known data route, a
path without control characters, a token whose role suffices (or no tokens configured), a
declared body within the limit, plain integer query parameters, and, in a cluster, a container
this node serves and no ``Segment-Forwarded-By``. Any other request, a refusal included, goes
to the full app, which answers it as before (``401``, ``413``, ``400``, forwarding, ...): the
front door never refuses anything the app would not, and it can only answer the same way,
since both call the same store functions and the same error mapping
(:func:`segmentstore.api.errors.error_response`).

What the middlewares did for these requests it does itself, more cheaply: metrics (the request
histogram is found once per route and status, not per request by its labels), the ``503`` for
a request cut off because the server is stopping, and the last-resort ``500``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.types import Receive, Scope, Send

from segmentstore.api.append_path import (
    APPEND,
    APPEND_EVENTS,
    SEGMENTS,
    AppendOptions,
    append_answer,
    encode_answer,
    read_body,
)
from segmentstore.api.auth import Role, parse_tokens, role_of
from segmentstore.api.errors import error_json, error_response
from segmentstore.api.loop_metrics import LoopHistogram
from segmentstore.api.metrics import Metrics
from segmentstore.cluster.membership import ClusterMembership
from segmentstore.errors import InvalidArgumentError, SegmentStoreError
from segmentstore.store import SegmentStore

log = logging.getLogger(__name__)

READ = ":read"
READ_EVENTS = ":readEvents"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Plain decimal query values only: anything else ("+1", "1e3", "%31") is left to FastAPI's
# validation, so its message stays the one the API documents.
_QUERY = re.compile(r"([a-z_]+)=([0-9]{1,19})")
_JSON = (b"content-type", b"application/json")
_OCTETS = (b"content-type", b"application/octet-stream")
_TRUE, _FALSE = b"true", b"false"


@dataclass(slots=True)
class _Route:
    """One data route: its template (for metrics) and its histograms, bound on first use."""

    method: str
    path_format: str  # read by the metrics as a matched route's template
    metrics: Metrics
    query_keys: frozenset[str]
    offset_required: bool = False
    histograms: dict[int, LoopHistogram] = field(default_factory=dict)

    def observe(self, status: int, seconds: float) -> None:
        histogram = self.histograms.get(status)
        if histogram is None:
            histogram = self.histograms[status] = self.metrics.histogram(
                self.method, self.path_format, status
            )
        histogram.observe(seconds)


@dataclass(slots=True)
class _Request:
    """What one pass over a request's head found."""

    route: _Route
    name: str
    authorization: bytes | None = None
    content_length: bytes | None = None
    writer_id: bytes | None = None
    writer_seq: bytes | None = None
    writer_prev_seq: bytes | None = None
    query: dict[str, int] = field(default_factory=dict)
    unusual: bool = False  # a header the full app must see (chunked body, forwarded, ...)


class FrontDoor:
    """Serves the data routes of ``store`` ahead of ``app`` (see the module docstring)."""

    def __init__(
        self,
        store: SegmentStore,
        metrics: Metrics,
        auth_tokens: Mapping[str, str] | None = None,
        cluster: ClusterMembership | None = None,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.cluster = cluster
        self._tokens = parse_tokens(auth_tokens or {})
        self._raw_limit = store.settings.store.max_append_bytes
        self._max_wait_ms = store.settings.store.max_wait_ms
        template = SEGMENTS + "{name}"
        appends = frozenset({"expected_offset"})
        self._append = _Route("POST", template + APPEND, metrics, appends)
        self._append_events = _Route("POST", template + APPEND_EVENTS, metrics, appends)
        reads = frozenset({"offset", "max_length", "wait_ms"})
        self._read = _Route("GET", template + READ, metrics, reads, True)
        events = frozenset({"offset", "max_bytes", "wait_ms"})
        self._read_events = _Route("GET", template + READ_EVENTS, metrics, events, True)
        self._info = _Route("GET", template, metrics, frozenset())

    # -- choosing ---------------------------------------------------------------------------

    def take(self, scope: Scope) -> _Request | None:
        """The request, if the front door answers it; None leaves it to the app."""
        if scope["type"] != "http":
            return None
        path: str = scope["path"]
        if not path.startswith(SEGMENTS):
            return None
        method = scope["method"]
        if method == "POST":
            if path.endswith(APPEND):
                request = _Request(self._append, path[len(SEGMENTS) : -len(APPEND)])
            elif path.endswith(APPEND_EVENTS):
                request = _Request(self._append_events, path[len(SEGMENTS) : -len(APPEND_EVENTS)])
            else:
                return None
        elif method == "GET":
            if path.endswith(READ):
                request = _Request(self._read, path[len(SEGMENTS) : -len(READ)])
            elif path.endswith(READ_EVENTS):
                request = _Request(self._read_events, path[len(SEGMENTS) : -len(READ_EVENTS)])
            elif ":" not in path:
                request = _Request(self._info, path[len(SEGMENTS) :])
            else:
                return None
        else:
            return None
        if not request.name or _CONTROL.search(path) is not None:
            return None
        self._read_head(scope, request)
        if request.unusual or not self._allowed(request, method):
            return None
        if method == "POST":
            declared = request.content_length
            if declared is None or int(declared) > self._raw_limit:
                return None  # chunked, or 413: the body limit middleware answers
        elif request.content_length not in (None, b"0"):
            return None
        query = _plain_query(scope["query_string"])
        if query is None or not query.keys() <= request.route.query_keys:
            return None  # FastAPI validates it and answers in its words
        if request.route.offset_required and "offset" not in query:
            return None
        request.query = query
        if self.cluster is not None and not self._served_here(request.name):
            return None
        return request

    def _read_head(self, scope: Scope, request: _Request) -> None:
        for key, value in scope["headers"]:
            if key == b"content-length":
                request.content_length = value
            elif key == b"authorization":
                if request.authorization is not None:
                    request.unusual = True  # two of them: auth decides which one counts
                request.authorization = value
            elif key == b"writer-id":
                request.writer_id = value
            elif key == b"writer-seq":
                request.writer_seq = value
            elif key == b"writer-prev-seq":
                request.writer_prev_seq = value
            elif key == b"transfer-encoding" or key == b"segment-forwarded-by":
                request.unusual = True

    def _allowed(self, request: _Request, method: str) -> bool:
        if not self._tokens:
            return True
        header = request.authorization
        if header is None:
            return False
        scheme, _, token = bytes(header).strip().partition(b" ")
        token = token.strip()
        if scheme.lower() != b"bearer" or not token:
            return False
        role = role_of(self._tokens, token)
        return role is not None and role >= (Role.READ if method == "GET" else Role.WRITE)

    def _served_here(self, name: str) -> bool:
        cluster = self.cluster
        assert cluster is not None
        if cluster.leaving:
            return False  # the app closes every connection of a node that is leaving
        try:
            return cluster.serves(self.store.container_of(name))
        except SegmentStoreError:
            return False  # an invalid name: the app answers 400

    # -- answering --------------------------------------------------------------------------

    async def serve(self, request: _Request, scope: Scope, receive: Receive, send: Send) -> None:
        """Answers ``request``; times it, and answers ``503`` if the server stops first."""
        started = time.perf_counter()
        route = request.route
        status = 0  # nothing answered yet
        try:
            if route is self._append:
                status = await self._serve_append(request, False, scope, receive, send)
            elif route is self._append_events:
                status = await self._serve_append(request, True, scope, receive, send)
            elif route is self._read:
                status = await self._serve_read(request, False, scope, receive, send)
            elif route is self._read_events:
                status = await self._serve_read(request, True, scope, receive, send)
            else:
                status = await self._serve_info(request, scope, receive, send)
        except asyncio.CancelledError:
            # uvicorn cancels what still runs when its graceful shutdown runs out (see
            # api.stopping); an answer half sent can only be cut off.
            if status:
                raise
            status = 503
            answer = error_json(
                503, "container_unavailable", "this node is stopping: send the request again"
            )
            await answer(scope, receive, send)
        except Exception:
            if status:
                raise  # the answer was half sent: only closing the connection tells the client
            # A bug. The traceback goes to the log (the path, never the headers: they hold
            # tokens); the client gets the usual shape and no internals.
            log.exception("unhandled error in %s %s", scope["method"], scope["path"])
            status = 500
            await error_json(500, "internal", "internal error")(scope, receive, send)
        finally:
            # A client gone before its answer counts as 500, as the app counts it.
            route.observe(status or 500, time.perf_counter() - started)

    async def _serve_append(
        self, request: _Request, events: bool, scope: Scope, receive: Receive, send: Send
    ) -> int:
        try:
            options = _append_options(request)
            body = await read_body(receive)
            if body is None:
                return 0  # the client went away: nothing to answer
            answer = await append_answer(
                self.store, self.metrics, request.name, body, options, events
            )
        except SegmentStoreError as error:
            return await _error(error, scope, receive, send)
        content = encode_answer(answer)
        await _respond(send, 200, [_JSON, (b"content-length", b"%d" % len(content))], content)
        return 200

    async def _serve_read(
        self, request: _Request, events: bool, scope: Scope, receive: Receive, send: Send
    ) -> int:
        query = request.query
        name = request.name
        offset = query["offset"]
        limit = query.get("max_bytes" if events else "max_length")
        wait_ms = min(query.get("wait_ms", 0), self._max_wait_ms)
        store = self.store
        try:
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
            return await _error(error, scope, receive, send)
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
            return 204
        headers += ((b"content-length", b"%d" % len(data)), _OCTETS)
        await _respond(send, 200, headers, data)
        return 200

    async def _serve_info(
        self, request: _Request, scope: Scope, receive: Receive, send: Send
    ) -> int:
        try:
            info = await self.store.get_info(request.name)
        except SegmentStoreError as error:
            return await _error(error, scope, receive, send)
        content = _dumps(info.to_dict())
        await _respond(send, 200, [(b"content-length", b"%d" % len(content)), _JSON], content)
        return 200


def _append_options(request: _Request) -> AppendOptions:
    expected = request.query.get("expected_offset")
    writer_id = writer_seq = prev_seq = None
    if request.writer_id is not None:
        writer_id = request.writer_id.decode("latin-1")
    if request.writer_seq is not None:
        writer_seq = _header_int("Writer-Seq", request.writer_seq)
    if request.writer_prev_seq is not None:
        prev_seq = _header_int("Writer-Prev-Seq", request.writer_prev_seq)
    return AppendOptions(expected, writer_id, writer_seq, prev_seq)


def _header_int(what: str, value: bytes) -> int:
    try:
        return int(value)
    except ValueError:
        text = value.decode("latin-1")
        raise InvalidArgumentError(f"{what} must be an integer, not {text[:64]!r}") from None


def _plain_query(query_string: bytes) -> dict[str, int] | None:
    """``a=1&b=2`` as ints; None for anything else (repeats, signs, escapes, other values)."""
    if not query_string:
        return {}
    query: dict[str, int] = {}
    for part in query_string.decode("latin-1").split("&"):
        found = _QUERY.fullmatch(part)
        if found is None or found.group(1) in query:
            return None
        query[found.group(1)] = int(found.group(2))
    return query


def _dumps(content: Any) -> bytes:
    # As Starlette's JSONResponse renders it, so both ways answer the same bytes.
    return json.dumps(
        content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode("utf-8")


async def _respond(
    send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes | memoryview
) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _error(error: SegmentStoreError, scope: Scope, receive: Receive, send: Send) -> int:
    answer = error_response(error)
    await answer(scope, receive, send)
    return answer.status_code
