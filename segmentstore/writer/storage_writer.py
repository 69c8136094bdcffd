"""The Storage Writer of one container: moves committed data from the cache to Tier 2.

It works from the durable metadata (lengths, start offsets, seals) plus an ordered queue of
the operations that make segments disappear (merges, deletes), and flushes a segment when it
has ``flush_threshold_bytes`` pending, when its oldest pending byte has waited
``flush_interval_ms``, or when a seal or a merge needs its bytes in Tier 2. Queued merges and
deletes are applied first and in order, so a deleted name's objects are gone before a new
segment of the same name writes any.

After each manifest update it tells the container the new storage length, which makes those
bytes evictable from the cache and lets Tier 1 truncate behind them. Every Tier 2 failure (an
outage, a full disk, a refused permission, throttling, a lost manifest race) is retried with
capped exponential backoff and never stops the writer; meanwhile appends go on into Tier 1 and
the cache, whose bounds push back (``throttled``) once the backlog fills them, and flushing
resumes by itself when Tier 2 answers again. Only a fenced manifest write (a newer owner epoch)
stops the writer and takes the container offline: retrying could never succeed, and the newer
owner has the segment now.

Every manifest it saves keeps the segment's state too (attributes, writer sequence numbers,
retention, times): a segment whose manifest keeps all of it may leave memory (``evictable``),
and is loaded back from the manifest alone.

A recovered container's storage lengths come from its checkpoint and may be behind Tier 2 (a
flush after the last checkpoint, and Tier 1 already truncated behind it). Nothing reads every
manifest at recovery: a segment's manifest is read when the segment is first flushed, or when a
read finds bytes neither cached nor below the storage length known (``refresh``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Callable

from segmentstore.contracts.errors import Tier2ReconciliationError
from segmentstore.metadata.container_metadata import SegmentMetadata
from segmentstore.settings import StorageWriterSettings
from segmentstore.tier2 import (
    ChunkStorage,
    FencedError,
    ManifestStore,
    Tier2Error,
    Tier2UnavailableError,
)
from segmentstore.writer.flush_schedule import FlushSchedule
from segmentstore.writer.segment_flusher import SegmentFlusher
from segmentstore.writer.tier2_threads import Tier2Threads
from segmentstore.writer.writer import DeleteEvent, MergeEvent, WriterHost

log = logging.getLogger(__name__)

_STOP_GRACE_S = 30.0
_MAX_PIECE = 64 << 20  # bytes taken from the cache per chunk write (and manifest update)


class StorageWriter:
    def __init__(
        self,
        container_id: int,
        epoch: int,
        storage: ChunkStorage,
        settings: StorageWriterSettings,
        host: WriterHost,
    ) -> None:
        self._container_id = container_id
        self._epoch = epoch
        self._storage = storage
        self._manifests = ManifestStore(storage)
        self._settings = settings
        self._host = host
        self._threads = Tier2Threads.shared(storage.concurrent_writes)
        # Segments one container brings up to date at once: half the threads, so that another
        # container's flush finds one too.
        self._parallel_flushes = max(1, storage.concurrent_writes // 2)
        self._events: list[MergeEvent | DeleteEvent] = []
        # Names whose objects a queued delete or merge is to remove: not live segments.
        self._removals: Counter[str] = Counter()
        self._dirty = FlushSchedule(settings.flush_interval_ms / 1000)
        # Segments whose manifest must take their current state (an eviction waits for it).
        self._state_wanted: set[int] = set()
        # Segments created since this writer started, not flushed yet: Tier 2 has no manifest
        # of theirs (a delete of an earlier one of the name is applied before), none to read.
        self._created: set[int] = set()
        self._flushers: dict[int, SegmentFlusher] = {}
        self._wakeup = asyncio.Event()
        self._busy = asyncio.Lock()  # one step at a time: the loop's, or flush_all's
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._stop_requested = asyncio.Event()
        self.flushed_bytes = 0
        self.last_error: str | None = None  # the Tier 2 failure being retried, if any
        self.failed_attempts = 0

    # -- feed (event loop, from the container's commit path) --------------------------------

    def appended(self, segment: SegmentMetadata) -> None:
        if segment.length - segment.storage_length >= self._settings.flush_threshold_bytes:
            self._dirty.urgent(segment.id)
            self._wakeup.set()
        elif self._dirty.pending(segment.id) and len(self._dirty) == 1:
            self._wakeup.set()  # the loop sleeps with no timer: it must arm one
        # A segment pending behind others falls due after them: nothing to tell the loop.

    def changed(self, segment: SegmentMetadata) -> None:
        """A seal or a truncation: Tier 2 should follow without waiting for the interval."""
        self._dirty.urgent(segment.id)
        self._wakeup.set()

    def enqueue(self, event: MergeEvent | DeleteEvent) -> None:
        self._events.append(event)
        self._removals[_removed_name(event)] += 1
        self._wakeup.set()

    def removal_pending(self, name: str) -> bool:
        return name in self._removals

    # -- eviction (event loop) --------------------------------------------------------------

    def evictable(self, segment: SegmentMetadata) -> bool:
        flusher = self._flushers.get(segment.id)
        if flusher is None or segment.id in self._dirty or not flusher.complete:
            return False
        manifest = flusher.manifest
        assert manifest is not None
        return (
            flusher.saved_sequence >= segment.last_sequence
            and manifest.storage_length == segment.length
            and manifest.start_offset == segment.start_offset
            and manifest.sealed == segment.sealed
        )

    def created(self, segment_id: int) -> None:
        self._created.add(segment_id)

    def want_saved(self, segment_id: int) -> None:
        if segment_id not in self._state_wanted:
            self._state_wanted.add(segment_id)
            self._dirty.urgent(segment_id)
            self._wakeup.set()

    def forget(self, segment_id: int) -> None:
        self._flushers.pop(segment_id, None)
        self._created.discard(segment_id)
        self._dirty.done(segment_id)
        self._state_wanted.discard(segment_id)

    async def refresh(self, segment_id: int) -> None:
        segment = self._host.durable_metadata.by_id.get(segment_id)
        if segment is None:
            return
        async with self._busy:
            flusher = self._flusher(segment)
            await self._threads.run(flusher.load)
            try:
                self._loaded(segment, flusher)
            except Tier2ReconciliationError as error:
                self._host.writer_failed(error)
                raise

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"storage-writer-{self._container_id}"
        )
        self._task.add_done_callback(self._on_done)

    async def stop(self) -> None:
        """Let the step under way finish (a worker thread cannot be cancelled, and a manifest
        it saved after a restart would race the next owner's), then stop."""
        self._stopping = True
        self._stop_requested.set()
        self._wakeup.set()
        if self._task is not None:
            await asyncio.wait([self._task], timeout=_STOP_GRACE_S)
            self._task.cancel()
            await asyncio.wait([self._task])

    def _on_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.error("container %d: storage writer stopped: %s", self._container_id, error)
            self._host.writer_failed(error)

    async def flush_all(self) -> None:
        """Write everything pending now (for tests and orderly shutdown)."""
        async with self._busy:
            await self._apply_events()
            await self._flush(self._dirty.ids())

    @property
    def lag_bytes(self) -> int:
        metadata = self._host.durable_metadata
        return sum(
            s.length - max(s.storage_length, s.start_offset)
            for i in self._dirty.ids()
            if (s := metadata.by_id.get(i)) is not None
        )

    # -- the loop ---------------------------------------------------------------------------

    async def reconcile(self) -> None:
        """Note the segments whose metadata says Tier 2 is behind (reading no manifest)."""
        for segment in self._host.durable_metadata.segments.values():
            if segment.sealed != segment.sealed_in_storage:
                self._dirty.urgent(segment.id)
            elif segment.start_offset or segment.length > segment.storage_length:
                # Bytes Tier 2 may lack, or a truncation it may not have applied yet.
                self._dirty.pending(segment.id)

    async def _run(self) -> None:
        while not self._stopping:
            await self._retrying(self._cycle)
            timeout = self._dirty.next_due_s()
            self._wakeup.clear()
            if self._stopping:
                break  # stop() set the wakeup that clear() just wiped
            if self._events or timeout == 0:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout)

    async def _retrying(self, step: Callable[[], object]) -> None:
        delay = self._settings.retry_min_ms / 1000
        while not self._stopping:
            try:
                await step()  # type: ignore[misc]
                if self.last_error is not None:
                    log.info("container %d: Tier 2 is back", self._container_id)
                    self.last_error = None
                return
            except FencedError:
                raise  # a newer owner has the segment: only stopping is right
            except Tier2Error as error:
                if not isinstance(error, Tier2UnavailableError):
                    # A refused or half-done step (a lost manifest race, a chunk cut short by
                    # a full disk) leaves our picture of Tier 2 uncertain: read it again.
                    self._flushers.clear()
                if self.last_error is None:
                    log.warning("container %d: Tier 2 step failed, retrying: %s",
                                self._container_id, error)  # fmt: skip
                self.last_error = str(error)
                self.failed_attempts += 1
                # stop() must not wait out a long backoff.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop_requested.wait(), delay)
                delay = min(delay * 2, self._settings.retry_max_ms / 1000)

    async def _cycle(self) -> None:
        async with self._busy:
            await self._apply_events()
            await self._flush(self._dirty.due())

    async def _flush(self, due: list[int]) -> None:
        """Bring the ``due`` segments up to date, several at once: each segment's steps in
        order, and many small segments' writes and syncs under way together (a million
        segments reaching Tier 2 would otherwise be a million syncs in a row). Every segment
        started is finished before the first failure is raised."""
        queue = iter(due)
        failures: list[BaseException] = []

        async def flusher() -> None:
            for segment_id in queue:
                if failures or self._stopping:
                    return
                try:
                    await self._bring_up_to_date(segment_id)
                except Exception as error:
                    failures.append(error)

        await asyncio.gather(*(flusher() for _ in range(min(self._parallel_flushes, len(due)))))
        if failures:
            raise failures[0]

    # -- steps ------------------------------------------------------------------------------

    def _flusher(self, segment: SegmentMetadata) -> SegmentFlusher:
        flusher = self._flushers.get(segment.id)
        if flusher is None:
            flusher = self._flushers[segment.id] = SegmentFlusher(
                self._storage,
                self._manifests,
                segment.name,
                segment.id,
                self._epoch,
                self._settings.max_chunk_bytes,
                self._settings.max_chunk_age_ms,
                self._settings.checksum_block_bytes,
            )
            if segment.id in self._created:
                self._created.discard(segment.id)
                flusher.known = True  # its first save creates the manifest
        return flusher

    def _loaded(self, segment: SegmentMetadata, flusher: SegmentFlusher) -> None:
        """What a freshly read manifest tells: Tier 2 may hold more than the container was told
        (a flush after its checkpoint, or a write whose answer was lost), never more than the
        segment has."""
        manifest = flusher.manifest
        if manifest is None:
            self._host.storage_advanced(segment.id, 0)  # Tier 2 holds none of it: known now
            return
        if manifest.storage_length > segment.length:
            raise Tier2ReconciliationError(segment.name, manifest.storage_length, segment.length)
        self._host.storage_advanced(segment.id, manifest.storage_length)
        if manifest.sealed:
            self._host.sealed_in_storage(segment.id)

    def _take_state(self, segment_id: int, flusher: SegmentFlusher) -> None:
        """Give ``flusher`` the state its next save keeps."""
        taken = self._host.segment_state(segment_id)
        if taken is not None:
            flusher.state, flusher.state_sequence = taken

    async def _bring_up_to_date(self, segment_id: int, upto: int | None = None) -> None:
        """Flush the segment's pending bytes (up to ``upto``), then its truncation and seal."""
        segment = self._host.durable_metadata.by_id.get(segment_id)
        if segment is None:
            self._dirty.done(segment_id)
            return
        flusher = self._flusher(segment)
        if not flusher.known:
            # First flush since it was loaded or recovered, or reloaded after a failed step.
            await self._threads.run(flusher.load)
            self._loaded(segment, flusher)
        end = segment.length if upto is None else upto
        metadata = self._host.durable_metadata
        while True:
            # Truncations and deletes commit while we await Tier 2: look again each time,
            # and take bytes from the cache only right after looking.
            if metadata.by_id.get(segment_id) is not segment:
                return  # deleted (or merged away): its queued event cleans Tier 2 up
            self._take_state(segment_id, flusher)
            if segment.start_offset > flusher.storage_length:
                # Never past ``end``: a pending merge must find Tier 2 exactly at its offset.
                await self._threads.run(flusher.skip_to, min(segment.start_offset, end))
                self._host.storage_advanced(segment_id, flusher.storage_length)
                if flusher.storage_length >= end:
                    break
                continue
            offset = flusher.storage_length
            if offset >= end:
                break
            length = min(end - offset, flusher.room(), _MAX_PIECE)
            entries = self._host.time_index_entries(segment_id, offset, offset + length)
            views, release = self._host.pin_pending(segment_id, offset, length)
            try:
                await self._threads.run(flusher.write, offset, views, length, entries)
            finally:
                release()
            self.flushed_bytes += length
            self._host.storage_advanced(segment_id, flusher.storage_length)
        if upto is not None:
            return  # a merge comes next; truncation and sealing follow in a later cycle
        if segment.start_offset > flusher.start_offset:
            self._take_state(segment_id, flusher)
            await self._threads.run(flusher.truncate, segment.start_offset)
        sealable = segment.sealed and flusher.storage_length == segment.length
        if sealable and not segment.sealed_in_storage:
            self._take_state(segment_id, flusher)
            await self._threads.run(flusher.seal)
            self._host.sealed_in_storage(segment_id)
        if segment_id in self._state_wanted and metadata.by_id.get(segment_id) is segment:
            self._take_state(segment_id, flusher)
            if not flusher.complete:
                await self._threads.run(flusher.save_state)
            self._state_wanted.discard(segment_id)
        if flusher.storage_length >= segment.length:
            self._dirty.done(segment_id)
        elif upto is None and flusher.storage_length >= end:
            # Caught up with what there was; what came meanwhile waits its own interval.
            self._dirty.done(segment_id)
            self.appended(segment)

    async def _apply_events(self) -> None:
        while self._events:
            event = self._events[0]
            if isinstance(event, DeleteEvent):
                flusher = self._flushers.pop(event.segment_id, None) or SegmentFlusher(
                    self._storage, self._manifests, event.name, event.segment_id,
                    self._epoch, self._settings.max_chunk_bytes, self._settings.max_chunk_age_ms,
            self._settings.checksum_block_bytes,
                )  # fmt: skip
                await self._threads.run(flusher.delete)
                self._dirty.done(event.segment_id)
            else:
                await self._apply_merge(event)
            self._events.pop(0)
            name = _removed_name(event)
            self._removals[name] -= 1
            if not self._removals[name]:
                del self._removals[name]
            self._host.structural_applied(event.sequence)

    async def _apply_merge(self, event: MergeEvent) -> None:
        target = self._host.durable_metadata.by_id.get(event.target_id)
        source = SegmentFlusher(
            self._storage, self._manifests, event.source_name, event.source_id,
            self._epoch, self._settings.max_chunk_bytes, self._settings.max_chunk_age_ms,
            self._settings.checksum_block_bytes,
        )  # fmt: skip
        self._flushers.pop(event.source_id, None)
        manifest = await self._threads.run(source.load)
        if target is None:
            # The target is gone too (a later delete): its queued delete cleans up; the
            # source's chunks only need their manifest dropped with them.
            if manifest is not None:
                await self._threads.run(source.delete)
            return
        flusher = self._flusher(target)
        if flusher.manifest is None:
            await self._threads.run(flusher.load)
            self._loaded(target, flusher)
        self._take_state(target.id, flusher)
        if manifest is not None and manifest.storage_length > 0:
            if flusher.storage_length < event.target_offset:
                await self._bring_up_to_date(target.id, upto=event.target_offset)
            if flusher.storage_length == event.target_offset:
                await self._threads.run(
                    flusher.absorb, event.target_offset, manifest, event.time_ms
                )
                self._host.storage_advanced(target.id, flusher.storage_length)
            await self._threads.run(source.forget_manifest)
        elif manifest is not None:
            await self._threads.run(source.forget_manifest)
        self._dirty.urgent(target.id)


def _removed_name(event: MergeEvent | DeleteEvent) -> str:
    return event.name if isinstance(event, DeleteEvent) else event.source_name
