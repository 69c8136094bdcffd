"""Durable Log operations: every change to a container is one of these, in sequence order.

Each operation has two halves. :meth:`Operation.prepare` runs once, in the operation processor,
against the *accepted* metadata: it validates (raising a ``SegmentStoreError``), resolves names
to ids, assigns offsets and values, and says whether anything needs writing at all. Then
:meth:`Operation.apply` changes metadata; it runs on the accepted copy at once, on the durable
copy once Tier 1 has the operation, and on recovery's copy during replay — one function, so the
three never disagree. ``apply`` is deterministic from the serialized fields alone.

Wire form (inside data frames, see docs/formats.md): ``kind u8 | sequence u64 | body``. Appends
have a packed binary body; the rare metadata operations carry JSON.
"""

from __future__ import annotations

import json
import struct
from enum import IntEnum
from typing import Any, ClassVar

from segmentstore.attributes import AttributeUpdate, resolve_updates
from segmentstore.errors import (
    BadOffsetError,
    InvalidArgumentError,
    OffsetBeyondEndError,
    SegmentExistsError,
    SegmentNotFoundError,
    SegmentSealedError,
    SegmentTruncatedError,
)
from segmentstore.metadata import ContainerMetadata, SegmentMetadata
from segmentstore.names import transaction_parent

Buffer = bytes | bytearray | memoryview

HEADER = struct.Struct("<BQ")
_APPEND = struct.Struct("<QQQqH")  # segment id, offset, time ms, writer seq (-1: none), id length
_APPEND_HEADER = struct.Struct("<BQQQQqH")  # HEADER and _APPEND in one pack: the hot path


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


class LogReplayError(Exception):
    """A replayed operation does not fit the metadata it is applied to: the log is inconsistent."""


class Operation:
    __slots__ = ("address", "sequence", "time_ms")
    kind: ClassVar[Kind]

    def __init__(self) -> None:
        self.sequence = 0
        self.time_ms = 0
        # Tier 1 address of the frame holding this operation's first byte, once durable.
        self.address = -1

    def prepare(self, metadata: ContainerMetadata) -> bool:
        """Validate against accepted metadata and fill in derived fields.

        Returns False when the operation changes nothing (an idempotent repeat) and needs no
        Tier 1 write. Raises ``SegmentStoreError`` if the operation must be refused.
        """
        raise NotImplementedError

    def apply(self, metadata: ContainerMetadata) -> None:
        raise NotImplementedError

    def encode(self) -> list[Buffer]:
        return [HEADER.pack(self.kind, self.sequence), *self._encode_body()]

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


def decode(data: memoryview) -> Operation:
    kind, sequence = HEADER.unpack_from(data)
    op = _KINDS[Kind(kind)]._decode_body(data[HEADER.size :])
    op.sequence = sequence
    return op


def _segment(metadata: ContainerMetadata, name: str) -> SegmentMetadata:
    segment = metadata.segments.get(name)
    if segment is None:
        raise SegmentNotFoundError(name)
    return segment


def _by_id(metadata: ContainerMetadata, segment_id: int) -> SegmentMetadata:
    segment = metadata.by_id.get(segment_id)
    if segment is None:
        raise LogReplayError(f"operation on unknown segment id {segment_id}")
    return segment


class CheckpointOperation(Operation):
    """A snapshot of the whole container metadata: recovery can start here."""

    __slots__ = ("snapshot",)
    kind = Kind.CHECKPOINT

    def __init__(self, snapshot: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.snapshot = snapshot or {}

    def prepare(self, metadata: ContainerMetadata) -> bool:
        metadata.sequence = self.sequence
        self.snapshot = metadata.snapshot()
        return True

    def apply(self, metadata: ContainerMetadata) -> None:
        metadata.sequence = self.sequence

    def _fields(self) -> dict[str, Any]:
        return self.snapshot

    @classmethod
    def _from_fields(cls, fields: dict[str, Any]) -> Operation:
        return cls(fields)


class CreateSegmentOperation(Operation):
    __slots__ = ("attributes", "name", "retention", "segment_id")
    kind = Kind.CREATE

    def __init__(
        self,
        name: str,
        attributes: dict[str, int] | None = None,
        retention: dict[str, int] | None = None,
        segment_id: int = 0,
    ) -> None:
        super().__init__()
        self.name = name
        self.attributes = attributes or {}
        self.retention = retention or {}
        self.segment_id = segment_id

    def prepare(self, metadata: ContainerMetadata) -> bool:
        if self.name in metadata.segments:
            raise SegmentExistsError(self.name)
        parent = transaction_parent(self.name)
        if parent is not None and _segment(metadata, parent).sealed:
            raise SegmentSealedError(parent)
        self.segment_id = metadata.next_segment_id
        self.apply(metadata)
        return True

    def apply(self, metadata: ContainerMetadata) -> None:
        metadata.sequence = self.sequence
        metadata.add(
            SegmentMetadata(
                id=self.segment_id,
                name=self.name,
                created_ms=self.time_ms,
                last_modified_ms=self.time_ms,
                attributes=dict(self.attributes),
                retention=dict(self.retention),
            )
        )

    def _fields(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "id": self.segment_id,
            "time_ms": self.time_ms,
            "attributes": self.attributes,
            "retention": self.retention,
        }

    @classmethod
    def _from_fields(cls, fields: dict[str, Any]) -> Operation:
        op = cls(fields["name"], fields["attributes"], fields["retention"], fields["id"])
        op.time_ms = fields["time_ms"]
        return op


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
        "writer_id",
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
    ) -> None:
        # Operation.__init__'s fields set here directly: this runs once per append.
        self.sequence = 0
        self.time_ms = 0
        self.address = -1
        self.name = name
        self.data = data
        self.expected_offset = expected_offset
        self.writer_id = writer_id
        self.writer_seq = writer_seq
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
            if self.writer_seq <= segment.writers.get(writer_id, -1):
                # Already applied: answer as a duplicate, write nothing.
                self.duplicate = True
                self.length_after = segment.length
                return False
        if segment.sealed:
            raise SegmentSealedError(self.name)
        if self.expected_offset is not None and self.expected_offset != segment.length:
            raise BadOffsetError(self.name, self.expected_offset, segment.length)
        self.segment_id = segment.id
        self.offset = segment.length
        self.apply(metadata)
        return True

    def apply(self, metadata: ContainerMetadata) -> None:
        segment = metadata.by_id.get(self.segment_id)
        if segment is None or segment.length != self.offset:
            raise LogReplayError(
                f"append at {self.offset} does not fit segment id {self.segment_id}"
                f" of length {None if segment is None else segment.length}"
            )
        metadata.sequence = self.sequence
        segment.length = self.length_after = self.offset + len(self.data)
        segment.last_modified_ms = self.time_ms
        segment.time_index.record(
            self.offset, self.length_after, self.time_ms, metadata.time_index_interval
        )
        if self.writer_id is not None:
            assert self.writer_seq is not None
            segment.writers[self.writer_id] = self.writer_seq

    def encode(self) -> list[Buffer]:
        if self.writer_id is None:
            header = _APPEND_HEADER.pack(
                Kind.APPEND, self.sequence, self.segment_id, self.offset, self.time_ms, -1, 0
            )
            return [header, self.data]
        writer = self.writer_id.encode()
        header = _APPEND_HEADER.pack(
            Kind.APPEND,
            self.sequence,
            self.segment_id,
            self.offset,
            self.time_ms,
            self.writer_seq,
            len(writer),
        )
        return [header + writer, self.data]

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


class _SegmentOperation(Operation):
    """An operation on one existing segment, named by the caller and by id on the wire."""

    __slots__ = ("name", "segment_id")

    def __init__(self, name: str, segment_id: int = 0) -> None:
        super().__init__()
        self.name = name
        self.segment_id = segment_id

    def _resolve(self, metadata: ContainerMetadata) -> SegmentMetadata:
        segment = _segment(metadata, self.name)
        self.segment_id = segment.id
        return segment

    def _fields(self) -> dict[str, Any]:
        return {"id": self.segment_id, "time_ms": self.time_ms}

    @classmethod
    def _from_fields(cls, fields: dict[str, Any]) -> Operation:
        op = cls("", fields["id"])
        op.time_ms = fields["time_ms"]
        return op


class SealOperation(_SegmentOperation):
    __slots__ = ()
    kind = Kind.SEAL

    def prepare(self, metadata: ContainerMetadata) -> bool:
        if self._resolve(metadata).sealed:
            return False
        self.apply(metadata)
        return True

    def apply(self, metadata: ContainerMetadata) -> None:
        metadata.sequence = self.sequence
        segment = _by_id(metadata, self.segment_id)
        segment.sealed = True
        segment.last_modified_ms = self.time_ms


class TruncateOperation(_SegmentOperation):
    __slots__ = ("offset",)
    kind = Kind.TRUNCATE

    def __init__(self, name: str, offset: int, segment_id: int = 0) -> None:
        super().__init__(name, segment_id)
        self.offset = offset

    def prepare(self, metadata: ContainerMetadata) -> bool:
        segment = self._resolve(metadata)
        if self.offset > segment.length:
            raise OffsetBeyondEndError(self.name, self.offset, segment.length)
        if self.offset <= segment.start_offset:
            return False
        self.apply(metadata)
        return True

    def apply(self, metadata: ContainerMetadata) -> None:
        metadata.sequence = self.sequence
        segment = _by_id(metadata, self.segment_id)
        segment.start_offset = max(segment.start_offset, self.offset)
        segment.last_modified_ms = self.time_ms
        segment.time_index.forget_below(segment.start_offset)

    def _fields(self) -> dict[str, Any]:
        return {"id": self.segment_id, "time_ms": self.time_ms, "offset": self.offset}

    @classmethod
    def _from_fields(cls, fields: dict[str, Any]) -> Operation:
        op = cls("", fields["offset"], fields["id"])
        op.time_ms = fields["time_ms"]
        return op


class MergeOperation(Operation):
    """Moves all of a (sealed, untruncated) source's bytes to the end of a target, atomically."""

    __slots__ = ("source", "source_id", "source_length", "target", "target_id", "target_offset")
    kind = Kind.MERGE

    def __init__(self, target: str, source: str) -> None:
        super().__init__()
        self.target = target
        self.source = source
        self.target_id = self.source_id = 0
        self.target_offset = self.source_length = 0

    def prepare(self, metadata: ContainerMetadata) -> bool:
        if self.target == self.source:
            raise InvalidArgumentError("a segment cannot be merged into itself")
        target = _segment(metadata, self.target)
        source = _segment(metadata, self.source)
        if target.sealed:
            raise SegmentSealedError(self.target)
        if source.start_offset > 0:
            raise SegmentTruncatedError(self.source, source.start_offset)
        self.target_id, self.source_id = target.id, source.id
        self.target_offset, self.source_length = target.length, source.length
        self.apply(metadata)
        return True

    def apply(self, metadata: ContainerMetadata) -> None:
        metadata.sequence = self.sequence
        target = _by_id(metadata, self.target_id)
        source = _by_id(metadata, self.source_id)
        if target.length != self.target_offset or source.length != self.source_length:
            raise LogReplayError(f"merge of {source.name} into {target.name} does not fit")
        if self.source_length:
            # To the target, the source's bytes are one append made now.
            target.time_index.add(target.length, self.time_ms)
        target.length += self.source_length
        target.last_modified_ms = self.time_ms
        # Replayed operations carry ids only; the Storage Writer needs the names.
        self.target, self.source = target.name, source.name
        metadata.remove(self.source_id)

    def _fields(self) -> dict[str, Any]:
        return {
            "target": self.target_id,
            "source": self.source_id,
            "target_offset": self.target_offset,
            "source_length": self.source_length,
            "time_ms": self.time_ms,
        }

    @classmethod
    def _from_fields(cls, fields: dict[str, Any]) -> Operation:
        op = cls("", "")
        op.target_id, op.source_id = fields["target"], fields["source"]
        op.target_offset, op.source_length = fields["target_offset"], fields["source_length"]
        op.time_ms = fields["time_ms"]
        return op


class DeleteSegmentOperation(_SegmentOperation):
    __slots__ = ()
    kind = Kind.DELETE

    def prepare(self, metadata: ContainerMetadata) -> bool:
        self._resolve(metadata)
        self.apply(metadata)
        return True

    def apply(self, metadata: ContainerMetadata) -> None:
        metadata.sequence = self.sequence
        self.name = _by_id(metadata, self.segment_id).name  # replay knows only the id
        metadata.remove(self.segment_id)


class UpdateAttributesOperation(_SegmentOperation):
    """Conditional attribute updates, resolved to plain values at prepare time (all or none)."""

    __slots__ = ("updates", "values")
    kind = Kind.ATTRIBUTES

    def __init__(
        self, name: str, updates: list[AttributeUpdate] | None = None, segment_id: int = 0
    ) -> None:
        super().__init__(name, segment_id)
        self.updates = updates or []
        self.values: dict[str, int] = {}

    def prepare(self, metadata: ContainerMetadata) -> bool:
        segment = self._resolve(metadata)
        self.values = resolve_updates(segment.attributes, self.updates)
        self.apply(metadata)
        return True

    def apply(self, metadata: ContainerMetadata) -> None:
        metadata.sequence = self.sequence
        segment = _by_id(metadata, self.segment_id)
        segment.attributes.update(self.values)
        segment.last_modified_ms = self.time_ms

    def _fields(self) -> dict[str, Any]:
        return {"id": self.segment_id, "time_ms": self.time_ms, "values": self.values}

    @classmethod
    def _from_fields(cls, fields: dict[str, Any]) -> Operation:
        op = cls("", None, fields["id"])
        op.values = fields["values"]
        op.time_ms = fields["time_ms"]
        return op


class SetRetentionOperation(_SegmentOperation):
    """Replaces a segment's retention policy (``time_ms`` and/or ``bytes``; empty: none)."""

    __slots__ = ("retention",)
    kind = Kind.RETENTION

    def __init__(
        self, name: str, retention: dict[str, int] | None = None, segment_id: int = 0
    ) -> None:
        super().__init__(name, segment_id)
        self.retention = retention or {}

    def prepare(self, metadata: ContainerMetadata) -> bool:
        if self._resolve(metadata).retention == self.retention:
            return False
        self.apply(metadata)
        return True

    def apply(self, metadata: ContainerMetadata) -> None:
        metadata.sequence = self.sequence
        segment = _by_id(metadata, self.segment_id)
        segment.retention = dict(self.retention)
        segment.last_modified_ms = self.time_ms

    def _fields(self) -> dict[str, Any]:
        return {"id": self.segment_id, "time_ms": self.time_ms, "retention": self.retention}

    @classmethod
    def _from_fields(cls, fields: dict[str, Any]) -> Operation:
        op = cls("", fields["retention"], fields["id"])
        op.time_ms = fields["time_ms"]
        return op


_KINDS: dict[Kind, type[Operation]] = {
    cls.kind: cls
    for cls in (
        CheckpointOperation,
        CreateSegmentOperation,
        AppendOperation,
        SealOperation,
        TruncateOperation,
        MergeOperation,
        DeleteSegmentOperation,
        UpdateAttributesOperation,
        SetRetentionOperation,
    )
}
