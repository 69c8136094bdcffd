"""NATS authentication as docs/nats-auth.md sets it up (:mod:`secured_nats`: its configuration
file run as three JetStream servers on loopback, TLS for clients and routes), with a cluster of
segment store nodes as its user.

The nodes work with that user's permissions: the servers refuse them nothing while they join,
take containers, write, and read a log of several MiB back after a node dies (which needs flow
control). A client without credentials cannot connect; a user of another account does not even
see the cluster's lease bucket; and a user of the segment store's own account without those
permissions (one this test adds) cannot write to it.
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
import yaml
from nats.aio.client import Client
from nats.errors import Error as NatsError
from nats.js.errors import BucketNotFoundError, KeyNotFoundError
from secured_nats import (
    DOC,
    PASSWORDS,
    STORE_PASSWORD,
    STORE_USER,
    documented_config,
    node_settings,
    running,
    tls_context,
    violations,
)
from store_cluster import StoreCluster

from segmentstore.client import SegmentStoreClient
from segmentstore.contracts.mapping import container_of
from segmentstore.harness.jetstream_cluster import JetStreamCluster

pytestmark = [pytest.mark.cluster, pytest.mark.integration]

BUCKET = "segmentstore-cluster"  # the lease bucket of the documented stream prefix
# A user of the segment store's account that someone gave other permissions.
INTRUDER = (
    '{ user: intruder, password: intruder-password, permissions: { publish: { allow: ["app.>"] },'
    ' subscribe: { allow: ["_INBOX.>"] } } },'
)
CONTAINERS = 4
BIG_MIB = 8  # a log this long is read back with flow control (from about 2 MiB on)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JetStreamCluster, Path]]:
    """The documented servers, and the CA file that signed their certificate."""
    with running(tmp_path_factory.mktemp("nats-auth"), extra_users=INTRUDER) as servers:
        yield servers


@pytest.fixture(scope="module")
def nodes(
    tmp_path_factory: pytest.TempPathFactory, secured: tuple[JetStreamCluster, Path]
) -> Iterator[StoreCluster]:
    """Two nodes with the documented user, its password and the servers' CA."""
    servers, ca_file = secured
    root = tmp_path_factory.mktemp("nats-auth-nodes")
    settings = {
        **node_settings(ca_file),
        # Everything stays in Tier 1, so that a container's recovery reads it all back.
        "SEGMENTSTORE_STORAGE_WRITER__FLUSH_INTERVAL_MS": "600000",
    }
    cluster = StoreCluster(
        root,
        servers.servers,
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


def test_the_nodes_work_with_the_documented_user_and_permissions(
    nodes: StoreCluster, secured: tuple[JetStreamCluster, Path]
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
    assert not violations(secured[0], STORE_USER)


async def _connect(
    secured: tuple[JetStreamCluster, Path], **options: Any
) -> tuple[Client, list[Exception]]:
    """A connection over TLS that does not reconnect, and the errors the server reports to it
    (refused permissions among them)."""
    errors: list[Exception] = []

    async def collect(error: Exception) -> None:
        errors.append(error)

    servers, ca_file = secured
    client = await nats.connect(
        servers.servers,
        tls=tls_context(ca_file),
        allow_reconnect=False,
        connect_timeout=5,
        error_cb=collect,
        **options,
    )
    return client, errors


async def _bucket_has(secured: tuple[JetStreamCluster, Path], key: str) -> bool:
    """Whether the lease bucket holds ``key``, read with the segment store's own user."""
    member, _ = await _connect(secured, user=STORE_USER, password=STORE_PASSWORD)
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
    [{}, {"user": STORE_USER, "password": "guessed"}],
    ids=["none", "a wrong password"],
)
async def test_a_client_without_credentials_cannot_connect(
    secured: tuple[JetStreamCluster, Path], credentials: dict[str, str]
) -> None:
    with pytest.raises(NatsError, match="Authorization Violation"):
        await _connect(secured, **credentials)
    # And without the servers' CA, no TLS session even starts.
    with pytest.raises(ssl.SSLCertVerificationError):
        await nats.connect(
            secured[0].servers, tls=ssl.create_default_context(), allow_reconnect=False
        )


async def test_a_user_of_another_account_does_not_see_the_bucket(
    nodes: StoreCluster, secured: tuple[JetStreamCluster, Path]
) -> None:
    assert await _bucket_has(secured, "node.n1") or await _bucket_has(secured, "node.n2")
    app, _ = await _connect(secured, user="app", password=PASSWORDS["NATS_APP_PASSWORD"])
    try:
        with pytest.raises(BucketNotFoundError):
            await app.jetstream(timeout=5).key_value(BUCKET)
        # The bucket's subject, in its own account: it reaches nothing of the segment store.
        await app.publish(f"$KV.{BUCKET}.node.rogue", b'{"url": "http://127.0.0.1:1"}')
        await app.flush()
    finally:
        await app.close()
    assert not await _bucket_has(secured, "node.rogue")


async def test_a_user_without_the_permissions_cannot_write_to_the_bucket(
    nodes: StoreCluster, secured: tuple[JetStreamCluster, Path]
) -> None:
    intruder, errors = await _connect(secured, user="intruder", password="intruder-password")
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
    assert not await _bucket_has(secured, "node.intruder")
    assert violations(secured[0], "intruder")


def test_the_chart_s_readme_gives_the_nats_chart_the_same_permissions() -> None:
    """The NATS chart's values in helm/segmentstore/README.md (which the NATS chart renders
    into JSON of the same configuration) allow the segment store's user what the servers of
    docs/nats-auth.md allow it."""
    allowed: dict[str, list[str]] = {}
    for kind in ("publish", "subscribe"):
        found = re.search(kind + r": \{\s*allow: \[(.*?)\]", documented_config(), re.DOTALL)
        assert found, f"{DOC.name} has no {kind} permissions"
        allowed[kind] = re.findall(r'"([^"]+)"', found[1])
    readme = DOC.parents[1] / "helm" / "segmentstore" / "README.md"
    (values,) = [
        yaml.safe_load(block)
        for block in re.findall(r"```yaml\n(.*?)```", readme.read_text(), re.DOTALL)
        if "accounts:" in block
    ]
    (user,) = values["config"]["merge"]["accounts"]["SEGMENTSTORE"]["users"]
    assert user["user"] == STORE_USER
    assert {kind: rules["allow"] for kind, rules in user["permissions"].items()} == allowed
    assert allowed["subscribe"] == ["_INBOX.>"] and "$JS.FC.>" in allowed["publish"]
