"""What the store answers about a segment and about an append (docs/api.md, Info)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the client imports these results without the store's code
    from segmentstore.metadata.container_metadata import SegmentMetadata


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    name: str
    container: int
    start_offset: int
    length: int
    storage_length: int
    sealed: bool
    created_ms: int
    last_modified_ms: int
    retention: dict[str, int] = field(default_factory=dict)
    attributes: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, segment: SegmentMetadata, container: int) -> SegmentInfo:
        return cls(
            name=segment.name,
            container=container,
            start_offset=segment.start_offset,
            length=segment.length,
            storage_length=segment.storage_length,
            sealed=segment.sealed,
            created_ms=segment.created_ms,
            last_modified_ms=segment.last_modified_ms,
            retention=dict(segment.retention),
            attributes=dict(segment.attributes),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)  # not frozen: one is made per append, and a frozen init costs 3x
class AppendResult:
    """``offset`` is where the bytes start (None for an exactly-once duplicate); ``length`` is
    the segment's length after them (the current length for a duplicate)."""

    offset: int | None
    length: int
    duplicate: bool = False
    events: int | None = None  # for an append of framed events: how many


@dataclass(frozen=True, slots=True)
class EventsRead:
    """Whole framed events read from a segment, and the offset of the next event."""

    data: bytes
    next_offset: int
