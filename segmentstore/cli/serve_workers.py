"""``segmentstore serve --workers N``: the node as N worker processes under a supervisor
(:mod:`segmentstore.workers`), composed here as ``serve`` composes a single process.

The supervisor binds the node's port and every worker's own before anything else (a node
that cannot serve claims nothing), locks the data directory for the whole node (a second node
over it is refused at once, naming the supervisor's pid), then has the data directory claimed
once, in a child of its own, then starts the workers. Each worker opens the store over its
share of the containers (in a cluster, joins as a member of its own, ``NODE/wI``) and serves
the node's port and its own. A failure to start, in the supervisor, the claim or a worker, is
one line naming the cause and the fix (:mod:`.startup_failures`), exit status 1.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import socket
from typing import Any
from urllib.parse import urlsplit

from segmentstore.cli.logs import configure_logging
from segmentstore.cli.serve import with_node_identity
from segmentstore.cli.startup_failures import explain, listen, report
from segmentstore.data_dir import lock_data_dir, unlock_data_dir
from segmentstore.settings import Settings

log = logging.getLogger("segmentstore")


def serve_workers(settings: Settings, count: int) -> int:
    """Run the node as ``count`` workers until SIGTERM or SIGINT; the exit status."""
    from segmentstore.workers.board import Board
    from segmentstore.workers.place import WorkerPlace
    from segmentstore.workers.supervisor import Supervisor

    api = settings.api
    node_socket = listen(api.host, api.port)
    base = settings.node.worker_base_port
    own_sockets: list[socket.socket] = []
    try:
        for i in range(count):
            own_sockets.append(listen(api.host, base + i if base else 0))
    except BaseException:
        for sock in [node_socket, *own_sockets]:
            sock.close()
        raise
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
    # Loaded once here, not in every worker: a worker started again after it died serves in
    # a fraction of a second (importing these takes most of one). Importing starts no thread.
    import segmentstore.api.server
    import segmentstore.cluster.membership
    import segmentstore.workers.ownership  # noqa: F401

    def run_worker(place: WorkerPlace) -> int:
        return _run_worker(settings, place)

    def prepare() -> int:
        prepared = _prepare(settings)
        if prepared == 0:  # said once it is true: a start that fails says only why
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
        return prepared

    # One process per data directory: the supervisor holds its lock for the node, its workers
    # share it (they inherit the locked descriptor) and take none of their own. On JetStream
    # the node holds nothing there.
    lock = lock_data_dir(settings.store.data_dir) if settings.tier1.mode != "jetstream" else None
    try:
        return Supervisor(places, run_worker, prepare).run()
    finally:
        unlock_data_dir(lock)


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
    except Exception as error:
        return report(explain(error), error, debug=_debug(settings))
    return 0


def _run_worker(settings: Settings, place: Any) -> int:
    """One worker: the store over its share, served on the node's port and its own."""
    from segmentstore.api.server import serve_settings
    from segmentstore.cluster.membership import ClusterMembership
    from segmentstore.gc_tuning import tune_for_many_segments
    from segmentstore.store import SegmentStore
    from segmentstore.workers.ownership import WorkerShare
    from segmentstore.workers.publisher import starting

    tune_for_many_segments()
    configure_logging(settings.log.level, settings.log.format, worker=place.name)
    starting(place)
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
    try:
        sockets = [place.node_socket, place.own_socket]
        serve_settings(store, settings, ownership, sockets, worker=place)
    except Exception as error:  # a worker that cannot start says why in one line
        return report(explain(error), error, debug=_debug(settings))
    return 0


def _debug(settings: Settings) -> bool:
    return settings.log.level.lower() == "debug"
