"""The operations that change a segment's metadata rather than its bytes: create, seal,
truncate, merge, delete, attributes, retention. Each records what it decided (ids, offsets, the
values a conditional update resolved to) as a small JSON body, so replay never re-evaluates a
condition (:mod:`segmentstore.logs.operations` for the contract)."""

from __future__ import annotations

from typing import Any

from segmentstore.contracts.attributes import AttributeUpdate, resolve_updates
from segmentstore.contracts.errors import (
    InvalidArgumentError,
    OffsetBeyondEndError,
    SegmentExistsError,
    SegmentSealedError,
    SegmentTruncatedError,
)
from segmentstore.contracts.names import transaction_parent
from segmentstore.logs.operations import (
    Kind,
    LogReplayError,
    Operation,
    segment_by_id,
    segment_named,
)
from segmentstore.metadata.container_metadata import ContainerMetadata, SegmentMetadata


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
        if parent is not None and segment_named(metadata, parent).sealed:
            raise SegmentSealedError(parent)
        self.segment_id = metadata.next_segment_id
        self.apply(metadata)
        return True

    def apply(self, metadata: ContainerMetadata) -> None:
        metadata.sequence = self.sequence
        metadata.segment_count += 1
        metadata.add(
            SegmentMetadata(
                id=self.segment_id,
                name=self.name,
                created_ms=self.time_ms,
                last_modified_ms=self.time_ms,
                attributes=dict(self.attributes),
                retention=dict(self.retention),
                last_sequence=self.sequence,
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


class _SegmentOperation(Operation):
    """An operation on one existing segment, named by the caller and by id on the wire."""

    __slots__ = ("name", "segment_id")

    def __init__(self, name: str, segment_id: int = 0) -> None:
        super().__init__()
        self.name = name
        self.segment_id = segment_id

    def _resolve(self, metadata: ContainerMetadata) -> SegmentMetadata:
        segment = segment_named(metadata, self.name)
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
        segment = segment_by_id(metadata, self.segment_id)
        segment.sealed = True
        segment.last_modified_ms = self.time_ms
        segment.last_sequence = self.sequence


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
        segment = segment_by_id(metadata, self.segment_id)
        segment.start_offset = max(segment.start_offset, self.offset)
        segment.last_modified_ms = self.time_ms
        segment.last_sequence = self.sequence
        if metadata.keeps_time_index:
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
        target = segment_named(metadata, self.target)
        source = segment_named(metadata, self.source)
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
        target = segment_by_id(metadata, self.target_id)
        source = segment_by_id(metadata, self.source_id)
        if target.length != self.target_offset or source.length != self.source_length:
            raise LogReplayError(f"merge of {source.name} into {target.name} does not fit")
        if self.source_length and metadata.keeps_time_index:
            # To the target, the source's bytes are one append made now.
            target.time_index.add(target.length, self.time_ms)
        target.length += self.source_length
        target.last_modified_ms = self.time_ms
        target.last_sequence = self.sequence
        # Replayed operations carry ids only; the Storage Writer needs the names.
        self.target, self.source = target.name, source.name
        metadata.remove(self.source_id)
        metadata.segment_count -= 1

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
        self.name = segment_by_id(metadata, self.segment_id).name  # replay knows only the id
        metadata.remove(self.segment_id)
        metadata.segment_count -= 1


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
        segment = segment_by_id(metadata, self.segment_id)
        segment.attributes.update(self.values)
        segment.last_modified_ms = self.time_ms
        segment.last_sequence = self.sequence

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
        segment = segment_by_id(metadata, self.segment_id)
        segment.retention = dict(self.retention)
        segment.last_modified_ms = self.time_ms
        segment.last_sequence = self.sequence

    def _fields(self) -> dict[str, Any]:
        return {"id": self.segment_id, "time_ms": self.time_ms, "retention": self.retention}

    @classmethod
    def _from_fields(cls, fields: dict[str, Any]) -> Operation:
        op = cls("", fields["retention"], fields["id"])
        op.time_ms = fields["time_ms"]
        return op


class LoadSegmentOperation(Operation):
    """Tells Tier 1 of a segment that was loaded back from Tier 2, with the state its manifest
    kept, before the first change to it: the state travels in the operation, so replay never
    reads Tier 2. A segment that replay already holds (from a checkpoint older than its
    eviction) is replaced by it: the same state, or a later one."""

    __slots__ = ("segment",)
    kind = Kind.LOAD

    def __init__(self, segment: SegmentMetadata) -> None:
        super().__init__()
        self.segment = segment

    @property
    def segment_id(self) -> int:
        return self.segment.id

    def prepare(self, metadata: ContainerMetadata) -> bool:
        present = metadata.segments.get(self.segment.name)
        if present is not None and present.logged:
            return False  # Tier 1 knows it already: nothing to write
        self.apply(metadata)
        return True

    def apply(self, metadata: ContainerMetadata) -> None:
        metadata.sequence = self.sequence
        present = metadata.by_id.get(self.segment.id)
        if present is not None and present.name == self.segment.name and not present.logged:
            # The very state it was loaded with (nothing changes an unlogged segment): keep
            # the object, which calls may hold pinned.
            present.logged = True
            present.last_sequence = self.sequence
            return
        if present is not None:
            metadata.remove(self.segment.id)
        loaded = self.segment.copy()
        loaded.logged, loaded.last_sequence = True, self.sequence
        metadata.add(loaded)

    def _fields(self) -> dict[str, Any]:
        return self.segment.to_dict()

    @classmethod
    def _from_fields(cls, fields: dict[str, Any]) -> Operation:
        return cls(SegmentMetadata.from_dict(fields))
