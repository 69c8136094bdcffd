"""A segment container: the unit of recovery that owns a Durable Log, metadata and read index.

Every change goes through the Durable Log; a call returns once Tier 1 has it and the durable
metadata and read index reflect it. Reads are served from the durable view only, so nothing
unacknowledged is ever visible (:mod:`.reads`). Only active segments are in memory: a call that
names another loads it back from Tier 2 first, and idle ones are evicted
(:mod:`.active_segments`, which calls back into the container's host side, :mod:`.host_side`,
as its Storage Writer does); a call pins the segments it uses, so none leaves memory under it.

A container that fails goes ``read_only`` (Tier 1 out of space: acknowledged data is still
served) or ``offline`` on its own, keeping the error that took it there (``failure_error``)
for the supervisor to judge; the others in the store carry on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

from segmentstore.cache import CacheFullError
from segmentstore.containers.active_segments import ActiveSegments
from segmentstore.containers.commit_effects import CommitEffects
from segmentstore.containers.failures import is_out_of_space
from segmentstore.containers.gauges import ContainerGauges
from segmentstore.containers.host_side import ContainerHostSide
from segmentstore.containers.manifest_lookups import ManifestLookups
from segmentstore.containers.parts import ContainerParts
from segmentstore.containers.reads import ContainerReads
from segmentstore.containers.retention import RetentionEnforcer
from segmentstore.containers.status import RUNNING, ContainerStatus
from segmentstore.contracts.attributes import AttributeUpdate
from segmentstore.contracts.errors import SegmentExistsError, SegmentStoreError
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
from segmentstore.tier2 import Tier2Error
from segmentstore.writer.writer import Writer

log = logging.getLogger(__name__)


class SegmentContainer(ContainerReads, ContainerHostSide, ContainerGauges):
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
        # Told of every change of status after it is made (a worker of a node writes it on the
        # board its siblings answer from, so that what a request changed is seen at once).
        self.on_status: Callable[[], None] | None = None
        self.failure: str | None = None
        self.failure_error: BaseException | None = None
        self.auto_recoveries = 0  # recoveries the supervisor started
        self.corrupted_reads = 0  # Tier 2 reads refused: bytes that failed their checksum
        self.recovery = RecoveryStats()
        self._reset()

    def set_status(self, status: ContainerStatus) -> None:
        self.status = status
        if self.on_status is not None:
            self.on_status()

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
        self.set_status(ContainerStatus.RECOVERING)
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
        self.set_status(ContainerStatus.RUNNING)
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
            self.set_status(ContainerStatus.STOPPED)
        await self._release_resources()

    async def release(self) -> None:
        """Stop for good on this node (another owns it now): no failure is kept."""
        self.set_status(ContainerStatus.STOPPED)
        await self._release_resources()
        self.set_status(ContainerStatus.STOPPED)
        self.failure, self.failure_error = None, None

    async def _go_offline(self, error: BaseException, reason: str | None = None) -> None:
        self.set_status(ContainerStatus.OFFLINE)
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
        self.set_status(ContainerStatus.READ_ONLY if out_of_space else ContainerStatus.OFFLINE)
        self.failure, self.failure_error = str(error), error
        self._effects.notify_all()

    def writer_failed(self, error: BaseException) -> None:
        """The Storage Writer stopped (fenced by a newer owner, or Tier 2 disagrees with us)."""
        self.set_status(ContainerStatus.OFFLINE)
        self.failure, self.failure_error = f"storage writer: {error}", error
        log.error("container %d offline: %s", self.id, self.failure)
        self._effects.notify_all()

    # -- applying committed operations ----------------------------------------------------

    def _restore(self, metadata: ContainerMetadata) -> None:
        metadata.time_index_interval = self._settings.time_index_interval_bytes
        self._effects.restore(metadata)

    def _commit(self, ops: list[Operation]) -> None:
        self._effects.commit(ops, self._durable)

    # -- operations -----------------------------------------------------------------------

    async def _process(self, op: Operation) -> None:
        if self._log is None or self.status is not RUNNING:
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
        if self._log is None or self.status is not RUNNING:
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
            if durable_log is None or self.status is not RUNNING:
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

    async def _changed(self, name: str, op: Operation) -> SegmentInfo:
        await self._process_on((name,), op)
        return await self.get_info(name)

    async def set_retention(self, name: str, retention: dict[str, int]) -> SegmentInfo:
        return await self._changed(name, SetRetentionOperation(name, retention))

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

    async def update_attributes(self, name: str, updates: list[AttributeUpdate]) -> dict[str, int]:
        await self._process_on((name,), UpdateAttributesOperation(name, updates))
        return await self.get_attributes(name)
