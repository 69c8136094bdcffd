"""The in-memory part of a segment's sparse time index: append boundaries not yet in Tier 2.

Every append reports its range and time; an entry is kept at most every
``time_index_interval_bytes`` of appends (the first append always gets one), so the index costs
16 bytes per interval of the segment's Tier 1 tail. Once the Storage Writer has put a range in
Tier 2 it writes the range's entries into the chunk's sidecar
(:mod:`segmentstore.tier2.chunk_index`) and they are dropped from here.

The index lives in the segment's metadata, so it is changed by ``Operation.apply`` and saved by
checkpoints: recovery's replay rebuilds the same entries. A running container keeps it in the
*accepted* copy only (``ContainerMetadata.keeps_time_index``): that is the copy checkpoints
snapshot, and the durable copy would only repeat the work on every append. Its entries may
therefore run ahead of what is durable; readers clamp their answers to the durable length.
Times never decrease within a segment: a clock that steps back is clamped.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right

from segmentstore.tier2 import TimeIndexEntry


class SegmentTimeIndex:
    __slots__ = ("last_entry_offset", "last_time_ms", "offsets", "times")

    def __init__(self) -> None:
        self.offsets = array("q")
        self.times = array("q")
        # Where the latest entry was made (also one that Tier 2 now holds): the next is due
        # an interval after it. -1: no append yet.
        self.last_entry_offset = -1
        # When the latest append was made (-1: none yet).
        self.last_time_ms = -1

    @classmethod
    def of(cls, entries: list[TimeIndexEntry]) -> SegmentTimeIndex:
        """An index holding ``entries`` (in order, as a sidecar gives them), for lookups."""
        index = cls()
        index.offsets.extend(e.offset for e in entries)
        index.times.extend(e.time_ms for e in entries)
        if entries:
            index.last_entry_offset, index.last_time_ms = entries[-1]
        return index

    def copy(self) -> SegmentTimeIndex:
        twin = SegmentTimeIndex()
        twin.offsets.extend(self.offsets)
        twin.times.extend(self.times)
        twin.last_entry_offset, twin.last_time_ms = self.last_entry_offset, self.last_time_ms
        return twin

    def __len__(self) -> int:
        return len(self.offsets)

    def record(self, offset: int, end: int, time_ms: int, interval: int) -> None:
        """An append of ``[offset, end)`` was made at ``time_ms``. It gets an entry if it would
        end more than an interval past the latest entry: so entries are at most an interval
        apart, or one append apart where a single append is larger than that. It also gets
        one if it is the first to begin in its aligned window of ``interval`` bytes, so that
        the first event at or after any multiple of the interval is known (a reader that skips
        a damaged checksum block resumes there: :mod:`segmentstore.tier2.chunk_index`)."""
        # Runs once per append: plain comparisons rather than max() calls.
        if time_ms < self.last_time_ms:
            time_ms = self.last_time_ms
        else:
            self.last_time_ms = time_ms
        last = self.last_entry_offset
        if end - last > interval or last < 0 or offset // interval != last // interval:
            self.add(offset, time_ms)

    def add(self, offset: int, time_ms: int) -> None:
        """An entry regardless of the interval (a merge: the whole source is one append)."""
        time_ms = max(time_ms, self.last_time_ms)
        self.last_time_ms = time_ms
        if self.offsets and self.offsets[-1] == offset:
            return
        self.offsets.append(offset)
        self.times.append(time_ms)
        self.last_entry_offset = offset

    def forget_below(self, offset: int) -> None:
        """Drop the entries below ``offset`` (they are in Tier 2 now, or truncated)."""
        cut = bisect_left(self.offsets, offset)
        if cut:
            del self.offsets[:cut]
            del self.times[:cut]

    def between(self, start: int, end: int) -> list[tuple[int, int]]:
        """The entries in ``[start, end)``, in offset order, as ``(offset, time_ms)``."""
        low = bisect_left(self.offsets, start)
        high = bisect_left(self.offsets, end, lo=low)
        # Plain tuples, zipped in C: the Storage Writer asks for every entry it flushes.
        return list(zip(self.offsets[low:high], self.times[low:high], strict=True))

    def first(self) -> TimeIndexEntry | None:
        return TimeIndexEntry(self.offsets[0], self.times[0]) if self.offsets else None

    def last_before_time(self, time_ms: int) -> TimeIndexEntry | None:
        """The latest entry made strictly before ``time_ms``."""
        i = bisect_left(self.times, time_ms) - 1
        return TimeIndexEntry(self.offsets[i], self.times[i]) if i >= 0 else None

    def last_at_or_below(self, offset: int) -> TimeIndexEntry | None:
        """The latest entry at or below ``offset``."""
        i = bisect_right(self.offsets, offset) - 1
        return TimeIndexEntry(self.offsets[i], self.times[i]) if i >= 0 else None

    @property
    def memory_bytes(self) -> int:
        return (len(self.offsets) + len(self.times)) * self.offsets.itemsize

    def to_json(self) -> dict[str, object]:
        return {
            "entries": [[o, t] for o, t in zip(self.offsets, self.times, strict=True)],
            "last_entry_offset": self.last_entry_offset,
            "last_time_ms": self.last_time_ms,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> SegmentTimeIndex:
        index = cls()
        entries = data["entries"]
        assert isinstance(entries, list)
        for offset, time_ms in entries:
            index.offsets.append(offset)
            index.times.append(time_ms)
        last_entry, last_time = data["last_entry_offset"], data["last_time_ms"]
        assert isinstance(last_entry, int) and isinstance(last_time, int)
        index.last_entry_offset, index.last_time_ms = last_entry, last_time
        return index
