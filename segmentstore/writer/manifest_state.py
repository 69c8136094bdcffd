"""The state a segment's manifest keeps (:class:`segmentstore.tier2.SegmentState`), taken
from the segment's durable metadata and time index."""

from __future__ import annotations

from segmentstore.metadata.container_metadata import SegmentMetadata
from segmentstore.metadata.time_index import SegmentTimeIndex
from segmentstore.tier2 import SegmentState


def manifest_state(segment: SegmentMetadata, time_index: SegmentTimeIndex) -> SegmentState:
    """What the manifest of ``segment`` is to keep of it now (``time_index``: the segment's
    in-memory index, which says where the index goes on)."""
    return SegmentState(
        length=segment.length,
        created_ms=segment.created_ms,
        last_modified_ms=segment.last_modified_ms,
        attributes=dict(segment.attributes),
        writers=dict(segment.writers),
        retention=dict(segment.retention),
        time_index_last_offset=time_index.last_entry_offset,
        time_index_last_time_ms=time_index.last_time_ms,
    )
