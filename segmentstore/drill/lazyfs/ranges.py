"""``Ranges``: disjoint byte ranges ``[start, end)`` of a file, each with a value, in order.

The model of a file's un-synced data keeps two kinds: who wrote the bytes the file holds now,
and the bytes a writer wrote that were overwritten since. Most writes append, so giving a
range past the last one is O(1); any other costs a bisection and a slice.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from typing import Generic, TypeVar

V = TypeVar("V")
Piece = tuple[int, int, V]


class Ranges(Generic[V]):
    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._values: list[V] = []

    def __iter__(self) -> Iterator[Piece[V]]:
        return iter(zip(self._starts, self._ends, self._values, strict=True))

    def __len__(self) -> int:
        return len(self._starts)

    def pieces(self, start: int, end: int) -> list[Piece[V]]:
        """The parts of ranges inside ``[start, end)``, clipped to it, in order."""
        found = []
        i = bisect_right(self._ends, start)
        while i < len(self._starts) and self._starts[i] < end:
            found.append((max(self._starts[i], start), min(self._ends[i], end), self._values[i]))
            i += 1
        return found

    def assign(self, start: int, end: int, value: V) -> None:
        """``[start, end)`` now has ``value``, whatever had it before."""
        if start >= end:
            return
        if not self._starts or start >= self._ends[-1]:
            self._starts.append(start)
            self._ends.append(end)
            self._values.append(value)
            return
        first = bisect_right(self._ends, start)
        last = first
        while last < len(self._starts) and self._starts[last] < end:
            last += 1
        starts, ends, values = [], [], []
        if first < last and self._starts[first] < start:
            starts.append(self._starts[first])
            ends.append(start)
            values.append(self._values[first])
        starts.append(start)
        ends.append(end)
        values.append(value)
        if first < last and self._ends[last - 1] > end:
            starts.append(end)
            ends.append(self._ends[last - 1])
            values.append(self._values[last - 1])
        self._starts[first:last] = starts
        self._ends[first:last] = ends
        self._values[first:last] = values

    def cut(self, size: int) -> None:
        """Forget everything at or past ``size``."""
        first = bisect_right(self._ends, size)
        if first < len(self._starts) and self._starts[first] < size:
            self._ends[first] = size
            first += 1
        del self._starts[first:], self._ends[first:], self._values[first:]

    def gaps(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of ``[start, end)`` that no range covers."""
        found = []
        at = start
        for s, e, _ in self.pieces(start, end):
            if s > at:
                found.append((at, s))
            at = e
        if at < end:
            found.append((at, end))
        return found
