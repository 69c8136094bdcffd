"""Appends take any bytes-like buffer and store exactly its bytes."""

from __future__ import annotations

from array import array

from segmentstore import SegmentStore
from segmentstore.contracts.events import encode as encode_events


async def test_any_buffer_is_appended_by_its_bytes(store: SegmentStore) -> None:
    # len() of a memoryview counts items, not bytes: a view of 4-byte items must still be
    # stored whole, and an offset must count bytes.
    await store.create_segment("s")
    words = array("I", [1, 2, 3])
    result = await store.append("s", memoryview(words))
    assert (result.offset, result.length) == (0, 12)
    grid = memoryview(bytearray(range(12))).cast("B", (3, 4))  # two dimensions
    assert (await store.append("s", grid)).length == 24
    strided = memoryview(bytes(range(10)))[::2]  # not contiguous: copied
    assert (await store.append("s", strided)).length == 29
    assert bytes(await store.read("s", 0)) == words.tobytes() + bytes(range(12)) + b"\0\2\4\6\b"

    await store.create_segment("e")
    shorts = memoryview(array("H", [7, 8]))
    assert (await store.append_events("e", [shorts, b"x"])).events == 2
    framed = (await store.read_events("e", 0)).data
    assert framed == encode_events([shorts.tobytes(), b"x"])
