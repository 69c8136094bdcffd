"""The connection caps on a node of two workers: each worker holds its own (its descriptors are
its own), a connection handed to the worker owning its request gives its slot back in the worker
that accepted it (none leaks, however many are handed), and a worker at its cap answers a
connection handed to it ``429``, as it answers one it accepted itself."""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from raw_http import answer, connect_from, head

from segmentstore.contracts.mapping import container_of
from segmentstore.harness.served_store import ServedStore

pytestmark = pytest.mark.integration

CONTAINERS = 4
PER_CLIENT = 4
SETTINGS = {
    "SEGMENTSTORE_CACHE__MAX_BYTES": str(64 << 20),
    "SEGMENTSTORE_API__MAX_CONNECTIONS_PER_CLIENT": str(PER_CLIENT),
    "SEGMENTSTORE_API__HEAD_TIMEOUT_MS": "20000",  # idle connections stay while a test runs
}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedStore]:
    root = tmp_path_factory.mktemp("limits")
    served = ServedStore(root / "data", root / "node.log", SETTINGS,
                         ["--containers", str(CONTAINERS)], environ={}, workers=2)  # fmt: skip
    try:
        served.wait_ready(60)
        for name in segment_of_worker().values():
            assert httpx.put(f"{served.url}/v1/segments/{name}", timeout=30).status_code == 201
        yield served
    finally:
        served.stop()


def segment_of_worker() -> dict[int, str]:
    """A segment of each worker (worker i owns the containers c with c % 2 == i)."""
    found: dict[int, str] = {}
    for i in range(100):
        found.setdefault(container_of(f"limits/{i}", CONTAINERS) % 2, f"limits/{i}")
    return found


def own_port(node: ServedStore, worker: int) -> int:
    members = httpx.get(f"{node.url}/v1/cluster", timeout=10).json()["nodes"]
    url = next(m["url"] for m in members if m["id"].endswith(f"/w{worker}"))
    return int(url.rsplit(":", 1)[1])


def per_worker(node: ServedStore, name: str, **labels: str) -> dict[str, float]:
    """worker -> a sample of the node's metrics, asked from an address of its own."""
    transport = httpx.HTTPTransport(local_address="127.0.0.4")
    with httpx.Client(transport=transport, timeout=10) as client:
        text = client.get(f"{node.url}/metrics").text
    return {
        sample.labels["worker"]: float(sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and {**sample.labels, "worker": ""} == {**labels, "worker": ""}
    }


def ask(sock: socket.socket, segment: str, headers: dict[str, str] | None = None) -> int:
    """The status of a GET of ``segment`` on ``sock`` (kept open), or of the 429 the server
    sent at once as it refused the connection."""
    if select.select([sock], [], [], 0.2)[0]:  # refused as it was accepted
        status, received = answer(sock)
        assert status == 429 and b'"code":"throttled"' in received, received[:300]
        return status
    sock.sendall(head("GET", f"/v1/segments/{segment}", headers or {}))
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(65536)
    fields, body = received.split(b"\r\n\r\n", 1)
    size = int(fields.lower().split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
    while len(body) < size:  # the whole answer, so that the connection is between requests
        body += sock.recv(65536)
    return int(received.split(b" ", 2)[1])


def hold(address: str, port: int, segment: str, count: int) -> list[int]:
    """The statuses of ``count`` connections from ``address``, all held open at once."""
    held = [connect_from(address, port) for _ in range(count)]
    try:
        return [ask(sock, segment) for sock in held]
    finally:
        for sock in held:
            sock.close()


def test_each_worker_holds_its_own_cap_and_a_handed_connection_leaks_no_slot(
    node: ServedStore,
) -> None:
    segments = segment_of_worker()
    handed_before = sum(per_worker(node, "segmentstore_worker_connections_handed_total").values())
    # Connections to the node's port from one address, each for one worker's segment or the
    # other's: whichever worker accepts one, about half of them move to the other. Which
    # worker accepts is the kernel's choice, so they go on until more were handed on than
    # the cap holds (a leaked slot each would then fill it).
    handed = handed_before
    for i in range(PER_CLIENT * 100):
        sock = connect_from("127.0.3.1", node.port or 0)
        sock.sendall(head("GET", f"/v1/segments/{segments[i % 2]}", {"Connection": "close"}))
        status, received = answer(sock)
        sock.close()
        assert status == 200, received[:300]
        if i % PER_CLIENT == PER_CLIENT - 1:
            handed = sum(per_worker(node, "segmentstore_worker_connections_handed_total").values())
            if handed - handed_before >= 2 * PER_CLIENT:
                break
    assert handed - handed_before >= 2 * PER_CLIENT, "too few were handed on to tell a leak"
    time.sleep(0.2)  # the last one's slot is given back as its worker sees it closed
    # Every slot of that address is free again in each worker, and each holds its own cap.
    for worker in (0, 1):
        statuses = hold("127.0.3.1", own_port(node, worker), segments[worker], PER_CLIENT + 1)
        assert statuses == [200] * PER_CLIENT + [429], (worker, statuses)


def test_a_worker_at_its_cap_refuses_a_connection_handed_to_it(node: ServedStore) -> None:
    segments = segment_of_worker()
    refused_before = per_worker(node, "segmentstore_http_connections_refused_total", cap="client")
    # Worker 1 holds its cap of connections from one address, idle.
    full = [connect_from("127.0.3.2", own_port(node, 1)) for _ in range(PER_CLIENT)]
    try:
        time.sleep(0.2)
        # Whichever worker accepts them, requests for worker 1's segment end in its 429 (each
        # closes its connection after its answer, so it moves with it rather than be relayed).
        for _ in range(PER_CLIENT + 2):
            sock = connect_from("127.0.3.2", node.port or 0)
            assert ask(sock, segments[1], {"Connection": "close"}) == 429
            sock.close()
        # Those worker 0 accepted and handed on gave their slots back there.
        time.sleep(0.2)
        assert hold("127.0.3.2", own_port(node, 0), segments[0], PER_CLIENT) == [200] * PER_CLIENT
    finally:
        for sock in full:
            sock.close()
    refused = per_worker(node, "segmentstore_http_connections_refused_total", cap="client")
    assert refused["w1"] - refused_before["w1"] == PER_CLIENT + 2
    assert refused["w0"] == refused_before["w0"]
