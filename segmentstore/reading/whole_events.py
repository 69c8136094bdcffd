"""Reading whole events: a read cut to ``max_bytes`` may end inside an event, and the first
event may be larger than ``max_bytes`` itself; the reader is given whole events only."""

from __future__ import annotations

from typing import Protocol

from segmentstore.contracts.errors import InvalidEventsError
from segmentstore.contracts.events import HEADER, event_size_at, whole_events
from segmentstore.contracts.segment_info import EventsRead, SegmentInfo


class _Reads(Protocol):
    async def read(
        self, name: str, offset: int, max_length: int | None = None, wait_ms: int = 0
    ) -> bytes | memoryview: ...

    async def get_info(self, name: str) -> SegmentInfo: ...


async def read_whole_events(
    store: _Reads, name: str, offset: int, max_bytes: int | None, wait_ms: int, max_append: int
) -> EventsRead:
    """Whole events from ``offset`` (an event boundary), about ``max_bytes`` of them but
    always at least one when one is there, even if it is larger; none if none came within
    ``wait_ms``. ``max_append`` bounds an event with its header."""
    data = bytes(await store.read(name, offset, max_bytes, wait_ms))
    if not data:
        return EventsRead(b"", offset)
    max_payload = max_append - HEADER.size
    whole = whole_events(data, offset, max_payload)
    if whole == 0:
        # The first event is larger than max_bytes (or its header was cut): read it whole.
        size = event_size_at(data, offset, max_payload) or HEADER.size
        data = await _read_exactly(store, name, offset, size, data)
        size = event_size_at(data, offset, max_payload) or len(data) + 1
        if len(data) < size:
            raise InvalidEventsError(
                f"the bytes at offset {offset} of {name!r} are not a whole event"
            )
        whole = size
    return EventsRead(data[:whole], offset + whole)


async def _read_exactly(store: _Reads, name: str, offset: int, size: int, have: bytes) -> bytes:
    """``size`` bytes from ``offset`` (fewer only if the segment ends first)."""
    pieces = [have]
    got = len(have)
    while got < size:
        info = await store.get_info(name)
        if offset + got >= info.length:
            break
        piece = await store.read(name, offset + got, size - got)
        pieces.append(bytes(piece))
        got += len(piece)
    return b"".join(pieces)
