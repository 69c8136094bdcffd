"""Every node answers every request: one for a container held elsewhere goes to its owner.

:class:`ClusterRouting` sits in front of the routes. For a request that names a segment (its
container by the usual mapping) or a container, held by another node:

* by default it is **forwarded** to the owner in one hop (:mod:`segmentstore.api.forwarding`)
  once its whole body has arrived (the signature covers the body's digest), and the owner's
  answer streamed back with ``Segment-Owner: <owner's URL>``, which tells a client that goes
  to owners directly that its map is stale;
* with ``Segment-Routing: redirect`` it is answered ``307 Temporary Redirect`` to the same
  path on the owner (``Location``), for clients that rather go there themselves.

A forwarded request reaches the owner whole or not at all: a client that goes away, a body
shorter than its ``Content-Length`` or one whose last chunk never comes is never sent on, and
a body that stops arriving is answered ``408`` by this node
(:mod:`segmentstore.api.http_protocol`).

Only members take part (:mod:`segmentstore.cluster.secret`): requests go only to nodes whose
entries a member signed, an owner's answer is passed on only with the owner's signature, and
``Segment-Forwarded-By`` is honoured only with a member's signature, young, its nonce unseen,
over the very body that arrives (else ``403``: nothing replayed or altered is applied).
A forwarded request is never forwarded again: its answer for a container this node does not
hold is ``503 container_unavailable``, as for a container no node holds yet or an owner that
does not answer; clients retry after ``Retry-After`` while a container moves. The listings
that span every container (``GET /v1/segments`` and ``GET /v1/containers``) are gathered
from every node (:mod:`segmentstore.api.cluster_listing`).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import time
from collections.abc import AsyncIterator

import aiohttp
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from segmentstore.api.cluster_listing import ClusterListing
from segmentstore.api.errors import BodyTooLarge, RefusedBody, error_response
from segmentstore.api.forwarding import HOP_BY_HOP, ForwardingSession, PeerBusy
from segmentstore.cluster.membership import ClusterMembership
from segmentstore.cluster.secret import FORWARDED_BY, FORWARDED_SIGNATURE, OWNER_SIGNATURE
from segmentstore.contracts.errors import (
    ContainerUnavailableError,
    ForbiddenError,
    SegmentStoreError,
)
from segmentstore.store import SegmentStore

log = logging.getLogger(__name__)

ROUTING = b"segment-routing"
OWNER = b"segment-owner"
SEGMENTS = "/v1/segments/"
CONTAINERS = "/v1/containers/"
# Of an owner's answer, not passed on: this node's server adds its own.
_NOT_PASSED_ON = HOP_BY_HOP | {b"date", b"server", OWNER}
_RETRY_MS = 1000
_UNPROVEN_LOG_EVERY_S = 60.0


_CLIENT_GONE = "the client went away before its whole body arrived"


class ClientGone(SegmentStoreError):
    """The client went away before its whole body arrived: there is no one left to answer."""

    code = "client_gone"
    on_the_wire = False


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
        self.secret = membership.secret
        self.session = session
        self.listing = ClusterListing(membership, session)
        self.count = membership.container_count
        self._unproven_logged = -1e9

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.membership.leaving:
            send = _closing(send)  # no connection to a node that is stopping is kept
        forwarded_by = _header(scope, FORWARDED_BY)
        if forwarded_by is not None:
            await self._from_member(forwarded_by, scope, receive, send)
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

    async def _from_member(
        self, forwarded_by: bytes, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """A request another node passed on: served here, and the answer signed, if that
        node proves it is a member."""
        node = forwarded_by.decode("latin-1")
        signed = self.secret.check_request(
            node,
            scope["method"],
            scope["raw_path"],
            scope["query_string"],
            _header(scope, FORWARDED_SIGNATURE),
        )
        if signed is None:
            now = time.monotonic()
            if now - self._unproven_logged > _UNPROVEN_LOG_EVERY_S:
                self._unproven_logged = now
                log.warning(
                    "refused a request that claims to come from node %r without a valid"
                    " signature of the cluster's (none, a forged, old or future one, or one"
                    " seen before; from %s)",
                    node[:64], (scope.get("client") or ("?",))[0],
                )  # fmt: skip
            error = ForbiddenError(
                "Segment-Forwarded-By is for the cluster's own nodes, each request signed once;"
                " send requests without it"
            )
            await error_response(error)(scope, receive, send)
            return
        checked = _body_checked(receive, signed.body_sha256)
        await self.app(scope, checked, self._signing(send, signed.nonce))

    def _signing(self, send: Send, nonce: str) -> Send:
        node_id, secret = self.membership.node_id, self.secret

        async def signing(message: Message) -> None:
            if message["type"] == "http.response.start":
                proof = secret.sign_answer(node_id, nonce, message["status"])
                headers = [*message.get("headers", []), (OWNER_SIGNATURE, proof.encode())]
                message = {**message, "headers": headers}
            await send(message)

        return signing

    def _container(self, path: str) -> int | None:
        """The container a request is for; None if it names none (or an invalid name, which
        the routes answer with the usual error)."""
        if path.startswith(SEGMENTS):
            name = path[len(SEGMENTS) :]
            # No name holds a ":" (docs/api.md, Segment names): one starts the action, which
            # the owner answers, known or not.
            head, colon, _ = name.rpartition(":")
            if colon:
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
        stopped: list[Exception] = []  # why the client's body ended early, if it did
        try:
            body = await _request_body(receive, stopped)
            async with self.session.forward(url, scope, body) as (response, nonce):
                proof = response.headers.get(OWNER_SIGNATURE.decode())
                if not self.secret.check_answer(node, nonce, response.status, proof):
                    log.warning(
                        "the answer from %s for container %d does not carry node %s's"
                        " signature: not passed on",
                        url, container, node,
                    )  # fmt: skip
                    await _unavailable(
                        container, f"its owner {node} did not prove it", scope, receive, send
                    )
                    return
                headers = [
                    (k.lower(), v)
                    for k, v in response.raw_headers
                    if k.lower() not in _NOT_PASSED_ON
                ]
                headers.append((OWNER, url.encode()))
                await send(
                    {"type": "http.response.start", "status": response.status, "headers": headers}
                )
                started = True
                async for chunk in response.content.iter_any():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
        except PeerBusy:
            reason = f"too many requests are under way to its owner {node}"
            await _unavailable(container, reason, scope, receive, send)
        except (aiohttp.ClientError, OSError, TimeoutError, ClientGone, BodyTooLarge) as error:
            if started:
                raise  # the answer was half sent: only closing the connection tells the client
            if stopped:
                if isinstance(stopped[0], BodyTooLarge):
                    await error_response(stopped[0].error)(scope, receive, send)
                return  # the client went away, and the owner applied nothing
            log.info("forwarding to container %d's owner %s failed: %r", container, node, error)
            reason = f"its owner {node} does not answer (it may be moving)"
            await _unavailable(container, reason, scope, receive, send)


async def _request_body(receive: Receive, stopped: list[Exception]) -> bytes | AsyncIterator[bytes]:
    """The whole body if it came in one piece (most do), else a stream of its pieces: a large
    body is passed on as it arrives, never held whole. A body that ends before its end (the
    client went away, or it outgrew its limit) raises, after putting why in ``stopped``."""
    first: Message = await receive()
    if first["type"] == "http.disconnect":
        stopped.append(ClientGone(_CLIENT_GONE))
        raise stopped[0]
    if not first.get("more_body", False):
        return bytes(first.get("body", b""))
    return _rest(first.get("body", b""), receive, stopped)


async def _rest(first: bytes, receive: Receive, stopped: list[Exception]) -> AsyncIterator[bytes]:
    if first:
        yield first
    while True:
        try:
            message: Message = await receive()
        except BodyTooLarge as error:
            stopped.append(error)
            raise
        if message["type"] == "http.disconnect":
            # Raised, not returned: returning would end the request to the owner as if the
            # body were complete, and the owner would apply the part that came.
            stopped.append(ClientGone(_CLIENT_GONE))
            raise stopped[0]
        body = message.get("body", b"")
        if body:
            yield body
        if not message.get("more_body", False):
            return


def _body_checked(receive: Receive, sha256: str) -> Receive:
    """``receive``, hashing the body as it arrives: at its last piece, a body that is not the
    one the forwarding node signed is refused (``403``) before the route can apply it."""
    digest = hashlib.sha256()

    async def checking() -> Message:
        message: Message = await receive()
        if message["type"] == "http.request":
            digest.update(message.get("body", b""))
            last = not message.get("more_body", False)
            if last and not hmac.compare_digest(digest.hexdigest(), sha256):
                raise RefusedBody(
                    ForbiddenError("the forwarded body is not the one its node signed")
                )
        return message

    return checking


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
