"""Data frames: how serialized operations are packed into Tier 1 records and read back.

A frame is ``version u8`` followed by entries ``length u32 | flags u8 | bytes``. An operation is
one or more consecutive entries: the first has FIRST set, the last has LAST set, so an operation
larger than a frame spans several. Integrity (checksum, torn-tail detection) is the Tier 1
record's job; a frame is exactly one record.

Consecutive small operations are copied, with their entry headers, into one buffer per frame
(one iovec, one checksum pass); large payloads are referenced, not copied, all the way to
``writev``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from segmentstore.contracts.errors import DataCorruptionError
from segmentstore.logs.operation_codec import decode
from segmentstore.logs.operations import (
    APPEND_HEADER,
    APPEND_KIND,
    AppendOperation,
    Buffer,
    Operation,
)

FORMAT_VERSION = 1
_VERSION = struct.Struct("<B")
_ENTRY = struct.Struct("<IB")
FIRST = 1
LAST = 2
_WHOLE = FIRST | LAST
_COPY_BELOW = 16 * 1024  # operations smaller than this are joined into one buffer
_MIN_USEFUL_ROOM = 64  # do not start an entry in a frame with less room than this
# The entry header and the operation header of a whole append without a writer id (by far the
# most common entry) in one pack: the same bytes as _ENTRY and AppendOperation.encode give.
_WHOLE_APPEND = struct.Struct(_ENTRY.format + APPEND_HEADER.format.lstrip("<"))


class FrameFormatError(DataCorruptionError):
    """A frame that Tier 1 returned intact does not parse: a bug or a foreign log."""


@dataclass(slots=True)
class Frame:
    parts: list[Buffer] = field(default_factory=lambda: [_VERSION.pack(FORMAT_VERSION)])
    size: int = _VERSION.size
    # Operations that learn this frame's address once it is durable (``Operation.addressed``)
    # and whose first byte is in it.
    addressed: list[Operation] = field(default_factory=list)
    # Small entries' pieces not yet joined into one part: joined once, when the frame is
    # done or a large piece follows, so Tier 1 checksums and writes one buffer for them, and
    # each byte is copied once (growing a buffer per entry would copy it many times).
    pending: list[Buffer] = field(default_factory=list)

    def join_pending(self) -> None:
        if self.pending:
            self.parts.append(b"".join(self.pending))
            self.pending = []


class DataFrameBuilder:
    """Packs operations, in order, into frames of at most ``max_frame_bytes``."""

    def __init__(self, max_frame_bytes: int) -> None:
        self._max = max_frame_bytes
        self._frames: list[Frame] = []
        self._current: Frame | None = None

    def add_all(self, ops: list[Operation]) -> None:
        """:meth:`add` each of ``ops``, in order. Small appends without a writer id that fit
        the current frame take a shortcut: one pack and no call each, which halves the cost of
        framing an append."""
        pack = _WHOLE_APPEND.pack
        max_size = self._max
        # add() starts a new frame below this much room even for an append that would fit:
        # the shortcut must do the same, or the two would frame a window differently.
        full_above = max_size - _ENTRY.size - _MIN_USEFUL_ROOM
        for op in ops:
            frame = self._current
            if type(op) is AppendOperation and op.writer_id is None and frame is not None:
                total = APPEND_HEADER.size + op.size
                size = frame.size + _ENTRY.size + total
                if total < _COPY_BELOW and size <= max_size and frame.size <= full_above:
                    frame.pending += (
                        pack(total, _WHOLE, APPEND_KIND, op.sequence, op.segment_id,
                             op.offset, op.time_ms, -1, 0),
                        op.data,
                    )  # fmt: skip
                    frame.size = size
                    continue
            self.add(op)

    def add(self, op: Operation) -> None:
        # Once per operation: kept to few attribute lookups and no inner loop when it can be.
        parts, total = op.encode()
        frame = self._current
        if frame is None or self._max - frame.size < _ENTRY.size + _MIN_USEFUL_ROOM:
            frame = self._new_frame()
        if op.addressed:
            frame.addressed.append(op)
        size = frame.size + _ENTRY.size + total
        if total < _COPY_BELOW and size <= self._max:
            # The common small append: its pieces wait to be joined with the frame's others.
            pending = frame.pending
            pending.append(_ENTRY.pack(total, _WHOLE))
            pending += parts
            frame.size = size
            return
        frame.join_pending()
        self._add_spanning(frame, parts, total)

    def _add_spanning(self, frame: Frame, parts: list[Buffer], total: int) -> None:
        views = [memoryview(p).cast("B") for p in parts]
        written = 0
        flags = FIRST
        while True:
            room = self._max - frame.size - _ENTRY.size
            take = min(room, total - written)
            if written + take == total:
                flags |= LAST
            frame.parts.append(_ENTRY.pack(take, flags))
            frame.size += _ENTRY.size + take
            remaining = take
            while remaining:
                view = views[0]
                if len(view) <= remaining:
                    frame.parts.append(view)
                    remaining -= len(view)
                    views.pop(0)
                else:
                    frame.parts.append(view[:remaining])
                    views[0] = view[remaining:]
                    remaining = 0
            written += take
            if flags & LAST:
                return
            flags = 0
            frame = self._new_frame()

    def _new_frame(self) -> Frame:
        if self._current is not None:
            self._current.join_pending()
        self._current = Frame()
        self._frames.append(self._current)
        return self._current

    def take_frames(self) -> list[Frame]:
        """Every frame built so far; the builder starts afresh."""
        if self._current is not None:
            self._current.join_pending()
        frames, self._frames, self._current = self._frames, [], None
        return frames


class DataFrameReader:
    """Turns frames back into operations, in order, reassembling those that span frames.

    A piece without FIRST and nothing pending is the tail of an operation whose start was
    truncated away; a FIRST while pieces are pending means the pending operation was torn by a
    crash before it was acknowledged. Both are dropped.
    """

    def __init__(self) -> None:
        self._pending: list[memoryview] = []
        self._pending_address = -1

    def read(self, address: int, frame: bytes) -> Iterator[Operation]:
        view = memoryview(frame)
        if len(view) < _VERSION.size or view[0] != FORMAT_VERSION:
            raise FrameFormatError(f"frame at {address} has an unknown format")
        position = _VERSION.size
        while position < len(view):
            if position + _ENTRY.size > len(view):
                raise FrameFormatError(f"frame at {address} ends inside an entry header")
            length, flags = _ENTRY.unpack_from(view, position)
            position += _ENTRY.size
            piece = view[position : position + length]
            if len(piece) != length:
                raise FrameFormatError(f"frame at {address} ends inside an entry")
            position += length
            if flags & FIRST:
                self._pending = [piece]
                self._pending_address = address
            elif self._pending:
                self._pending.append(piece)
            else:
                continue
            if flags & LAST:
                body = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
                self._pending = []
                op = decode(memoryview(body))
                op.address = self._pending_address
                yield op
