"""Every route of docs/api.md through the blocking client, against a real server."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from segmentstore import AttributeUpdate, UpdateType
from segmentstore.client import SegmentStoreClient

from .conftest import LiveServer


@pytest.fixture
def client(live: LiveServer) -> Iterator[SegmentStoreClient]:
    with SegmentStoreClient(live.url, timeout_s=30) as store:
        yield store


def test_create_info_delete(client: SegmentStoreClient, name: str) -> None:
    created = client.create_segment(
        name, attributes={"a": 1}, retention={"time_ms": 60_000, "bytes": 1 << 20}
    )
    assert (created.name, created.length, created.sealed) == (name, 0, False)
    assert created.attributes == {"a": 1}
    assert created.retention == {"time_ms": 60_000, "bytes": 1 << 20}
    info = client.get_info(name)
    assert info.name == name and 0 <= info.container < 4 and info.created_ms > 0
    client.delete_segment(name)
    assert name not in client.list_segments(name)


def test_names_with_every_allowed_character(client: SegmentStoreClient) -> None:
    name = "A-z_0.9~/x#y/..." + "z" * 8
    client.create_segment(name)
    assert client.append(name, b"ok").offset == 0
    assert client.get_info(name).name == name
    assert client.read(name, 0).data == b"ok"
    assert client.list_segments("A-z_0.9~/x#y/") == [name]


def test_listing_follows_pages(client: SegmentStoreClient, name: str) -> None:
    prefix = name + "/"
    names = sorted(f"{prefix}{i:03d}" for i in range(7))
    for item in names:
        client.create_segment(item)
    page = client.list_page(prefix, limit=3)
    assert page.segments == names[:3] and page.next == names[2]
    assert client.list_page(prefix, after=page.next, limit=3).segments == names[3:6]
    assert client.list_page(prefix, after=names[5], limit=3).next is None
    assert client.list_segments(prefix) == names
    assert client.list_segments(prefix, limit=5) == names[:5]
    assert client.list_segments(prefix, after=names[4]) == names[5:]


def test_append_and_read(client: SegmentStoreClient, name: str) -> None:
    client.create_segment(name)
    first = client.append(name, b"hello")
    assert (first.offset, first.length, first.duplicate) == (0, 5, False)
    assert client.append(name, bytearray(b", world"), expected_offset=5).offset == 5
    read = client.read(name, 0)
    assert read.data == b"hello, world"
    assert (read.offset, read.start_offset, read.length, read.sealed) == (0, 0, 12, False)
    assert read.next_offset == 12
    partial = client.read(name, 7, max_length=3)
    assert (partial.data, partial.next_offset) == (b"wor", 10)


def test_exactly_once_append(client: SegmentStoreClient, name: str) -> None:
    client.create_segment(name)
    assert client.append(name, b"one", writer_id="w", writer_seq=0).offset == 0
    again = client.append(name, b"one", writer_id="w", writer_seq=0)
    assert (again.offset, again.length, again.duplicate) == (None, 3, True)
    assert client.append(name, b"two", writer_id="w", writer_seq=1).offset == 3
    assert client.read(name, 0).data == b"onetwo"


def test_tail_read_waits_for_data(live: LiveServer, client: SegmentStoreClient, name: str) -> None:
    client.create_segment(name)
    empty = client.read(name, 0, wait_ms=50)
    assert (empty.data, empty.length, empty.next_offset) == (b"", 0, 0)

    def later() -> None:
        time.sleep(0.3)
        with SegmentStoreClient(live.url) as other:
            other.append(name, b"late")

    writer = threading.Thread(target=later)
    writer.start()
    try:
        begun = time.monotonic()
        read = client.read(name, 0, wait_ms=10_000)
        assert read.data == b"late" and time.monotonic() - begun < 9
    finally:
        writer.join()


def test_seal_truncate_and_headers(client: SegmentStoreClient, name: str) -> None:
    client.create_segment(name)
    client.append(name, b"0123456789")
    truncated = client.truncate(name, 4)
    assert (truncated.start_offset, truncated.length) == (4, 10)
    assert client.truncate(name, 4).start_offset == 4  # again: a no-op
    sealed = client.seal(name)
    assert sealed.sealed and client.seal(name).sealed  # idempotent
    read = client.read(name, 4)
    assert (read.data, read.start_offset, read.sealed) == (b"456789", 4, True)


def test_transactions_merge(client: SegmentStoreClient, name: str) -> None:
    client.create_segment(name)
    client.append(name, b"head-")
    transaction = client.begin_transaction(name)
    assert transaction.startswith(f"{name}#transaction.")
    client.append(transaction, b"txn")
    merged = client.merge(name, transaction)
    assert (merged.offset, merged.length) == (5, 8)
    assert client.read(name, 0).data == b"head-txn"
    assert transaction not in client.list_segments(name)


def test_attributes(client: SegmentStoreClient, name: str) -> None:
    client.create_segment(name, attributes={"count": 1})
    assert client.get_attributes(name) == {"count": 1}
    after = client.update_attributes(
        name,
        [
            {"key": "count", "value": 2, "type": "accumulate"},
            AttributeUpdate("epoch", 7, UpdateType.REPLACE_IF_ABSENT),
            AttributeUpdate("gen", 1, UpdateType.REPLACE_IF_EQUALS, compare=None),
        ],
    )
    assert after == {"count": 3, "epoch": 7, "gen": 1}
    assert client.get_info(name).attributes == after


def test_events(client: SegmentStoreClient, name: str) -> None:
    client.create_segment(name)
    appended = client.append_events(name, [b"a", b"", b"ccc"])
    assert (appended.offset, appended.events) == (0, 3)
    framed = b"\0\0\0\0\0\0\0\x02dd"
    assert client.append_events(name, framed, expected_offset=appended.length).events == 1
    read = client.read_events(name, 0)
    assert read.events() == [b"a", b"", b"ccc", b"dd"]
    assert read.next_offset == read.length == 4 * 8 + 6
    some = client.read_events(name, 0, max_bytes=9)
    assert some.events() == [b"a"] and some.next_offset == 9
    tail = client.read_events(name, read.next_offset, wait_ms=20)
    assert (tail.data, tail.next_offset) == (b"", read.next_offset)


def test_offset_at(client: SegmentStoreClient, name: str) -> None:
    client.create_segment(name)
    client.append(name, b"x" * 100)
    now_ms = int(time.time() * 1000) + 60_000
    assert client.offset_at(name, now_ms) == 100  # every append was made before it
    assert client.offset_at(name, 0) == 0
    assert client.set_retention(name, {"time_ms": 5}).retention == {"time_ms": 5}
    assert client.set_retention(name, None).retention == {}


def test_containers_restart_and_probes(client: SegmentStoreClient) -> None:
    containers = client.containers()
    assert [c.id for c in containers] == [0, 1, 2, 3]
    assert all(c.status == "running" for c in containers)
    restarted = client.restart_container(2)
    assert restarted.id == 2 and restarted.status == "running"
    assert restarted.epoch > containers[2].epoch
    assert client.healthz() and client.readyz()
    assert "segmentstore" in client.metrics()


def test_bearer_token(secured: LiveServer, name: str) -> None:
    with SegmentStoreClient(secured.url, token="write-token") as writer:
        writer.create_segment(name)
        writer.append(name, b"x")
    with SegmentStoreClient(secured.url, token="read-token") as reader:
        assert reader.read(name, 0).data == b"x"
