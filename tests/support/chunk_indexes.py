"""Chunks written by hand in tests get the index the Storage Writer would give them."""

from __future__ import annotations

from segmentstore.tier2 import ChunkIndexBuilder, ChunkInfo, ChunkStorage
from segmentstore.tier2.chunk_index import index_object_key


def write_index(
    storage: ChunkStorage,
    chunk: ChunkInfo,
    data: bytes,
    boundaries: list[tuple[int, int]] | None = None,
    block_bytes: int = 1024,
) -> None:
    """The index of ``chunk``, whose bytes are ``data``: checksums, and ``boundaries``
    (``(segment offset, time_ms)``; by default one at the chunk's start)."""
    if boundaries is None:
        boundaries = [(chunk.start_offset, 0)]
    records = ChunkIndexBuilder(chunk.start_offset, block_bytes).add([data], boundaries)
    storage.create(index_object_key(chunk), [records])
