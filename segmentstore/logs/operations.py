"""Durable Log operations: every change to a container is one of these, in sequence order.

Each operation has two halves. :meth:`Operation.prepare` runs once, in the operation processor,
against the *accepted* metadata: it validates (raising a ``SegmentStoreError``), resolves names
to ids, assigns offsets and values, and says whether anything needs writing at all. Then
:meth:`Operation.apply` changes metadata; it runs on the accepted copy at once, on the durable
copy once Tier 1 has the operation, and on recovery's copy during replay — one function, so the
three never disagree. ``apply`` is deterministic from the serialized fields alone.

Wire form (inside data frames, see docs/formats.md): ``kind u8 | sequence u64 | body``. Appends
(here) have a packed binary body; the rare metadata operations
(:mod:`segmentstore.logs.metadata_operations`) carry JSON. :mod:`segmentstore.logs.operation_codec`
reads them back.
"""

from __future__ import annotations

import json
import struct
from enum import IntEnum
from typing import Any, ClassVar

from segmentstore.contracts.errors import (
    BadOffsetError,
    DataCorruptionError,
    SegmentNotFoundError,
    SegmentSealedError,
    SegmentStoreError,
    WriterSeqMismatchError,
)
from segmentstore.contracts.segment_info import AppendResult
from segmentstore.metadata.container_metadata import ContainerMetadata, SegmentMetadata

Buffer = bytes | bytearray | memoryview

HEADER = struct.Struct("<BQ")
_APPEND = struct.Struct("<QQQqH")  # segment id, offset, time ms, writer seq (-1: none), id length
APPEND_HEADER = struct.Struct("<BQQQQqH")  # HEADER and _APPEND in one pack: the hot path


class Kind(IntEnum):
    CHECKPOINT = 1
    CREATE = 2
    APPEND = 3
    SEAL = 4
    TRUNCATE = 5
    MERGE = 6
    DELETE = 7
    ATTRIBUTES = 8
    RETENTION = 9
    LOAD = 10


APPEND_KIND = int(Kind.APPEND)  # a plain int: an enum member costs a lookup on every append


class LogReplayError(DataCorruptionError):
    """A replayed operation does not fit the metadata it is applied to: the log is inconsistent."""


class Operation:
    __slots__ = ("address", "refusal", "sequence", "time_ms")
    kind: ClassVar[Kind]
    # Whether the processor tells it the Tier 1 address of its frame once durable (recovery
    # tells every operation): only checkpoints need it, as the points Tier 1 is truncated at.
    addressed: ClassVar[bool] = False

    def __init__(self) -> None:
        self.sequence = 0
        self.time_ms = 0
        # Tier 1 address of the frame holding its first byte: from recovery, or once durable if
        # it is ``addressed``.
        self.address = -1
        # Why the processor refused it (prepare raised), if it did.
        self.refusal: SegmentStoreError | None = None

    def prepare(self, metadata: ContainerMetadata) -> bool:
        """Validate against accepted metadata and fill in derived fields.

        Returns False when the operation changes nothing (an idempotent repeat) and needs no
        Tier 1 write. Raises ``SegmentStoreError`` if the operation must be refused.
        """
        raise NotImplementedError

    def apply(self, metadata: ContainerMetadata) -> None:
        raise NotImplementedError

    def encode(self) -> tuple[list[Buffer], int]:
        """The wire form as buffers, and their total size in bytes."""
        parts = [HEADER.pack(self.kind, self.sequence), *self._encode_body()]
        return parts, sum(len(part) for part in parts)

    def _encode_body(self) -> list[Buffer]:
        return [json.dumps(self._fields(), separators=(",", ":")).encode()]

    def _fields(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def _from_fields(cls, fields: dict[str, Any]) -> Operation:
        raise NotImplementedError

    @classmethod
    def _decode_body(cls, body: memoryview) -> Operation:
        return cls._from_fields(json.loads(bytes(body)))


def segment_named(metadata: ContainerMetadata, name: str) -> SegmentMetadata:
    """The segment a caller names (validation): ``SegmentNotFoundError`` if there is none."""
    segment = metadata.segments.get(name)
    if segment is None:
        raise SegmentNotFoundError(name)
    return segment


def segment_by_id(metadata: ContainerMetadata, segment_id: int) -> SegmentMetadata:
    """The segment an operation's wire form names (apply, replay): ``LogReplayError`` if none."""
    segment = metadata.by_id.get(segment_id)
    if segment is None:
        raise LogReplayError(f"operation on unknown segment id {segment_id}")
    return segment


class CheckpointOperation(Operation):
    """A snapshot of the container metadata (its active segments): recovery can start here."""

    __slots__ = ("body", "snapshot")
    kind = Kind.CHECKPOINT
    addressed = True

    def __init__(self, snapshot: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.snapshot = snapshot or {}
        self.body = b""  # the encoded snapshot, once prepared

    def prepare(self, metadata: ContainerMetadata) -> bool:
        metadata.sequence = self.sequence
        self.snapshot = metadata.snapshot()
        self.body = json.dumps(self.snapshot, separators=(",", ":")).encode()
        return True

    def _encode_body(self) -> list[Buffer]:
        return [self.body or json.dumps(self.snapshot, separators=(",", ":")).encode()]

    def apply(self, metadata: ContainerMetadata) -> None:
        metadata.sequence = self.sequence

    def _fields(self) -> dict[str, Any]:
        return self.snapshot

    @classmethod
    def _from_fields(cls, fields: dict[str, Any]) -> Operation:
        return cls(fields)


class AppendOperation(Operation):
    """Bytes added at the end of a segment; optionally conditional or exactly-once."""

    __slots__ = (
        "data",
        "duplicate",
        "expected_offset",
        "length_after",
        "name",
        "offset",
        "segment_id",
        "size",
        "writer_id",
        "writer_prev_seq",
        "writer_seq",
    )
    kind = Kind.APPEND

    def __init__(
        self,
        name: str,
        data: Buffer,
        expected_offset: int | None = None,
        writer_id: str | None = None,
        writer_seq: int | None = None,
        writer_prev_seq: int | None = None,
    ) -> None:
        # Operation.__init__'s fields set here directly: this runs once per append.
        self.sequence = 0
        self.time_ms = 0
        self.address = -1
        self.refusal = None
        self.name = name
        self.data = data
        self.size = len(data)  # read several times per append: counted once
        self.expected_offset = expected_offset
        self.writer_id = writer_id
        self.writer_seq = writer_seq
        # Checked when the append is admitted, never on replay: what it guards (the order of
        # a writer's batches) is already in the log by then. Not serialised for that reason.
        self.writer_prev_seq = writer_prev_seq
        self.segment_id = 0
        self.offset = -1
        self.length_after = 0
        self.duplicate = False

    def prepare(self, metadata: ContainerMetadata) -> bool:
        segment = metadata.segments.get(self.name)
        if segment is None:
            raise SegmentNotFoundError(self.name)
        writer_id = self.writer_id
        if writer_id is not None:
            assert self.writer_seq is not None
            last = segment.writers.get(writer_id)
            if last is not None and self.writer_seq <= last:
                # Already applied: answer as a duplicate, write nothing.
                self.duplicate = True
                self.length_after = segment.length
                return False
            prev = self.writer_prev_seq
            if prev is not None and prev != last:
                # Its predecessor is not (yet) the writer's last batch here: applying it now
                # would put it out of order, or after a gap.
                raise WriterSeqMismatchError(self.name, prev, last)
        if segment.sealed:
            raise SegmentSealedError(self.name)
        if self.expected_offset is not None and self.expected_offset != segment.length:
            raise BadOffsetError(self.name, self.expected_offset, segment.length)
        self.segment_id = segment.id
        self.offset = segment.length
        self._change(metadata, segment)
        return True

    def result(self) -> AppendResult:
        """What the caller gets once the append is durable (or found to be a duplicate)."""
        if self.duplicate:
            return AppendResult(None, self.length_after, duplicate=True)
        return AppendResult(self.offset, self.length_after)

    def apply(self, metadata: ContainerMetadata) -> None:
        segment = metadata.by_id.get(self.segment_id)
        if segment is None or segment.length != self.offset:
            raise LogReplayError(
                f"append at {self.offset} does not fit segment id {self.segment_id}"
                f" of length {None if segment is None else segment.length}"
            )
        self._change(metadata, segment)

    def _change(self, metadata: ContainerMetadata, segment: SegmentMetadata) -> None:
        offset = self.offset
        time_ms = self.time_ms
        metadata.sequence = self.sequence
        segment.length = self.length_after = end = offset + self.size
        segment.last_modified_ms = time_ms
        segment.last_sequence = self.sequence
        if metadata.keeps_time_index:
            segment.time_index.record(offset, end, time_ms, metadata.time_index_interval)
        if self.writer_id is not None:
            segment.writers[self.writer_id] = self.writer_seq  # type: ignore[assignment]

    @staticmethod
    def apply_run(metadata: ContainerMetadata, run: list[AppendOperation]) -> None:
        """``apply`` of each of ``run``, consecutive appends to one segment, in one pass
        (commit applies a window's appends per segment; this is its per-append cost)."""
        first = run[0]
        segment = metadata.by_id.get(first.segment_id)
        if segment is None or len(run) == 1 or metadata.keeps_time_index:
            for op in run:
                op.apply(metadata)
            return
        length = segment.length
        writers = segment.writers
        for op in run:
            if op.offset != length:
                raise LogReplayError(
                    f"append at {op.offset} does not fit segment id {op.segment_id}"
                    f" of length {length}"
                )
            length = op.length_after = length + op.size
            if op.writer_id is not None:
                writers[op.writer_id] = op.writer_seq  # type: ignore[assignment]
        last = run[-1]
        segment.length = length
        segment.last_modified_ms = last.time_ms
        segment.last_sequence = metadata.sequence = last.sequence

    def encode(self) -> tuple[list[Buffer], int]:
        if self.writer_id is None:
            header = APPEND_HEADER.pack(
                APPEND_KIND, self.sequence, self.segment_id, self.offset, self.time_ms, -1, 0
            )
            return [header, self.data], APPEND_HEADER.size + self.size
        writer = self.writer_id.encode()
        header = APPEND_HEADER.pack(
            APPEND_KIND,
            self.sequence,
            self.segment_id,
            self.offset,
            self.time_ms,
            self.writer_seq,
            len(writer),
        )
        header += writer
        return [header, self.data], len(header) + self.size

    @classmethod
    def _decode_body(cls, body: memoryview) -> Operation:
        segment_id, offset, time_ms, writer_seq, id_length = _APPEND.unpack_from(body)
        start = _APPEND.size + id_length
        writer_id = bytes(body[_APPEND.size : start]).decode() if id_length else None
        op = cls("", body[start:], None, writer_id, None if writer_seq < 0 else writer_seq)
        op.segment_id = segment_id
        op.offset = offset
        op.time_ms = time_ms
        return op
