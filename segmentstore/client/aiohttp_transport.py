"""The asyncio client's transport: one aiohttp session, its keep-alive pool, and the one place
where aiohttp's errors become the client's.

Why aiohttp: with 64 concurrent tasks appending 1 KiB records, httpx's asyncio pool reaches a
few hundred requests per second whatever its limits, while aiohttp's reaches what the server
answers (``segmentstore bench client`` measures both against ``wrk``). The clients promise
``httpx.TransportError`` for a server that cannot be reached or answers nothing, and the retry
rule (:mod:`.retry`) tells a failure before sending from one after it by httpx's classes, so
aiohttp's errors are translated into those here and nowhere else:

    aiohttp.ConnectionTimeoutError   -> httpx.ConnectTimeout   (nothing sent)
    aiohttp.ClientConnectorError     -> httpx.ConnectError     (nothing sent)
    other TimeoutError               -> httpx.ReadTimeout
    ServerDisconnectedError,
    ClientPayloadError,
    ClientResponseError              -> httpx.RemoteProtocolError
    ClientOSError and the rest       -> httpx.ReadError
    InvalidURL                       -> httpx.UnsupportedProtocol (never retried)

Every request may name its own base URL (``send(call, base_url=...)``), so a caller that knows
which node owns a segment can address it directly over the same pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp
import httpx
from yarl import URL

from . import calls
from .calls import Call
from .reply import Reply
from .tls import tls_verification

# Below uvicorn's 5 s keep-alive: a connection the server is about to close is never reused
# (an append sent on it could not be retried).
_KEEPALIVE_S = 3.0


class AiohttpTransport:
    """Sends :class:`~.calls.Call` requests and returns whole :class:`~.reply.Reply` answers.

    The session is made on first use, inside the running event loop (aiohttp binds it to the
    loop); :meth:`aclose` closes it and every pooled connection.
    """

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str],
        timeout_s: float,
        max_connections: int,
        verify: bool | str = True,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._headers = dict(headers)
        self._timeout_s = timeout_s
        self._max_connections = max_connections
        # aiohttp's ssl=: True (the system's CAs), an SSLContext (a CA bundle), or False.
        self._ssl = tls_verification(verify)
        self._session: aiohttp.ClientSession | None = None
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            limit=self._max_connections,
            keepalive_timeout=_KEEPALIVE_S,
            ssl=self._ssl,
        )
        self._session = aiohttp.ClientSession(
            headers=self._headers,
            connector=connector,
            skip_auto_headers=("User-Agent",),
            # The store sets no cookies; the jar would still be consulted on every request.
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        return self._session

    def _timeout(self, extra_s: float) -> aiohttp.ClientTimeout:
        found = self._timeouts.get(extra_s)
        if found is None:
            # sock_connect also bounds the wait for a free pooled connection.
            found = aiohttp.ClientTimeout(
                total=None, sock_connect=self._timeout_s, sock_read=self._timeout_s + extra_s
            )
            self._timeouts[extra_s] = found
        return found

    async def send(self, call: Call[Any], base_url: str | None = None) -> Reply:
        session = self._session or self._open()
        url = (base_url.rstrip("/") if base_url else self._base_url) + call.path + calls.query(call)
        data, headers = calls.body(call)
        try:
            async with session.request(
                call.method,
                # encoded: the path is already percent-encoded (``%2E``, ``%23``); yarl must
                # not decode or normalise it into another name.
                URL(url, encoded=True),
                data=data,
                headers=headers,
                timeout=self._timeout(call.extra_timeout_s),
            ) as response:
                content = await response.read()
                return Reply(response.status, response.headers, content)
        except aiohttp.ConnectionTimeoutError as error:
            raise httpx.ConnectTimeout(str(error) or "connect timed out") from error
        except aiohttp.ClientConnectorError as error:
            raise httpx.ConnectError(str(error)) from error
        except TimeoutError as error:
            raise httpx.ReadTimeout(str(error) or "no answer in time") from error
        except (
            aiohttp.ServerDisconnectedError,
            aiohttp.ClientPayloadError,
            aiohttp.ClientResponseError,
        ) as error:
            raise httpx.RemoteProtocolError(str(error) or type(error).__name__) from error
        except aiohttp.InvalidURL as error:
            raise httpx.UnsupportedProtocol(f"cannot send to {url}: {error}") from error
        except aiohttp.ClientError as error:
            raise httpx.ReadError(str(error) or type(error).__name__) from error

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
