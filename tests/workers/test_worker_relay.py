"""Requests relayed to the worker that owns their container, on a real node of two workers:
where a relayed request ends (never part of the next one), what reaches the owner and the
client byte for byte (a body over several reads, an answer over several), a client gone
mid-body (nothing applied), an owner killed mid-request (``503`` with ``Retry-After``, never a
hang), a connection that keeps asking the sibling (it moves there), and a process that is not
a worker of the node (refused)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from raw_http import head

from segmentstore.api.http_protocol import MOVE_AFTER
from segmentstore.api.worker_relay import MAX_RELAYED_BYTES, request_extent
from segmentstore.contracts.mapping import container_of
from segmentstore.harness.served_store import ServedStore

pytestmark = pytest.mark.integration

CONTAINERS = 4
SETTINGS = {"SEGMENTSTORE_CACHE__MAX_BYTES": str(64 << 20)}

# -- where a request ends ---------------------------------------------------------------------


def test_a_request_ends_where_its_content_length_says() -> None:
    body = b"x" * 10
    whole = b"POST /v1/segments/a:append HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n"
    assert request_extent(whole + body) == len(whole) + 10
    assert request_extent(whole) == len(whole) + 10  # the body is still to come
    bare = b"GET /v1/segments/a HTTP/1.1\r\nHost: h\r\n\r\n"
    assert request_extent(bare) == len(bare)
    kept = b"GET /v1/segments/a HTTP/1.1\r\nConnection: Keep-Alive\r\n\r\n"
    assert request_extent(kept) == len(kept)


@pytest.mark.parametrize(
    "request_",
    [
        b"POST /v1/segments/a:append HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST /v1/segments/a:append HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
        b"POST /v1/segments/a:append HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        b"POST /v1/segments/a:append HTTP/1.1\r\nContent-Length: 1 1\r\n\r\n",
        b"POST /v1/segments/a:append HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
        b"GET /v1/segments/a HTTP/1.1\r\nUpgrade: h2c\r\n\r\n",
        b"GET /v1/segments/a HTTP/1.1\r\nConnection: close\r\n\r\n",
        b"GET /v1/segments/a HTTP/1.0\r\n\r\n",
        b"HEAD /v1/segments/a HTTP/1.1\r\n\r\n",
        b"GET /v1/segments/a HTTP/1.1\r\nHost: h\r\n",  # the head is not whole yet
    ],
)
def test_a_request_whose_end_is_not_plain_is_never_relayed(request_: bytes) -> None:
    assert request_extent(request_) is None


@given(st.binary(max_size=400))
def test_no_read_makes_it_raise(data: bytes) -> None:
    extent = request_extent(b"POST /v1/segments/a HTTP/1.1\r\n" + data)
    assert extent is None or extent >= data.find(b"\r\n\r\n")


# -- on a node of two workers -----------------------------------------------------------------


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedStore]:
    root = tmp_path_factory.mktemp("relay")
    served = ServedStore(root / "data", root / "node.log", SETTINGS,
                         ["--containers", str(CONTAINERS)], environ={}, workers=2)  # fmt: skip
    try:
        served.wait_ready(60)
        yield served
    finally:
        served.stop()


_made: set[str] = set()


def segment_of(node: ServedStore, worker: int, tag: str) -> str:
    """A new segment of worker ``worker`` (which owns the containers c with c % 2 == it)."""
    name = next(
        n
        for n in (f"relay/{tag}-{i}" for i in range(1000))
        if container_of(n, CONTAINERS) % 2 == worker and n not in _made
    )
    _made.add(name)
    assert httpx.put(f"{node.url}/v1/segments/{name}", timeout=30).status_code == 201
    return name


def own_port(node: ServedStore, worker: int) -> int:
    members = httpx.get(f"{node.url}/v1/cluster", timeout=10).json()["nodes"]
    url = next(m["url"] for m in members if m["id"].endswith(f"/w{worker}"))
    return int(url.rsplit(":", 1)[1])


def counter(node: ServedStore, name: str, worker: str) -> float:
    text = httpx.get(f"{node.url}/metrics", timeout=10).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and sample.labels.get("worker") == worker
    )


def content(node: ServedStore, name: str) -> bytes:
    r = httpx.get(f"{node.url}/v1/segments/{name}:read", params={"offset": 0}, timeout=30)
    assert r.status_code == 200, r.text
    return r.content


def append_request(name: str, body: bytes) -> bytes:
    return head("POST", f"/v1/segments/{name}:append", {"Content-Length": str(len(body))}) + body


def read_answer(sock: socket.socket) -> tuple[int, dict[bytes, bytes], bytes]:
    """One whole answer on a kept-alive connection: status, headers, body."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed before an answer: {received!r}"
        received += chunk
    fields, body = received.split(b"\r\n\r\n", 1)
    lines = fields.split(b"\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(b":") for h in lines[1:])}
    size = int(headers[b"content-length"])
    while len(body) < size:
        chunk = sock.recv(65536)
        assert chunk, "the connection closed mid-answer"
        body += chunk
    assert len(body) == size, "more than one answer arrived"
    return int(lines[0].split(b" ", 2)[1]), headers, body


def test_requests_for_both_workers_on_one_connection_reach_their_owners(
    node: ServedStore,
) -> None:
    mine, theirs = segment_of(node, 0, "mine"), segment_of(node, 1, "theirs")
    relayed = counter(node, "segmentstore_worker_relayed_requests_total", "w0")
    sent: dict[str, bytearray] = {mine: bytearray(), theirs: bytearray()}
    with socket.create_connection(("127.0.0.1", own_port(node, 0)), timeout=30) as sock:
        for i in range(40):  # alternating: never MOVE_AFTER in a row for the sibling
            name = theirs if i % 2 else mine
            body = os.urandom(100 + i)
            sock.sendall(append_request(name, body))
            status, _, answer = read_answer(sock)
            assert status == 200, answer
            assert int(answer.split(b'"offset":', 1)[1].split(b",", 1)[0]) == len(sent[name])
            sent[name] += body
        # A request that asks for something odd is answered by the owner, as the owner would.
        sock.sendall(head("GET", f"/v1/segments/{theirs}:read?offset=999999", {}))
        status, _, answer = read_answer(sock)
        assert status == 416 and b'"code":"offset_beyond_end"' in answer, answer
    assert counter(node, "segmentstore_worker_relayed_requests_total", "w0") - relayed == 21
    assert content(node, mine) == sent[mine] and content(node, theirs) == sent[theirs]


def test_a_body_over_many_reads_and_an_answer_over_many_arrive_whole(node: ServedStore) -> None:
    theirs = segment_of(node, 1, "large")
    body = os.urandom(MAX_RELAYED_BYTES - 1024)  # relayed, in several pieces
    with socket.create_connection(("127.0.0.1", own_port(node, 0)), timeout=30) as sock:
        request = append_request(theirs, body)
        for start in range(0, len(request), 7000):
            sock.sendall(request[start : start + 7000])
            time.sleep(0.002)
        status, _, answer = read_answer(sock)
        assert status == 200, answer
        # Whole before: a body larger than the relay takes moves the connection instead.
        for _ in range(4):
            sock.sendall(head("GET", f"/v1/segments/{theirs}", {}))
            assert read_answer(sock)[0] == 200
        sock.sendall(head("GET", f"/v1/segments/{theirs}:read?offset=0", {}))
        status, _, answer = read_answer(sock)
        assert status == 200 and answer == body
    assert content(node, theirs) == body


def test_a_client_gone_mid_body_applies_nothing(node: ServedStore) -> None:
    theirs = segment_of(node, 1, "cut")
    relayed = counter(node, "segmentstore_worker_relayed_requests_total", "w0")
    with socket.create_connection(("127.0.0.1", own_port(node, 0)), timeout=30) as sock:
        sock.sendall(head("POST", f"/v1/segments/{theirs}:append", {"Content-Length": "1000"}))
        sock.sendall(b"y" * 300)
        time.sleep(0.3)
    assert counter(node, "segmentstore_worker_relayed_requests_total", "w0") == relayed + 1
    time.sleep(0.5)
    info = httpx.get(f"{node.url}/v1/segments/{theirs}", timeout=10).json()
    assert info["length"] == 0, info
    # The worker relays on as before.
    with socket.create_connection(("127.0.0.1", own_port(node, 0)), timeout=30) as sock:
        sock.sendall(append_request(theirs, b"after"))
        assert read_answer(sock)[0] == 200
    assert content(node, theirs) == b"after"


def test_a_connection_that_keeps_asking_the_sibling_moves_there(node: ServedStore) -> None:
    theirs = segment_of(node, 1, "sticky")
    relayed = counter(node, "segmentstore_worker_relayed_requests_total", "w0")
    handed = counter(node, "segmentstore_worker_connections_handed_total", "w0")
    with socket.create_connection(("127.0.0.1", own_port(node, 0)), timeout=30) as sock:
        for _ in range(MOVE_AFTER + 5):
            sock.sendall(head("GET", f"/v1/segments/{theirs}", {}))
            assert read_answer(sock)[0] == 200
    assert counter(node, "segmentstore_worker_relayed_requests_total", "w0") - relayed == (
        MOVE_AFTER - 1
    )
    assert counter(node, "segmentstore_worker_connections_handed_total", "w0") - handed == 1


def relay_address(pid: int) -> bytes:
    """The relay address process ``pid`` listens on, as the kernel lists it (abstract: no
    file to find it by)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            inodes.update(re.findall(r"socket:\[(\d+)\]", os.readlink(f"/proc/{pid}/fd/{fd}")))
    found = {
        fields[7][1:]
        for fields in (line.split() for line in Path("/proc/net/unix").read_text().splitlines())
        if len(fields) == 8 and fields[6] in inodes and fields[7].endswith("/relay")
    }
    assert len(found) == 1, found
    return b"\0" + found.pop().encode()


def test_a_process_that_is_not_the_nodes_cannot_relay(node: ServedStore) -> None:
    theirs = segment_of(node, 1, "stranger")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stranger:
        stranger.settimeout(10)
        stranger.connect(relay_address(worker_pid(node, "w1")))
        try:
            stranger.sendall(append_request(theirs, b"from outside"))
            assert stranger.recv(65536) == b""  # closed, unanswered
        except (ConnectionResetError, BrokenPipeError):
            pass  # closed before the request was all sent
    assert httpx.get(f"{node.url}/v1/segments/{theirs}", timeout=10).json()["length"] == 0
    deadline = time.monotonic() + 10  # the worker's line reaches the log through its parent
    while "refused a relay connection from a process that is not this node's" not in node.log():
        assert time.monotonic() < deadline, node.log()
        time.sleep(0.1)


def worker_pid(node: ServedStore, worker: str) -> int:
    return int(re.findall(rf"worker {worker} started \(pid (\d+)\)", node.log_path.read_text())[-1])


def test_an_owner_killed_mid_request_is_answered_503_not_a_hang(node: ServedStore) -> None:
    theirs = segment_of(node, 1, "killed")
    failed = counter(node, "segmentstore_worker_relay_failures_total", "w0")
    with socket.create_connection(("127.0.0.1", own_port(node, 0)), timeout=30) as sock:
        sock.sendall(head("POST", f"/v1/segments/{theirs}:append", {"Content-Length": "100"}))
        sock.sendall(b"z" * 10)  # the owner waits for the rest
        time.sleep(0.3)
        os.kill(worker_pid(node, "w1"), signal.SIGKILL)
        begun = time.monotonic()
        status, headers, answer = read_answer(sock)
        assert time.monotonic() - begun < 5
        assert status == 503 and b'"code":"container_unavailable"' in answer, answer
        assert int(headers[b"retry-after"]) >= 1
        assert sock.recv(65536) == b""  # and closed: the rest of its body cannot follow
    assert counter(node, "segmentstore_worker_relay_failures_total", "w0") == failed + 1
    deadline = time.monotonic() + 30
    while httpx.get(f"{node.url}/readyz", timeout=10).status_code != 200:
        assert time.monotonic() < deadline, node.log()
        time.sleep(0.1)
    # The worker started again takes relayed requests as before; nothing of the cut one is in.
    with socket.create_connection(("127.0.0.1", own_port(node, 0)), timeout=30) as sock:
        sock.sendall(append_request(theirs, b"again"))
        assert read_answer(sock)[0] == 200
    assert content(node, theirs) == b"again"


def test_a_head_request_for_the_siblings_segment_is_answered_and_the_connection_goes_on(
    node: ServedStore,
) -> None:
    theirs = segment_of(node, 1, "head")
    with socket.create_connection(("127.0.0.1", own_port(node, 0)), timeout=10) as sock:
        sock.sendall(head("HEAD", f"/v1/segments/{theirs}", {}))
        received = b""
        while b"\r\n\r\n" not in received:
            received += sock.recv(65536)
        # Answered as the owner answers HEAD (a head alone, whatever its Content-Length).
        assert received.startswith(b"HTTP/1.1 ") and received.endswith(b"\r\n\r\n"), received
        sock.sendall(head("GET", f"/v1/segments/{theirs}", {}))
        status, _, answer = read_answer(sock)
        assert status == 200 and b'"length":0' in answer, answer
