"""Questions about a segment's append boundaries, answered from its whole time index: the
in-memory tail (:mod:`segmentstore.metadata.time_index`) and the Tier 2 sidecars
(:mod:`segmentstore.tier2.chunk_index`).

Times never decrease along a segment (merged chunks are re-stamped with the merge's time), so
"the latest boundary made before T" is a binary search: over the chunks by the time of their
first entry, then inside one chunk. A chunk with no entry (the middle of one large append) is
skipped. Sidecars read from Tier 2 are kept in a small LRU as :class:`SegmentTimeIndex` objects
(the same lookups as the tail's), keyed by segment, chunk key, start and length, so that a chunk
that grew or moved (a merge) is read again.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Sequence

from segmentstore.metadata.container_metadata import SegmentMetadata
from segmentstore.metadata.time_index import SegmentTimeIndex
from segmentstore.tier2 import (
    ChunkInfo,
    ChunkStorage,
    ManifestStore,
    TimeIndexEntry,
    read_time_index,
)

_CACHED_SIDECARS = 256


_EntriesOf = Callable[[ChunkInfo], SegmentTimeIndex]
_Search = Callable[[Sequence[ChunkInfo], _EntriesOf, int], TimeIndexEntry | None]


class TimeLookup:
    """One per container; the Tier 2 parts run in a worker thread."""

    def __init__(
        self, storage: ChunkStorage, index_of: Callable[[SegmentMetadata], SegmentTimeIndex]
    ) -> None:
        self._storage = storage
        self._index_of = index_of  # a segment's in-memory (Tier 1 tail) index
        self._manifests = ManifestStore(storage)
        self._sidecars: OrderedDict[tuple[str, str, int, int], SegmentTimeIndex] = OrderedDict()
        self._lock = threading.Lock()  # lookups run in several worker threads at once

    async def offset_at(self, segment: SegmentMetadata, time_ms: int) -> int:
        """docs/api.md's ``:offsetAt``: an append boundary ``O`` such that every append made at or
        after ``time_ms`` lies at or after ``O``, with at most one index interval (or one
        append) of earlier data between ``O`` and the first such append."""
        index = self._index_of(segment)
        if 0 <= index.last_time_ms < time_ms:
            return segment.length  # every append so far was made before it
        first = index.first()
        if first is not None and first.time_ms < time_ms:
            entry = index.last_before_time(time_ms)
        else:
            entry = await self._in_tier2(segment, _last_before_time, time_ms)
        return _clamp(entry, segment)

    async def boundary_at_or_below(self, segment: SegmentMetadata, offset: int) -> int:
        """The highest append boundary at or below ``offset`` (the start offset if none is
        known); ``offset`` itself when it is the segment's length."""
        if offset >= segment.length:
            return segment.length
        index = self._index_of(segment)
        first = index.first()
        if first is not None and first.offset <= offset:
            entry = index.last_at_or_below(offset)
        else:
            entry = await self._in_tier2(segment, _last_at_or_below, offset)
        return _clamp(entry, segment)

    async def oldest_time(self, segment: SegmentMetadata) -> int | None:
        """When the oldest append still stored (in Tier 2 or the tail) was made, if known."""
        entry = await self._in_tier2(segment, _first, 0)
        if entry is None:
            entry = self._index_of(segment).first()
        return None if entry is None else entry.time_ms

    async def _in_tier2(
        self, segment: SegmentMetadata, search: _Search, key: int
    ) -> TimeIndexEntry | None:
        if segment.storage_length <= segment.start_offset:
            return None  # nothing readable is in Tier 2
        return await asyncio.to_thread(self._search_tier2, segment.name, segment.id, search, key)

    def _search_tier2(
        self, name: str, segment_id: int, search: _Search, key: int
    ) -> TimeIndexEntry | None:
        loaded = self._manifests.load(name)
        if loaded is None or loaded[0].segment_id != segment_id:
            return None
        return search(loaded[0].chunks, functools.partial(self._entries, name), key)

    def _entries(self, name: str, chunk: ChunkInfo) -> SegmentTimeIndex:
        # The name too: a merge into an empty target adopts chunks at the same offsets, with
        # their times rewritten.
        cache_key = (name, chunk.key, chunk.start_offset, chunk.length)
        with self._lock:
            entries = self._sidecars.get(cache_key)
            if entries is not None:
                self._sidecars.move_to_end(cache_key)
                return entries
        entries = SegmentTimeIndex.of(read_time_index(self._storage, chunk))
        with self._lock:
            self._sidecars[cache_key] = entries
            if len(self._sidecars) > _CACHED_SIDECARS:
                self._sidecars.popitem(last=False)
        return entries


def _clamp(entry: TimeIndexEntry | None, segment: SegmentMetadata) -> int:
    """An entry's offset within the readable ``[start_offset, length]``. (The in-memory index
    also holds appends accepted but not yet durable: those are never answered.)"""
    if entry is None:
        return segment.start_offset
    return min(max(entry.offset, segment.start_offset), segment.length)


def _last_before_time(
    chunks: Sequence[ChunkInfo], entries_of: _EntriesOf, time_ms: int
) -> TimeIndexEntry | None:
    """The latest entry made before ``time_ms``: binary search over the chunks by the time
    of their first entry (chunks without entries are stepped over)."""
    low, high = 0, len(chunks)
    best: SegmentTimeIndex | None = None
    while low < high:
        middle = (low + high) // 2
        j = middle
        while j < high and not entries_of(chunks[j]):
            j += 1
        if j == high:
            high = middle  # nothing with entries in [middle, high)
            continue
        entries = entries_of(chunks[j])
        if entries.times[0] < time_ms:
            best, low = entries, j + 1
        else:
            high = middle
    if best is None:
        return None
    return best.last_before_time(time_ms)


def _last_at_or_below(
    chunks: Sequence[ChunkInfo], entries_of: _EntriesOf, offset: int
) -> TimeIndexEntry | None:
    """The latest entry at or below ``offset``, looking back from the chunk that holds it."""
    i = bisect_right(chunks, offset, key=lambda c: c.start_offset) - 1
    while i >= 0:
        entry = entries_of(chunks[i]).last_at_or_below(offset)
        if entry is not None:
            return entry
        i -= 1
    return None


def _first(chunks: Sequence[ChunkInfo], entries_of: _EntriesOf, _: int) -> TimeIndexEntry | None:
    for chunk in chunks:
        entry = entries_of(chunk).first()
        if entry is not None:
            return entry
    return None
