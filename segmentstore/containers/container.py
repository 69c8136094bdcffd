"""A segment container: the unit of recovery that owns a Durable Log, metadata and read index.

Every change goes through the Durable Log; a call returns once Tier 1 has it and the durable
metadata and read index reflect it. Reads are served from the durable view only, so nothing
unacknowledged is ever visible. Only active segments are in memory: a call that names another
loads it back from Tier 2 first, and idle ones are evicted (:mod:`.active_segments`); a call
pins the segments it uses, so none leaves memory under it.

A container that fails goes ``read_only`` (Tier 1 out of space: acknowledged data is still
served) or ``offline`` on its own, keeping the error that took it there (``failure_error``)
for the supervisor to judge; the others in the store carry on.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Callable, Iterable

from segmentstore.cache import CacheFullError
from segmentstore.containers.active_segments import ActiveSegments
from segmentstore.containers.commit_effects import CommitEffects
from segmentstore.containers.failures import is_out_of_space
from segmentstore.containers.gauges import ContainerGauges
from segmentstore.containers.manifest_lookups import ManifestLookups
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
    SegmentExistsError,
    SegmentNotFoundError,
    SegmentStoreError,
    SegmentTruncatedError,
)
from segmentstore.contracts.names import transaction_parent
from segmentstore.contracts.segment_info import AppendResult, SegmentInfo
from segmentstore.logs.metadata_operations import (
    CreateSegmentOperation,
    DeleteSegmentOperation,
    LoadSegmentOperation,
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
from segmentstore.settings import MetadataSettings, StoreSettings
from segmentstore.tier1 import DataLogError, DurableDataLog
from segmentstore.tier2 import ChunkCorruptedError, SegmentState, Tier2Error
from segmentstore.writer.manifest_state import manifest_state
from segmentstore.writer.writer import Writer

log = logging.getLogger(__name__)


# Looking an enum member up on its class costs about 80 ns: the append path reads this instead.
_RUNNING = ContainerStatus.RUNNING
_READ_ONLY = ContainerStatus.READ_ONLY


class SegmentContainer(ContainerGauges):
    """One container over its ``parts`` (its Durable Log, read indexes and Storage Writer
    come from their factories) and the store's shared cache, Tier 2 reads and manifest
    lookups; ``settings`` is the store section (time index density, retention checks),
    ``metadata`` when segments leave memory."""

    def __init__(
        self,
        container_id: int,
        settings: StoreSettings,
        parts: ContainerParts,
        cache_manager: CacheManager,
        tier2: Tier2Reads,
        metadata: MetadataSettings | None = None,
        lookups: ManifestLookups | None = None,
    ) -> None:
        self.id = container_id
        self._settings = settings
        self._metadata_settings = metadata or MetadataSettings()
        self._lookups = lookups or ManifestLookups(tier2.storage)
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
        self._active = ActiveSegments(self.id, self._metadata_settings, self._lookups, self)

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
            now = time.monotonic()
            for segment in accepted.segments.values():
                segment.last_used = now  # recovered: idle from now on, not since ever
            for segment in self._durable.segments.values():
                segment.storage_known = False  # until its manifest is read
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
            # Which segments Tier 2 is behind on (no manifest is read: a read that finds bytes
            # neither cached nor below the storage length it knows asks Tier 2 then).
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
            self._active.start()
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
        await self._active.stop()
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
            if segment is not None:
                segment.storage_known = True
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

    def segment_state(self, segment_id: int) -> tuple[SegmentState, int] | None:
        segment = self._durable.by_id.get(segment_id)
        if segment is None:
            return None
        return manifest_state(segment, self._time_index_of(segment)), segment.last_sequence

    def time_index_entries(self, segment_id: int, start: int, end: int) -> list[tuple[int, int]]:
        segment = self._durable.by_id.get(segment_id)
        return [] if segment is None else self._time_index_of(segment).between(start, end)

    def time_index(self, name: str) -> SegmentTimeIndex:
        """The in-memory time index of active segment ``name`` (its Tier 1 tail)."""
        segment = self._durable.segments.get(name)
        if segment is None:
            raise SegmentNotFoundError(name)
        return self._time_index_of(segment)

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

    # -- active segments (ActiveSegmentsHost) ---------------------------------------------

    @property
    def accepted(self) -> ContainerMetadata | None:
        return None if self._log is None else self._log.accepted

    def removal_pending(self, name: str) -> bool:
        return self._writer is not None and self._writer.removal_pending(name)

    def at_rest(self, segment: SegmentMetadata) -> bool:
        writer = self._writer
        if writer is None or self.status is not _RUNNING:
            return False
        index = self._effects.indexes.get(segment.id)
        if (index is not None and index.in_use) or segment.id in self._effects.merging:
            return False
        if segment.retention.get("time_ms") is not None and not segment.retention_due_ms:
            return False  # the retention enforcer has yet to say when it next expires data
        if not writer.evictable(segment):
            writer.want_saved(segment.id)
            return False
        return True

    def evict(self, segment_id: int) -> None:
        assert self._log is not None and self._writer is not None
        accepted = self._log.accepted
        segment = accepted.remove(segment_id)
        durable = self._durable.remove(segment_id)
        if segment.retention.get("time_ms") is not None:
            # Back into memory when its data next expires (checkpoints carry the watch).
            heapq.heappush(accepted.retention_watch, (durable.retention_due_ms, segment.name))
        self._effects.evicted(segment_id)
        self._writer.forget(segment_id)

    def insert(self, segment: SegmentMetadata) -> None:
        assert self._log is not None
        self._log.accepted.add(segment)
        durable = segment.copy()
        durable.time_index = SegmentTimeIndex()  # the accepted copy keeps it
        self._durable.add(durable)
        self._effects.loaded(segment.id, segment.storage_length)

    async def checkpoint(self) -> None:
        if self._log is None or self.status is not _RUNNING:
            raise self._refusal()
        await self._log.checkpoint()

    @property
    def active_segments(self) -> ActiveSegments:
        return self._active

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

    async def _process_on(self, names: tuple[str, ...], op: Operation) -> None:
        """Process ``op``, which names the segments ``names``: each is loaded if it is not
        active, and pinned until ``op`` is settled (the processor resolves it by name)."""
        pinned: list[SegmentMetadata] = []
        try:
            for name in names:
                pinned.append(await self._activated(name))
            await self._process(op)
        finally:
            for segment in pinned:
                segment.pins -= 1

    async def _activated(self, name: str) -> SegmentMetadata:
        """The accepted copy of segment ``name``, loaded if it is not active and logged if
        Tier 1 does not know it yet, and pinned: the caller unpins it once done."""
        if self._log is None or self.status is not _RUNNING:
            raise self._refusal()
        segment = await self._active.segment(name)
        segment.pins += 1
        try:
            if not segment.logged:
                await self._process(LoadSegmentOperation(segment.copy()))
        except BaseException:
            segment.pins -= 1
            raise
        return segment

    def _readable(self) -> None:
        if self.status is not _RUNNING and self.status is not _READ_ONLY:
            raise ContainerUnavailableError(self.id, self.failure or self.status.value)

    async def _segment(self, name: str) -> SegmentMetadata:
        """The durable copy of segment ``name``, loaded first if it is not active. Pin it
        before the next await."""
        self._readable()
        segment = self._durable.segments.get(name)
        while segment is None:
            if self._log is None or name in self._log.accepted.segments:
                raise SegmentNotFoundError(name)  # a create not yet durable
            await self._active.load(name)
            self._readable()
            segment = self._durable.segments.get(name)
        segment.last_used = time.monotonic()
        return segment

    def _info(self, segment: SegmentMetadata) -> SegmentInfo:
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
        if (
            self._log is not None
            and name not in self._log.accepted.segments
            and await self._active.exists_inactive(name)
        ):
            raise SegmentExistsError(name)
        op = CreateSegmentOperation(name, attributes, retention)
        parent = transaction_parent(name)
        await self._process_on(() if parent is None else (parent,), op)
        return await self.get_info(name)

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
        durable_log = self._log
        segment = None if durable_log is None else durable_log.accepted.segments.get(name)
        if segment is None or not segment.logged:
            segment = await self._activated(name)
        else:
            segment.pins += 1
        segment.last_used = time.monotonic()
        try:
            size = op.size
            # Room in the cache is taken before the append is admitted: at commit its bytes
            # go into the cache, which must never have to refuse them.
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
        finally:
            segment.pins -= 1
        if op.refusal is not None:
            raise op.refusal
        return op.result()

    async def read(
        self, name: str, offset: int, max_length: int, wait_ms: int
    ) -> bytes | memoryview:
        deadline = time.monotonic() + wait_ms / 1000
        self._readable()
        pinned = self._durable.segments.get(name) or await self._segment(name)
        pinned.pins += 1  # no eviction under a read that waits (for Tier 2, or at the tail)
        try:
            segment: SegmentMetadata | None = pinned
            while True:
                if segment is None:
                    raise SegmentNotFoundError(name)  # deleted meanwhile
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
                self._readable()
                segment = self._durable.segments.get(name)
        finally:
            pinned.pins -= 1

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
        try:
            if offset >= segment.storage_length and self._writer is not None:
                # Recovered from a checkpoint older than the last flush: ask Tier 2 itself.
                await self._writer.refresh(segment.id)
            if offset >= segment.storage_length:
                # Not cached and not in Tier 2: never expected; refuse rather than answer.
                raise ContainerUnavailableError(
                    self.id,
                    f"bytes at {offset} of {segment.name!r} are neither cached nor in Tier 2",
                )
            index = self._effects.indexes[segment.id]
            return await self._tier2.read_into(index, segment, offset, wanted)
        except ChunkCorruptedError as error:
            raise self._corrupted(error) from error
        except Tier2Error as error:
            raise ContainerUnavailableError(self.id, f"Tier 2 read failed: {error}") from error

    async def _changed(self, name: str, op: Operation) -> SegmentInfo:
        await self._process_on((name,), op)
        return await self.get_info(name)

    def _corrupted(self, error: ChunkCorruptedError) -> DataCorruptedError:
        self.corrupted_reads += 1
        log.error("container %d: %s", self.id, error)
        return DataCorruptedError(error.segment, error.chunk, error.start, error.end, error.reason)

    async def set_retention(self, name: str, retention: dict[str, int]) -> SegmentInfo:
        return await self._changed(name, SetRetentionOperation(name, retention))

    async def offset_at(self, name: str, timestamp_ms: int) -> int:
        segment = await self._segment(name)
        segment.pins += 1
        try:
            return await self._time_lookup.offset_at(segment, timestamp_ms)
        except Tier2Error as error:
            raise ContainerUnavailableError(self.id, f"Tier 2 read failed: {error}") from error
        finally:
            segment.pins -= 1

    async def seal(self, name: str) -> SegmentInfo:
        return await self._changed(name, SealOperation(name))

    async def truncate(self, name: str, offset: int) -> SegmentInfo:
        return await self._changed(name, TruncateOperation(name, offset))

    async def merge(self, target: str, source: str) -> AppendResult:
        op = MergeOperation(target, source)
        await self._process_on((target, source), op)
        return AppendResult(op.target_offset, op.target_offset + op.source_length)

    async def delete_segment(self, name: str) -> None:
        await self._process_on((name,), DeleteSegmentOperation(name))

    async def get_info(self, name: str) -> SegmentInfo:
        segment = await self._segment(name)
        if not segment.storage_known and self._writer is not None:
            # Recovered from a checkpoint: Tier 2 may hold more than it says, and a storage
            # length once reported never goes back.
            segment.pins += 1
            try:
                await self._writer.refresh(segment.id)
            except Tier2Error as error:
                raise ContainerUnavailableError(
                    self.id, f"cannot read the manifest of {name!r}: {error}"
                ) from error
            finally:
                segment.pins -= 1
        return self._info(segment)

    async def get_attributes(self, name: str) -> dict[str, int]:
        return dict((await self._segment(name)).attributes)

    async def update_attributes(self, name: str, updates: list[AttributeUpdate]) -> dict[str, int]:
        await self._process_on((name,), UpdateAttributesOperation(name, updates))
        return await self.get_attributes(name)

    def active_names(self, prefix: str = "") -> list[str]:
        """The names of the active segments that start with ``prefix`` (unsorted)."""
        self._readable()
        return [name for name in self._durable.segments if name.startswith(prefix)]
