"""Passing requests on to another node of the cluster, within limits.

One aiohttp session per node carries every request it forwards to a container's owner and
every part of a listing it gathers. Each is signed as a member's
(:class:`~segmentstore.cluster.secret.ClusterSecret`), and:

* has deadlines: connecting takes at most ``connect_timeout_s``, and the answer must begin
  within ``answer_timeout_s`` (plus the ``wait_ms`` of a tail read, which may wait that long
  on purpose);
* counts against its peer's cap: at most ``max_per_peer`` at once go to one node, and one
  more is refused at once (:class:`PeerBusy`, answered ``503`` with ``Retry-After``), so a
  slow or stuck peer cannot tie up every connection and task of this node.

A request is passed on once its whole body has arrived, since the signature covers the body's
digest (the owner checks it before it applies anything); a body that ends early (the client
went away) raises while it is read, so nothing is sent at all
(:mod:`segmentstore.api.cluster_routing`). Its slot is held from the first byte of the body.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from urllib.parse import parse_qs

import aiohttp
from starlette.types import Scope
from yarl import URL

from segmentstore.cluster.secret import (
    FORWARDED_BY,
    FORWARDED_SIGNATURE,
    OWNER_SIGNATURE,
    ClusterSecret,
)
from segmentstore.contracts.errors import SegmentStoreError

# Headers of one connection, or the cluster's own, never passed on from a client.
HOP_BY_HOP = frozenset(
    {
        b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"te",
        b"trailer", b"upgrade", b"host", FORWARDED_BY, FORWARDED_SIGNATURE, OWNER_SIGNATURE,
    }
)  # fmt: skip
_MAX_WAIT_S = 60.0


class PeerBusy(SegmentStoreError):
    """As many requests as the cap allows are already under way to this peer (answered as the
    container being unavailable, so never sent itself)."""

    code = "peer_busy"
    on_the_wire = False


class ForwardingSession:
    def __init__(
        self,
        node_id: str,
        secret: ClusterSecret | None,
        *,
        connect_timeout_s: float = 2.0,
        answer_timeout_s: float = 30.0,
        max_per_peer: int = 256,
    ) -> None:
        self.node_id = node_id
        self.secret = secret
        self.connect_timeout_s = connect_timeout_s
        self.answer_timeout_s = answer_timeout_s
        self.max_per_peer = max_per_peer
        self._session: aiohttp.ClientSession | None = None
        self._under_way: dict[str, int] = {}  # peer URL -> requests under way to it
        self.forwarded = 0  # requests passed on (for /metrics)
        self.refused_busy = 0  # refused because their peer was at its cap

    def under_way(self, base_url: str) -> int:
        return self._under_way.get(base_url, 0)

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, force_close=False),
                auto_decompress=False,
                skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
            )
        return self._session

    def _timeout(self, wait_s: float) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(
            total=None,
            connect=self.connect_timeout_s,
            sock_connect=self.connect_timeout_s,
            sock_read=self.answer_timeout_s + wait_s,
        )

    @contextlib.asynccontextmanager
    async def forward(
        self, base_url: str, scope: Scope, body: bytes | AsyncIterator[bytes]
    ) -> AsyncIterator[tuple[aiohttp.ClientResponse, str]]:
        """Send the request of ``scope`` with ``body`` (read whole first, if it is a stream)
        to the same path on ``base_url``; yields the answer and the nonce its owner's
        signature must name. ``PeerBusy`` at the peer's cap."""
        async with self._slot(base_url):
            if not isinstance(body, bytes):
                body = b"".join([chunk async for chunk in body])
            self.forwarded += 1
            headers = [(k, v) for k, v in scope["headers"] if k not in HOP_BY_HOP]
            method, path, query = scope["method"], scope["raw_path"], scope["query_string"]
            nonce = self._sign(headers, method, path, query, body)
            target = base_url.rstrip("/") + scope["raw_path"].decode("latin-1")
            if scope["query_string"]:
                target += "?" + scope["query_string"].decode("latin-1")
            async with self._open().request(
                scope["method"],
                URL(target, encoded=True),
                headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers],
                data=body,
                allow_redirects=False,
                timeout=self._timeout(_wait_s(scope["query_string"])),
            ) as response:
                yield response, nonce

    @contextlib.asynccontextmanager
    async def get(
        self, base_url: str, path: str, query: str, headers: dict[str, str]
    ) -> AsyncIterator[tuple[aiohttp.ClientResponse, str]]:
        """A signed GET of ``path`` that the node asked answers from what it holds itself."""
        async with self._slot(base_url):
            raw: list[tuple[bytes, bytes]] = []
            nonce = self._sign(raw, "GET", path.encode(), query.encode())
            all_headers = {**headers, **{k.decode(): v.decode() for k, v in raw}}
            target = base_url.rstrip("/") + path + (f"?{query}" if query else "")
            async with self._open().get(
                URL(target, encoded=True),
                headers=all_headers,
                allow_redirects=False,
                timeout=self._timeout(0),
            ) as response:
                yield response, nonce

    def _sign(
        self,
        headers: list[tuple[bytes, bytes]],
        method: str,
        path: bytes,
        query: bytes,
        body: bytes = b"",
    ) -> str:
        """Add this node's ``Segment-Forwarded-By`` and signature to ``headers``; the nonce."""
        headers.append((FORWARDED_BY, self.node_id.encode()))
        if self.secret is None:
            return ""
        signature, nonce = self.secret.sign_request(self.node_id, method, path, query, body)
        headers.append((FORWARDED_SIGNATURE, signature.encode()))
        return nonce

    @contextlib.asynccontextmanager
    async def _slot(self, base_url: str) -> AsyncIterator[None]:
        if self._under_way.get(base_url, 0) >= self.max_per_peer:
            self.refused_busy += 1
            raise PeerBusy(f"{self.max_per_peer} requests are already under way to {base_url}")
        self._under_way[base_url] = self._under_way.get(base_url, 0) + 1
        try:
            yield
        finally:
            left = self._under_way[base_url] - 1
            if left:
                self._under_way[base_url] = left
            else:
                del self._under_way[base_url]

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _wait_s(query: bytes) -> float:
    """The ``wait_ms`` of a tail read, in seconds (0 for anything else)."""
    if b"wait_ms=" not in query:
        return 0.0
    values = parse_qs(query.decode("latin-1")).get("wait_ms")
    try:
        return min(max(int(values[-1]), 0) / 1000, _MAX_WAIT_S) if values else 0.0
    except ValueError:
        return 0.0
