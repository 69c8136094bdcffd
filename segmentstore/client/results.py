"""What the client returns beyond the embedded API's own types.

Info and appends come back as the contract's
:class:`~segmentstore.contracts.segment_info.SegmentInfo` and
:class:`~segmentstore.contracts.segment_info.AppendResult`, so code moves between the embedded
store and HTTP unchanged. Reads add what the ``Segment-*`` headers say about the segment.
"""

from __future__ import annotations

from dataclasses import dataclass

from segmentstore.contracts.events import HEADER as EVENT_HEADER


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Bytes read from ``offset`` (empty when a tail read's ``wait_ms`` passed with no data),
    and the segment's state just after the read."""

    data: bytes
    offset: int
    start_offset: int
    length: int
    sealed: bool

    @property
    def next_offset(self) -> int:
        return self.offset + len(self.data)


@dataclass(frozen=True, slots=True)
class EventsReadResult:
    """Whole framed events from ``offset``; ``next_offset`` is the next read's ``offset``."""

    data: bytes
    offset: int
    next_offset: int
    start_offset: int
    length: int
    sealed: bool

    def events(self) -> list[bytes]:
        """The payloads of the events in ``data``."""
        payloads = []
        position = 0
        while position < len(self.data):
            _, size = EVENT_HEADER.unpack_from(self.data, position)
            position += EVENT_HEADER.size
            payloads.append(self.data[position : position + size])
            position += size
        return payloads


@dataclass(frozen=True, slots=True)
class SegmentPage:
    """One page of a listing; pass ``next`` as ``after`` for the following page."""

    segments: list[str]
    next: str | None


@dataclass(frozen=True, slots=True)
class ContainerState:
    id: int
    epoch: int
    status: str  # running, recovering or offline
    segments: int
    tier1_bytes: int
    tier2_lag_bytes: int
    last_sequence: int
