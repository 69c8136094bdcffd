"""Reading a segment's events in order, following its tail: :class:`EventReader`.

    reader = EventReader(client, "scope/stream/0", offset=0, wait_ms=1000)
    async for offset, payload in reader:
        ...                       # offset: where the event starts (what EventWriter returned)
    # reader.offset is where the next read starts: store it, resume from it later.

Reads are ``:readEvents`` of up to ``max_bytes`` (whole events only), so one request brings
many events. At the tail of an open segment the reader long-polls (``wait_ms``) and goes on
when data comes; with ``follow=False`` it stops at the tail instead. It stops for good at the
end of a sealed segment. Errors are the client's (``SegmentTruncatedError`` when ``offset`` is
below what retention kept, ``SegmentNotFoundError``, ``httpx.TransportError`` after retries).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from struct import Struct
from typing import TYPE_CHECKING

from segmentstore.contracts.errors import EndOfSegmentError

if TYPE_CHECKING:
    from .async_client import AsyncSegmentStoreClient

_HEADER = Struct(">ii")


class EventReader:
    """Iterates ``(offset, payload)`` from ``offset`` (an event boundary); see the module."""

    def __init__(
        self,
        client: AsyncSegmentStoreClient,
        segment: str,
        offset: int = 0,
        *,
        wait_ms: int = 1000,
        max_bytes: int = 4 << 20,
        follow: bool = True,
    ) -> None:
        self._client = client
        self.segment = segment
        self.offset = offset
        self._wait_ms = wait_ms
        self._max_bytes = max_bytes
        self._follow = follow

    def __aiter__(self) -> AsyncIterator[tuple[int, bytes]]:
        return self._events()

    async def _events(self) -> AsyncIterator[tuple[int, bytes]]:
        unpack = _HEADER.unpack_from
        while True:
            try:
                result = await self._client.read_events(
                    self.segment, self.offset, self._max_bytes, self._wait_ms
                )
            except EndOfSegmentError:
                return
            data = result.data
            if not data:
                if result.sealed and result.next_offset >= result.length:
                    return
                if not self._follow:
                    return
                continue
            view = memoryview(data)
            position = 0
            while position < len(data):
                _, size = unpack(data, position)
                start = position + _HEADER.size
                event_offset = result.offset + position
                position = start + size
                # Moved before the yield: a consumer that stops here resumes after this event.
                self.offset = result.offset + position
                yield event_offset, bytes(view[start:position])
