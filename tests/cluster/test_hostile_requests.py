"""Requests that are cut off, stall or are too large, sent to a container's owner and through
another node: nothing is appended, nothing is left open, the nodes stay healthy, and the
client's exactly-once retry of the same request afterwards appends it whole, once."""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from raw_http import answer, connect, head, open_sockets, resident_bytes, wait_sockets_at_most
from store_cluster import StoreCluster

from segmentstore.contracts.mapping import container_of
from segmentstore.harness.jetstream_cluster import JetStreamCluster

pytestmark = [pytest.mark.cluster, pytest.mark.integration]

BODY_TIMEOUT_MS = 2_000
MAX_FORWARDS_PER_PEER = 6
BODY = bytes(range(256)) * 400  # 102,400 bytes


@pytest.fixture(scope="module")
def nodes(
    tmp_path_factory: pytest.TempPathFactory, nats: JetStreamCluster, moto_endpoint: str
) -> Iterator[StoreCluster]:
    """Three nodes with a short body timeout and a small cap of forwards per peer."""
    options = {"endpoint_url": moto_endpoint, "create_bucket": True}
    options |= {"access_key": "testing", "secret_key": "testing", "region": "us-east-1"}
    cluster = StoreCluster(
        tmp_path_factory.mktemp("hostile"),
        nats.servers,
        f"s3://cluster-tests/hostile{uuid.uuid4().hex[:8]}",
        prefix=f"hostile{uuid.uuid4().hex[:8]}",
        settings={
            "SEGMENTSTORE_TIER2__OPTIONS": json.dumps(options),
            "SEGMENTSTORE_API__BODY_TIMEOUT_MS": str(BODY_TIMEOUT_MS),
            "SEGMENTSTORE_CLUSTER__MAX_FORWARDS_PER_PEER": str(MAX_FORWARDS_PER_PEER),
        },
    )
    try:
        cluster.start(3)
        yield cluster
    finally:
        cluster.stop()


def routes(nodes: StoreCluster, name: str, timeout_s: float = 30) -> tuple[str, str, str]:
    """(owner id, owner URL, another node's URL) for segment ``name``, once its container has
    an owner (on a loaded machine a lease can lapse and be taken again between two tests)."""
    container = container_of(name, nodes.containers)
    deadline = time.monotonic() + timeout_s
    while True:
        view = nodes.cluster_map()
        owner = next(c["owner"] for c in view["containers"] if c["id"] == container)
        urls = {n["id"]: n["url"] for n in view["nodes"]}
        if owner in urls:
            other = next(url for node, url in urls.items() if node != owner)
            return owner, urls[owner], other
        assert time.monotonic() < deadline, f"container {container} has no owner: {view}"
        time.sleep(0.2)


def fresh_segment(nodes: StoreCluster) -> str:
    name = f"hostile/{uuid.uuid4().hex[:12]}"
    assert httpx.put(f"{nodes.urls[0]}/v1/segments/{name}", timeout=30).status_code == 201
    return name


def length_of(nodes: StoreCluster, name: str) -> int:
    return int(httpx.get(f"{nodes.urls[0]}/v1/segments/{name}", timeout=30).json()["length"])


def retry_whole(url: str, name: str, writer: str) -> dict[str, object]:
    """The client's retry of the cut-off request, whole, with the same writer sequence."""
    answer = httpx.post(
        f"{url}/v1/segments/{name}:append",
        content=BODY,
        headers={"Writer-Id": writer, "Writer-Seq": "1"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def pids(nodes: StoreCluster) -> list[int]:
    return [node.proc.pid for node in nodes.nodes.values() if node.proc.poll() is None]


@pytest.fixture
def sockets_back(nodes: StoreCluster) -> Iterator[None]:
    """After the test, the nodes hold no more sockets than before it (a few kept-alive
    connections between nodes and to JetStream may come and go)."""
    before = [open_sockets(pid) for pid in pids(nodes)]
    yield
    limits = [count + 4 for count in before]
    after = wait_sockets_at_most(pids(nodes), limits, BODY_TIMEOUT_MS / 1000 * 3 + 10)
    assert all(a <= limit for a, limit in zip(after, limits, strict=True)), (before, after)
    print(f"sockets per node before {before}, after {after}")
    for url in nodes.urls:
        assert httpx.get(f"{url}/readyz", timeout=10).status_code == 200


@pytest.mark.parametrize("via", ["owner", "other node"])
def test_a_chunked_body_cut_off_after_one_chunk_appends_nothing(
    nodes: StoreCluster, via: str, sockets_back: None
) -> None:
    name = fresh_segment(nodes)
    _, owner, other = routes(nodes, name)
    url = owner if via == "owner" else other
    sock = connect(url)
    writer = uuid.uuid4().hex
    headers = {"Transfer-Encoding": "chunked", "Writer-Id": writer, "Writer-Seq": "1"}
    sock.sendall(head("POST", f"/v1/segments/{name}:append", headers))
    sock.sendall(b"7\r\n" + BODY[:7] + b"\r\n")
    time.sleep(0.3)  # the first chunk is on its way to the owner
    sock.close()
    time.sleep(1.0)
    assert length_of(nodes, name) == 0
    assert retry_whole(url, name, writer) == {"offset": 0, "length": len(BODY)}
    assert length_of(nodes, name) == len(BODY)


@pytest.mark.parametrize("via", ["owner", "other node"])
def test_a_content_length_body_cut_off_halfway_appends_nothing(
    nodes: StoreCluster, via: str, sockets_back: None
) -> None:
    name = fresh_segment(nodes)
    _, owner, other = routes(nodes, name)
    url = owner if via == "owner" else other
    sock = connect(url)
    writer = uuid.uuid4().hex
    headers = {"Content-Length": str(len(BODY)), "Writer-Id": writer, "Writer-Seq": "1"}
    sock.sendall(head("POST", f"/v1/segments/{name}:append", headers) + BODY[: len(BODY) // 2])
    time.sleep(0.3)
    sock.shutdown(socket.SHUT_WR)
    sock.close()
    time.sleep(1.0)
    assert length_of(nodes, name) == 0
    assert retry_whole(url, name, writer) == {"offset": 0, "length": len(BODY)}


@pytest.mark.parametrize("via", ["owner", "other node"])
def test_a_body_that_stalls_is_answered_408_and_appends_nothing(
    nodes: StoreCluster, via: str, sockets_back: None
) -> None:
    name = fresh_segment(nodes)
    _, owner, other = routes(nodes, name)
    url = owner if via == "owner" else other
    writer = uuid.uuid4().hex
    headers = {"Content-Length": str(len(BODY)), "Writer-Id": writer, "Writer-Seq": "1"}
    sock = connect(url)
    started = time.monotonic()
    sock.sendall(head("POST", f"/v1/segments/{name}:append", headers) + BODY[:10])
    status, received = answer(sock)  # the node answers, then closes the connection
    waited = time.monotonic() - started
    sock.close()
    assert status == 408, received
    assert b'"code":"request_timeout"' in received
    assert BODY_TIMEOUT_MS / 1000 * 0.9 <= waited < BODY_TIMEOUT_MS / 1000 + 10
    print(f"{via}: 408 after {waited:.2f} s (timeout {BODY_TIMEOUT_MS} ms)")
    assert length_of(nodes, name) == 0
    assert retry_whole(url, name, writer) == {"offset": 0, "length": len(BODY)}


def test_fifty_abandoned_forwards_leave_no_connection_open(
    nodes: StoreCluster, sockets_back: None
) -> None:
    """Requests that declare a body, send 10 bytes of it and close: the forwarding node's
    connections to the owner are closed with them, not left open for minutes."""
    name = fresh_segment(nodes)
    _, _, other = routes(nodes, name)
    headers = {"Content-Length": "100000"}
    for _ in range(50):
        sock = connect(other)
        sock.sendall(head("POST", f"/v1/segments/{name}:append", headers) + BODY[:10])
        sock.close()
    time.sleep(1.0)
    assert length_of(nodes, name) == 0


def test_a_peer_at_its_cap_gets_no_more_forwards(nodes: StoreCluster, sockets_back: None) -> None:
    """Stalled requests hold their forwarding slots until their 408: one more than the cap
    is answered 503 with Retry-After at once, and the slots come back after the timeout."""
    name = fresh_segment(nodes)
    _, _, other = routes(nodes, name)
    held = []
    for _ in range(MAX_FORWARDS_PER_PEER):
        sock = connect(other)
        sock.sendall(head("POST", f"/v1/segments/{name}:append", {"Content-Length": "100"}))
        sock.sendall(b"x" * 10)
        held.append(sock)
    time.sleep(0.5)
    refused = httpx.post(f"{other}/v1/segments/{name}:append", content=b"more", timeout=30)
    assert refused.status_code == 503, refused.text
    assert refused.headers["retry-after"]
    assert "too many requests are under way" in refused.json()["error"]["message"]
    for sock in held:
        assert answer(sock)[0] == 408
        sock.close()
    accepted = httpx.post(f"{other}/v1/segments/{name}:append", content=b"more", timeout=30)
    assert accepted.status_code == 200, accepted.text


@pytest.mark.parametrize("via", ["owner", "other node"])
def test_64_mib_of_headers_are_refused_431_without_growing_the_node(
    nodes: StoreCluster, via: str, sockets_back: None
) -> None:
    name = fresh_segment(nodes)
    _, owner, other = routes(nodes, name)
    url = owner if via == "owner" else other
    node = next(n for n in nodes.nodes.values() if n.url == url)
    rss_before = resident_bytes(node.proc.pid)
    sock = connect(url)
    sock.sendall(head("POST", f"/v1/segments/{name}:append", {"Content-Length": "5"})[:-2])
    line = b"X-Filler: " + b"f" * 8180 + b"\r\n"
    sent = 0
    try:
        while sent < 64 << 20:
            sock.sendall(line * 128)
            sent += len(line) * 128
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused and closed, long before 64 MiB
    status, received = answer(sock)
    sock.close()
    assert status == 431, received[:300]
    assert b"request_header_too_large" in received
    assert sent < 16 << 20, f"the node read {sent} bytes of headers before refusing"
    grown = resident_bytes(node.proc.pid) - rss_before
    assert grown < 32 << 20
    print(f"{via}: 431 after {sent >> 10} KiB of headers sent; RSS grew {grown >> 10} KiB")
    assert length_of(nodes, name) == 0
    ok = httpx.post(f"{url}/v1/segments/{name}:append", content=b"hello", timeout=30)
    assert ok.status_code == 200, ok.text


def test_forwarded_answers_carry_one_date_and_the_owner(nodes: StoreCluster) -> None:
    name = fresh_segment(nodes)
    owner_id, owner, other = routes(nodes, name)
    answer = httpx.post(f"{other}/v1/segments/{name}:append", content=b"x", timeout=30)
    assert answer.status_code == 200
    assert len(answer.headers.get_list("date")) == 1
    assert answer.headers["segment-owner"] == owner
    assert "segment-owner-signature" not in {k.lower() for k in answer.headers}
    container = container_of(name, nodes.containers)
    restarted = httpx.post(f"{other}/v1/containers/{container}:restart", timeout=60)
    assert restarted.status_code == 200, restarted.text
    assert restarted.json()["owner"] == owner_id


@pytest.mark.parametrize("path", ["/v1/segments", "/v1/containers", "/v1/segments/a/b:append"])
def test_a_client_cannot_pose_as_a_forwarding_node(nodes: StoreCluster, path: str) -> None:
    for url in nodes.urls:
        method = "POST" if path.endswith(":append") else "GET"
        answer = httpx.request(
            method,
            f"{url}{path}",
            content=b"x" if method == "POST" else None,
            headers={"Segment-Forwarded-By": "n1"},
            timeout=30,
        )
        assert answer.status_code == 403, answer.text
        assert answer.json()["error"]["code"] == "forbidden"
    # Signed with another secret, or for another path, it is refused just the same.
    forged = StoreCluster.__new__(StoreCluster)
    forged.secret = "a secret that is not the cluster's"
    headers = forged.as_member("GET", "/v1/segments")
    assert httpx.get(f"{nodes.urls[0]}/v1/segments", headers=headers).status_code == 403
    headers = nodes.as_member("GET", "/v1/containers")
    assert httpx.get(f"{nodes.urls[0]}/v1/segments", headers=headers).status_code == 403
    assert httpx.get(f"{nodes.urls[0]}/v1/containers", headers=headers).status_code == 200


def test_a_replayed_forwarded_append_is_refused_and_not_applied(nodes: StoreCluster) -> None:
    """A node-to-node append (no writer id, as in the report) captured and sent to the owner
    again a second later: the first is applied, the copy is refused and applies nothing."""
    name = fresh_segment(nodes)
    _, owner, _ = routes(nodes, name)
    path = f"/v1/segments/{name}:append"
    body = b"captured between two nodes|" + bytes(10)
    headers = nodes.as_member("POST", path, "n1", body=body)
    first = httpx.post(f"{owner}{path}", content=body, headers=headers, timeout=30)
    assert first.status_code == 200, first.text
    assert first.headers["segment-owner-signature"]
    time.sleep(1.0)
    replayed = httpx.post(f"{owner}{path}", content=body, headers=headers, timeout=30)
    assert replayed.status_code == 403, replayed.text
    assert replayed.json()["error"]["code"] == "forbidden"
    assert length_of(nodes, name) == len(body)


@pytest.mark.parametrize("delivery", ["whole", "chunked"])
def test_a_swapped_body_is_refused_and_not_applied(nodes: StoreCluster, delivery: str) -> None:
    """The signed headers of one 37-byte body sent with another of the same length: refused
    (403) once the body has arrived, and nothing of it applied; the body signed is then taken
    with a signature of its own."""
    name = fresh_segment(nodes)
    _, owner, _ = routes(nodes, name)
    path = f"/v1/segments/{name}:append"
    signed_body, other_body = b"a" * 37, b"b" * 37
    headers = nodes.as_member("POST", path, "n2", body=signed_body)
    if delivery == "whole":
        reply = httpx.post(f"{owner}{path}", content=other_body, headers=headers, timeout=30)
        status, text = reply.status_code, reply.content
    else:  # in pieces, as a stream: each piece hashed as it arrives
        sock = connect(owner)
        sock.sendall(head("POST", path, {**headers, "Transfer-Encoding": "chunked"}))
        for piece in (other_body[:10], other_body[10:]):
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            time.sleep(0.2)
        sock.sendall(b"0\r\n\r\n")
        status, text = answer(sock)
        sock.close()
    assert status == 403, text
    assert b"not the one its node signed" in text
    assert length_of(nodes, name) == 0
    headers = nodes.as_member("POST", path, "n2", body=signed_body)
    taken = httpx.post(f"{owner}{path}", content=signed_body, headers=headers, timeout=30)
    assert taken.status_code == 200, taken.text
    assert length_of(nodes, name) == len(signed_body)


@pytest.mark.parametrize(
    ("when", "offset_ms"),
    [("five minutes ahead", 300_000), ("a minute ahead", 60_000), ("two minutes old", -120_000)],
)
def test_a_signature_from_the_future_or_long_past_is_refused(
    nodes: StoreCluster, when: str, offset_ms: int
) -> None:
    name = fresh_segment(nodes)
    _, owner, _ = routes(nodes, name)
    path = f"/v1/segments/{name}:append"
    at_ms = int(time.time() * 1000) + offset_ms
    headers = nodes.as_member("POST", path, "n3", body=b"dated", at_ms=at_ms)
    reply = httpx.post(f"{owner}{path}", content=b"dated", headers=headers, timeout=30)
    assert reply.status_code == 403, f"{when}: {reply.text}"
    assert length_of(nodes, name) == 0
    # A clock a second ahead is within the allowance.
    headers = nodes.as_member(
        "POST", path, "n3", body=b"dated", at_ms=int(time.time() * 1000) + 1000
    )
    assert httpx.post(f"{owner}{path}", content=b"dated", headers=headers, timeout=30).is_success


def test_forwarded_requests_still_reach_their_owner_signed_over_their_bodies(
    nodes: StoreCluster,
) -> None:
    """Through a node that is not the owner, whole and streamed bodies, small and large."""
    name = fresh_segment(nodes)
    _, _, other = routes(nodes, name)
    appended = bytearray()
    for size in (1, 1000, 3 << 20):
        body = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
        reply = httpx.post(f"{other}/v1/segments/{name}:append", content=body, timeout=60)
        assert reply.status_code == 200, reply.text
        appended += body

    def pieces() -> Iterator[bytes]:
        yield b"streamed "
        yield b"in pieces"

    streamed = httpx.post(f"{other}/v1/segments/{name}:append", content=pieces(), timeout=60)
    assert streamed.status_code == 200, streamed.text
    appended += b"streamed in pieces"
    assert length_of(nodes, name) == len(appended)
