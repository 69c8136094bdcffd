"""What one file holds that an ``fsync``/``fdatasync`` has not made durable, and how to bring
the file back to what a power loss leaves of it.

The file on the backing directory always holds its current content (the file system passes
every write through). Beside it, until the next sync, the model keeps:

* ``durable_size``: the size the last sync left (or the size when the model first saw it);
* the un-synced operations in order: each write (offset, length) and each truncation;
* who wrote each byte the file holds now (the durable base, or one of those writes);
* the bytes each writer (the base included) had written that something overwrote or
  truncated since, read from the file just before they were lost.

So every operation's bytes can be found again, in the file or in the saved pieces, and any
subset of the operations can be replayed over the durable base: that is what survives a power
loss that kept that subset. Appends, most of what the store does, save nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from segmentstore.drill.lazyfs.ranges import Ranges

BASE = -1  # the writer of the durable bytes


@dataclass(frozen=True, slots=True)
class Write:
    writer: int
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class Truncate:
    size: int


Operation = Write | Truncate
# (start, end, writer, the bytes the file held there before the operation)
Displaced = list[tuple[int, int, int, bytes]]
SavedPiece = tuple[int, int, tuple[int, bytes]]  # (start, end, (where data starts, data))


class UnsyncedFile:
    def __init__(self, size: int, first_seq: int) -> None:
        self.first_seq = first_seq  # orders files the same way in every replay of a run
        self.durable_size = size
        self.size = size
        self.operations: list[Operation] = []
        self.durable = 0  # the first ``durable`` operations were synced (an fsync reached them)
        self._current: Ranges[int] = Ranges()
        self._current.assign(0, size, BASE)
        self._saved: dict[int, Ranges[tuple[int, bytes]]] = {}

    def owners(self, start: int, end: int) -> list[tuple[int, int, int]]:
        """Who wrote the bytes now in ``[start, end)``: read them before they are replaced."""
        return self._current.pieces(start, min(end, self.size))

    def wrote(self, offset: int, length: int, displaced: Displaced) -> None:
        """``length`` bytes were written at ``offset``; ``displaced`` is what they replaced."""
        if length <= 0:
            return
        self._save(displaced, offset, offset + length)
        writer = len(self.operations)
        self._current.assign(offset, offset + length, writer)
        self.operations.append(Write(writer, offset, length))
        self.size = max(self.size, offset + length)

    def truncated(self, size: int, displaced: Displaced) -> None:
        self._save(displaced, size, self.size)
        self._current.cut(size)
        self.operations.append(Truncate(size))
        self.size = size

    def _save(self, displaced: Displaced, start: int, end: int) -> None:
        for s, e, writer, data in displaced:
            a, b = max(s, start), min(e, end)
            if a < b:
                piece = data[a - s : b - s]
                self._saved.setdefault(writer, Ranges()).assign(a, b, (a, piece))

    @property
    def unsynced(self) -> int:
        return len(self.operations) - self.durable

    def survive(self, fd: int, keep: Callable[[Operation], bool]) -> int:
        """Rewrite the file open at ``fd`` as the durable base plus the operations ``keep``
        chooses among the un-synced ones, replayed in order; return how many of those were
        kept."""
        result: Ranges[int] = Ranges()
        result.assign(0, self.durable_size, BASE)
        size = self.durable_size
        kept = 0
        for i, operation in enumerate(self.operations):
            if i >= self.durable and not keep(operation):
                continue
            kept += i >= self.durable
            if isinstance(operation, Write):
                end = operation.offset + operation.length
                result.assign(operation.offset, end, operation.writer)
                size = max(size, end)
            else:
                result.cut(operation.size)
                size = operation.size
        on_disk = self.size
        for start, end, writer in result:
            for a, b in self._not_in_file(start, end, writer):
                for s, e, (at, data) in self._saved_pieces(writer, a, b):
                    os.pwrite(fd, data[s - at : e - at], s)
        for a, b in result.gaps(0, min(size, on_disk)):
            os.pwrite(fd, bytes(b - a), a)  # bytes no kept operation wrote read as zeros
        os.ftruncate(fd, size)
        return kept

    def _not_in_file(self, start: int, end: int, writer: int) -> list[tuple[int, int]]:
        """The parts of ``[start, end)`` where the file does not hold ``writer``'s bytes."""
        elsewhere = [(s, e) for s, e, w in self._current.pieces(start, end) if w != writer]
        return sorted(elsewhere + self._current.gaps(start, end))

    def _saved_pieces(self, writer: int, a: int, b: int) -> list[SavedPiece]:
        saved = self._saved.get(writer)
        pieces = [] if saved is None else saved.pieces(a, b)
        if sum(e - s for s, e, _ in pieces) != b - a:
            raise AssertionError(f"lazyfs lost track of writer {writer}'s bytes [{a}, {b})")
        return pieces
