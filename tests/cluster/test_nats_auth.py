"""NATS authentication as docs/nats-auth.md sets it up: the configuration file it shows, run as
three JetStream servers on loopback (ports, paths and certificates put in, nothing else
changed), TLS for clients and routes, a cluster of segment store nodes as its user.

The nodes work with that user's permissions: none of their requests is refused while they
join, take containers, write, and read a log of several MiB back after a node dies (which
needs flow control). A client without credentials cannot connect; a user of another account
does not even see the cluster's lease bucket; and a user of the segment store's own account
without those permissions (one this test adds) cannot write to it.
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from certificates import certificates
from nats.aio.client import Client
from nats.errors import Error as NatsError
from nats.js.errors import BucketNotFoundError, KeyNotFoundError
from store_cluster import StoreCluster

from segmentstore.bench.jetstream_cluster import JetStreamCluster, JetStreamNode
from segmentstore.client import SegmentStoreClient
from segmentstore.containers.mapping import container_of

pytestmark = [pytest.mark.cluster, pytest.mark.integration]

DOC = Path(__file__).resolve().parents[2] / "docs" / "nats-auth.md"
PASSWORDS = {
    "NATS_SEGMENTSTORE_PASSWORD": "store-password",
    "NATS_APP_PASSWORD": "app-password",
    "NATS_ADMIN_PASSWORD": "admin-password",
}
BUCKET = "segmentstore-cluster"  # the lease bucket of the documented stream prefix
# A user of the segment store's account that someone gave other permissions: added here.
INTRUDER = (
    '{ user: intruder, password: intruder-password, permissions: { publish: { allow: ["app.>"] },'
    ' subscribe: { allow: ["_INBOX.>"] } } },'
)
CONTAINERS = 4
BIG_MIB = 8  # a log this long is read back with flow control (from about 2 MiB on)


def documented_config() -> str:
    """The one ``conf`` block of docs/nats-auth.md."""
    (block,) = re.findall(r"```conf\n(.*?)```", DOC.read_text(), re.DOTALL)
    return block


def _server_config(tls: tuple[Path, Path, Path], node: JetStreamNode, routes: list[int]) -> str:
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
            f"users: [\n      {INTRUDER}\n      {{\n        user: segmentstore"
        ),
    }
    for documented, here in replacements.items():
        assert documented in config, f"{DOC.name} no longer says {documented!r}: update this test"
        config = config.replace(documented, here)
    return config


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return certificates(tmp_path_factory.mktemp("nats-tls"))


def _tls_context(tls: tuple[Path, Path, Path]) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(tls[0]))


@pytest.fixture(scope="module")
def secured_nats(
    tmp_path_factory: pytest.TempPathFactory, tls: tuple[Path, Path, Path]
) -> Iterator[JetStreamCluster]:
    """The documented servers; the passwords in their environment, as the document says."""
    probe = {"user": "app", "password": PASSWORDS["NATS_APP_PASSWORD"], "tls": _tls_context(tls)}
    with pytest.MonkeyPatch.context() as environment:
        for name, value in PASSWORDS.items():
            environment.setenv(name, value)
        cluster = JetStreamCluster(
            tmp_path_factory.mktemp("nats-auth"),
            server_config=lambda node, routes: _server_config(tls, node, routes),
            client_options=probe,
        )
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()


@pytest.fixture(scope="module")
def nodes(
    tmp_path_factory: pytest.TempPathFactory,
    secured_nats: JetStreamCluster,
    tls: tuple[Path, Path, Path],
) -> Iterator[StoreCluster]:
    """Two nodes with the documented user, its password and the servers' CA."""
    root = tmp_path_factory.mktemp("nats-auth-nodes")
    settings = {
        "SEGMENTSTORE_TIER1__JETSTREAM__USER": "segmentstore",
        "SEGMENTSTORE_TIER1__JETSTREAM__PASSWORD": PASSWORDS["NATS_SEGMENTSTORE_PASSWORD"],
        "SEGMENTSTORE_TIER1__JETSTREAM__TLS_CA_FILE": str(tls[0]),
        # Everything stays in Tier 1, so that a container's recovery reads it all back.
        "SEGMENTSTORE_STORAGE_WRITER__FLUSH_INTERVAL_MS": "600000",
    }
    cluster = StoreCluster(
        root,
        secured_nats.servers,
        f"file://{root / 'tier2'}",
        prefix="segmentstore",
        containers=CONTAINERS,
        settings=settings,
    )
    try:
        cluster.start(2)
        yield cluster
    finally:
        cluster.stop()


def _violations(cluster: JetStreamCluster, user: str) -> list[str]:
    """The servers' log lines that refused ``user`` something."""
    lines: list[str] = []
    for node in cluster.nodes:
        log = (node.directory / "nats.log").read_text(errors="replace")
        lines += [
            line for line in log.splitlines() if f'/user:{user}"' in line and "Violation" in line
        ]
    return lines


def test_the_nodes_work_with_the_documented_user_and_permissions(
    nodes: StoreCluster, secured_nats: JetStreamCluster
) -> None:
    small = {f"auth/{i}": f"event {i}|".encode() * 20 for i in range(8)}
    big = "auth/log"
    chunks = [bytes([i]) * (1 << 20) for i in range(BIG_MIB)]
    with SegmentStoreClient(nodes.nodes["n1"].url) as client:
        for segment, payload in {**small, big: b""}.items():
            client.create_segment(segment)
            if payload:
                client.append(segment, payload)
        for chunk in chunks:
            client.append(big, chunk)
    with SegmentStoreClient(nodes.nodes["n2"].url) as client:  # forwarded where n1 owns
        for segment, payload in small.items():
            assert bytes(client.read(segment, 0).data) == payload

    # The owner of the big log dies: the survivor reads the whole log back from JetStream.
    container = container_of(big, CONTAINERS)
    owner = nodes.cluster_map()["containers"][container]["owner"]
    nodes.nodes[owner].sigkill()
    nodes.wait_settled(90, nodes=1)
    (survivor,) = nodes.live.values()
    with SegmentStoreClient(survivor) as client:
        read = bytearray()
        while len(read) < BIG_MIB << 20:
            data = client.read(big, len(read)).data
            assert data, f"the log ends at {len(read)} bytes"
            read += data
        assert bytes(read) == b"".join(chunks)
        for segment, payload in small.items():
            assert bytes(client.read(segment, 0).data) == payload
    assert not _violations(secured_nats, "segmentstore")


async def _connect(
    servers: list[str], tls: tuple[Path, Path, Path], **options: Any
) -> tuple[Client, list[Exception]]:
    """A connection over TLS that does not reconnect, and the errors the server reports to it
    (refused permissions among them)."""
    errors: list[Exception] = []

    async def collect(error: Exception) -> None:
        errors.append(error)

    client = await nats.connect(
        servers,
        tls=_tls_context(tls),
        allow_reconnect=False,
        connect_timeout=5,
        error_cb=collect,
        **options,
    )
    return client, errors


async def _bucket_has(servers: list[str], tls: tuple[Path, Path, Path], key: str) -> bool:
    """Whether the lease bucket holds ``key``, read with the segment store's own user."""
    member, _ = await _connect(
        servers, tls, user="segmentstore", password=PASSWORDS["NATS_SEGMENTSTORE_PASSWORD"]
    )
    try:
        bucket = await member.jetstream(timeout=5).key_value(BUCKET)
        try:
            await bucket.get(key)
        except KeyNotFoundError:
            return False
        return True
    finally:
        await member.close()


@pytest.mark.parametrize(
    "credentials",
    [{}, {"user": "segmentstore", "password": "guessed"}],
    ids=["none", "a wrong password"],
)
async def test_a_client_without_credentials_cannot_connect(
    secured_nats: JetStreamCluster,
    tls: tuple[Path, Path, Path],
    credentials: dict[str, str],
) -> None:
    with pytest.raises(NatsError, match="Authorization Violation"):
        await _connect(secured_nats.servers, tls, **credentials)
    # And without the servers' CA, no TLS session even starts.
    with pytest.raises(ssl.SSLCertVerificationError):
        await nats.connect(
            secured_nats.servers, tls=ssl.create_default_context(), allow_reconnect=False
        )


async def test_a_user_of_another_account_does_not_see_the_bucket(
    nodes: StoreCluster, secured_nats: JetStreamCluster, tls: tuple[Path, Path, Path]
) -> None:
    servers = secured_nats.servers
    assert await _bucket_has(servers, tls, "node.n1") or await _bucket_has(servers, tls, "node.n2")
    app, _ = await _connect(servers, tls, user="app", password=PASSWORDS["NATS_APP_PASSWORD"])
    try:
        with pytest.raises(BucketNotFoundError):
            await app.jetstream(timeout=5).key_value(BUCKET)
        # The bucket's subject, in its own account: it reaches nothing of the segment store.
        await app.publish(f"$KV.{BUCKET}.node.rogue", b'{"url": "http://127.0.0.1:1"}')
        await app.flush()
    finally:
        await app.close()
    assert not await _bucket_has(servers, tls, "node.rogue")


async def test_a_user_without_the_permissions_cannot_write_to_the_bucket(
    nodes: StoreCluster, secured_nats: JetStreamCluster, tls: tuple[Path, Path, Path]
) -> None:
    servers = secured_nats.servers
    intruder, errors = await _connect(servers, tls, user="intruder", password="intruder-password")
    try:
        await intruder.publish(f"$KV.{BUCKET}.node.intruder", b'{"url": "http://127.0.0.1:1"}')
        await intruder.flush()
        with pytest.raises((TimeoutError, NatsError)):  # JetStream's API is refused too
            await intruder.jetstream(timeout=2).key_value(BUCKET)
        await asyncio.sleep(0.5)  # the server's refusals arrive asynchronously
        refused = " ".join(str(error) for error in errors).lower()  # nats-py lowers it
        assert f'permissions violation for publish to "$kv.{BUCKET}.node.intruder"' in refused
    finally:
        await intruder.close()
    assert not await _bucket_has(servers, tls, "node.intruder")
    assert _violations(secured_nats, "intruder")
