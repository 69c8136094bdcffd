"""Serving the app with uvicorn, the store opened and closed in the ASGI lifespan.

``serve`` is what ``segmentstore serve`` runs::

    store = SegmentStore(settings)            # not started: the lifespan starts it
    asyncio.run(serve(store, settings.api.host, settings.api.port, settings.auth.roles()))

With ``tls_cert_file`` and ``tls_key_file`` (PEM) it serves HTTPS only. With
``uvicorn_logging=False`` uvicorn installs no log handlers of its own and its records go to the
root logger, in the format the process configured (``segmentstore serve`` does this).

Shutdown (SIGTERM or SIGINT, handled by uvicorn itself): uvicorn stops accepting
connections, lets requests in flight finish for up to ``graceful_timeout_s`` (a tail read may
wait up to 60 s, so the rest are cancelled then), and runs the lifespan's shutdown, which
closes the store: pending appends are completed or failed and files are closed. With the
default of 10 s the whole stop stays well within 30 s. After a clean stop
uvicorn re-raises the signal it caught, so the process ends the way the signal says.

A worker of a node (``worker``, from ``segmentstore serve --workers N``) serves the node's
port and its own, takes the connections its siblings hand it (:mod:`.worker_handoff`) and
keeps its line of the node's board current (:mod:`segmentstore.workers.publisher`).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI
from starlette.types import ASGIApp

from segmentstore.api.app import create_app
from segmentstore.api.connection_limits import (
    ConnectionLimits,
    ConnectionLimitsCollector,
    descriptor_budget,
)
from segmentstore.api.http_protocol import limited_protocol
from segmentstore.api.readiness import readiness
from segmentstore.api.worker_handoff import ConnectionHandOff
from segmentstore.api.worker_relay import RELAY_KEEP_ALIVE_S, RequestRelay
from segmentstore.cluster.membership import ClusterMembership
from segmentstore.cluster.ownership import ContainerOwnership
from segmentstore.settings import ApiSettings, Settings
from segmentstore.store import SegmentStore
from segmentstore.workers.place import WorkerPlace
from segmentstore.workers.publisher import BoardPublisher

log = logging.getLogger(__name__)

GRACEFUL_TIMEOUT_S = 10
# The settings' own defaults, for a caller that passes no settings (tests, the benchmarks).
MAX_HEADER_BYTES = ApiSettings().max_header_bytes
BODY_TIMEOUT_S = ApiSettings().body_timeout_ms / 1000
HEAD_TIMEOUT_S = ApiSettings().head_timeout_ms / 1000
# A node stopping gracefully gives its containers this long to drain and move.
HAND_OVER_TIMEOUT_S = 15
LEAVING_GRACE_S = 1.0


async def start_node(store: SegmentStore, cluster: ContainerOwnership | None) -> None:
    """Start ``store`` (its containers then recover in the background: probes get /healthz
    200 and /readyz 503 meanwhile, not a refusal) and join ``cluster``; if joining fails, the
    store is closed again and the failure raised."""
    await store.start(wait_for_recovery=False)
    if cluster is not None:
        try:
            await cluster.start()
        except BaseException:
            await store.close()
            raise


def serving_app(
    store: SegmentStore,
    auth_tokens: Mapping[str, str] | None = None,
    cluster: ContainerOwnership | None = None,
    worker: WorkerPlace | None = None,
    *,
    started: bool = False,
) -> FastAPI:
    """The app over ``store``, which it closes in its lifespan: started already (``started``,
    by :func:`start_node`) or started there; with ``cluster``, the node joins after the store
    starts and leaves before it closes."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not started:
            await start_node(store, cluster)
        try:
            yield
        finally:
            if cluster is not None:
                await cluster.leave()  # at once, if SIGTERM already handed over
            await app.state.forwarding.close()
            log.info("closing the store")
            await store.close()

    return create_app(store, auth_tokens, lifespan=lifespan, cluster=cluster, worker=worker)


class NodeServer(uvicorn.Server):
    """uvicorn's server, and a node's part in what is larger than its process.

    * In a cluster (``cluster``), on SIGTERM or SIGINT the node hands its containers over
      while it still serves (requests for them are forwarded to their new owners), and only
      then stops listening; a second signal stops it at once, as usual.
    * A worker of a node (``hand_off`` and ``publisher``) takes its siblings' connections and
      says on the board that it serves once it accepts, and stops taking them first when it
      stops.
    """

    def __init__(
        self,
        config: uvicorn.Config,
        cluster: ClusterMembership | None = None,
        hand_off: ConnectionHandOff | None = None,
        publisher: BoardPublisher | None = None,
        relay: RequestRelay | None = None,
    ) -> None:
        super().__init__(config)
        self._cluster = cluster
        self._hand_off = hand_off
        self._relay = relay
        self._publisher = publisher
        self._leaving: asyncio.Task[None] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit:
            return
        if self._hand_off is not None:
            config = self.config

            def adoptable(initial: bytes) -> asyncio.Protocol:
                protocol: asyncio.Protocol = config.http_protocol_class(  # type: ignore[call-arg]
                    config=config, server_state=self.server_state, app_state=self.lifespan.state
                )
                protocol.initial = initial  # type: ignore[attr-defined]
                return protocol

            self._hand_off.start(adoptable)
        if self._relay is not None:
            self._relay.start(self._relayed_protocol)
        if self._publisher is not None:
            self._publisher.serving()

    def _relayed_protocol(self) -> asyncio.Protocol:
        """The HTTP server's protocol for a connection a sibling relays requests on: every
        request on it is a client's that the sibling's limits admitted, so none apply here, and
        it is served here whatever it asks (a request never bounces back)."""
        config = self.config
        protocol: Any = config.http_protocol_class(  # type: ignore[call-arg]
            config=config, server_state=self.server_state, app_state=self.lifespan.state
        )
        protocol.connection_limits = None
        protocol.worker_hand_off = None
        protocol.worker_relay = None
        protocol.timeout_keep_alive = RELAY_KEEP_ALIVE_S
        return protocol  # type: ignore[no-any-return]

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._publisher is not None:
            self._publisher.stopping()
        if self._hand_off is not None:
            self._hand_off.close()
        if self._relay is not None:
            self._relay.close()
        await super().shutdown(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._cluster is None or self._leaving is not None or self.should_exit:
            super().handle_exit(sig, frame)
            return
        # A signal handler runs between two bytecodes of whatever the loop was doing: the
        # hand-over is scheduled, thread-safely, rather than started here.
        loop = asyncio.get_event_loop()
        loop.call_soon_threadsafe(self._begin_leaving, loop, sig)

    def _begin_leaving(self, loop: asyncio.AbstractEventLoop, sig: int) -> None:
        if self._leaving is None:
            self._leaving = loop.create_task(self._leave_then_exit(sig))

    async def _leave_then_exit(self, sig: int) -> None:
        assert self._cluster is not None
        try:
            await asyncio.wait_for(self._cluster.leave(), HAND_OVER_TIMEOUT_S)
            # Still listening a moment (every answer now closes its connection, and /readyz
            # says 503): a request already on its way is answered, not cut off with the
            # connection it came on.
            await asyncio.sleep(LEAVING_GRACE_S)
        except Exception:
            log.exception("handing containers over failed; stopping anyway")
        finally:
            super().handle_exit(sig, None)


def server_config(
    app: ASGIApp,
    host: str = "127.0.0.1",
    port: int = 9090,
    *,
    graceful_timeout_s: int = GRACEFUL_TIMEOUT_S,
    log_level: str = "info",
    tls_cert_file: Path | None = None,
    tls_key_file: Path | None = None,
    uvicorn_logging: bool = True,
    max_header_bytes: int = MAX_HEADER_BYTES,
    body_timeout_s: float = BODY_TIMEOUT_S,
    head_timeout_s: float = HEAD_TIMEOUT_S,
    connection_limits: ConnectionLimits | None = None,
    hand_off: ConnectionHandOff | None = None,
    relay: RequestRelay | None = None,
) -> uvicorn.Config:
    """uvicorn's settings for the app. ``uvicorn_logging``: uvicorn's own log handlers and
    format; False leaves its records to the root logger's handlers. ``max_header_bytes``,
    ``body_timeout_s``, ``head_timeout_s`` and ``connection_limits``: the limits of
    :mod:`segmentstore.api.http_protocol`."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=limited_protocol(
            max_header_bytes, body_timeout_s, head_timeout_s, connection_limits, hand_off, relay
        ),
        lifespan="on",  # a store that fails to start stops the server instead of serving 503s
        ws="none",  # no websockets here; and the legacy websockets module warns on import
        access_log=False,  # at thousands of requests a second; /metrics counts them instead
        log_level=log_level,
        log_config=uvicorn.config.LOGGING_CONFIG if uvicorn_logging else None,
        timeout_graceful_shutdown=graceful_timeout_s,
        server_header=False,
        # No proxy is trusted to name the client (X-Forwarded-For): nothing here reads the
        # client's address, and the check cost a pass over every request's headers.
        proxy_headers=False,
        ssl_certfile=tls_cert_file,
        ssl_keyfile=tls_key_file,
    )


async def serve(
    store: SegmentStore,
    host: str = "127.0.0.1",
    port: int = 9090,
    auth_tokens: Mapping[str, str] | None = None,
    *,
    graceful_timeout_s: int = GRACEFUL_TIMEOUT_S,
    log_level: str = "info",
    sockets: Sequence[socket.socket] | None = None,
    tls_cert_file: Path | None = None,
    tls_key_file: Path | None = None,
    uvicorn_logging: bool = True,
    cluster: ContainerOwnership | None = None,
    max_header_bytes: int = MAX_HEADER_BYTES,
    body_timeout_s: float = BODY_TIMEOUT_S,
    head_timeout_s: float = HEAD_TIMEOUT_S,
    max_connections: int | None = None,
    max_connections_per_client: int | None = None,
    on_started: Callable[[], None] | None = None,
    worker: WorkerPlace | None = None,
) -> None:
    """Serve ``store`` (unstarted) until SIGTERM or SIGINT; returns once it is closed.
    ``on_started`` is called once the store has started (and the node joined its cluster).

    ``sockets``, if given, are already bound listening sockets to serve on instead of
    ``host``/``port`` (``segmentstore serve`` binds its port before anything else). The store
    is started and the cluster joined before uvicorn runs: a failure to start is raised here,
    as it is, for the caller to tell (rather than become uvicorn's lifespan traceback).
    ``worker``: this process is a worker of a node (its sockets are the node's and its own);
    the connection limits are then its own, as its descriptors are.
    """
    await start_node(store, cluster)
    if on_started is not None:
        on_started()
    app = serving_app(store, auth_tokens, cluster, worker, started=True)
    limits = None
    if max_connections is not None:
        per_client = max_connections_per_client or max_connections
        limits = ConnectionLimits(descriptor_budget(max_connections), per_client)
        app.state.metrics.registry.register(ConnectionLimitsCollector(limits))
    hand_off, publisher, relay = None, None, None
    if worker is not None:
        assert cluster is not None, "a worker's containers are shared out by an ownership"
        ownership = cluster

        def owner_of(container: int) -> str | None:
            owner = ownership.owner(container)
            return None if owner is None else owner[0]

        hand_off = ConnectionHandOff(worker, store.container_of, owner_of)
        app.state.hand_off = hand_off
        relay = RequestRelay(worker)
        app.state.relay = relay
        publisher = BoardPublisher(store, worker, lambda: readiness(store, ownership).ready)
    config = server_config(
        app,
        host,
        port,
        graceful_timeout_s=graceful_timeout_s,
        log_level=log_level,
        tls_cert_file=tls_cert_file,
        tls_key_file=tls_key_file,
        uvicorn_logging=uvicorn_logging,
        max_header_bytes=max_header_bytes,
        body_timeout_s=body_timeout_s,
        head_timeout_s=head_timeout_s,
        connection_limits=limits,
        hand_off=hand_off,
        relay=relay,
    )
    membership = cluster if isinstance(cluster, ClusterMembership) else None
    server = NodeServer(config, membership, hand_off, publisher, relay)
    if sockets:
        # uvicorn names the address only of sockets it binds itself.
        host, port = sockets[0].getsockname()[:2]
        log.info("listening on %s://%s:%d", "https" if tls_cert_file else "http", host, port)
    await server.serve(sockets=list(sockets) if sockets is not None else None)


def serve_settings(
    store: SegmentStore,
    settings: Settings,
    cluster: ContainerOwnership | None,
    sockets: Sequence[socket.socket],
    *,
    on_started: Callable[[], None] | None = None,
    worker: WorkerPlace | None = None,
) -> None:
    """Run :func:`serve` on uvloop with ``settings``' API section (TLS, limits) and log level,
    until SIGTERM or SIGINT: ``segmentstore serve``'s process, or one worker of a node
    (``worker``), whose connection limits are its own as its descriptors are."""
    api = settings.api
    service = serve(
        store,
        api.host,
        api.port,
        settings.auth.roles(),
        log_level=settings.log.level,
        tls_cert_file=api.tls_cert_file,
        tls_key_file=api.tls_key_file,
        uvicorn_logging=False,  # its records take the process's one format
        cluster=cluster,
        sockets=sockets,
        max_header_bytes=api.max_header_bytes,
        body_timeout_s=api.body_timeout_ms / 1000,
        head_timeout_s=api.head_timeout_ms / 1000,
        max_connections=api.max_connections,
        max_connections_per_client=api.max_connections_per_client,
        on_started=on_started,
        worker=worker,
    )
    _run(service)


def serve_app(app: ASGIApp, host: str = "127.0.0.1", port: int = 0) -> None:
    """Serve any ASGI ``app`` as ``segmentstore serve`` serves the store (the same server
    settings, on uvloop) until SIGTERM or SIGINT: the bare baselines of ``segmentstore bench
    http`` (:mod:`segmentstore.api.baselines`), whose ratios are then what the store
    costs behind the same server."""
    _run(uvicorn.Server(server_config(app, host, port, log_level="info")).serve())


def _run(service: Coroutine[Any, Any, None]) -> None:
    try:
        import uvloop  # uvicorn[standard] brings it: a faster event loop
    except ImportError:  # pragma: no cover
        asyncio.run(service)
    else:
        uvloop.run(service)
