"""What a segment's manifest keeps of the segment besides its bytes: everything the service
needs to serve it again after it left memory.

The service evicts a segment that it has not used for a while once its bytes are all in Tier 2,
and loads it back from its manifest on its next use. So the manifest carries, beside the chunk
list, the segment's other state as of a save: attributes, the writer ids and sequence numbers
that make appends exactly-once, its retention policy, its times, and where its time index
continues. ``length`` is the segment's length when the state was taken: a state is complete
(the segment can be loaded from it) only when that equals the manifest's ``storage_length``.

Readers of segment data (``tier2 cat``, Spark) need none of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from segmentstore.tier2.errors import InvalidManifestError

_FIELDS = {
    "length",
    "created_ms",
    "last_modified_ms",
    "attributes",
    "writers",
    "retention",
    "time_index",
}


@dataclass(frozen=True, slots=True)
class SegmentState:
    length: int
    created_ms: int
    last_modified_ms: int
    attributes: Mapping[str, int] = field(default_factory=dict)
    # writer id -> the highest sequence number applied (exactly-once appends)
    writers: Mapping[str, int] = field(default_factory=dict)
    retention: Mapping[str, int] = field(default_factory=dict)
    # Where the segment's sparse time index goes on: the offset of its latest entry (the next
    # is due an interval later) and the time of its latest append; -1: none yet.
    time_index_last_offset: int = -1
    time_index_last_time_ms: int = -1

    def to_document(self) -> dict[str, Any]:
        return {
            "length": self.length,
            "created_ms": self.created_ms,
            "last_modified_ms": self.last_modified_ms,
            "attributes": dict(self.attributes),
            "writers": dict(self.writers),
            "retention": dict(self.retention),
            "time_index": [self.time_index_last_offset, self.time_index_last_time_ms],
        }

    @staticmethod
    def from_document(document: Any) -> SegmentState:
        """Parse a state; ``InvalidManifestError`` (without a key) if it is malformed."""
        if not isinstance(document, dict) or document.keys() != _FIELDS:
            raise InvalidManifestError("", f"the segment state must have the fields {_FIELDS}")
        for name in ("length", "created_ms", "last_modified_ms"):
            if type(document[name]) is not int or document[name] < 0:
                raise InvalidManifestError("", f"state.{name} must be a non-negative integer")
        maps = {}
        for name in ("attributes", "writers", "retention"):
            value = document[name]
            if not isinstance(value, dict) or not all(
                isinstance(k, str) and type(v) is int for k, v in value.items()
            ):
                raise InvalidManifestError("", f"state.{name} must map strings to integers")
            maps[name] = value
        time_index = document["time_index"]
        if (
            not isinstance(time_index, list)
            or len(time_index) != 2
            or not all(type(v) is int and v >= -1 for v in time_index)
        ):
            raise InvalidManifestError("", "state.time_index must be [offset, time_ms]")
        return SegmentState(
            length=document["length"],
            created_ms=document["created_ms"],
            last_modified_ms=document["last_modified_ms"],
            attributes=maps["attributes"],
            writers=maps["writers"],
            retention=maps["retention"],
            time_index_last_offset=time_index[0],
            time_index_last_time_ms=time_index[1],
        )
