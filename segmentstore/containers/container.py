"""A segment container: the unit of recovery that owns a Durable Log, metadata and read index.

Every change goes through the Durable Log; a call returns once Tier 1 has it and the durable
metadata and read index reflect it. Reads are served from the durable view only, so nothing
unacknowledged is ever visible. A container that fails goes ``read_only`` (Tier 1 out of space:
acknowledged data is still served) or ``offline`` on its own, keeping the error that took it
there (``failure_error``) for the supervisor to judge; the others in the store carry on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

from segmentstore.cache import CacheFullError
from segmentstore.containers.commit_effects import CommitEffects
from segmentstore.containers.failures import is_out_of_space
from segmentstore.containers.gauges import ContainerGauges
from segmentstore.containers.parts import ContainerParts
from segmentstore.containers.retention import RetentionEnforcer
from segmentstore.containers.status import ContainerStatus
from segmentstore.contracts.attributes import AttributeUpdate
from segmentstore.contracts.errors import (
    ContainerUnavailableError,
    DataCorruptedError,
    EndOfSegmentError,
    InsufficientStorageError,
    OffsetBeyondEndError,
    SegmentNotFoundError,
    SegmentStoreError,
    SegmentTruncatedError,
)
from segmentstore.contracts.segment_info import AppendResult, SegmentInfo
from segmentstore.logs.metadata_operations import (
    CreateSegmentOperation,
    DeleteSegmentOperation,
    MergeOperation,
    SealOperation,
    SetRetentionOperation,
    TruncateOperation,
    UpdateAttributesOperation,
)
from segmentstore.logs.operation_log import OperationLog
from segmentstore.logs.operations import AppendOperation, Operation
from segmentstore.logs.recovery import RecoveryStats, replay
from segmentstore.metadata.container_metadata import ContainerMetadata, SegmentMetadata
from segmentstore.metadata.time_index import SegmentTimeIndex
from segmentstore.reading.cache_manager import CacheManager
from segmentstore.reading.read_index import SegmentReadIndex
from segmentstore.reading.tier2_reads import Tier2Reads
from segmentstore.reading.time_lookup import TimeLookup
from segmentstore.settings import StoreSettings
from segmentstore.tier1 import DataLogError, DurableDataLog
from segmentstore.tier2 import ChunkCorruptedError, Tier2Error
from segmentstore.writer.writer import Writer

log = logging.getLogger(__name__)


# Looking an enum member up on its class costs about 80 ns: the append path reads this instead.
_RUNNING = ContainerStatus.RUNNING
_READ_ONLY = ContainerStatus.READ_ONLY


class SegmentContainer(ContainerGauges):
    """One container over its ``parts`` (its Durable Log, read indexes and Storage Writer
    come from their factories) and the store's shared cache and Tier 2 reads; ``settings`` is
    the store section (time index density, retention checks)."""

    def __init__(
        self,
        container_id: int,
        settings: StoreSettings,
        parts: ContainerParts,
        cache_manager: CacheManager,
        tier2: Tier2Reads,
    ) -> None:
        self.id = container_id
        self._settings = settings
        self._parts = parts
        self._cache_manager = cache_manager
        self._tier2 = tier2
        self._time_lookup = TimeLookup(tier2.storage, self._time_index_of)
        self.status = ContainerStatus.STOPPED
        self.failure: str | None = None
        self.failure_error: BaseException | None = None
        self.auto_recoveries = 0  # recoveries the supervisor started
        self.corrupted_reads = 0  # Tier 2 reads refused: bytes that failed their checksum
        self.recovery = RecoveryStats()
        self._reset()

    def _reset(self) -> None:
        self._data_log: DurableDataLog | None = None
        self._durable = ContainerMetadata(self.id)
        self._log: OperationLog | None = None
        self._writer: Writer | None = None
        self._retention_enforcer: RetentionEnforcer | None = None
        self._effects = CommitEffects(self._parts.read_index, self._parts.tier1_coalesce_bytes)

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self._durable.epoch

    def _read_indexes(self) -> Iterable[SegmentReadIndex]:
        return self._effects.indexes.values()

    async def start(self) -> None:
        """Recover from Tier 1 and start accepting operations; a failure leaves it offline."""
        self._reset()
        self._cache_manager.register(self._read_indexes)
        self.status = ContainerStatus.RECOVERING
        self.failure, self.failure_error = None, None
        started = time.monotonic()
        self.recovery = RecoveryStats()
        try:
            self._data_log = self._parts.data_log(self.id)
            epoch = await self._data_log.open()
            # Built before replay so that replayed merges and deletes queue up in it.
            self._writer = self._parts.writer(self.id, epoch, self)
            self._effects.writer = self._writer
            self._durable = await replay(
                self.id, epoch, self._data_log, self._restore, self._effects.replay, self.recovery
            )
            self._durable.time_index_interval = self._settings.time_index_interval_bytes
            accepted = self._durable.copy()
            # From here on only the accepted copy keeps the time indexes.
            self._durable.keeps_time_index = False
            for segment in self._durable.segments.values():
                segment.time_index = SegmentTimeIndex()
            self._log = self._parts.operation_log(
                self.id,
                self._data_log,
                accepted,
                commit=self._commit,
                needed_sequence=self._effects.retention.needed_sequence,
                on_failure=self._on_log_failure,
                release=self._cache_manager.release,
            )
            # Before anything is served: bytes that Tier 2 got after the last checkpoint are
            # neither in the replayed index nor below the checkpointed storage lengths.
            await self._writer.reconcile()
            self._log.start()
            # Every start begins the log anew at a checkpoint, so the next recovery is bounded.
            await self._log.checkpoint()
            self._writer.start()
            self._retention_enforcer = RetentionEnforcer(
                self.id,
                lambda: self._durable,
                self._time_lookup,
                self.truncate,
                self._settings.retention_check_interval_ms,
            )
            self._retention_enforcer.start()
        except (DataLogError, Tier2Error, SegmentStoreError) as error:
            # Corruption and a Tier 2 ahead of Tier 1 are ContainerFailureErrors (permanent);
            # the supervisor judges from failure_error whether another recovery may help.
            await self._go_offline(error)
            return
        except CacheFullError as error:
            await self._go_offline(error, f"the cache is too small to recover it: {error}")
            return
        self.recovery.seconds = time.monotonic() - started
        self.status = ContainerStatus.RUNNING
        log.info(
            "container %d running: epoch %d, %d segments, replayed %d operations in %.3f s",
            self.id,
            self.epoch,
            len(self._durable.segments),
            self.recovery.operations_replayed,
            self.recovery.seconds,
        )

    async def stop(self) -> None:
        # Stopped first: a request arriving while the parts stop is refused (503) rather than
        # let into a read index or log that is being taken apart. What was queued still drains.
        if self.status is not ContainerStatus.OFFLINE:
            self.status = ContainerStatus.STOPPED
        await self._release_resources()

    async def release(self) -> None:
        """Stop for good on this node (another owns it now): no failure is kept."""
        self.status = ContainerStatus.STOPPED
        await self._release_resources()
        self.status = ContainerStatus.STOPPED
        self.failure, self.failure_error = None, None

    async def _go_offline(self, error: BaseException, reason: str | None = None) -> None:
        self.status = ContainerStatus.OFFLINE
        self.failure, self.failure_error = reason or str(error), error
        log.error("container %d offline: %s", self.id, self.failure)
        await self._release_resources()

    async def _release_resources(self) -> None:
        if self._retention_enforcer is not None:
            await self._retention_enforcer.stop()
        if self._writer is not None:
            await self._writer.stop()
        if self._log is not None:
            await self._log.stop()
        if self._data_log is not None:
            await self._data_log.close()
        self._cache_manager.unregister(self._read_indexes)
        self._effects.drop_all()  # frees cache entries and wakes tail readers

    def _on_log_failure(self, error: BaseException) -> None:
        # Out of space, everything acknowledged is still in the cache or Tier 2: serve it.
        out_of_space = is_out_of_space(error)
        self.status = ContainerStatus.READ_ONLY if out_of_space else ContainerStatus.OFFLINE
        self.failure, self.failure_error = str(error), error
        self._effects.notify_all()

    def writer_failed(self, error: BaseException) -> None:
        """The Storage Writer stopped (fenced by a newer owner, or Tier 2 disagrees with us)."""
        self.status = ContainerStatus.OFFLINE
        self.failure, self.failure_error = f"storage writer: {error}", error
        log.error("container %d offline: %s", self.id, self.failure)
        self._effects.notify_all()

    # -- applying committed operations ----------------------------------------------------

    def _restore(self, metadata: ContainerMetadata) -> None:
        metadata.time_index_interval = self._settings.time_index_interval_bytes
        self._effects.restore(metadata)

    def _commit(self, ops: list[Operation]) -> None:
        self._effects.commit(ops, self._durable)

    # -- the Storage Writer's view (WriterHost) -------------------------------------------

    def pin_pending(
        self, segment_id: int, offset: int, length: int
    ) -> tuple[list[memoryview], Callable[[], None]]:
        index = self._effects.indexes[segment_id]
        return index.pin_views(offset, length), index.unpin

    def storage_advanced(self, segment_id: int, storage_length: int) -> None:
        for metadata in self._metadata_copies():
            segment = metadata.by_id.get(segment_id)
            if segment is not None and storage_length > segment.storage_length:
                segment.storage_length = min(storage_length, segment.length)
                # The flush wrote these entries into the chunk's sidecar.
                segment.time_index.forget_below(segment.storage_length)
        self._effects.storage_advanced(segment_id, storage_length)
        self.truncate_behind_tier2()

    def truncate_behind_tier2(self) -> None:
        """While read-only (Tier 1 full, no more checkpoints written), truncate Tier 1 behind
        what Tier 2 now holds: that is what gives its recovery room."""
        if self.status is _READ_ONLY and self._log is not None:
            self._log.truncate_behind_tier2()

    def time_index_entries(self, segment_id: int, start: int, end: int) -> list[tuple[int, int]]:
        segment = self._durable.by_id.get(segment_id)
        return [] if segment is None else self._time_index_of(segment).between(start, end)

    def time_index(self, name: str) -> SegmentTimeIndex:
        """The in-memory time index of segment ``name`` (its Tier 1 tail)."""
        return self._time_index_of(self._segment(name))

    def _time_index_of(self, segment: SegmentMetadata) -> SegmentTimeIndex:
        """The time index of a (durable) segment, kept in the accepted metadata; empty if
        the accepted copy no longer has the segment (a delete under way)."""
        keeper = self._durable if self._log is None else self._log.accepted
        found = keeper.by_id.get(segment.id)
        return SegmentTimeIndex() if found is None else found.time_index

    def sealed_in_storage(self, segment_id: int) -> None:
        for metadata in self._metadata_copies():
            segment = metadata.by_id.get(segment_id)
            if segment is not None:
                segment.sealed_in_storage = True

    def structural_applied(self, sequence: int) -> None:
        self._effects.structural_applied(sequence)

    def _metadata_copies(self) -> list[ContainerMetadata]:
        # Storage lengths are not operations: both copies learn them, and checkpoints of the
        # accepted copy persist them (recovery reconciles with Tier 2 in any case).
        copies = [self._durable]
        if self._log is not None:
            copies.append(self._log.accepted)
        return copies

    # -- operations -----------------------------------------------------------------------

    def _refusal(self) -> SegmentStoreError:
        """Why a change is refused while the container is not running."""
        if self.status is _READ_ONLY:
            return InsufficientStorageError(
                f"container {self.id} serves reads only until Tier 1 has room: {self.failure}"
            )
        return ContainerUnavailableError(self.id, self.failure or self.status.value)

    async def _process(self, op: Operation) -> None:
        if self._log is None or self.status is not _RUNNING:
            raise self._refusal()
        await self._log.process(op)

    def _readable(self) -> None:
        if self.status is not _RUNNING and self.status is not _READ_ONLY:
            raise ContainerUnavailableError(self.id, self.failure or self.status.value)

    def _segment(self, name: str) -> SegmentMetadata:
        self._readable()
        segment = self._durable.segments.get(name)
        if segment is None:
            raise SegmentNotFoundError(name)
        return segment

    def _info(self, name: str) -> SegmentInfo:
        segment = self._segment(name)
        return SegmentInfo(
            name=segment.name,
            container=self.id,
            start_offset=segment.start_offset,
            length=segment.length,
            storage_length=segment.storage_length,
            sealed=segment.sealed,
            created_ms=segment.created_ms,
            last_modified_ms=segment.last_modified_ms,
            retention=dict(segment.retention),
            attributes=dict(segment.attributes),
        )

    async def create_segment(
        self,
        name: str,
        attributes: dict[str, int] | None = None,
        retention: dict[str, int] | None = None,
    ) -> SegmentInfo:
        await self._process(CreateSegmentOperation(name, attributes, retention))
        return self._info(name)

    async def append(
        self,
        name: str,
        data: bytes | bytearray | memoryview,
        expected_offset: int | None = None,
        writer_id: str | None = None,
        writer_seq: int | None = None,
        writer_prev_seq: int | None = None,
    ) -> AppendResult:
        op = AppendOperation(name, data, expected_offset, writer_id, writer_seq, writer_prev_seq)
        size = op.size
        # Room in the cache is taken before the append is admitted: at commit its bytes go
        # into the cache, which must never have to refuse them.
        manager = self._cache_manager
        reserved = manager.try_reserve(size) or await manager.reserve(size)
        # _process and DurableLog.process inlined: the hot path awaits the window itself.
        durable_log = self._log
        if durable_log is None or self.status is not _RUNNING:
            manager.release(reserved)
            raise self._refusal()
        try:
            # The Durable Log hands the reservation back once the append is settled.
            await durable_log.submit(op, size, reserved)
        except asyncio.CancelledError as cancelled:
            await durable_log.settled(op, cancelled)
        if op.refusal is not None:
            raise op.refusal
        return op.result()

    async def read(
        self, name: str, offset: int, max_length: int, wait_ms: int
    ) -> bytes | memoryview:
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            segment = self._segment(name)
            if offset < segment.start_offset:
                raise SegmentTruncatedError(name, segment.start_offset)
            if offset > segment.length:
                raise OffsetBeyondEndError(name, offset, segment.length)
            if offset < segment.length:
                wanted = min(max_length, segment.length - offset)
                data = self._effects.indexes[segment.id].read(offset, wanted)
                if data:
                    return data
                return await self._read_tier2(segment, offset, wanted)
            if segment.sealed:
                raise EndOfSegmentError(name, segment.length)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return b""
            await self._effects.indexes[segment.id].wait_for_change(remaining)

    async def _read_tier2(self, segment: SegmentMetadata, offset: int, wanted: int) -> bytes:
        """A cache miss: the bytes are in Tier 2 (under the segment's manifest, or under a
        merged source's until the writer has moved them over)."""
        for _, at, length, source in self._effects.merging.get(segment.id, ()):
            if at <= offset < at + length:
                try:
                    return await self._tier2.read(
                        source, offset - at, min(wanted, at + length - offset)
                    )
                except ChunkCorruptedError as error:
                    raise self._corrupted(error) from error
                except Tier2Error:
                    break  # the writer finished the merge meanwhile: the target has them now
        if offset >= segment.storage_length:
            # Not cached and not in Tier 2: never expected; refuse rather than answer empty.
            raise ContainerUnavailableError(
                self.id, f"bytes at {offset} of {segment.name!r} are neither cached nor in Tier 2"
            )
        index = self._effects.indexes[segment.id]
        try:
            return await self._tier2.read_into(index, segment, offset, wanted)
        except ChunkCorruptedError as error:
            raise self._corrupted(error) from error
        except Tier2Error as error:
            raise ContainerUnavailableError(self.id, f"Tier 2 read failed: {error}") from error

    def _corrupted(self, error: ChunkCorruptedError) -> DataCorruptedError:
        self.corrupted_reads += 1
        log.error("container %d: %s", self.id, error)
        return DataCorruptedError(error.segment, error.chunk, error.start, error.end, error.reason)

    async def set_retention(self, name: str, retention: dict[str, int]) -> SegmentInfo:
        await self._process(SetRetentionOperation(name, retention))
        return self._info(name)

    async def offset_at(self, name: str, timestamp_ms: int) -> int:
        segment = self._segment(name)
        try:
            return await self._time_lookup.offset_at(segment, timestamp_ms)
        except Tier2Error as error:
            raise ContainerUnavailableError(self.id, f"Tier 2 read failed: {error}") from error

    async def seal(self, name: str) -> SegmentInfo:
        await self._process(SealOperation(name))
        return self._info(name)

    async def truncate(self, name: str, offset: int) -> SegmentInfo:
        await self._process(TruncateOperation(name, offset))
        return self._info(name)

    async def merge(self, target: str, source: str) -> AppendResult:
        op = MergeOperation(target, source)
        await self._process(op)
        return AppendResult(op.target_offset, op.target_offset + op.source_length)

    async def delete_segment(self, name: str) -> None:
        await self._process(DeleteSegmentOperation(name))

    def get_info(self, name: str) -> SegmentInfo:
        return self._info(name)

    def get_attributes(self, name: str) -> dict[str, int]:
        return dict(self._segment(name).attributes)

    async def update_attributes(self, name: str, updates: list[AttributeUpdate]) -> dict[str, int]:
        await self._process(UpdateAttributesOperation(name, updates))
        return self.get_attributes(name)

    def segment_names(self) -> list[str]:
        self._readable()
        return list(self._durable.segments)
