"""Reads that miss the cache: fetched from Tier 2 in aligned blocks, then cached.

A block is fetched through the segment's manifest (the only truth about Tier 2), clamped to
what Tier 2 holds and to the gap in the read index around the offset, so a fetched entry
never overlaps one that is cached already. If the cache has no room even after eviction, the
bytes are served without being cached. Every fetched byte is checked against its chunk's
checksums first (``ChunkCorruptedError`` otherwise, which the container answers
``data_corrupted``): damaged bytes are never cached nor served.
"""

from __future__ import annotations

import asyncio
import contextlib

from segmentstore.cache import CacheFullError
from segmentstore.metadata.container_metadata import SegmentMetadata
from segmentstore.reading.cache_manager import CacheManager
from segmentstore.reading.read_index import SegmentReadIndex
from segmentstore.tier2 import ChunkCorruptedError, ChunkStorage, SegmentReader


class Tier2Reads:
    def __init__(
        self, storage: ChunkStorage, cache: CacheManager, block_bytes: int, verify: bool = True
    ) -> None:
        self.storage = storage
        self._reader = SegmentReader(storage, verify=verify)
        self._cache = cache
        self._block = block_bytes

    def list_names(self, prefix: str, after: str | None, limit: int | None) -> list[str]:
        """Blocking: the names of the segments whose manifests Tier 2 holds, that start with
        ``prefix`` and come after ``after``, in order, at most ``limit`` (None: all)."""
        return self._reader.list_names(prefix, after=after, limit=limit)

    async def read(self, name: str, offset: int, length: int) -> bytes:
        """Bytes of ``name`` straight from Tier 2, not cached."""
        return await asyncio.to_thread(self._reader.read, name, offset, length)

    async def read_into(
        self, index: SegmentReadIndex, segment: SegmentMetadata, offset: int, wanted: int
    ) -> bytes:
        """Up to ``wanted`` bytes from ``offset`` (in ``[start_offset, storage_length)``),
        fetched in an aligned block that is then kept in ``index``."""
        name, storage_length = segment.name, segment.storage_length
        gap_start, gap_end = index.gap_around(offset)
        # Never below the start offset: the manifest's may lag it, and a read below it would
        # come back clamped, shifting every byte.
        start = max(offset - offset % self._block, gap_start, segment.start_offset)
        end = min(max(start + self._block, offset + wanted), gap_end, storage_length)
        try:
            data = await asyncio.to_thread(self._reader.read, name, start, end - start)
        except ChunkCorruptedError as damage:
            # The aligned fetch took in a damaged block: fetch only the side of it that holds
            # the offset, so that the answer is the bytes up to the damage (if the offset is
            # in the damage, the answer is the error).
            if offset >= damage.end:
                start = damage.end
            elif offset < damage.start:
                end = damage.start
            else:
                raise
            data = await asyncio.to_thread(self._reader.read, name, start, end - start)
        # The index may have changed during the fetch (another reader, a truncation): keep
        # only what still falls in a gap.
        if len(data) == end - start and index.gap_around(start) == (gap_start, gap_end):
            self._cache.evict(len(data) + self._cache.cache.block_bytes)
            # If it still does not fit, the cache is full of bytes that only Tier 1 has: the
            # block is served uncached.
            with contextlib.suppress(CacheFullError):
                index.insert_fetched(start, data)
        within = offset - start
        return data[within : within + wanted]
