"""What a committed operation changes besides the container's metadata.

Once Tier 1 has an operation (or recovery replays it), its effects reach: the segments' read
indexes (appended bytes, truncations, merges, deletes), the Tier 1 retention (which operations
Tier 1 must still keep), the Storage Writer's queue, and the merged ranges that are still read
from a source's manifest until the writer has moved them to the target's. One container owns
one of these, rebuilt on every start.
"""

from __future__ import annotations

from segmentstore.logs.metadata_operations import (
    CreateSegmentOperation,
    DeleteSegmentOperation,
    LoadSegmentOperation,
    MergeOperation,
    SealOperation,
    TruncateOperation,
)
from segmentstore.logs.operations import AppendOperation, Operation
from segmentstore.logs.tier1_retention import Tier1Retention
from segmentstore.metadata.container_metadata import ContainerMetadata
from segmentstore.reading.read_index import ReadIndexFactory, SegmentReadIndex
from segmentstore.writer.writer import DeleteEvent, MergeEvent, Writer

# A merged range of a target: (merge sequence, target offset, length, source name).
MergedRange = tuple[int, int, int, str]


class CommitEffects:
    def __init__(self, new_index: ReadIndexFactory, tier1_coalesce_bytes: int) -> None:
        self._new_index = new_index
        # Set when the container starts, before anything is replayed.
        self.writer: Writer | None = None
        self.indexes: dict[int, SegmentReadIndex] = {}
        self.retention = Tier1Retention(coalesce_bytes=tier1_coalesce_bytes)
        # Merged ranges whose bytes Tier 2 still has under the source's manifest, per target.
        self.merging: dict[int, list[MergedRange]] = {}

    def restore(self, metadata: ContainerMetadata) -> None:
        """Start from a checkpoint. Bytes appended before it are, by the truncation rule,
        below each segment's start offset or already in Tier 2: the indexes start empty."""
        self.indexes = {segment.id: self._new_index() for segment in metadata.segments.values()}

    def replay(self, metadata: ContainerMetadata, op: Operation) -> None:
        op.apply(metadata)
        self._apply(op, metadata)

    def commit(self, ops: list[Operation], metadata: ContainerMetadata) -> None:
        """Apply a durable window of operations to ``metadata`` and reflect them here."""
        # A window's appends are indexed per segment, all at once: one cache append and one
        # bookkeeping call per segment instead of per append. Other operations are reflected
        # in their place, after the appends before them.
        runs: dict[int, list[AppendOperation]] = {}
        for op in ops:
            if type(op) is AppendOperation:
                run = runs.get(op.segment_id)
                if run is None:
                    runs[op.segment_id] = [op]
                else:
                    run.append(op)
            else:
                if runs:
                    self._apply_appends(runs, metadata)
                    runs = {}
                op.apply(metadata)
                self._apply(op, metadata)
                if type(op) is CreateSegmentOperation:
                    # Live, not replayed: no flush of it can have happened yet.
                    assert self.writer is not None
                    self.writer.created(op.segment_id)
        if runs:
            self._apply_appends(runs, metadata)

    def _apply_appends(
        self, runs: dict[int, list[AppendOperation]], metadata: ContainerMetadata
    ) -> None:
        """Apply and reflect appends; each run is one segment's consecutive appends. Runs of
        different segments commute, except that the container's sequence must end at the
        last append's, whichever run holds it."""
        last = 0
        for segment_id, run in runs.items():
            AppendOperation.apply_run(metadata, run)
            first = run[0]
            data = first.data if len(run) == 1 else b"".join([op.data for op in run])
            self._appended(segment_id, first.offset, data, first.sequence, metadata)
            last = max(last, run[-1].sequence)
        metadata.sequence = last

    def _appended(
        self,
        segment_id: int,
        offset: int,
        data: bytes | bytearray | memoryview,
        sequence: int,
        metadata: ContainerMetadata,
    ) -> None:
        assert self.writer is not None
        self.indexes[segment_id].append(offset, data)
        self.retention.appended(segment_id, offset, offset + len(data), sequence)
        self.writer.appended(metadata.by_id[segment_id])

    def _apply(self, op: Operation, metadata: ContainerMetadata) -> None:
        writer = self.writer
        assert writer is not None
        match op:
            case AppendOperation():
                self._appended(op.segment_id, op.offset, op.data, op.sequence, metadata)
            case CreateSegmentOperation():
                self.indexes[op.segment_id] = self._new_index()
            case LoadSegmentOperation():
                self.loaded(op.segment_id, op.segment.storage_length)
            case SealOperation():
                self.indexes[op.segment_id].notify()
                writer.changed(metadata.by_id[op.segment_id])
            case TruncateOperation():
                self.indexes[op.segment_id].truncate(op.offset)
                self.retention.release(op.segment_id, op.offset)
                writer.changed(metadata.by_id[op.segment_id])
            case MergeOperation():
                source = self.indexes.pop(op.source_id)
                self.indexes[op.target_id].absorb(source, op.target_offset)
                self.retention.merged(op.source_id, op.target_id, op.target_offset)
                self.retention.hold(op.sequence)
                self.merging.setdefault(op.target_id, []).append(
                    (op.sequence, op.target_offset, op.source_length, op.source)
                )
                writer.enqueue(
                    MergeEvent(op.sequence, op.target_id, op.source, op.source_id,
                               op.target_offset, op.source_length, op.time_ms)
                )  # fmt: skip
            case DeleteSegmentOperation():
                self.indexes.pop(op.segment_id).drop()
                self.retention.deleted(op.segment_id)
                self.retention.hold(op.sequence)
                self.merging.pop(op.segment_id, None)
                writer.enqueue(DeleteEvent(op.sequence, op.name, op.segment_id))

    # -- segments entering and leaving memory ------------------------------------------------

    def loaded(self, segment_id: int, storage_length: int) -> None:
        """A segment was loaded back from Tier 2 (all of it is there)."""
        index = self.indexes.get(segment_id)
        if index is None:
            index = self.indexes[segment_id] = self._new_index()
        index.storage_length = max(index.storage_length, storage_length)

    def evicted(self, segment_id: int) -> None:
        """A segment left memory: nothing of it is needed here any more."""
        index = self.indexes.pop(segment_id, None)
        if index is not None:
            index.drop()
        self.retention.deleted(segment_id)

    # -- what the Storage Writer reports back ------------------------------------------------

    def storage_advanced(self, segment_id: int, storage_length: int) -> None:
        index = self.indexes.get(segment_id)
        if index is not None:
            index.storage_length = max(index.storage_length, storage_length)
        self.retention.release(segment_id, storage_length)

    def structural_applied(self, sequence: int) -> None:
        """A merge or delete is done in Tier 2: Tier 1 need not keep it, and a merged range
        is read from the target's own manifest now."""
        self.retention.unhold(sequence)
        for target, merges in list(self.merging.items()):
            merges[:] = [m for m in merges if m[0] != sequence]
            if not merges:
                del self.merging[target]

    # -- lifecycle ---------------------------------------------------------------------------

    def notify_all(self) -> None:
        """Wake every tail reader (the container changed state)."""
        for index in self.indexes.values():
            index.notify()

    def drop_all(self) -> None:
        """Free every cached byte and wake every tail reader (the container stops)."""
        for index in self.indexes.values():
            index.drop()
        self.indexes = {}
