"""What the store answers about a segment and about an append (docs/api.md, Info)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


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
