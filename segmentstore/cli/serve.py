"""``segmentstore serve``: the service, with settings from a file, the environment and flags."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from segmentstore.cli.logs import configure_logging

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
}


def add_command(commands: Any) -> None:
    serve = commands.add_parser("serve", help="run the service (HTTP API on the store)")
    serve.add_argument("--config", type=Path, default=None, help="a TOML or YAML settings file")
    serve.add_argument("--data-dir", type=Path, default=None, help="default ./data")
    serve.add_argument("--host", default=None, help="default 127.0.0.1")
    serve.add_argument("--port", type=int, default=None, help="default 9090")
    serve.add_argument("--containers", type=int, default=None, help="default 4")
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
    serve.add_argument("--tls-cert-file", type=Path, default=None, help="serve HTTPS: PEM cert")
    serve.add_argument("--tls-key-file", type=Path, default=None, help="... and its PEM key")
    serve.add_argument(
        "--log-level", default=None, help="debug, info (default), warning, error, critical"
    )
    serve.add_argument(
        "--log-format", default=None, help="text (default) or json (one object a line)"
    )
    serve.add_argument(
        "--print-config", action="store_true", help="print settings (secrets masked) and exit"
    )
    serve.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from segmentstore.errors import InvalidArgumentError

    try:
        settings = _settings(args)
    except InvalidArgumentError as error:
        print(f"segmentstore: {error}", file=sys.stderr)
        return 2
    if args.print_config:
        print(settings.model_dump_json(indent=2))  # secrets print as **********
        return 0
    configure_logging(settings.log.level, settings.log.format)
    _serve(settings)
    return 0


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


def _serve(settings: Settings) -> None:
    from segmentstore.api.server import serve  # lazily: 'segmentstore tier2 cat' never loads it
    from segmentstore.store import SegmentStore

    api = settings.api
    scheme = "https" if api.tls_cert_file else "http"
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
    service = serve(
        SegmentStore(settings),
        api.host,
        api.port,
        settings.auth.roles(),
        log_level=settings.log.level,
        tls_cert_file=api.tls_cert_file,
        tls_key_file=api.tls_key_file,
        uvicorn_logging=False,  # its records take the process's one format
    )
    try:
        import uvloop  # uvicorn[standard] brings it: a faster event loop
    except ImportError:  # pragma: no cover
        asyncio.run(service)
    else:
        uvloop.run(service)
