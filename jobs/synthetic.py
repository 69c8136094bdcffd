"""Event segments written straight into Tier 2, laid out as the Storage Writer lays them out.

For benchmarks and tests of the scan: appends of whole events are cut into chunks at a fixed
size (so chunks begin and end inside events), each chunk has an index with its checksums and
the first append boundary of every aligned ``boundary_every_bytes``, and a manifest names the
chunks. The
payloads are deterministic (``payload_of``), so a reader's output can be checked without
keeping them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from segmentstore.tier2 import (
    ChunkIndexBuilder,
    ChunkInfo,
    ChunkStorage,
    ManifestStore,
    SegmentManifest,
    TimeIndexEntry,
    chunk_key,
)
from segmentstore.tier2.chunk_index import index_object_key

CHECKSUM_BLOCK_BYTES = 256 * 1024  # the store's default (storage_writer.checksum_block_bytes)

HEADER = struct.Struct(">ii")


def payload_of(segment_index: int, event_index: int, size: int) -> bytes:
    """The payload of event ``event_index`` of the ``segment_index``-th synthetic segment."""
    stamp = f"{segment_index}:{event_index}:".encode()
    return (stamp * (size // len(stamp) + 1))[:size]


def framed_appends(
    segment_index: int, events: int, event_bytes: int, events_per_append: int
) -> Iterator[bytes]:
    """The segment's appends, each ``events_per_append`` framed events."""
    for first in range(0, events, events_per_append):
        yield b"".join(
            HEADER.pack(0, event_bytes) + payload_of(segment_index, i, event_bytes)
            for i in range(first, min(first + events_per_append, events))
        )


def write_segment(
    storage: ChunkStorage,
    name: str,
    appends: Iterator[bytes],
    *,
    chunk_bytes: int,
    boundary_every_bytes: int = 4096,
    sidecars: bool = True,
) -> SegmentManifest:
    """Write ``appends`` as segment ``name`` (chunks, their indexes unless ``sidecars`` is
    false, then the manifest)."""
    chunks: list[ChunkInfo] = []
    pending = bytearray()
    boundaries: list[TimeIndexEntry] = []
    written = 0  # segment offset of pending[0]
    last_boundary = -boundary_every_bytes

    def roll(size: int) -> None:
        nonlocal written, boundaries
        key = chunk_key(name, written, 0)
        data = bytes(pending[:size])
        storage.create(key, [data])
        chunk = ChunkInfo(key, written, size)
        if sidecars:
            inside = [b for b in boundaries if b.offset < written + size]
            index = ChunkIndexBuilder(written, CHECKSUM_BLOCK_BYTES).add([data], inside)
            storage.create(index_object_key(chunk), [index])
            boundaries = [b for b in boundaries if b.offset >= written + size]
        chunks.append(chunk)
        del pending[:size]
        written += size

    for append in appends:
        offset = written + len(pending)
        if offset // boundary_every_bytes != last_boundary // boundary_every_bytes:
            boundaries.append(TimeIndexEntry(offset, 0))
            last_boundary = offset
        pending += append
        while len(pending) >= chunk_bytes:
            roll(chunk_bytes)
    if pending:
        roll(len(pending))
    manifest = SegmentManifest(
        name=name,
        chunks=tuple(chunks),
        storage_length=written,
        start_offset=0,
        sealed=True,
        owner_epoch=0,
        version=0,
    )
    ManifestStore(storage).save(manifest, None, 0)
    return manifest
