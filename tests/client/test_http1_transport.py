"""The asyncio client's HTTP/1.1 transport against a real loopback server that answers what a
test scripts: framings the store does not use today (chunked, close-delimited), keep-alive
and its limits, the pool bound, per-request base URLs, and every way an answer goes missing."""

from __future__ import annotations

import asyncio
import itertools
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segmentstore.client import (
    AsyncSegmentStoreClient,
    EventReader,
    EventWriter,
    calls,
    http1_transport,
)
from segmentstore.client.http1_connection import Http1Connection, ReplyHeaders
from segmentstore.client.http1_transport import Http1Transport

from .conftest import LiveServer


@dataclass
class Request:
    connection: int
    line: str
    headers: dict[str, str]
    body: bytes
    close: bool = False  # set by a script: close the connection after its answer


# What the server does with a request: bytes to write (in pieces, each flushed), or None to
# close the connection without answering.
Script = Callable[[Request], Awaitable[list[bytes] | None]]


@dataclass
class ScriptedServer:
    url: str
    requests: list[Request] = field(default_factory=list)
    connections: int = 0
    busy: int = 0
    most_busy: int = 0


def ok(body: bytes = b'{"ok":1}', extra: str = "") -> list[bytes]:
    head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    return [head.encode() + body]


@asynccontextmanager
async def scripted(script: Script) -> AsyncIterator[ScriptedServer]:
    state = ScriptedServer(url="")

    handlers: set[asyncio.Task[None]] = set()
    writers: set[asyncio.StreamWriter] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        writers.add(writer)
        state.connections += 1
        number = state.connections
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                line, *lines = head.decode("latin-1").split("\r\n")[:-2]
                headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                request = Request(number, line, headers, body)
                state.requests.append(request)
                state.busy += 1
                state.most_busy = max(state.most_busy, state.busy)
                try:
                    pieces = await script(request)
                finally:
                    state.busy -= 1
                if pieces is None:
                    return
                for piece in pieces:
                    writer.write(piece)
                    await writer.drain()
                if request.close:
                    return
        finally:
            writer.close()
            writers.discard(writer)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    state.url = f"http://127.0.0.1:{port}"
    try:
        yield state
    finally:
        server.close()
        for writer in list(writers):
            writer.close()  # the handlers' reads end; they return
        await asyncio.wait_for(asyncio.gather(*handlers, return_exceptions=True), 10)
        await server.wait_closed()


def transport(url: str, *, timeout_s: float = 10.0, max_connections: int = 8) -> Http1Transport:
    return Http1Transport(
        url,
        headers={"Authorization": "Bearer t"},
        timeout_s=timeout_s,
        max_connections=max_connections,
    )


async def test_a_request_carries_its_path_query_headers_and_body() -> None:
    async def answer(request: Request) -> list[bytes]:
        return ok()

    async with scripted(answer) as server:
        http = transport(server.url)
        call = calls.append("scope/s#1/0", b"payload", 7, writer_id="w", writer_seq=3)
        reply = await http.send(call)
        await http.aclose()
    assert reply.status_code == 200 and reply.content == b'{"ok":1}'
    (request,) = server.requests
    assert request.line == "POST /v1/segments/scope/s%231/0:append?expected_offset=7 HTTP/1.1"
    assert request.headers["host"] == server.url.removeprefix("http://")
    assert request.headers["authorization"] == "Bearer t"
    assert request.headers["writer-id"] == "w" and request.headers["writer-seq"] == "3"
    assert request.headers["content-type"] == "application/octet-stream"
    assert request.body == b"payload"


async def test_connections_send_without_nagle_delays() -> None:
    # A large body goes as two writes after its head; with Nagle's algorithm the second could
    # wait for the server's delayed acknowledgement (tens of ms).
    async def answer(request: Request) -> list[bytes]:
        return ok()

    async with scripted(answer) as server:
        http = transport(server.url)
        await http.send(calls.append("s", bytes(256 << 10)))
        connection = http._pool(server.url).take_idle()
        assert connection is not None and connection._transport is not None
        sock = connection._transport.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        http._pool(server.url).release(connection)
        await http.aclose()
    assert len(server.requests[0].body) == 256 << 10


async def test_chunked_and_close_delimited_answers_arrive_whole_in_any_pieces() -> None:
    body = b"0123456789" * 3000

    async def answer(request: Request) -> list[bytes]:
        if request.line.startswith("GET /chunked"):
            framed = b"".join(
                b"%x;ext=1\r\n%s\r\n" % (len(part), part) for part in (body[:7], body[7:])
            )
            whole = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + framed
            whole += b"0\r\nX-Trailer: 1\r\n\r\n"
            # A byte at a time at first: every parser state is met split across reads.
            return [whole[i : i + 1] for i in range(200)] + [whole[200:]]
        request.close = True  # no length: the body ends where the connection does
        return [b"HTTP/1.1 200 OK\r\nSegment-Length: 5\r\n\r\n" + body]

    async with scripted(answer) as server:
        http = transport(server.url)
        chunked = calls.Call("GET", "/chunked", lambda r: r)
        first = await http.send(chunked)
        second = await http.send(chunked)
        until_close = await http.send(calls.Call("GET", "/close", lambda r: r))
        await http.aclose()
    assert first.content == body and second.content == body
    assert server.requests[0].connection == server.requests[1].connection  # kept alive
    assert until_close.content == body
    assert until_close.headers["segment-length"] == until_close.headers["SEGMENT-LENGTH"] == "5"


async def test_connections_are_reused_until_the_server_says_close() -> None:
    async def answer(request: Request) -> list[bytes]:
        return ok(extra="Connection: close\r\n" if request.line.startswith("GET /last") else "")

    async with scripted(answer) as server:
        http = transport(server.url)
        for path in ("/a", "/b", "/last", "/c"):
            await http.send(calls.Call("GET", path, lambda r: r))
        await http.aclose()
    assert [r.connection for r in server.requests] == [1, 1, 1, 2]


async def test_an_idle_connection_past_the_keepalive_is_not_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http1_transport, "KEEPALIVE_S", 0.05)

    async def answer(request: Request) -> list[bytes]:
        return ok()

    async with scripted(answer) as server:
        http = transport(server.url)
        await http.send(calls.healthz())
        await asyncio.sleep(0.1)
        await http.send(calls.healthz())
        await http.aclose()
    assert [r.connection for r in server.requests] == [1, 2]


async def test_the_pool_bounds_concurrent_connections() -> None:
    async def answer(request: Request) -> list[bytes]:
        await asyncio.sleep(0.02)
        return ok()

    async with scripted(answer) as server:
        http = transport(server.url, max_connections=2)
        replies = await asyncio.gather(*(http.send(calls.healthz()) for _ in range(12)))
        await http.aclose()
    assert [r.status_code for r in replies] == [200] * 12
    assert server.connections == 2 and server.most_busy == 2


async def test_each_request_may_name_its_own_server() -> None:
    async def answer(request: Request) -> list[bytes]:
        return ok()

    async with scripted(answer) as one, scripted(answer) as other:
        http = transport(one.url)
        await http.send(calls.healthz())
        await http.send(calls.healthz(), base_url=other.url + "/")
        await http.send(calls.healthz(), base_url=other.url)
        await http.send(calls.healthz())
        await http.aclose()
    assert len(one.requests) == 2 and len(other.requests) == 2
    assert other.connections == 1  # with or without its trailing slash: one server, one pool
    assert other.requests[0].headers["host"] == other.url.removeprefix("http://")


async def test_a_missing_answer_is_the_transport_error_the_retry_rule_expects() -> None:
    async def answer(request: Request) -> list[bytes] | None:
        if request.line.startswith("GET /drop"):
            return None
        if request.line.startswith("GET /garbage"):
            return [b"SMTP ready\r\n\r\n"]
        await asyncio.sleep(1)  # /hang: not within the 0.3 s timeout
        return ok()

    async with scripted(answer) as server:
        http = transport(server.url, timeout_s=0.3)
        with pytest.raises(httpx.RemoteProtocolError, match="closed the connection"):
            await http.send(calls.Call("GET", "/drop", lambda r: r))
        with pytest.raises(httpx.RemoteProtocolError, match="not an HTTP/1"):
            await http.send(calls.Call("GET", "/garbage", lambda r: r))
        with pytest.raises(httpx.ReadTimeout):
            await http.send(calls.Call("GET", "/hang", lambda r: r))
        await http.aclose()
    # Nothing of a failed request's connection is reused.
    assert [r.connection for r in server.requests] == [1, 2, 3]


async def test_failures_before_sending_are_told_apart() -> None:
    async with scripted(lambda request: asyncio.sleep(0, ok())) as server:
        url = server.url
    http = transport(url)  # the server is gone: nothing listens on its port
    with pytest.raises(httpx.ConnectError):
        await http.send(calls.healthz())
    with pytest.raises(httpx.UnsupportedProtocol):
        await http.send(calls.healthz(), base_url="ftp://127.0.0.1:21")
    with pytest.raises(httpx.LocalProtocolError, match="line break"):
        await http.send(calls.append("s", b"x", writer_id="w\r\nX-Evil: 1", writer_seq=1))
    await http.aclose()


def _parse(wire: bytes, edges: list[int]) -> tuple[int, ReplyHeaders, bytes]:
    """``wire`` fed to a connection in the pieces that ``edges`` cut it into."""
    loop = asyncio.new_event_loop()
    try:
        connection = Http1Connection(loop)
        waiter: asyncio.Future[tuple[int, ReplyHeaders, bytes]] = loop.create_future()
        connection._waiter = waiter  # as request() leaves it once the request is written
        for start, end in itertools.pairwise(sorted({0, len(wire), *edges})):
            connection.data_received(wire[start:end])
        return waiter.result()
    finally:
        loop.close()


def _wire(body: bytes, chunk_sizes: list[int] | None) -> bytes:
    """An answer of ``body``: with a Content-Length, or chunked in pieces of ``chunk_sizes``."""
    if chunk_sizes is None:
        head = b"HTTP/1.1 201 Created\r\nContent-Length: %d\r\nX-A: 1, 2\r\n\r\n" % len(body)
        return head + body
    framed, rest = b"", body
    for size in [*chunk_sizes, len(body)]:
        if rest:
            framed += b"%x\r\n%s\r\n" % (len(rest[:size]), rest[:size])
            rest = rest[size:]
    head = b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\nx-a: 2\r\n\r\n"
    return head + framed + b"0\r\n\r\n"


@pytest.mark.parametrize("chunk_sizes", [None, [3, 1, 9]], ids=["length", "chunked"])
def test_an_answer_parses_the_same_cut_anywhere_or_byte_by_byte(
    chunk_sizes: list[int] | None,
) -> None:
    body = b"0123456789abcdefghij"
    wire = _wire(body, chunk_sizes)
    for edges in [list(range(len(wire))), *([cut] for cut in range(1, len(wire)))]:
        status, headers, content = _parse(wire, edges)
        assert (status, content, headers["x-A"]) == (201, body, "1, 2")


@settings(max_examples=200, deadline=None)
@given(
    body=st.binary(max_size=3000),
    chunk_sizes=st.none() | st.lists(st.integers(1, 700), max_size=8),
    cuts=st.lists(st.integers(0, 4000), max_size=12),
)
def test_an_answer_parses_the_same_however_it_is_cut(
    body: bytes, chunk_sizes: list[int] | None, cuts: list[int]
) -> None:
    wire = _wire(body, chunk_sizes)
    status, headers, content = _parse(wire, [cut for cut in cuts if cut < len(wire)])
    assert (status, content, headers["x-A"]) == (201, body, "1, 2")


def test_the_client_runs_on_uvloop(live: LiveServer) -> None:
    # uvloop's transports are not asyncio.Transport subclasses; the service itself runs on it.
    uvloop = pytest.importorskip("uvloop")

    async def main() -> tuple[list[int], list[tuple[int, bytes]], bool]:
        segment = f"uvloop/{uuid.uuid4().hex[:8]}"
        async with AsyncSegmentStoreClient(live.url) as client:
            await client.create_segment(segment)
            async with EventWriter(client, linger_ms=1) as writer:
                offsets = await asyncio.gather(
                    *(writer.write(segment, bytes([i]) * (i * 700)) for i in range(1, 120))
                )
            events = [item async for item in EventReader(client, segment, follow=False)]
            return offsets, events, await client.healthz()

    offsets, events, healthy = uvloop.run(main())
    assert healthy and [offset for offset, _ in events] == sorted(offsets)
    assert [payload for _, payload in events] == [bytes([i]) * (i * 700) for i in range(1, 120)]
