"""JetStream servers set up as docs/nats-auth.md says: the configuration file it shows, run as
three servers on loopback with nothing changed but the ports, paths and certificates (and, for
a test that needs them, users added to the segment store's account), TLS for clients and
routes, the passwords in the servers' environment as the document has it. Also the settings
that make a node connect as the segment store's user, and the servers' refusals read back from
their logs."""

from __future__ import annotations

import contextlib
import re
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from certificates import certificates

from segmentstore.harness.jetstream_cluster import JetStreamCluster, JetStreamNode

DOC = Path(__file__).resolve().parents[2] / "docs" / "nats-auth.md"
PASSWORDS = {
    "NATS_SEGMENTSTORE_PASSWORD": "store-password",
    "NATS_APP_PASSWORD": "app-password",
    "NATS_ADMIN_PASSWORD": "admin-password",
}
STORE_USER = "segmentstore"
STORE_PASSWORD = PASSWORDS["NATS_SEGMENTSTORE_PASSWORD"]


def documented_config() -> str:
    """The one ``conf`` block of docs/nats-auth.md."""
    (block,) = re.findall(r"```conf\n(.*?)```", DOC.read_text(), re.DOTALL)
    return block


def server_config(
    tls: tuple[Path, Path, Path], node: JetStreamNode, routes: list[int], extra_users: str = ""
) -> str:
    """The documented file for ``node`` on loopback; ``extra_users`` (NATS user blocks, each
    followed by a comma) join the segment store's account."""
    ca_file, cert_file, key_file = tls
    config = documented_config()
    loopback_routes = ", ".join(f"nats-route://127.0.0.1:{port}" for port in routes)
    replacements = {
        "server_name: n1": f"server_name: {node.name}",
        "listen: 0.0.0.0:4222": f"listen: 127.0.0.1:{node.client_port}",
        "listen: 0.0.0.0:6222": f"listen: 127.0.0.1:{node.route_port}",
        "nats-route://n1:6222, nats-route://n2:6222, nats-route://n3:6222": loopback_routes,
        "/etc/nats/tls/server.crt": f'"{cert_file}"',
        "/etc/nats/tls/server.key": f'"{key_file}"',
        "/etc/nats/tls/ca.crt": f'"{ca_file}"',
        "/var/lib/nats": f'"{node.directory / "store"}"',
        "users: [\n      {\n        user: segmentstore": (
            f"users: [\n      {extra_users}\n      {{\n        user: segmentstore"
        ),
    }
    for documented, here in replacements.items():
        assert documented in config, f"{DOC.name} no longer says {documented!r}: update this"
        config = config.replace(documented, here)
    return config


def tls_context(ca_file: Path) -> ssl.SSLContext:
    """What a client that trusts the servers' CA connects with."""
    return ssl.create_default_context(cafile=str(ca_file))


def node_settings(ca_file: Path) -> dict[str, str]:
    """The settings of a node that connects as the segment store's user, over TLS."""
    return {
        "SEGMENTSTORE_TIER1__JETSTREAM__USER": STORE_USER,
        "SEGMENTSTORE_TIER1__JETSTREAM__PASSWORD": STORE_PASSWORD,
        "SEGMENTSTORE_TIER1__JETSTREAM__TLS_CA_FILE": str(ca_file),
    }


@contextlib.contextmanager
def running(root: Path, extra_users: str = "") -> Iterator[tuple[JetStreamCluster, Path]]:
    """The three servers, started under ``root`` and stopped (by PID) on the way out; with the
    CA file that signed their certificate (the one certificate, for 127.0.0.1, all three
    use)."""
    (root / "tls").mkdir(parents=True, exist_ok=True)
    tls = certificates(root / "tls")
    # Readiness is probed as the user of another account: the segment store's may create
    # nothing but its own streams.
    probe = {"user": "app", "password": PASSWORDS["NATS_APP_PASSWORD"], "tls": tls_context(tls[0])}
    with pytest.MonkeyPatch.context() as environment:
        for name, value in PASSWORDS.items():
            environment.setenv(name, value)  # the servers inherit it, as the document says
        cluster = JetStreamCluster(
            root / "servers",
            server_config=lambda node, routes: server_config(tls, node, routes, extra_users),
            client_options=probe,
        )
        try:
            cluster.start()
            yield cluster, tls[0]
        finally:
            cluster.stop()


def violations(cluster: JetStreamCluster, user: str) -> list[str]:
    """The servers' log lines that refused ``user`` something (a publish, a subscription)."""
    lines: list[str] = []
    for node in cluster.nodes:
        log = (node.directory / "nats.log").read_text(errors="replace")
        lines += [
            line for line in log.splitlines() if f'/user:{user}"' in line and "Violation" in line
        ]
    return lines
