"""Reading one planned partition from Tier 2 into Arrow record batches (on an executor).

Bytes are read in windows of at most ``window_bytes`` that never cross a chunk edge, so every
event of a window starts in the same chunk (the ``chunk`` column). A window that ends inside an
event is followed by one that starts at that event, so no bytes are copied to stitch events
together: the few bytes of the cut event are read again. An event longer than a window, or
one running across a chunk edge, gets a window of its own that is exactly its size.

A partition with ``exact`` set must land exactly on its ``stop``, the next partition's start:
this is what proves that split (``BrokenFramingError`` otherwise). The last partition of a
segment stops at the last whole event before its ``stop``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa

from segmentstore.jobs.chunk_reads import MissingChunkError, chunk_at, read_range
from segmentstore.jobs.errors import BrokenFramingError, DataLossError
from segmentstore.jobs.framing import bytes_batch, events_batch, walk_events
from segmentstore.jobs.planner import ScanPartition
from segmentstore.tier2 import ChunkStorage

log = logging.getLogger(__name__)

WINDOW_BYTES = 4 * 1024 * 1024


def read_partition(
    storage: ChunkStorage,
    partition: ScanPartition,
    *,
    fail_on_data_loss: bool = True,
    window_bytes: int = WINDOW_BYTES,
) -> Iterator[pa.RecordBatch]:
    """The rows of ``partition``; a missing chunk is ``DataLossError``, or, with
    ``fail_on_data_loss`` false, a warning and the end of the partition."""
    read = _read_events if partition.mode == "events" else _read_bytes
    try:
        yield from read(storage, partition, window_bytes)
    except MissingChunkError as missing:
        chunk = missing.chunk
        reason = f"bytes [{chunk.start_offset}, {chunk.end_offset}) cannot be read: {missing}"
        if fail_on_data_loss:
            raise DataLossError(partition.segment, reason, chunk.key) from missing.__cause__
        log.warning(
            "segment %r: skipping [%d, %d) up to the next known event boundary: chunk %s: %s",
            partition.segment,
            max(partition.start, chunk.start_offset),
            partition.stop,
            chunk.key,
            missing,
        )


def _read_events(
    storage: ChunkStorage, partition: ScanPartition, window_bytes: int
) -> Iterator[pa.RecordBatch]:
    segment, stop = partition.segment, partition.stop
    position, need = partition.start, 0
    while position < stop:
        chunk = chunk_at(partition.chunks, position)
        window_end = min(chunk.end_offset, position + window_bytes, stop)
        read_end = min(max(window_end, position + need), stop)
        data = read_range(storage, partition.chunks, position, read_end)
        walk = walk_events(data, segment, position)
        if walk.starts:
            yield events_batch(data, walk, segment, position, chunk.key)
        position += walk.whole
        need = walk.need
        if need and read_end == stop:
            break  # the next event runs past the stop
    if partition.exact and position != stop:
        raise BrokenFramingError(
            segment,
            stop,
            f"the event at offset {position} runs past it ({need} bytes from {position}), "
            "though the next part of the scan starts there",
        )


def _read_bytes(
    storage: ChunkStorage, partition: ScanPartition, window_bytes: int
) -> Iterator[pa.RecordBatch]:
    for position in range(partition.start, partition.stop, window_bytes):
        end = min(position + window_bytes, partition.stop)
        chunk = chunk_at(partition.chunks, position)
        data = read_range(storage, partition.chunks, position, end)
        yield bytes_batch(data, partition.segment, position, chunk.key)
