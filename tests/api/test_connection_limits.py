"""Limits that hold whatever the packets, on a real ``segmentstore serve`` process: a head one
byte over the limit is refused however it arrives, a head must arrive within its time however
slowly it trickles in, and thousands of idle connections from one address are capped while
another client is served, the node's descriptors staying within its budget."""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from raw_http import answer, head

from segmentstore.harness.served_store import REPO, ServedStore, child_environment

pytestmark = [pytest.mark.integration]

HEAD_LIMIT = 64 * 1024
HEAD_TIMEOUT_S = 3.0
PER_CLIENT = 2_000
IDLE = 5_000
NODE_CAP = 2_500
CROWD_HEAD_TIMEOUT_S = 20.0
DESCRIPTORS = 1024  # the descriptor limit of the node started with few of them
RESERVE = 256  # what such a node keeps of them for its own files and connections


def served(root: Path, head_timeout_s: float) -> Iterator[ServedStore]:
    """A node with the caps above whose heads must arrive within ``head_timeout_s``."""
    settings = {
        "SEGMENTSTORE_API__HEAD_TIMEOUT_MS": str(int(head_timeout_s * 1000)),
        "SEGMENTSTORE_API__MAX_CONNECTIONS": str(NODE_CAP),
        "SEGMENTSTORE_API__MAX_CONNECTIONS_PER_CLIENT": str(PER_CLIENT),
    }
    yield from with_a_segment(
        ServedStore(root / "data", root / "serve.log", settings, environ=os.environ)
    )


def with_a_segment(store: ServedStore) -> Iterator[ServedStore]:
    """``store`` once ready, with a segment to append to; stopped afterwards."""
    try:
        store.wait_ready(60)
        assert httpx.put(f"{store.url}/v1/segments/limits/0", timeout=30).status_code == 201
        yield store
    finally:
        store.stop()


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedStore]:
    """A node whose heads must arrive within 3 s."""
    yield from served(tmp_path_factory.mktemp("limits"), HEAD_TIMEOUT_S)


@pytest.fixture
def crowded(tmp_path: Path) -> Iterator[ServedStore]:
    """A node that gives a head 20 s: long enough for a test to open its thousands of
    connections before the first are closed."""
    yield from served(tmp_path, CROWD_HEAD_TIMEOUT_S)


@pytest.fixture
def few_descriptors(tmp_path: Path) -> Iterator[ServedStore]:
    """A node that may open only 1,024 descriptors, with the default cap on connections
    (10,000, which it could never hold) and room for 300 per address."""
    settings = {
        "SEGMENTSTORE_API__HEAD_TIMEOUT_MS": str(int(CROWD_HEAD_TIMEOUT_S * 1000)),
        "SEGMENTSTORE_API__MAX_CONNECTIONS_PER_CLIENT": "300",
    }
    serve = [sys.executable, "-m", "segmentstore.cli", "serve", "--data-dir", str(tmp_path)]
    serve += ["--host", "127.0.0.1", "--port", "0"]
    command = ["sh", "-c", f'ulimit -n {DESCRIPTORS} && exec "$0" "$@"', *serve]
    env = child_environment(os.environ, settings)
    yield from with_a_segment(ServedStore.launch(command, env, REPO, tmp_path / "serve.log"))


def connect_from(address: str, port: int) -> socket.socket:
    sock = socket.socket()
    sock.bind((address, 0))
    sock.settimeout(30)
    sock.connect(("127.0.0.1", port))
    return sock


def a_head_of(size: int) -> bytes:
    """A request head of exactly ``size`` bytes: an append with a filler header."""
    fields = {"Content-Length": "1", "Connection": "close", "X-Filler": ""}
    base = head("POST", "/v1/segments/limits/0:append", fields)
    filler = size - len(base)
    assert filler > 0
    return base.replace(b"X-Filler: ", b"X-Filler: " + b"f" * filler)


def metric(node: ServedStore, name: str, **labels: str) -> float:
    """A sample of the node's metrics, asked from an address of its own (127.0.0.4), never
    the one the tests fill up."""
    transport = httpx.HTTPTransport(local_address="127.0.0.4")
    with httpx.Client(transport=transport, timeout=10) as client:
        text = client.get(f"{node.url}/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    raise AssertionError(f"no {name}{labels}")


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def length(node: ServedStore) -> int:
    return int(httpx.get(f"{node.url}/v1/segments/limits/0", timeout=30).json()["length"])


@pytest.mark.parametrize("size", [HEAD_LIMIT, HEAD_LIMIT + 1, 70_000, 100_000])
def test_a_head_in_one_write_is_held_to_the_limit(node: ServedStore, size: int) -> None:
    before = length(node)
    sock = connect_from("127.0.0.1", node.port or 0)
    sock.sendall(a_head_of(size) + b"x")  # one write: the whole head and its body
    status, received = answer(sock)
    sock.close()
    if size <= HEAD_LIMIT:
        assert status == 200, received[:300]
        assert length(node) == before + 1
    else:
        assert status == 431, received[:300]
        assert b'"code":"request_header_too_large","message"' in received
        assert length(node) == before


def test_a_head_that_trickles_in_is_cut_off_at_its_time(node: ServedStore) -> None:
    """One byte every half second keeps the stall clock (30 s) from ever running out; the
    head's own deadline does not care."""
    sock = connect_from("127.0.0.1", node.port or 0)
    started = time.monotonic()
    request = a_head_of(2000)
    status, received = 0, b""
    for byte in request:
        try:
            sock.send(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            break
        time.sleep(0.5)
        if time.monotonic() - started > HEAD_TIMEOUT_S + 10:
            break
    status, received = answer(sock)
    waited = time.monotonic() - started
    sock.close()
    assert status == 408, received[:300]
    assert b"did not arrive whole within 3000 ms" in received
    assert HEAD_TIMEOUT_S * 0.9 <= waited < HEAD_TIMEOUT_S + 5
    # A connection that sends nothing at all is closed as well.
    silent = connect_from("127.0.0.1", node.port or 0)
    quiet_started = time.monotonic()
    assert silent.recv(1) == b""
    assert time.monotonic() - quiet_started < HEAD_TIMEOUT_S + 5
    silent.close()


def test_thousands_of_idle_connections_are_capped_while_others_are_served(
    crowded: ServedStore,
) -> None:
    node = crowded
    pid, port = node.proc.pid, node.port or 0
    baseline = descriptors(pid)
    refused_before = metric(node, "segmentstore_http_connections_refused_total", cap="client")
    held: list[socket.socket] = []
    try:
        started = time.monotonic()
        for _ in range(IDLE):  # one address, sending nothing
            held.append(connect_from("127.0.0.1", port))
        assert time.monotonic() - started < CROWD_HEAD_TIMEOUT_S / 2, "too slow to open them"
        time.sleep(1)  # the answers to those refused are on their way
        refused = [s for s in held if _refused(s)]
        open_now = metric(node, "segmentstore_http_connections_open")
        peak = descriptors(pid)
        # Another client (another address) is served meanwhile, on fresh connections.
        transport = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(base_url=node.url, transport=transport, timeout=30) as other:
            for i in range(20):
                appended = other.post("/v1/segments/limits/0:append", content=b"%d" % i)
                assert appended.status_code == 200, appended.text
                assert other.get("/v1/segments/limits/0").status_code == 200
        # The connections past the address's cap were answered 429 and closed at once.
        refused_after = metric(node, "segmentstore_http_connections_refused_total", cap="client")
        print(
            f"{IDLE} idle connections from one address: {len(refused)} refused (429), node's"
            f" descriptors {baseline} before, {peak} at the peak (cap {PER_CLIENT} per"
            f" address, {NODE_CAP} in all), {open_now:.0f} connections open"
        )
        assert len(refused) == IDLE - PER_CLIENT
        assert refused_after - refused_before == IDLE - PER_CLIENT
        assert open_now <= PER_CLIENT + 2  # (and the metrics request itself)
        assert peak <= baseline + PER_CLIENT + 50
        # The idle ones that were kept go within the head's time, and the descriptors with them.
        deadline = started + CROWD_HEAD_TIMEOUT_S + 15
        while descriptors(pid) > baseline + 20:
            assert time.monotonic() < deadline, descriptors(pid)
            time.sleep(0.2)
    finally:
        for sock in held:
            sock.close()


def test_past_the_nodes_cap_every_address_is_refused(node: ServedStore) -> None:
    port = node.port or 0
    before = metric(node, "segmentstore_http_connections_refused_total", cap="node")
    held: list[socket.socket] = []
    try:
        for i in range(NODE_CAP + 100):  # spread over addresses, under each one's cap
            held.append(connect_from(f"127.0.1.{i % 200 + 1}", port))
        time.sleep(1)
        refused = [s for s in held if _refused(s)]
    finally:
        for sock in held:
            sock.close()
    assert len(refused) == 100
    # (asked once the node has room again: while it is full, the metrics are refused too)
    deadline = time.monotonic() + 10
    while True:
        try:
            counted = metric(node, "segmentstore_http_connections_refused_total", cap="node")
            break
        except ValueError:  # a 429 answer, not the metrics: the slots are being given back
            assert time.monotonic() < deadline
            time.sleep(0.2)
    assert counted - before == 100
    assert metric(node, "segmentstore_http_connections_limit") == NODE_CAP


def test_the_nodes_cap_is_lowered_to_what_its_descriptors_allow(
    few_descriptors: ServedStore,
) -> None:
    """5,000 idle connections from 20 addresses, each under its own cap, against a node whose
    descriptor limit is far below its cap on connections: it keeps as many as its descriptors
    allow after its reserve, refuses the rest, never runs out of descriptors, and once a few
    slots are free again answers requests that need files of its own."""
    node = few_descriptors
    pid, port = node.proc.pid, node.port or 0
    with open(f"/proc/{pid}/limits") as limits:
        assert f"Max open files            {DESCRIPTORS}" in limits.read()
    budget = DESCRIPTORS - RESERVE
    assert metric(node, "segmentstore_http_connections_limit") == budget
    baseline = descriptors(pid)
    held: list[socket.socket] = []
    try:
        for i in range(IDLE):
            held.append(connect_from(f"127.0.2.{i % 20 + 1}", port))
        time.sleep(1)
        refused = {s for s in held if _refused(s)}
        peak = descriptors(pid)
        print(
            f"{IDLE} idle connections from 20 addresses, descriptor limit {DESCRIPTORS}:"
            f" {IDLE - len(refused)} kept (cap lowered to {budget}), {len(refused)} refused;"
            f" node's descriptors {baseline} before, {peak} at the peak"
        )
        assert IDLE - len(refused) == budget
        assert peak <= baseline + budget + 10
        assert peak < DESCRIPTORS - RESERVE // 2
        for sock in [s for s in held if s not in refused][:5]:  # a few slots free again
            sock.close()
        time.sleep(0.5)
        with httpx.Client(base_url=node.url, timeout=30) as other:
            for i in range(20):
                name = f"limits/new/{i}"  # each a segment the node has not opened yet
                assert other.put(f"/v1/segments/{name}").status_code == 201
                appended = other.post(f"/v1/segments/{name}:append", content=b"%d" % i)
                assert appended.status_code == 200, appended.text
    finally:
        for sock in held:
            sock.close()
    assert metric(node, "segmentstore_http_connections_refused_total", cap="node") >= len(refused)
    assert "Too many open files" not in node.log()


def _refused(sock: socket.socket) -> bool:
    """Whether the server answered ``sock`` 429 (and closed it) without being asked anything;
    False for one kept open, waiting for a request."""
    sock.settimeout(None)  # else Python waits for the socket's timeout before it asks
    try:
        data = sock.recv(4096, socket.MSG_DONTWAIT)  # an answer is there at once, or never
    except BlockingIOError:
        return False
    assert data.startswith(b"HTTP/1.1 429 "), data[:200]
    assert b"retry-after: 1\r\n" in data and b'"code":"throttled"' in data
    return True
