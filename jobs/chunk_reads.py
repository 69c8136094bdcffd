"""Reading a range of segment bytes from the chunks that a manifest names."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from segmentstore.tier2 import ChunkInfo, ChunkNotFoundError, ChunkRangeError, ChunkStorage


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


def read_range(storage: ChunkStorage, chunks: Sequence[ChunkInfo], start: int, end: int) -> bytes:
    """Segment bytes ``[start, end)`` from ``chunks``, which must hold them."""
    pieces = []
    position = start
    while position < end:
        chunk = chunk_at(chunks, position)
        high = min(end, chunk.end_offset)
        try:
            pieces.append(storage.read(chunk.key, position - chunk.start_offset, high - position))
        except (ChunkNotFoundError, ChunkRangeError) as e:
            raise MissingChunkError(chunk, e) from e
        position = high
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)
