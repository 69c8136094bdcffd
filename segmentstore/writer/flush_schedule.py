"""When each segment with bytes (or changes) not yet in Tier 2 is due for a flush.

A segment becomes *pending* when its first byte not in Tier 2 is committed, and is due once
that byte has waited the flush interval; it is *urgent* (due at once) when it passes the size
threshold, is sealed or truncated, or an eviction waits for its manifest. Pending segments are
kept in the order they became pending, which is the order they fall due in: finding the due
ones, and the next moment one falls due, costs what is due, not what is pending. A node with a
million small segments waiting for their interval would otherwise scan all of them on every
commit.
"""

from __future__ import annotations

import time


class FlushSchedule:
    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._since: dict[int, float] = {}  # segment id -> when it became pending; in that order
        self._urgent: dict[int, None] = {}  # due at once, in the order they became so

    def __contains__(self, segment_id: int) -> bool:
        return segment_id in self._since

    def __len__(self) -> int:
        return len(self._since)

    def ids(self) -> list[int]:
        return list(self._since)

    def pending(self, segment_id: int) -> bool:
        """The segment has something Tier 2 lacks; True if it was not pending before."""
        if segment_id in self._since:
            return False
        self._since[segment_id] = time.monotonic()
        return True

    def urgent(self, segment_id: int) -> None:
        """The segment is due now."""
        self.pending(segment_id)
        self._urgent[segment_id] = None

    def done(self, segment_id: int) -> None:
        """Tier 2 holds everything of the segment (or it is gone)."""
        self._since.pop(segment_id, None)
        self._urgent.pop(segment_id, None)

    def due(self) -> list[int]:
        """The segments due now: the urgent ones, then the ones whose interval ran out."""
        due = list(self._urgent)
        self._urgent.clear()
        deadline = time.monotonic() - self._interval_s
        chosen = set(due)
        for segment_id, since in self._since.items():
            if since > deadline:
                break
            if segment_id not in chosen:
                due.append(segment_id)
        return due

    def next_due_s(self) -> float | None:
        """Seconds until the next segment falls due (0: one is due now; None: none pending)."""
        if self._urgent:
            return 0.0
        for since in self._since.values():
            return max(0.0, since + self._interval_s - time.monotonic())
        return None
