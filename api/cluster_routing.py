"""Every node answers every request: one for a container held elsewhere goes to its owner.

:class:`ClusterRouting` sits in front of the routes. For a request that names a segment (its
container by the usual mapping) or a container, held by another node:

* by default it is **forwarded** to the owner in one hop, the body streamed through rather
  than buffered (an 8 MiB append is not held twice), and the owner's answer streamed back
  with ``Segment-Owner: <owner's URL>``, which tells a client that goes to owners directly
  that its map is stale;
* with ``Segment-Routing: redirect`` it is answered ``307 Temporary Redirect`` to the same
  path on the owner (``Location``), for clients that rather go there themselves.

A forwarded request carries ``Segment-Forwarded-By``; a node never forwards such a request
again (its answer for a container it does not hold is ``503 container_unavailable``, as for
a container no node holds yet, or an owner that does not answer): clients retry after
``Retry-After`` while a container moves. The listings that span every container
(``GET /v1/segments`` and ``GET /v1/containers``) are gathered from every node
(:mod:`segmentstore.api.cluster_listing`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import aiohttp
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from yarl import URL

from segmentstore.api.cluster_listing import ClusterListing
from segmentstore.api.errors import BodyTooLarge, error_response
from segmentstore.cluster.membership import ClusterMembership
from segmentstore.contracts.errors import ContainerUnavailableError, SegmentStoreError
from segmentstore.store import SegmentStore

log = logging.getLogger(__name__)

FORWARDED_BY = b"segment-forwarded-by"
ROUTING = b"segment-routing"
OWNER = b"segment-owner"
SEGMENTS = "/v1/segments/"
CONTAINERS = "/v1/containers/"
ACTIONS = frozenset(
    {
        "append", "appendEvents", "attributes", "beginTransaction", "merge", "offsetAt",
        "read", "readEvents", "retention", "seal", "truncate",
    }
)  # fmt: skip
# Headers of one connection, not of the request: never passed on.
_HOP_BY_HOP = frozenset(
    {
        b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"te",
        b"trailer", b"upgrade", b"host",
    }
)  # fmt: skip
_RETRY_MS = 1000


class ClusterRouting:
    def __init__(
        self,
        app: ASGIApp,
        store: SegmentStore,
        membership: ClusterMembership,
        session: ForwardingSession,
    ) -> None:
        self.app = app
        self.store = store
        self.membership = membership
        self.session = session
        self.listing = ClusterListing(membership, session)
        self.count = membership.container_count

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.membership.leaving:
            send = _closing(send)  # no connection to a node that is stopping is kept
        if _header(scope, FORWARDED_BY) is not None:
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if scope["method"] == "GET" and path in ("/v1/segments", "/v1/containers"):
            await self.listing.answer(scope, receive, send)
            return
        container = self._container(path)
        if container is None or self.membership.serves(container):
            await self.app(scope, receive, send)
            return
        owner = self.membership.owner(container)
        if owner is None:
            reason = "no node holds it right now (it is moving)"
            await _unavailable(container, reason, scope, receive, send)
        elif _header(scope, ROUTING) == b"redirect":
            await _redirect(owner[1], scope, send)
        else:
            await self._forward(container, owner, scope, receive, send)

    def _container(self, path: str) -> int | None:
        """The container a request is for; None if it names none (or an invalid name, which
        the routes answer with the usual error)."""
        if path.startswith(SEGMENTS):
            name = path[len(SEGMENTS) :]
            head, colon, action = name.rpartition(":")
            if colon and action in ACTIONS:
                name = head
            try:
                return self.store.container_of(name)
            except SegmentStoreError:  # an invalid name: answered locally, 400
                return None
        if path.startswith(CONTAINERS) and path.endswith(":restart"):
            text = path[len(CONTAINERS) : -len(":restart")]
            if text.isdigit() and int(text) < self.count:
                return int(text)
        return None

    async def _forward(
        self, container: int, owner: tuple[str, str], scope: Scope, receive: Receive, send: Send
    ) -> None:
        node, url = owner
        started = False
        refused: list[BodyTooLarge] = []  # the body outgrew its limit while it streamed
        try:
            body = await _request_body(scope, receive, refused)
            async with self.session.forward(url, scope, body) as response:
                headers = [(k.lower(), v) for k, v in response.raw_headers]
                headers = [(k, v) for k, v in headers if k not in _HOP_BY_HOP and k != OWNER]
                headers.append((OWNER, url.encode()))
                await send(
                    {"type": "http.response.start", "status": response.status, "headers": headers}
                )
                started = True
                async for chunk in response.content.iter_any():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
        except (aiohttp.ClientError, OSError, TimeoutError, BodyTooLarge) as error:
            if started:
                raise  # the answer was half sent: only closing the connection tells the client
            if refused:
                await error_response(refused[0].error)(scope, receive, send)
                return
            log.info("forwarding to container %d's owner %s failed: %r", container, node, error)
            reason = f"its owner {node} does not answer (it may be moving)"
            await _unavailable(container, reason, scope, receive, send)


class ForwardingSession:
    """One aiohttp session for every forwarded request of this node, opened on first use."""

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id.encode()
        self._session: aiohttp.ClientSession | None = None
        self.forwarded = 0  # requests passed on (for /metrics)

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, force_close=False),
                # A tail read may wait a minute; only connecting has a short deadline.
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=2),
                auto_decompress=False,
                skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
            )
        return self._session

    def forward(
        self, base_url: str, scope: Scope, body: bytes | AsyncIterator[bytes]
    ) -> aiohttp.client._RequestContextManager:
        """Send the request of ``scope`` with ``body`` to the same path on ``base_url``."""
        self.forwarded += 1
        headers = [(k, v) for k, v in scope["headers"] if k not in _HOP_BY_HOP]
        headers.append((FORWARDED_BY, self.node_id))
        target = base_url.rstrip("/") + scope["raw_path"].decode("latin-1")
        if scope["query_string"]:
            target += "?" + scope["query_string"].decode("latin-1")
        return self._open().request(
            scope["method"],
            URL(target, encoded=True),
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers],
            data=body,
            allow_redirects=False,
        )

    def get(
        self, url: str, headers: dict[str, str] | None = None
    ) -> aiohttp.client._RequestContextManager:
        """A GET that the node asked answers from what it holds itself."""
        headers = {**(headers or {}), FORWARDED_BY.decode(): self.node_id.decode()}
        return self._open().get(url, headers=headers, allow_redirects=False)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


async def _request_body(
    scope: Scope, receive: Receive, refused: list[BodyTooLarge]
) -> bytes | AsyncIterator[bytes]:
    """The whole body if it came in one piece (most do), else a stream of its pieces: a large
    body is passed on as it arrives, never held whole. A body that outgrows its limit on the
    way is put in ``refused``."""
    first: Message = await receive()
    if first["type"] == "http.disconnect" or not first.get("more_body", False):
        return bytes(first.get("body", b""))
    return _rest(first.get("body", b""), receive, refused)


async def _rest(
    first: bytes, receive: Receive, refused: list[BodyTooLarge]
) -> AsyncIterator[bytes]:
    if first:
        yield first
    while True:
        try:
            message: Message = await receive()
        except BodyTooLarge as error:
            refused.append(error)
            raise
        if message["type"] == "http.disconnect":
            return
        body = message.get("body", b"")
        if body:
            yield body
        if not message.get("more_body", False):
            return


def _closing(send: Send) -> Send:
    async def closing(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", []) if k != b"connection"]
            message = {**message, "headers": [*headers, (b"connection", b"close")]}
        await send(message)

    return closing


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


async def _redirect(url: str, scope: Scope, send: Send) -> None:
    location = url.rstrip("/") + scope["raw_path"].decode("latin-1")
    if scope["query_string"]:
        location += "?" + scope["query_string"].decode("latin-1")
    headers = [(b"location", location.encode()), (OWNER, url.encode()), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 307, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def _unavailable(
    container: int, reason: str, scope: Scope, receive: Receive, send: Send
) -> None:
    error = ContainerUnavailableError(container, reason, _RETRY_MS)
    with contextlib.suppress(OSError):
        await error_response(error)(scope, receive, send)
