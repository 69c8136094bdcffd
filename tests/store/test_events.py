"""Events through the embedded API: framing validation, atomic batches, whole-event reads."""

from __future__ import annotations

import random
import struct

import pytest

from segmentstore import InvalidEventsError, SegmentStore
from segmentstore.reading.events import count, encode


async def test_batches_append_atomically_and_read_back_whole(store: SegmentStore) -> None:
    await store.create_segment("e")
    first = await store.append_events("e", [b"alpha", b"", b"gamma"])
    assert (first.offset, first.events) == (0, 3)
    second = await store.append_events("e", encode([b"x" * 100] * 10))
    assert second.events == 10 and second.offset == first.length
    read = await store.read_events("e", 0, max_bytes=20)
    assert read.data == encode([b"alpha"])  # 13 bytes: the second event would cross 20
    read = await store.read_events("e", read.next_offset, max_bytes=1 << 20)
    assert read.data == encode([b"", b"gamma"] + [b"x" * 100] * 10)
    assert read.next_offset == second.length
    assert (await store.read_events("e", read.next_offset, wait_ms=0)).data == b""


async def test_one_event_larger_than_max_bytes_is_still_returned(store: SegmentStore) -> None:
    await store.create_segment("e")
    await store.append_events("e", [b"y" * 100_000])
    read = await store.read_events("e", 0, max_bytes=10)
    assert read.data == encode([b"y" * 100_000]) and read.next_offset == 100_008


@pytest.mark.parametrize(
    "body",
    [
        b"",
        struct.pack(">ii", 1, 0),  # type 1
        struct.pack(">ii", 0, -1),  # negative length
        struct.pack(">ii", 0, 10) + b"short",  # past the end of the body
        encode([b"ok"]) + b"\x00\x00",  # a torn header after a good event
    ],
)
async def test_bad_framing_appends_nothing(store: SegmentStore, body: bytes) -> None:
    await store.create_segment("e")
    with pytest.raises(InvalidEventsError):
        await store.append_events("e", body)
    assert (await store.get_info("e")).length == 0


async def test_reading_from_a_non_boundary_is_invalid(store: SegmentStore) -> None:
    await store.create_segment("e")
    await store.append_events("e", [b"payload"])
    with pytest.raises(InvalidEventsError):
        await store.read_events("e", 3)


def _walk(body: bytes, max_payload: int) -> int | None:
    """The framing rule, plainly: the event count, or None if ``body`` is not whole events."""
    position = events = 0
    while position < len(body):
        if position + 8 > len(body):
            return None
        kind, length = struct.unpack_from(">ii", body, position)
        if kind != 0 or not 0 <= length <= max_payload or position + 8 + length > len(body):
            return None
        position += 8 + length
        events += 1
    return events or None


def test_batches_of_equal_events_are_counted_as_a_walk_counts_them() -> None:
    """Same-size batches take a shortcut (one strided check per header byte): it must agree
    with a walk on every batch, including ones with one header or length byte changed."""
    rng = random.Random(11)
    for _ in range(400):
        size = rng.choice([0, 1, 7, 92, 100, 4088])
        body = bytearray(encode([rng.randbytes(size) for _ in range(rng.randint(1, 300))]))
        if rng.random() < 0.7:
            stride = 8 + size
            event = rng.randrange(len(body) // stride)
            body[event * stride + rng.randrange(8)] ^= 1 << rng.randrange(8)
        if rng.random() < 0.1:
            body += b"x"
        expected = _walk(bytes(body), 1 << 20)
        if expected is None:
            with pytest.raises(InvalidEventsError):
                count(bytes(body), 1 << 20)
        else:
            assert count(bytes(body), 1 << 20) == expected
