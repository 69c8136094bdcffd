"""``segmentstore serve``: the service, with settings from a file, the environment and flags."""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

from segmentstore.cli.logs import configure_logging
from segmentstore.cli.startup_failures import USAGE, StartupFailure, explain, listen, report

if TYPE_CHECKING:
    from segmentstore.settings import Settings

log = logging.getLogger("segmentstore")

# flag destination -> (section, key) of the settings tree
_FLAG_KEYS = {
    "data_dir": ("store", "data_dir"),
    "containers": ("store", "containers"),
    "host": ("api", "host"),
    "port": ("api", "port"),
    "tls_cert_file": ("api", "tls_cert_file"),
    "tls_key_file": ("api", "tls_key_file"),
    "tier1": ("tier1", "mode"),
    "tier2": ("tier2", "uri"),
    "log_level": ("log", "level"),
    "log_format": ("log", "format"),
    "cluster": ("cluster", "enabled"),
    "node_id": ("cluster", "node_id"),
    "advertise": ("cluster", "advertise_url"),
    "cluster_secret_file": ("cluster", "secret_file"),
    "rebuild_from_tier2": ("store", "rebuild_from_tier2"),
    "workers": ("node", "workers"),
}


def add_command(commands: Any) -> None:
    serve = commands.add_parser("serve", help="run the service (HTTP API on the store)")
    serve.add_argument("--config", type=Path, default=None, help="a TOML or YAML settings file")
    serve.add_argument("--data-dir", type=Path, default=None, help="default ./data")
    serve.add_argument("--host", default=None, help="default 127.0.0.1")
    serve.add_argument("--port", type=int, default=None, help="default 9090")
    serve.add_argument("--containers", type=int, default=None, help="default 4")
    serve.add_argument(
        "--workers",
        type=int,
        default=None,
        help="worker processes, each owning a share of the containers (node.workers; default:"
        " the CPUs this process may use; 1: one process)",
    )
    serve.add_argument("--tier2", default=None, help="default file://<data-dir>/tier2")
    serve.add_argument(
        "--tier1",
        choices=["local", "jetstream"],
        default=None,
        help="local files (default) or a replicated stream per container on NATS JetStream",
    )
    serve.add_argument(
        "--nats",
        default=None,
        help="JetStream server URLs, comma-separated (tier1.jetstream.servers)",
    )
    serve.add_argument(
        "--cluster",
        action="store_true",
        default=None,
        help="share the containers with the other nodes of the same JetStream Tier 1",
    )
    serve.add_argument("--node-id", default=None, help="this node's id (default: host name)")
    serve.add_argument(
        "--advertise", default=None, help="the URL others reach this node at (cluster mode)"
    )
    serve.add_argument(
        "--cluster-secret-file",
        type=Path,
        default=None,
        help="the secret every node of the cluster shares (cluster mode; at least 16 bytes)",
    )
    serve.add_argument("--tls-cert-file", type=Path, default=None, help="serve HTTPS: PEM cert")
    serve.add_argument("--tls-key-file", type=Path, default=None, help="... and its PEM key")
    serve.add_argument(
        "--log-level", default=None, help="debug, info (default), warning, error, critical"
    )
    serve.add_argument(
        "--log-format", default=None, help="text (default) or json (one object a line)"
    )
    serve.add_argument(
        "--rebuild-from-tier2",
        action="store_true",
        default=None,
        help="Tier 1 lost: rebuild it from the Tier 2 manifests, naming what was lost"
        " (docs/operations.md, Rebuilding a lost Tier 1 from Tier 2)",
    )
    serve.add_argument(
        "--print-config", action="store_true", help="print settings (secrets masked) and exit"
    )
    serve.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Serve until stopped; a startup failure is one line on standard error
    (:mod:`.startup_failures`), its exit status 2 for settings and 1 for the rest."""
    from segmentstore.contracts.errors import InvalidArgumentError

    try:
        settings = _settings(args)
        _check_tier2_uri(settings)
    except InvalidArgumentError as error:
        fix = "fix the flag, SEGMENTSTORE_ variable or config file that sets it"
        return report(StartupFailure(f"{error}: {fix}", USAGE), None, debug=False)
    if args.print_config:
        print(effective_config(settings))
        return 0
    configure_logging(settings.log.level, settings.log.format)
    try:
        workers = min(settings.node.worker_count(), settings.store.containers)
        if workers > 1:
            from segmentstore.cli.serve_workers import serve_workers

            return serve_workers(settings, workers)
        _serve(settings)
    except Exception as error:  # anything that stops the start: one line, not a traceback
        return report(explain(error), error, debug=settings.log.level.lower() == "debug")
    return 0


def _check_tier2_uri(settings: Settings) -> None:
    """A Tier 2 URI no backend takes is a setting to fix, refused before anything starts."""
    from segmentstore.contracts.errors import InvalidArgumentError
    from segmentstore.tier2 import InvalidTier2UriError
    from segmentstore.tier2.location import Tier2Location

    try:
        Tier2Location.parse(settings.tier2_uri())
    except InvalidTier2UriError as error:
        raise InvalidArgumentError(f"invalid settings: tier2.uri: {error}") from error


def effective_config(settings: Settings) -> str:
    """The settings as JSON (secrets print as **********), with what an empty setting stands
    for spelled out: ``tier2.uri`` is ``<data_dir>/tier2`` unless set."""
    document = json.loads(settings.model_dump_json())
    document["tier2"]["uri"] = settings.tier2_uri()
    return json.dumps(document, indent=2)


def _settings(args: argparse.Namespace) -> Settings:
    """Flags over ``SEGMENTSTORE_*`` variables over the config file (docs/api.md)."""
    from segmentstore.config import load_settings

    flags: dict[str, dict[str, Any]] = {}
    for destination, (section, key) in _FLAG_KEYS.items():
        value = getattr(args, destination)
        if value is not None:
            flags.setdefault(section, {})[key] = value
    if args.nats is not None:
        flags.setdefault("tier1", {})["jetstream"] = {"servers": args.nats}
    return load_settings(args.config, os.environ, flags)


def with_node_identity(settings: Settings) -> Settings:
    """A cluster node's id defaults to the host name (a StatefulSet pod's is stable), and
    its advertised URL to its own address."""
    cluster = settings.cluster
    if not cluster.enabled:
        return settings
    node_id = cluster.node_id or socket.gethostname().split(".")[0]
    url = cluster.advertise_url
    if not url:
        api = settings.api
        host = socket.gethostname() if api.host in ("0.0.0.0", "::", "") else api.host
        scheme = "https" if api.tls_cert_file else "http"
        url = f"{scheme}://{host}:{api.port}"
    return settings.with_overrides(cluster={"node_id": node_id, "advertise_url": url})


def _serve(settings: Settings) -> None:
    # lazily: 'segmentstore tier2 cat' never loads these
    from segmentstore.api.server import serve_settings
    from segmentstore.gc_tuning import tune_for_many_segments
    from segmentstore.store import SegmentStore

    tune_for_many_segments()
    # The port first, before the data directory is touched: a node that cannot serve claims
    # nothing. (A cluster node's advertised URL needs the port too, before it joins.)
    listener = listen(settings.api.host, settings.api.port)
    sockets = [listener]
    settings = settings.with_overrides(api={"port": listener.getsockname()[1]})
    settings = with_node_identity(settings)
    api = settings.api
    scheme = "https" if api.tls_cert_file else "http"

    def started() -> None:  # said once it is true: a start that fails says only why
        log.info(
            "serving %s on %s://%s:%d (%d containers, Tier 2 %s, auth %s)",
            settings.store.data_dir.resolve(),
            scheme,
            api.host,
            api.port,
            settings.store.containers,
            settings.tier2_uri(),
            "on" if settings.auth.tokens else "off",
        )

    store = SegmentStore(settings)
    cluster = None
    if settings.cluster.enabled:
        from segmentstore.cluster.membership import on_jetstream

        cluster = on_jetstream(store, settings)
    try:
        serve_settings(store, settings, cluster, sockets, on_started=started)
    finally:
        listener.close()
