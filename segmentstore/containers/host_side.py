"""What a segment container's Storage Writer and active segments call back into: the
container as their host (:class:`~segmentstore.writer.writer.WriterHost`,
:class:`~.active_segments.ActiveSegmentsHost`).

The Storage Writer takes the bytes it flushes from the read index, and tells the container
what Tier 2 now holds (storage lengths, seals, merges and deletes applied) and asks what a
segment's manifest is to keep of it. The active segments ask whether a segment is at rest
(everything of it in Tier 2, nothing in memory waiting on it), and have it leave memory or
come back into it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from segmentstore.containers.active_segments import ActiveSegments
from segmentstore.containers.container_base import ContainerBase
from segmentstore.containers.status import READ_ONLY, RUNNING
from segmentstore.metadata.container_metadata import ContainerMetadata, SegmentMetadata
from segmentstore.metadata.time_index import SegmentTimeIndex
from segmentstore.tier2 import SegmentState
from segmentstore.writer.manifest_state import manifest_state


class ContainerHostSide(ContainerBase):
    """The host side of a :class:`~.container.SegmentContainer`."""

    # -- the Storage Writer's view (WriterHost) -------------------------------------------

    def pin_pending(
        self, segment_id: int, offset: int, length: int
    ) -> tuple[list[memoryview], Callable[[], None]]:
        index = self._effects.indexes[segment_id]
        return index.pin_views(offset, length), index.unpin

    def storage_advanced(self, segment_id: int, storage_length: int) -> None:
        for metadata in self._metadata_copies():
            segment = metadata.by_id.get(segment_id)
            if segment is not None:
                segment.storage_known = True
            if segment is not None and storage_length > segment.storage_length:
                segment.storage_length = min(storage_length, segment.length)
                # The flush wrote these entries into the chunk's sidecar.
                segment.time_index.forget_below(segment.storage_length)
        self._effects.storage_advanced(segment_id, storage_length)
        self.truncate_behind_tier2()

    def truncate_behind_tier2(self) -> None:
        """While read-only (Tier 1 full, no more checkpoints written), truncate Tier 1 behind
        what Tier 2 now holds: that is what gives its recovery room."""
        if self.status is READ_ONLY and self._log is not None:
            self._log.truncate_behind_tier2()

    def segment_state(self, segment_id: int) -> tuple[SegmentState, int] | None:
        segment = self._durable.by_id.get(segment_id)
        if segment is None:
            return None
        return manifest_state(segment, self._time_index_of(segment)), segment.last_sequence

    def time_index_entries(self, segment_id: int, start: int, end: int) -> list[tuple[int, int]]:
        segment = self._durable.by_id.get(segment_id)
        return [] if segment is None else self._time_index_of(segment).between(start, end)

    def sealed_in_storage(self, segment_id: int) -> None:
        for metadata in self._metadata_copies():
            segment = metadata.by_id.get(segment_id)
            if segment is not None:
                segment.sealed_in_storage = True

    def structural_applied(self, sequence: int) -> None:
        self._effects.structural_applied(sequence)

    def _metadata_copies(self) -> list[ContainerMetadata]:
        # Storage lengths are not operations: both copies learn them, and checkpoints of the
        # accepted copy persist them (recovery reconciles with Tier 2 in any case).
        copies = [self._durable]
        if self._log is not None:
            copies.append(self._log.accepted)
        return copies

    # -- active segments (ActiveSegmentsHost) ---------------------------------------------

    @property
    def accepted(self) -> ContainerMetadata | None:
        return None if self._log is None else self._log.accepted

    def removal_pending(self, name: str) -> bool:
        return self._writer is not None and self._writer.removal_pending(name)

    def at_rest(self, segment: SegmentMetadata) -> bool:
        writer = self._writer
        if writer is None or self.status is not RUNNING:
            return False
        index = self._effects.indexes.get(segment.id)
        if (index is not None and index.in_use) or segment.id in self._effects.merging:
            return False
        if segment.retention.get("time_ms") is not None and not segment.retention_due_ms:
            return False  # the retention enforcer has yet to say when it next expires data
        if not writer.evictable(segment):
            writer.want_saved(segment.id)
            return False
        return True

    def evict(self, segment_id: int) -> None:
        assert self._log is not None and self._writer is not None
        accepted = self._log.accepted
        segment = accepted.remove(segment_id)
        durable = self._durable.remove(segment_id)
        if segment.retention.get("time_ms") is not None:
            # Back into memory when its data next expires (checkpoints carry the watch).
            heapq.heappush(accepted.retention_watch, (durable.retention_due_ms, segment.name))
        self._effects.evicted(segment_id)
        self._writer.forget(segment_id)

    def insert(self, segment: SegmentMetadata) -> None:
        assert self._log is not None
        self._log.accepted.add(segment)
        durable = segment.copy()
        durable.time_index = SegmentTimeIndex()  # the accepted copy keeps it
        self._durable.add(durable)
        self._effects.loaded(segment.id, segment.storage_length)

    async def checkpoint(self) -> None:
        if self._log is None or self.status is not RUNNING:
            raise self._refusal()
        await self._log.checkpoint()

    @property
    def active_segments(self) -> ActiveSegments:
        return self._active
