"""The read index: where each segment's readable bytes are, and who waits at its tail.

Entries are kept per segment in offset order and found by binary search; each holds the bytes
of one committed append (shared with the operation, not copied). Tail readers park a future
that the next change to the segment (append, seal, merge, delete) completes.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_right

from segmentstore.operations import Buffer


class SegmentReadIndex:
    __slots__ = ("_data", "_offsets", "_tail")

    def __init__(self) -> None:
        self._offsets: list[int] = []
        self._data: list[Buffer] = []
        self._tail: asyncio.Future[None] | None = None

    def append(self, offset: int, data: Buffer) -> None:
        self._offsets.append(offset)
        self._data.append(data)
        self.notify()

    def read(self, offset: int, max_length: int) -> bytes | memoryview:
        """Up to ``max_length`` contiguous bytes from ``offset``; empty if none are indexed."""
        i = bisect_right(self._offsets, offset) - 1
        if i < 0:
            return b""
        start = offset - self._offsets[i]
        first = memoryview(self._data[i])[start:]
        if len(first) >= max_length or i + 1 == len(self._data):
            return first[:max_length]
        pieces = [first]
        remaining = max_length - len(first)
        for data in self._data[i + 1 :]:
            if remaining <= 0:
                break
            piece = memoryview(data)[:remaining]
            pieces.append(piece)
            remaining -= len(piece)
        return b"".join(pieces)

    def truncate(self, start_offset: int) -> None:
        """Drop entries that lie wholly below ``start_offset``."""
        keep = bisect_right(self._offsets, start_offset) - 1
        if keep > 0:
            del self._offsets[:keep]
            del self._data[:keep]

    def absorb(self, source: SegmentReadIndex, at_offset: int) -> None:
        """Take over ``source``'s entries, which now start at ``at_offset``."""
        if source._offsets:
            shift = at_offset - source._offsets[0]
            self._offsets.extend(o + shift for o in source._offsets)
            self._data.extend(source._data)
        source.notify()
        self.notify()

    def tail_changed(self) -> asyncio.Future[None]:
        """A future completed at the segment's next change."""
        if self._tail is None or self._tail.done():
            self._tail = asyncio.get_running_loop().create_future()
        return self._tail

    def notify(self) -> None:
        tail = self._tail
        if tail is not None:
            self._tail = None
            if not tail.done():
                tail.set_result(None)
