"""The asyncio client's transport: keep-alive pools of :class:`~.http1_connection.Http1Connection`,
one per server the client talks to, and the one place where connecting fails into the client's
errors.

Every request may name its own base URL (``send(call, base_url=...)``): each distinct
``scheme://host:port`` gets its own pool of at most ``max_connections`` connections, so a
caller that knows which node owns a segment addresses it directly.

The clients promise ``httpx.TransportError`` for a server that cannot be reached or answers
nothing, and the retry rule (:mod:`.retry`) tells a failure before sending from one after it
by httpx's classes:

    connect timed out                               -> httpx.ConnectTimeout  (nothing sent)
    refused, unreachable, TLS handshake refused     -> httpx.ConnectError    (nothing sent)
    no connection free within the timeout           -> httpx.PoolTimeout     (nothing sent)
    a scheme other than http/https, a bad URL       -> httpx.UnsupportedProtocol (never retried)
    a header value HTTP cannot carry (a line break) -> httpx.LocalProtocolError  (never retried)
    after sending: see :mod:`.http1_connection`
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from . import calls
from .calls import Call
from .http1_connection import Http1Connection
from .reply import Reply
from .tls import tls_verification

# Below uvicorn's 5 s keep-alive: a connection the server is about to close is never reused
# (an append sent on it could not be retried).
KEEPALIVE_S = 3.0
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


def _ssl_context(verify: bool | str) -> ssl.SSLContext:
    checked = tls_verification(verify)
    if isinstance(checked, ssl.SSLContext):
        return checked
    if checked:
        return ssl.create_default_context()
    unchecked = ssl.create_default_context()
    unchecked.check_hostname = False
    unchecked.verify_mode = ssl.CERT_NONE
    return unchecked


class _Pool:
    """The connections to one ``scheme://host:port``: idle ones (most recent last), how many
    are open, and the requests waiting for one to be free."""

    def __init__(self, base_url: str, limit: int, tls: ssl.SSLContext | None) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise httpx.UnsupportedProtocol(f"cannot send to {base_url!r}: not an http(s) URL")
        self.secure = parts.scheme == "https"
        self.host = parts.hostname
        try:
            self.port = parts.port or (443 if self.secure else 80)
        except ValueError as error:
            raise httpx.UnsupportedProtocol(f"cannot send to {base_url!r}: {error}") from None
        # The path prefix of the base URL, if any, goes before every request's path.
        self.prefix = parts.path.rstrip("/")
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = f"{host}:{self.port}"
        self.tls = tls if self.secure else None
        self.limit = limit
        self.idle: list[Http1Connection] = []
        self.open = 0
        self.waiters: deque[asyncio.Future[None]] = deque()
        self.closed = False

    def take_idle(self) -> Http1Connection | None:
        """The most recently used idle connection still fit to reuse, if any."""
        now = time.monotonic()
        while self.idle:
            connection = self.idle.pop()
            if connection.reusable and now - connection.idle_since < KEEPALIVE_S:
                return connection
            self._drop(connection)
        return None

    async def acquire(self, timeout_s: float) -> Http1Connection:
        """A connection to send on: an idle one, a new one, or the next one released."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            connection = self.take_idle()
            if connection is not None:
                return connection
            if self.open < self.limit:
                break
            waiter = loop.create_future()
            self.waiters.append(waiter)
            try:
                async with asyncio.timeout_at(deadline):
                    await waiter
            except BaseException as error:
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # the turn this waiter was given goes to the next one
                else:
                    self.waiters.remove(waiter)
                if isinstance(error, TimeoutError):
                    raise httpx.PoolTimeout(f"no free connection in {timeout_s:g} s") from None
                raise
        self.open += 1
        try:
            return await self._connect(loop, max(0.0, deadline - loop.time()))
        except BaseException:
            self.open -= 1
            self._wake()
            raise

    async def _connect(self, loop: asyncio.AbstractEventLoop, timeout_s: float) -> Http1Connection:
        try:
            async with asyncio.timeout(timeout_s):
                _, connection = await loop.create_connection(
                    lambda: Http1Connection(loop),
                    self.host,
                    self.port,
                    ssl=self.tls,
                    server_hostname=self.host if self.tls else None,
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {self.host_header} timed out") from None
        except OSError as error:  # refused, unreachable, a certificate not trusted
            raise httpx.ConnectError(f"cannot connect to {self.host_header}: {error}") from error
        return connection

    def release(self, connection: Http1Connection) -> None:
        if connection.reusable and not self.closed:
            self.idle.append(connection)
        else:
            self._drop(connection)
        self._wake()

    def _drop(self, connection: Http1Connection) -> None:
        connection.close()
        self.open -= 1

    def _wake(self) -> None:
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def close(self) -> None:
        self.closed = True
        for connection in self.idle:
            connection.close()
        self.idle.clear()


class Http1Transport:
    """Sends :class:`~.calls.Call` requests and returns whole :class:`~.reply.Reply` answers
    over HTTP/1.1 keep-alive connections; :meth:`aclose` closes every pooled connection (a
    connection busy with a request closes when that request ends; a later request opens new
    ones)."""

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str],
        timeout_s: float,
        max_connections: int,
        verify: bool | str = True,
    ) -> None:
        self._base_url = base_url
        self._timeout_s = timeout_s
        self._max_connections = max_connections
        self._verify = verify
        self._tls: ssl.SSLContext | None = None
        if any("\r" in value or "\n" in value for value in headers.values()):
            raise ValueError("a header value holds a line break")
        # Written into every request as they are: formatted once.
        self._fixed = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        self._pools: dict[str, _Pool] = {}

    def _pool(self, base_url: str) -> _Pool:
        pool = self._pools.get(base_url)
        if pool is None:
            # "http://node:9090/" and "http://node:9090" are one server, with one pool.
            origin = base_url.rstrip("/")
            pool = self._pools.get(origin)
            if pool is None:
                if origin.startswith("https:") and self._tls is None:
                    self._tls = _ssl_context(self._verify)
                pool = self._pools[origin] = _Pool(origin, self._max_connections, self._tls)
            self._pools[base_url] = pool
        return pool

    async def send(self, call: Call[Any], base_url: str | None = None) -> Reply:
        pool = self._pool(base_url or self._base_url)
        data, headers = calls.body(call)
        head = self._head(pool, call, data, headers)
        connection = pool.take_idle() or await pool.acquire(self._timeout_s)
        try:
            status, answer_headers, content = await connection.request(
                head, data, self._timeout_s + call.extra_timeout_s
            )
        finally:
            pool.release(connection)
        return Reply(status, answer_headers, content)

    def _head(
        self, pool: _Pool, call: Call[Any], data: bytes | None, headers: Mapping[str, str]
    ) -> bytes:
        """The request line and headers, ready to write."""
        lines = [
            f"{call.method} {pool.prefix}{call.path}{calls.query(call)} HTTP/1.1\r\n"
            f"Host: {pool.host_header}\r\n{self._fixed}"
        ]
        for name, value in headers.items():
            if "\r" in value or "\n" in value:
                raise httpx.LocalProtocolError(f"header {name} holds a line break: {value[:80]!r}")
            lines.append(f"{name}: {value}\r\n")
        if data is not None or call.method in _WITH_BODY:
            lines.append(f"Content-Length: {0 if data is None else len(data)}\r\n")
        lines.append("\r\n")
        try:
            return "".join(lines).encode("latin-1")
        except UnicodeEncodeError as error:
            raise httpx.LocalProtocolError(f"a header that HTTP cannot carry: {error}") from None

    async def aclose(self) -> None:
        for pool in set(self._pools.values()):
            pool.close()
        self._pools.clear()
