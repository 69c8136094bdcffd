"""``segmentstore serve --workers N``: the node as N worker processes under a supervisor
(:mod:`segmentstore.workers`), composed here as ``serve`` composes a single process.

The supervisor binds the node's port and every worker's own before anything else (a node
that cannot serve claims nothing), then has the data directory claimed once, in a child of
its own, then starts the workers. Each worker opens the store over its share of the
containers (in a cluster, joins as a member of its own, ``NODE/wI``) and serves the node's
port and its own.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import socket
import sys
from typing import Any
from urllib.parse import urlsplit

from segmentstore.cli.logs import configure_logging
from segmentstore.cli.serve import with_node_identity
from segmentstore.contracts.errors import SegmentStoreError
from segmentstore.settings import Settings

log = logging.getLogger("segmentstore")


def serve_workers(settings: Settings, count: int) -> int:
    """Run the node as ``count`` workers until SIGTERM or SIGINT; the exit status."""
    from segmentstore.workers.board import Board
    from segmentstore.workers.place import WorkerPlace
    from segmentstore.workers.supervisor import Supervisor

    api = settings.api
    try:
        node_socket = socket.create_server((api.host, api.port))
        base = settings.node.worker_base_port
        own_sockets = [
            socket.create_server((api.host, base + i if base else 0)) for i in range(count)
        ]
    except OSError as error:
        print(
            f"segmentstore serve: cannot listen on {api.host}:{api.port}: {error}", file=sys.stderr
        )
        return 1
    settings = with_node_identity(
        settings.with_overrides(api={"port": node_socket.getsockname()[1]})
    )
    node_id = settings.cluster.node_id or socket.gethostname().split(".")[0]
    urls = tuple(_worker_url(settings, s.getsockname()[1]) for s in own_sockets)
    board = Board(count, settings.store.containers)
    secret, run_id = secrets.token_bytes(32), secrets.token_hex(8)
    places = [
        WorkerPlace(i, count, node_id, node_socket, own, urls, run_id, secret, board)
        for i, own in enumerate(own_sockets)
    ]
    log.info(
        "serving %s on %s://%s:%d with %d workers (%d containers, Tier 2 %s, auth %s)",
        settings.store.data_dir.resolve(),
        _scheme(settings),
        api.host,
        settings.api.port,
        count,
        settings.store.containers,
        settings.tier2_uri(),
        "on" if settings.auth.tokens else "off",
    )
    # Loaded once here, not in every worker: a worker started again after it died serves in
    # a fraction of a second (importing these takes most of one). Importing starts no thread.
    import segmentstore.api.server
    import segmentstore.cluster.membership
    import segmentstore.workers.ownership  # noqa: F401

    def run_worker(place: WorkerPlace) -> int:
        return _run_worker(settings, place)

    return Supervisor(places, run_worker, lambda: _prepare(settings)).run()


def _scheme(settings: Settings) -> str:
    return "https" if settings.api.tls_cert_file else "http"


def _worker_url(settings: Settings, port: int) -> str:
    """Where clients reach a worker: the node's advertised host (in a cluster), or the host it
    listens on (the host name for a wildcard address), at the worker's own port."""
    if settings.cluster.enabled and settings.cluster.advertise_url:
        parts = urlsplit(settings.cluster.advertise_url)
        host = parts.hostname or "localhost"
        scheme = parts.scheme
    else:
        host = settings.api.host
        if host in ("0.0.0.0", "::", ""):
            host = socket.gethostname()
        scheme = _scheme(settings)
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


def _prepare(settings: Settings) -> int:
    """What must be done once before the workers start, in a process of its own: the data
    directory claimed (or its count checked), Tier 2 checked, a lost Tier 1 refused or
    rebuilt, a shared Tier 1's count recorded. A store that owns no container, started and
    closed."""
    from segmentstore.store import SegmentStore

    async def claim() -> None:
        store = SegmentStore(settings, share=frozenset())
        await store.start()
        await store.close()

    try:
        asyncio.run(claim())
    except SegmentStoreError as error:
        print(f"segmentstore serve: {error.message}", file=sys.stderr)
        return 1
    return 0


def _run_worker(settings: Settings, place: Any) -> int:
    """One worker: the store over its share, served on the node's port and its own."""
    from segmentstore.api.server import serve
    from segmentstore.cluster.membership import ClusterMembership
    from segmentstore.store import SegmentStore
    from segmentstore.workers.ownership import WorkerShare
    from segmentstore.workers.publisher import starting

    configure_logging(settings.log.level, settings.log.format, worker=place.name)
    starting(place)
    api = settings.api
    settings = place.settings_of_worker(settings)
    if settings.cluster.enabled:
        from segmentstore.cluster.membership import on_jetstream

        store = SegmentStore(settings)
        ownership: ClusterMembership | WorkerShare = on_jetstream(store, settings)
    else:
        store = SegmentStore(settings, share=place.share(settings.store.containers))
        ownership = WorkerShare(store, place)
    log.info("worker %s (%s) serves the node's port and its own at %s",
             place.name, place.id, place.url)  # fmt: skip
    service = serve(
        store,
        api.host,
        api.port,
        settings.auth.roles(),
        log_level=settings.log.level,
        tls_cert_file=api.tls_cert_file,
        tls_key_file=api.tls_key_file,
        uvicorn_logging=False,
        cluster=ownership,
        sockets=[place.node_socket, place.own_socket],
        max_header_bytes=api.max_header_bytes,
        body_timeout_s=api.body_timeout_ms / 1000,
        worker=place,
    )
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        asyncio.run(service)
    else:
        uvloop.run(service)
    return 0
