"""Container metadata: what a container knows about each of its segments.

A container keeps two copies. The *accepted* copy is what the operation processor validates
new operations against: it already includes every operation queued for Tier 1. The *durable*
copy only includes operations that Tier 1 has acknowledged; it is what readers see and what
recovery rebuilds. Both are changed by the same ``Operation.apply`` so they cannot drift apart.

Invariants of every segment: ``start_offset <= length``, ``storage_length <= length``, and
``length`` and ``storage_length`` never decrease.

Only *active* segments are here: one that was not used for a while, and whose bytes and state
are all in its Tier 2 manifest, is evicted from both copies, and an operation that names it
loads it back first (``LoadSegmentOperation``, :mod:`segmentstore.containers.active_segments`).
So nothing here, checkpoints included, grows with the segments a container no longer uses.
"""

from __future__ import annotations

import copy
import heapq
import time
from dataclasses import dataclass, field, fields
from typing import Any

from segmentstore.metadata.time_index import SegmentTimeIndex


@dataclass(slots=True)
class SegmentMetadata:
    id: int
    name: str
    created_ms: int
    last_modified_ms: int
    start_offset: int = 0
    length: int = 0
    storage_length: int = 0
    sealed: bool = False
    sealed_in_storage: bool = False
    merged: bool = False
    deleted: bool = False
    attributes: dict[str, int] = field(default_factory=dict)
    # Exactly-once appends: the highest sequence number applied per writer id.
    writers: dict[str, int] = field(default_factory=dict)
    retention: dict[str, int] = field(default_factory=dict)
    # Append boundaries and their times for the bytes not yet in Tier 2 (:offsetAt, retention).
    time_index: SegmentTimeIndex = field(default_factory=SegmentTimeIndex)
    # In memory only, never serialized: the sequence number of the last operation applied to
    # this segment (the accepted and the durable copy agree on it once nothing is in flight),
    # when it was last used, how many calls are using it now (none may be evicted), whether
    # Tier 1 knows it (False: loaded from Tier 2 for reads only; its first change logs a
    # LoadSegmentOperation first, so that replay knows the segment it changes), and whether
    # storage_length is what Tier 2 holds (False after recovery until the manifest is read:
    # a checkpoint's figure may be behind it, and a reported storage length never goes back).
    last_sequence: int = 0
    last_used: float = field(default_factory=time.monotonic)
    pins: int = 0
    logged: bool = True
    storage_known: bool = True
    # When its time retention policy next has data to expire (ms since the epoch; 0: not known
    # yet): the retention enforcer says, and an eviction passes it on to the retention watch.
    retention_due_ms: int = 0

    def check_invariants(self) -> None:
        if not 0 <= self.start_offset <= self.length:
            raise AssertionError(f"{self.name}: start {self.start_offset} > length {self.length}")
        if not 0 <= self.storage_length <= self.length:
            raise AssertionError(
                f"{self.name}: storage {self.storage_length} > length {self.length}"
            )

    def to_dict(self) -> dict[str, Any]:
        document = {name: copy.copy(getattr(self, name)) for name in _SERIALIZED}
        document["time_index"] = self.time_index.to_json()
        return document

    def to_row(self) -> list[Any]:
        """The serialized fields in :data:`ROW_FIELDS` order (a checkpoint's row). It shares
        this segment's maps: encode it before anything changes them."""
        index = self.time_index
        return [
            self.id,
            self.name,
            self.created_ms,
            self.last_modified_ms,
            self.start_offset,
            self.length,
            self.storage_length,
            self.sealed,
            self.sealed_in_storage,
            self.merged,
            self.deleted,
            self.attributes,
            self.writers,
            self.retention,
            [index.offsets.tolist(), index.times.tolist(), index.last_entry_offset,
             index.last_time_ms] if index.offsets else
            [[], [], index.last_entry_offset, index.last_time_ms],
        ]  # fmt: skip

    @classmethod
    def from_row(cls, row: list[Any]) -> SegmentMetadata:
        index = row[14]
        segment = cls(
            row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], row[9],
            row[10], row[11], row[12], row[13],
        )  # fmt: skip
        time_index = segment.time_index
        offsets, times, time_index.last_entry_offset, time_index.last_time_ms = index
        if offsets:
            time_index.offsets.extend(offsets)
            time_index.times.extend(times)
        return segment

    def copy(self) -> SegmentMetadata:
        """An independent copy (its maps and time index are copied too)."""
        # Positional, not dataclasses.replace: a recovery copies every active segment.
        return SegmentMetadata(
            self.id,
            self.name,
            self.created_ms,
            self.last_modified_ms,
            self.start_offset,
            self.length,
            self.storage_length,
            self.sealed,
            self.sealed_in_storage,
            self.merged,
            self.deleted,
            dict(self.attributes),
            dict(self.writers),
            dict(self.retention),
            self.time_index.copy(),
            self.last_sequence,
            self.last_used,
            self.pins,
            self.logged,
            self.storage_known,
            self.retention_due_ms,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SegmentMetadata:
        values = dict(data)
        index = values.pop("time_index", None)
        segment = cls(**values)
        if index is not None:
            segment.time_index = SegmentTimeIndex.from_json(index)
        return segment


_IN_MEMORY_ONLY = frozenset(
    {"last_sequence", "last_used", "pins", "logged", "storage_known", "retention_due_ms"}
)
_SERIALIZED = tuple(f.name for f in fields(SegmentMetadata) if f.name not in _IN_MEMORY_ONLY)
# A checkpoint's segments are rows of these (a list per segment, not an object: a checkpoint
# of many active segments is half the size and encodes and decodes in half the time).
ROW_FIELDS = _SERIALIZED


@dataclass(slots=True)
class ContainerMetadata:
    container_id: int
    epoch: int = 0
    # The sequence number of the last operation applied; the next one is strictly higher.
    sequence: int = 0
    next_segment_id: int = 1
    # Every segment the container holds, active or not (creates add one; deletes and merges,
    # which remove their source, take one away; loads and evictions change nothing).
    segment_count: int = 0
    # Inactive segments with a time retention policy, as a heap of (when their next data
    # expires, name): they come back into memory then, for the retention enforcer.
    retention_watch: list[tuple[int, str]] = field(default_factory=list)
    segments: dict[str, SegmentMetadata] = field(default_factory=dict)
    by_id: dict[int, SegmentMetadata] = field(default_factory=dict)
    # A setting, not state: how sparse the segments' time indexes are (never serialized; a
    # changed setting only changes how dense later entries are).
    time_index_interval: int = 4096
    # Whether applying operations maintains the segments' time indexes. A running container
    # keeps them in the accepted copy only (which checkpoints snapshot; readers use it too),
    # so the durable copy does not pay for them a second time.
    keeps_time_index: bool = True

    def add(self, segment: SegmentMetadata) -> None:
        self.segments[segment.name] = segment
        self.by_id[segment.id] = segment
        self.next_segment_id = max(self.next_segment_id, segment.id + 1)

    def remove(self, segment_id: int) -> SegmentMetadata:
        segment = self.by_id.pop(segment_id)
        del self.segments[segment.name]
        return segment

    def snapshot(self) -> dict[str, Any]:
        """A self-contained picture of this metadata (the body of a checkpoint)."""
        return {
            "container_id": self.container_id,
            "sequence": self.sequence,
            "next_segment_id": self.next_segment_id,
            "segment_count": self.segment_count,
            "retention_watch": [list(entry) for entry in self.retention_watch],
            "segment_fields": list(ROW_FIELDS),
            "segments": [s.to_row() for s in self.segments.values()],
        }

    @classmethod
    def from_snapshot(cls, data: dict[str, Any], epoch: int) -> ContainerMetadata:
        metadata = cls(
            container_id=data["container_id"],
            epoch=epoch,
            sequence=data["sequence"],
            next_segment_id=data["next_segment_id"],
        )
        rows = data.get("segment_fields") == list(ROW_FIELDS)
        for entry in data["segments"]:
            # Checkpoints written before rows held an object per segment.
            metadata.add(
                SegmentMetadata.from_row(entry) if rows else SegmentMetadata.from_dict(entry)
            )
        # Checkpoints written before segments could leave memory held every segment.
        metadata.segment_count = data.get("segment_count", len(metadata.segments))
        metadata.retention_watch = [(due, name) for due, name in data.get("retention_watch", [])]
        heapq.heapify(metadata.retention_watch)
        return metadata

    def copy(self) -> ContainerMetadata:
        """An independent copy, segment by segment (no deep copy of the whole)."""
        twin = ContainerMetadata(
            container_id=self.container_id,
            epoch=self.epoch,
            sequence=self.sequence,
            next_segment_id=self.next_segment_id,
            segment_count=self.segment_count,
            retention_watch=list(self.retention_watch),
            time_index_interval=self.time_index_interval,
            keeps_time_index=self.keeps_time_index,
        )
        for segment in self.segments.values():
            twin.add(segment.copy())
        return twin

    def check_invariants(self) -> None:
        for segment in self.segments.values():
            segment.check_invariants()
