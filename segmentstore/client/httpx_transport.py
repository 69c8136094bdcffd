"""The asyncio client over httpx, for a caller that hands in an ``httpx.AsyncBaseTransport``
(a mock in tests, a proxy): the same ``send`` as :class:`~.http1_transport.Http1Transport`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from . import calls
from .calls import Call
from .reply import Answer
from .tls import tls_verification


class HttpxTransport:
    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str],
        timeout_s: float,
        max_connections: int,
        transport: httpx.AsyncBaseTransport,
        verify: bool | str = True,
    ) -> None:
        self._timeout = httpx.Timeout(timeout_s)
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=self._timeout,
            transport=transport,
            limits=httpx.Limits(max_connections=max_connections),
            verify=tls_verification(verify),
        )

    async def send(self, call: Call[Any], base_url: str | None = None) -> Answer:
        data, headers = calls.body(call)
        url = base_url.rstrip("/") + call.path if base_url else call.path
        return await self._http.request(
            call.method,
            url,
            params=call.params,
            headers=headers,
            content=data,
            timeout=calls.timeout(self._timeout, call),
        )

    async def aclose(self) -> None:
        await self._http.aclose()
