"""Spreading the drill's requests over the nodes of a cluster, as a load balancer would.

Every node of a cluster answers every route (it forwards to the container's owner), so each
request goes to a node drawn at random among those that can answer now: one that was killed or
paused is left out until it is back. The drill's load, probes and verification use one client
whose transport does this, and so need not know how many nodes there are.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import httpx

# The client's base URL: the transport replaces it with a live node's on every request.
CLUSTER_URL = "http://drill-cluster"


class SpreadTransport(httpx.AsyncBaseTransport):
    def __init__(self, live_urls: Callable[[], list[str]], seed: int, limits: httpx.Limits) -> None:
        self._live_urls = live_urls
        self._rng = random.Random(seed)
        self._inner = httpx.AsyncHTTPTransport(limits=limits)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        urls = self._live_urls()
        if not urls:
            raise httpx.ConnectError("no node of the cluster is answering", request=request)
        node = httpx.URL(self._rng.choice(urls))
        request.url = request.url.copy_with(scheme=node.scheme, host=node.host, port=node.port)
        request.headers["Host"] = node.netloc.decode("ascii")
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()
