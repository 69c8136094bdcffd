"""Which operations Tier 1 must still keep, so the Durable Log knows where it may truncate.

Segment bytes at or above ``max(start_offset, storage_length)`` exist only in Tier 1 (and the
cache, which is not durable): the operations that wrote them must stay replayable, and so
must merges and deletes that the Storage Writer has not applied to Tier 2 yet (*holds*). This
tracks, per segment, ranges of such bytes with the sequence number of the first append that
wrote each range. Ranges are coalesced up to ``coalesce_bytes`` so the bookkeeping stays
small; a range is only released once all of it is no longer needed, which errs on the side of
keeping data.
"""

from __future__ import annotations

_START, _END, _SEQUENCE = 0, 1, 2


class Tier1Retention:
    def __init__(self, coalesce_bytes: int = 1 << 20) -> None:
        self._coalesce = coalesce_bytes
        # A list, not a deque: most segments hold one range, and an empty deque alone costs
        # 600 bytes, per segment whose bytes are not yet in Tier 2.
        self._ranges: dict[int, list[list[int]]] = {}
        # Operations (merges, deletes) that Tier 2 has not applied yet: replay must see them.
        self._held: set[int] = set()

    def hold(self, sequence: int) -> None:
        self._held.add(sequence)

    def unhold(self, sequence: int) -> None:
        self._held.discard(sequence)

    def appended(self, segment_id: int, offset: int, end: int, sequence: int) -> None:
        ranges = self._ranges.get(segment_id)
        if ranges is None:
            ranges = self._ranges[segment_id] = []
        elif ranges:
            last = ranges[-1]
            if last[_END] == offset and end - last[_START] <= self._coalesce:
                last[_END] = end
                return
        ranges.append([offset, end, sequence])

    def release(self, segment_id: int, below_offset: int) -> None:
        """Bytes below ``below_offset`` are truncated or in Tier 2: Tier 1 need not keep them."""
        ranges = self._ranges.get(segment_id)
        if ranges is None:
            return
        released = 0
        while released < len(ranges) and ranges[released][_END] <= below_offset:
            released += 1
        del ranges[:released]
        if not ranges:
            del self._ranges[segment_id]  # nothing per segment outlives its Tier 1 bytes

    def merged(self, source_id: int, target_id: int, target_offset: int) -> None:
        """The source's bytes now sit in the target, its offset 0 at ``target_offset``."""
        source = self._ranges.pop(source_id, None)
        if not source:
            return
        # Source offset o is target offset target_offset + o; the source's first ranges may
        # already be released (in Tier 2), so its first remaining range need not start at 0.
        start, end = target_offset + source[0][_START], target_offset + source[-1][_END]
        first_sequence = min(r[_SEQUENCE] for r in source)
        self._ranges.setdefault(target_id, []).append([start, end, first_sequence])

    def deleted(self, segment_id: int) -> None:
        self._ranges.pop(segment_id, None)

    def needed_sequence(self) -> int | None:
        """The lowest sequence number whose data Tier 1 must keep, or None if it keeps none."""
        lowest: int | None = min(self._held, default=None)
        for ranges in self._ranges.values():
            for entry in ranges:
                if lowest is None or entry[_SEQUENCE] < lowest:
                    lowest = entry[_SEQUENCE]
        return lowest
