"""Reading one planned partition from Tier 2 into Arrow record batches (on an executor).

Bytes are read in windows of at most ``window_bytes`` that never cross a chunk edge, so every
event of a window starts in the same chunk (the ``chunk`` column). A window that ends inside an
event is followed by one that starts at that event, so no bytes are copied to stitch events
together: the few bytes of the cut event are read again. An event longer than a window, or
one running across a chunk edge, gets a window of its own that is exactly its size.

A partition with ``exact`` set must land exactly on its ``stop``, the next partition's start:
this is what proves that split (``BrokenFramingError`` otherwise). The last partition of a
segment stops at the last whole event before its ``stop``.

Every byte is verified against its chunk's checksums (unless ``verify_checksums`` is off). A
damaged block (bytes that do not match, or a chunk cut short) is ``DataLossError`` naming the
segment, the chunk and the range; with ``fail_on_data_loss`` false the events wholly before it
are read, the reader resumes at the first recorded event boundary at or after its end (the
first event after the block: blocks end on aligned index windows), and the skip is logged and
counted. So exactly the events that touch the damaged block are missing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa

from segmentstore.jobs.chunk_reads import MissingChunkError, chunk_at, read_range
from segmentstore.jobs.errors import BrokenFramingError, DataLossError
from segmentstore.jobs.framing import bytes_batch, events_batch, walk_events
from segmentstore.jobs.planner import ScanPartition
from segmentstore.tier2 import (
    ChunkCorruptedError,
    ChunkStorage,
    ManifestStore,
    SegmentReader,
    Tier2Error,
)

log = logging.getLogger(__name__)

WINDOW_BYTES = 4 * 1024 * 1024


def read_partition(
    storage: ChunkStorage,
    partition: ScanPartition,
    *,
    fail_on_data_loss: bool = True,
    window_bytes: int = WINDOW_BYTES,
    verify_checksums: bool = True,
) -> Iterator[pa.RecordBatch]:
    """The rows of ``partition``; a missing chunk is ``DataLossError``, or, with
    ``fail_on_data_loss`` false, a warning and the end of the partition; a damaged block is
    ``DataLossError``, or a warning and a skip to the first event after it."""
    read = _read_events if partition.mode == "events" else _read_bytes
    reads = _Reads(SegmentReader(storage, verify=verify_checksums), partition, fail_on_data_loss)
    try:
        yield from read(reads, partition, window_bytes)
    except MissingChunkError as missing:
        chunk = missing.chunk
        reason = f"bytes [{chunk.start_offset}, {chunk.end_offset}) cannot be read: {missing}"
        reason += _since_planned(storage, partition)
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


def _since_planned(storage: ChunkStorage, partition: ScanPartition) -> str:
    """Why a planned chunk may be gone: the segment deleted, or created again, since."""
    try:
        found = ManifestStore(storage).load(partition.segment)
    except Tier2Error:
        return ""
    if found is None:
        return " (the segment was deleted after the scan was planned)"
    if partition.segment_id is not None and found[0].segment_id != partition.segment_id:
        return (
            f" (the segment was deleted and created again after the scan was planned: segment"
            f" id {partition.segment_id}, now {found[0].segment_id})"
        )
    return ""


class _Reads:
    """The partition's verified reads, and what to do about a damaged block."""

    def __init__(self, reader: SegmentReader, partition: ScanPartition, fail: bool) -> None:
        self.reader = reader
        self.partition = partition
        self.fail = fail
        self.skipped = 0  # damaged ranges skipped in this partition

    def read(self, start: int, end: int) -> bytes | memoryview:
        return read_range(self.reader, self.partition.segment, self.partition.chunks, start, end)

    def damaged(self, damage: ChunkCorruptedError, resume: int | None) -> None:
        """Fail, or log the skip from the damaged block to ``resume`` (None: the end)."""
        segment = self.partition.segment
        if self.fail:
            reason = f"bytes [{damage.start}, {damage.end}) are damaged: {damage.reason}"
            raise DataLossError(segment, reason, damage.chunk) from damage
        self.skipped += 1
        log.warning(
            "segment %r: chunk %s bytes [%d, %d) are damaged (%s); skipped up to %s"
            " (damaged ranges skipped in this part of the scan: %d)",
            segment, damage.chunk, damage.start, damage.end, damage.reason,
            "its end" if resume is None else f"the event boundary at {resume}", self.skipped,
        )  # fmt: skip

    def next_boundary(self, offset: int) -> int | None:
        """The first recorded event boundary at or after ``offset`` in the partition."""
        for chunk in self.partition.chunks:
            if chunk.end_offset <= offset:
                continue
            for entry in self.reader.time_index(chunk):
                if entry.offset >= offset:
                    return entry.offset
        return None


def _read_events(
    reads: _Reads, partition: ScanPartition, window_bytes: int
) -> Iterator[pa.RecordBatch]:
    segment, stop = partition.segment, partition.stop
    position, need = partition.start, 0
    while position < stop:
        chunk = chunk_at(partition.chunks, position)
        window_end = min(chunk.end_offset, position + window_bytes, stop)
        read_end = min(max(window_end, position + need), stop)
        try:
            data = reads.read(position, read_end)
        except ChunkCorruptedError as damage:
            if damage.start > position:  # the whole events before the damaged block
                intact = reads.read(position, damage.start)
                walk = walk_events(intact, segment, position)
                if walk.starts:
                    yield events_batch(intact, walk, segment, position, chunk.key)
            resume = reads.next_boundary(damage.end)
            reads.damaged(damage, resume)
            if resume is None or resume >= stop:
                position = stop  # what follows belongs to the next part of the scan
                break
            position, need = resume, 0
            continue
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
    reads: _Reads, partition: ScanPartition, window_bytes: int
) -> Iterator[pa.RecordBatch]:
    position = partition.start
    while position < partition.stop:
        end = min(position + window_bytes, partition.stop)
        chunk = chunk_at(partition.chunks, position)
        try:
            data = reads.read(position, end)
        except ChunkCorruptedError as damage:
            if damage.start > position:
                intact = bytes(reads.read(position, damage.start))
                yield bytes_batch(intact, partition.segment, position, chunk.key)
            reads.damaged(damage, damage.end)
            position = max(damage.end, position + 1)
            continue
        yield bytes_batch(bytes(data), partition.segment, position, chunk.key)
        position = end
