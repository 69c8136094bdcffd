"""The README's cluster example sets up NATS with one user and a password: its servers, run from
the configuration the README writes (only the ports and the store directory changed), admit no
client without that password, so nothing but the nodes can write to the cluster's buckets.

(tests/test_docs.py runs the whole example as written: the nodes work with that user.)
"""

from __future__ import annotations

import json
import re
import secrets
import socket
from collections.abc import Iterator

import nats
import pytest
from doc_blocks import REPO, blocks

from segmentstore.harness.jetstream_cluster import JetStreamCluster, JetStreamNode

pytestmark = [pytest.mark.cluster, pytest.mark.integration]

USER = "segmentstore"
PASSWORD = "pw" + secrets.token_hex(16)  # as the README makes one
BUCKET = "segmentstore-cluster"  # the lease bucket of the default stream prefix


def readme_config_template() -> str:
    """The ``n$i.conf`` the README's cluster example writes, before the shell expands it."""
    (example,) = [b for b in blocks(REPO / "README.md") if "--cluster" in b.text]
    (template,) = re.findall(r"cat > n\$i\.conf <<EOF\n(.*?\n)EOF\n", example.text, re.DOTALL)
    return template


def readme_config(node: JetStreamNode, route_ports: list[int]) -> str:
    """What the shell writes for ``node`` (``$i`` expanded, ``\\$`` kept as ``$``), on this
    cluster's free ports, its store in the node's directory."""
    index = node.name.removeprefix("n")
    config = readme_config_template().replace("$i", index).replace("\\$", "$")
    config = config.replace(f"127.0.0.1:422{index}", f"127.0.0.1:{node.client_port}")
    for number, port in enumerate(route_ports, start=1):
        config = config.replace(f"127.0.0.1:622{number}", f"127.0.0.1:{port}")
    config = config.replace(f'"./js/n{index}"', f'"{node.directory / "js"}"')
    assert not re.search(r"127\.0\.0\.1:[46]22[1-3]\b", config), config  # every port replaced
    return config


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JetStreamCluster]:
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv("NATS_PASSWORD", PASSWORD)  # the servers inherit it, as in the README
        cluster = JetStreamCluster(
            tmp_path_factory.mktemp("readme-nats"),
            server_config=readme_config,
            client_options={"user": USER, "password": PASSWORD},
        )
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()


def test_the_readme_writes_the_password_as_a_reference_to_the_environment() -> None:
    template = readme_config_template()
    assert "password: \\$NATS_PASSWORD" in template  # the files hold no password
    assert "authorization" in template


def nats_answer(server: str, credentials: dict[str, str]) -> str:
    """What a NATS server answers a client that connects with ``credentials`` and pings: the
    protocol spoken by hand (nats-py leaves a refused connection's socket open)."""
    host, port = server.removeprefix("nats://").split(":")
    options = {"verbose": False, "pedantic": False, "protocol": 1, **credentials}
    with socket.create_connection((host, int(port)), timeout=5) as connection:
        reader = connection.makefile("rb")
        assert reader.readline().startswith(b"INFO ")
        connection.sendall(b"CONNECT " + json.dumps(options).encode() + b"\r\nPING\r\n")
        return reader.readline().decode().strip()


@pytest.mark.parametrize(
    "credentials",
    [{}, {"user": USER, "pass": "guessed"}, {"user": "someone", "pass": PASSWORD}],
    ids=["none", "a wrong password", "another user"],
)
def test_a_client_without_the_password_is_refused(
    servers: JetStreamCluster, credentials: dict[str, str]
) -> None:
    for server in servers.servers:
        assert nats_answer(server, credentials) == "-ERR 'Authorization Violation'"
    # The same conversation with the password gets the server's PONG.
    assert nats_answer(servers.servers[0], {"user": USER, "pass": PASSWORD}) == "PONG"


async def test_the_readme_s_user_writes_to_the_cluster_s_bucket(servers: JetStreamCluster) -> None:
    """The other side of the refusals above: with the password, the same servers take the
    writes the nodes make."""
    client = await nats.connect(servers.servers, user=USER, password=PASSWORD)
    try:
        bucket = await client.jetstream(timeout=10).create_key_value(bucket=BUCKET, replicas=3)
        await bucket.put("node.n1", b'{"url": "http://127.0.0.1:9091"}')
        assert (await bucket.get("node.n1")).value == b'{"url": "http://127.0.0.1:9091"}'
    finally:
        await client.close()
