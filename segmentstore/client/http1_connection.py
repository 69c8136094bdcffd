"""One keep-alive HTTP/1.1 connection of the asyncio client: an :class:`asyncio.Protocol` that
writes a request and parses its answer, and nothing else.

Why not a general HTTP library: a request through aiohttp's session costs this process about
90 µs of CPU, several times what the store spends answering it, so on one machine the client
took the CPU the store needed. The store speaks plain HTTP/1.1 (``Content-Length`` or chunked
answers, keep-alive), and a protocol that writes one prepared buffer and parses the answer in
place costs a fraction of that.

One request at a time per connection, its answer read whole. The connection reports what went
wrong as the client's (httpx's) transport errors, already sorted for the retry rule:

    the peer closed or reset before the whole answer  -> httpx.RemoteProtocolError / ReadError
    no byte of the answer within the read timeout     -> httpx.ReadTimeout
    an answer that is not HTTP/1.x                     -> httpx.RemoteProtocolError
"""

from __future__ import annotations

import asyncio
import time
from typing import cast

import httpx

_HEAD_END = b"\r\n\r\n"
_MAX_HEAD_BYTES = 64 << 10
# Above this a body is written on its own instead of being copied behind the request's head.
_JOIN_BELOW_BYTES = 64 << 10


class ReplyHeaders(dict[str, str]):
    """An answer's headers, looked up by name in any case (stored lowercased)."""

    def __getitem__(self, key: str) -> str:
        return dict.__getitem__(self, key.lower())

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return dict.get(self, key.lower(), default)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and dict.__contains__(self, key.lower())


class Http1Connection(asyncio.Protocol):
    """A connection made by ``loop.create_connection``; :meth:`request` sends one request and
    returns ``(status, headers, body)``. After an error or a ``Connection: close`` answer it is
    :attr:`reusable` no more."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._waiter: asyncio.Future[tuple[int, ReplyHeaders, bytes]] | None = None
        self._status = 0
        self._headers: ReplyHeaders | None = None
        self._body_bytes = -1  # -1: chunked; -2: until the connection closes
        self._chunks: list[bytes] = []
        self._keep_alive = True
        self._timer: asyncio.TimerHandle | None = None
        self._timeout_s = 0.0
        self._last_data = 0.0
        self.closed = False
        self.idle_since = time.monotonic()

    # -- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport, though not always a subclass of asyncio.Transport (uvloop's).
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._last_data = self._loop.time()
        if self._waiter is None or self._waiter.done():
            # Bytes nobody asked for: the connection's state is unknown; never reuse it.
            self.close()
            return
        try:
            if self._buffer or self._headers is not None or not self._parse_whole(data):
                self._buffer += data
                self._parse()
        except httpx.RemoteProtocolError as error:
            self._fail(error)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is None or self._waiter.done():
            return
        if self._headers is not None and self._body_bytes == -2:
            self._finish(bytes(self._buffer))  # an answer delimited by the close
        elif exc is None:
            self._fail(httpx.RemoteProtocolError("the server closed the connection unanswered"))
        else:
            self._fail(httpx.ReadError(str(exc) or type(exc).__name__))

    # -- requests --------------------------------------------------------------------------

    @property
    def reusable(self) -> bool:
        return not self.closed and self._keep_alive and self._waiter is None

    async def request(
        self, head: bytes, body: bytes | None, timeout_s: float
    ) -> tuple[int, ReplyHeaders, bytes]:
        transport = self._transport
        assert transport is not None and self._waiter is None
        waiter: asyncio.Future[tuple[int, ReplyHeaders, bytes]] = self._loop.create_future()
        self._waiter = waiter
        self._status, self._headers, self._body_bytes = 0, None, -1
        if body is None:
            transport.write(head)
        elif len(body) < _JOIN_BELOW_BYTES:
            transport.write(head + body)
        else:
            # Two writes, not writelines: before Python 3.12 that joins them, copying the body.
            transport.write(head)
            transport.write(body)
        now = self._last_data = self._loop.time()
        self._timeout_s = timeout_s
        # One timer per connection, armed while it is busy and left armed between requests
        # (cheaper than one per request); brought forward when this request's is earlier.
        timer = self._timer
        if timer is None or timer.when() > now + timeout_s:
            if timer is not None:
                timer.cancel()
            self._timer = self._loop.call_at(now + timeout_s, self._check_timeout)
        try:
            return await waiter
        except BaseException:
            self.close()  # cancelled or failed half-way: what comes next on it is unknown
            raise
        finally:
            self._waiter = None
            self.idle_since = time.monotonic()

    def close(self) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._transport is not None:
            self._transport.close()

    def _check_timeout(self) -> None:
        self._timer = None
        if self._waiter is None or self._waiter.done():
            return  # idle, or answered: the next request arms it again
        # Counted from the last byte received: a large answer that keeps arriving never times
        # out, a silent server does.
        deadline = self._last_data + self._timeout_s
        if self._loop.time() >= deadline:
            self._fail(httpx.ReadTimeout(f"no answer within {self._timeout_s:g} s"))
            self.close()
        else:
            self._timer = self._loop.call_at(deadline, self._check_timeout)

    def _fail(self, error: Exception) -> None:
        self._keep_alive = False
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)

    def _finish(self, body: bytes) -> None:
        assert self._headers is not None and self._waiter is not None
        if not self._waiter.done():
            self._waiter.set_result((self._status, self._headers, body))

    # -- parsing ---------------------------------------------------------------------------

    def _parse_whole(self, data: bytes) -> bool:
        """The usual case, without copying into the buffer: ``data`` is one whole answer with
        a ``Content-Length``. False (nothing consumed) when it is anything else."""
        end = data.find(_HEAD_END)
        if end < 0:
            return False
        self._read_head(data[:end])
        stop = end + 4 + self._body_bytes
        if self._headers is None or self._body_bytes < 0 or len(data) != stop:
            self._status, self._headers, self._body_bytes = 0, None, -1
            return False
        self._finish(data[end + 4 :])
        return True

    def _parse(self) -> None:
        buffer = self._buffer
        while self._headers is None:
            end = buffer.find(_HEAD_END)
            if end < 0:
                if len(buffer) > _MAX_HEAD_BYTES:
                    raise httpx.RemoteProtocolError("the answer's head is too large")
                return
            head = bytes(buffer[:end])
            del buffer[: end + 4]
            self._read_head(head)
        if self._body_bytes >= 0:
            if len(buffer) >= self._body_bytes:
                body = bytes(buffer[: self._body_bytes])
                del buffer[: self._body_bytes]
                if buffer:
                    self._keep_alive = False  # more than one answer: never reuse it
                self._finish(body)
        elif self._body_bytes == -1:
            self._read_chunks()

    def _read_head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        if not version.startswith("HTTP/1.") or len(rest) < 3 or not rest[:3].isdigit():
            raise httpx.RemoteProtocolError(f"not an HTTP/1.x answer: {lines[0][:80]!r}")
        status = int(rest[:3])
        if 100 <= status < 200:
            return  # an interim answer (100 Continue): the real one follows
        found: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon:
                raise httpx.RemoteProtocolError(f"a malformed header line: {line[:80]!r}")
            key = name.strip().lower()
            if key in found:
                found[key] += ", " + value.strip()
            else:
                found[key] = value.strip()
        connection = found.get("connection", "").lower()
        self._keep_alive = (
            "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
        )
        self._status, self._headers = status, ReplyHeaders(found)
        if "chunked" in found.get("transfer-encoding", "").lower():
            self._body_bytes = -1
            self._chunks = []
        elif (length := found.get("content-length")) is not None:
            if not length.isdigit():
                raise httpx.RemoteProtocolError(f"a malformed Content-Length: {length[:40]!r}")
            self._body_bytes = int(length)
        elif status in (204, 304):
            self._body_bytes = 0
        else:
            self._body_bytes = -2
            self._keep_alive = False

    def _read_chunks(self) -> None:
        buffer = self._buffer
        while True:
            line_end = buffer.find(b"\r\n")
            if line_end < 0:
                return
            size_text = bytes(buffer[:line_end]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise httpx.RemoteProtocolError(
                    f"a malformed chunk size: {size_text[:40]!r}"
                ) from None
            if size == 0:
                # The last chunk, then trailer lines (ignored), then an empty line.
                end = buffer.find(_HEAD_END, line_end)
                if end < 0:
                    return
                del buffer[: end + 4]
                if buffer:
                    self._keep_alive = False  # more than one answer: never reuse it
                self._finish(b"".join(self._chunks))
                return
            start = line_end + 2
            if len(buffer) < start + size + 2:
                return
            self._chunks.append(bytes(buffer[start : start + size]))
            del buffer[: start + size + 2]
