"""Reading a range of segment bytes from the chunks that a manifest names, verified against
each chunk's checksums (unless the reader was made not to verify)."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from segmentstore.tier2 import ChunkInfo, ChunkNotFoundError, ChunkRangeError, SegmentReader


class MissingChunkError(Exception):
    """A chunk the plan counted on is gone (or shorter than its manifest says): the caller
    decides whether that is data loss or only a boundary it cannot prove."""

    def __init__(self, chunk: ChunkInfo, cause: Exception) -> None:
        super().__init__(str(cause))
        self.chunk = chunk


def chunk_at(chunks: Sequence[ChunkInfo], offset: int) -> ChunkInfo:
    """The non-empty chunk that holds ``offset``."""
    index = bisect_right(chunks, offset, key=lambda c: c.start_offset) - 1
    while chunks[index].end_offset <= offset:  # empty chunks share a start offset
        index += 1
    return chunks[index]


def read_range(
    reader: SegmentReader, segment: str, chunks: Sequence[ChunkInfo], start: int, end: int
) -> bytes | memoryview:
    """Segment bytes ``[start, end)`` from ``chunks``, which must hold them (maybe a view into
    a larger read: the scan only parses them, and copying each window cost a tenth of it).

    ``MissingChunkError`` for a chunk that is gone (or short, unverified);
    ``ChunkCorruptedError`` (Tier 2's) for bytes that fail their checksum."""
    try:
        return reader.view_chunks(segment, chunks, start, end)
    except (ChunkNotFoundError, ChunkRangeError) as e:
        chunk = next((c for c in chunks if c.key == e.key), chunk_at(chunks, start))
        raise MissingChunkError(chunk, e) from e
