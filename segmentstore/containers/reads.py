"""What a segment container answers from its durable view, never through the Durable Log:
bytes (cached, from Tier 2, or waited for at the tail), a segment's info and attributes, the
offset of a time, the names of its active segments.

Nothing unacknowledged is ever visible: reads see only the durable metadata. A segment that
is not active is loaded first (:mod:`.active_segments`), and pinned while a read waits, so it
cannot leave memory under it. The parts a read goes through are the read path's own
(:mod:`segmentstore.reading`: the read index over the cache, Tier 2 fetches, time lookups);
here they are put together with what only the container knows: its status, its active
segments, the merges under way and its Storage Writer's view of Tier 2.
"""

from __future__ import annotations

import logging
import time

from segmentstore.containers.container_base import ContainerBase
from segmentstore.containers.status import READ_ONLY, RUNNING
from segmentstore.contracts.errors import (
    ContainerUnavailableError,
    DataCorruptedError,
    EndOfSegmentError,
    OffsetBeyondEndError,
    SegmentNotFoundError,
    SegmentTruncatedError,
)
from segmentstore.contracts.segment_info import SegmentInfo
from segmentstore.metadata.container_metadata import SegmentMetadata
from segmentstore.metadata.time_index import SegmentTimeIndex
from segmentstore.reading.tier2_reads import Tier2Reads
from segmentstore.reading.time_lookup import TimeLookup
from segmentstore.tier2 import ChunkCorruptedError, Tier2Error

log = logging.getLogger(__name__)


class ContainerReads(ContainerBase):
    """The reads of a :class:`~.container.SegmentContainer` (over its shared Tier 2 reads)."""

    corrupted_reads: int
    _tier2: Tier2Reads
    _time_lookup: TimeLookup

    def _readable(self) -> None:
        if self.status is not RUNNING and self.status is not READ_ONLY:
            raise ContainerUnavailableError(self.id, self.failure or self.status.value)

    async def _segment(self, name: str) -> SegmentMetadata:
        """The durable copy of segment ``name``, loaded first if it is not active. Pin it
        before the next await."""
        self._readable()
        segment = self._durable.segments.get(name)
        while segment is None:
            if self._log is None or name in self._log.accepted.segments:
                raise SegmentNotFoundError(name)  # a create not yet durable
            await self._active.load(name)
            self._readable()
            segment = self._durable.segments.get(name)
        segment.last_used = time.monotonic()
        return segment

    def _info(self, segment: SegmentMetadata) -> SegmentInfo:
        return SegmentInfo(
            name=segment.name,
            container=self.id,
            start_offset=segment.start_offset,
            length=segment.length,
            storage_length=segment.storage_length,
            sealed=segment.sealed,
            created_ms=segment.created_ms,
            last_modified_ms=segment.last_modified_ms,
            retention=dict(segment.retention),
            attributes=dict(segment.attributes),
        )

    async def read(
        self, name: str, offset: int, max_length: int, wait_ms: int
    ) -> bytes | memoryview:
        deadline = time.monotonic() + wait_ms / 1000
        self._readable()
        pinned = self._durable.segments.get(name) or await self._segment(name)
        pinned.pins += 1  # no eviction under a read that waits (for Tier 2, or at the tail)
        try:
            segment: SegmentMetadata | None = pinned
            while True:
                if segment is None:
                    raise SegmentNotFoundError(name)  # deleted meanwhile
                if offset < segment.start_offset:
                    raise SegmentTruncatedError(name, segment.start_offset)
                if offset > segment.length:
                    raise OffsetBeyondEndError(name, offset, segment.length)
                if offset < segment.length:
                    wanted = min(max_length, segment.length - offset)
                    data = self._effects.indexes[segment.id].read(offset, wanted)
                    if data:
                        return data
                    return await self._read_tier2(segment, offset, wanted)
                if segment.sealed:
                    raise EndOfSegmentError(name, segment.length)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return b""
                await self._effects.indexes[segment.id].wait_for_change(remaining)
                self._readable()
                segment = self._durable.segments.get(name)
        finally:
            pinned.pins -= 1

    async def _read_tier2(self, segment: SegmentMetadata, offset: int, wanted: int) -> bytes:
        """A cache miss: the bytes are in Tier 2 (under the segment's manifest, or under a
        merged source's until the writer has moved them over)."""
        for _, at, length, source in self._effects.merging.get(segment.id, ()):
            if at <= offset < at + length:
                try:
                    return await self._tier2.read(
                        source, offset - at, min(wanted, at + length - offset)
                    )
                except ChunkCorruptedError as error:
                    raise self._corrupted(error) from error
                except Tier2Error:
                    break  # the writer finished the merge meanwhile: the target has them now
        try:
            if offset >= segment.storage_length and self._writer is not None:
                # Recovered from a checkpoint older than the last flush: ask Tier 2 itself.
                await self._writer.refresh(segment.id)
            if offset >= segment.storage_length:
                # Not cached and not in Tier 2: never expected; refuse rather than answer.
                raise ContainerUnavailableError(
                    self.id,
                    f"bytes at {offset} of {segment.name!r} are neither cached nor in Tier 2",
                )
            index = self._effects.indexes[segment.id]
            return await self._tier2.read_into(index, segment, offset, wanted)
        except ChunkCorruptedError as error:
            raise self._corrupted(error) from error
        except Tier2Error as error:
            raise ContainerUnavailableError(self.id, f"Tier 2 read failed: {error}") from error

    def _corrupted(self, error: ChunkCorruptedError) -> DataCorruptedError:
        self.corrupted_reads += 1
        log.error("container %d: %s", self.id, error)
        return DataCorruptedError(error.segment, error.chunk, error.start, error.end, error.reason)

    async def offset_at(self, name: str, timestamp_ms: int) -> int:
        segment = await self._segment(name)
        segment.pins += 1
        try:
            return await self._time_lookup.offset_at(segment, timestamp_ms)
        except Tier2Error as error:
            raise ContainerUnavailableError(self.id, f"Tier 2 read failed: {error}") from error
        finally:
            segment.pins -= 1

    def time_index(self, name: str) -> SegmentTimeIndex:
        """The in-memory time index of active segment ``name`` (its Tier 1 tail)."""
        segment = self._durable.segments.get(name)
        if segment is None:
            raise SegmentNotFoundError(name)
        return self._time_index_of(segment)

    async def get_info(self, name: str) -> SegmentInfo:
        segment = await self._segment(name)
        if not segment.storage_known and self._writer is not None:
            # Recovered from a checkpoint: Tier 2 may hold more than it says, and a storage
            # length once reported never goes back.
            segment.pins += 1
            try:
                await self._writer.refresh(segment.id)
            except Tier2Error as error:
                raise ContainerUnavailableError(
                    self.id, f"cannot read the manifest of {name!r}: {error}"
                ) from error
            finally:
                segment.pins -= 1
        return self._info(segment)

    async def get_attributes(self, name: str) -> dict[str, int]:
        return dict((await self._segment(name)).attributes)

    def active_names(self, prefix: str = "") -> list[str]:
        """The names of the active segments that start with ``prefix`` (unsorted)."""
        self._readable()
        return [name for name in self._durable.segments if name.startswith(prefix)]
