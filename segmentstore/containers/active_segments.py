"""Which of a container's segments are in memory: loading the others back on first use, and
evicting the ones not used for a while (Pravega's "active segment metadata").

A segment is *active* while its metadata is in memory. Once it has not been used for
``metadata.idle_eviction_ms``, or it is among the least recently used beyond
``metadata.max_active_segments``, it leaves memory, but only when nothing of it would be lost:
no call is using it, nothing of it is in flight in the Durable Log, and its Tier 2 manifest
keeps every byte of it and its state as of its last operation (the Storage Writer saves the
manifest first if it lags). Eviction writes nothing to Tier 1: a recovery that replays from a
checkpoint taken before it simply holds the segment again, in the state its manifest keeps.

A call that names a segment not in memory loads it: its manifest is read from Tier 2 and the
segment joins both copies of the metadata as its manifest keeps it. Nothing is written for a
load: a read needs nothing more, and before the first change to a loaded segment the container
logs it as a ``LoadSegmentOperation`` (whose state travels in it), so that replay never needs
Tier 2 to know the segment it changes. A name whose delete (or merge) has not yet reached Tier 2
is not loaded from the manifest it leaves behind. Loads of one name share one read.

Once more segments were evicted since the last such checkpoint than stay active, a checkpoint
is written, so that recovery (and Tier 1, truncated at checkpoints) is bounded by what is
active, not by what was.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import logging
import time
from typing import Protocol

from segmentstore.containers.manifest_lookups import ManifestLookups
from segmentstore.contracts.errors import ContainerUnavailableError, SegmentNotFoundError
from segmentstore.gc_tuning import give_back_freed_memory
from segmentstore.metadata.container_metadata import ContainerMetadata, SegmentMetadata
from segmentstore.metadata.time_index import SegmentTimeIndex
from segmentstore.settings import MetadataSettings
from segmentstore.tier2 import SegmentManifest, Tier2Error

log = logging.getLogger(__name__)

# Once the segments evicted since the last checkpoint this wrote are at least as many as stay
# active, a checkpoint is written: recovery then replays at most about as many evicted segments
# as there are active ones (none once all are idle, so Tier 1 is truncated behind them and Tier
# 2 is their only copy), and these checkpoints cost Tier 1 at most one row per segment evicted
# (a checkpoint holds a row per active segment; one after every round that let go of a tenth of
# them cost up to ten, 1 KB per segment at a million).
# A round that evicted this many gives the freed heap back to the system (it costs a walk of
# the heap's free lists: not every round).
_TRIM_AFTER = 1_000


class ActiveSegmentsHost(Protocol):
    """What eviction and loading need from the container."""

    @property
    def accepted(self) -> ContainerMetadata | None:
        """The accepted metadata (None while the container is not running)."""
        ...

    @property
    def durable_metadata(self) -> ContainerMetadata: ...

    def removal_pending(self, name: str) -> bool: ...

    def at_rest(self, segment: SegmentMetadata) -> bool:
        """Whether everything of the durable ``segment`` is in Tier 2 and nothing in memory
        waits on it (readers, merges under way); asks for its manifest to be saved if not."""
        ...

    def insert(self, segment: SegmentMetadata) -> None:
        """Make ``segment``, loaded from its manifest, active (not yet logged)."""
        ...

    def evict(self, segment_id: int) -> None: ...

    async def checkpoint(self) -> None: ...


class ActiveSegments:
    def __init__(
        self,
        container_id: int,
        settings: MetadataSettings,
        lookups: ManifestLookups,
        host: ActiveSegmentsHost,
    ) -> None:
        self._container_id = container_id
        self._idle_s = settings.idle_eviction_ms / 1000
        self._max_active = settings.max_active_segments
        # Look often enough that a segment leaves within about an eighth of its idle time.
        self._interval_s = min(max(self._idle_s / 8, 0.05), 10.0)
        self._lookups = lookups
        self._host = host
        self._loading: dict[str, asyncio.Future[None]] = {}
        self._task: asyncio.Task[None] | None = None
        self.loads = 0
        self.evictions = 0
        self._evicted_since_checkpoint = 0

    # -- loading --------------------------------------------------------------------------

    async def segment(self, name: str) -> SegmentMetadata:
        """The accepted copy of segment ``name``, loaded first if it is not active;
        ``SegmentNotFoundError`` if it does not exist. Pin it before the next await."""
        while True:
            accepted = self._host.accepted
            if accepted is None:
                raise ContainerUnavailableError(self._container_id, "not running")
            segment = accepted.segments.get(name)
            if segment is not None:
                segment.last_used = time.monotonic()
                return segment
            await self.load(name)

    async def exists_inactive(self, name: str) -> bool:
        """Whether ``name`` is a segment that is not in memory now (before a create)."""
        if self._host.removal_pending(name):
            return False
        return await self._manifest(name) is not None

    async def load(self, name: str) -> None:
        """Make ``name`` active if it exists; ``SegmentNotFoundError`` if it does not. One
        load of a name at a time: callers asking meanwhile wait for it."""
        loading = self._loading.get(name)
        if loading is None:
            loading = asyncio.ensure_future(self._load(name))
            self._loading[name] = loading
            loading.add_done_callback(functools.partial(self._loaded, name))
        await asyncio.shield(loading)

    def _loaded(self, name: str, loading: asyncio.Future[None]) -> None:
        if self._loading.get(name) is loading:
            del self._loading[name]
        if not loading.cancelled():
            loading.exception()  # retrieved here: every caller may have been cancelled

    async def _load(self, name: str) -> None:
        accepted = self._host.accepted
        if accepted is not None and name in accepted.segments:
            return
        if self._host.removal_pending(name):
            raise SegmentNotFoundError(name)  # deleted or merged: its manifest is leftover
        manifest = await self._manifest(name)
        if manifest is None:
            raise SegmentNotFoundError(name)
        if not manifest.complete:
            # Only a lost or rebuilt Tier 1 leaves this: loading it would serve a segment
            # without its exactly-once state, or shorter than it was.
            reason = (
                f"segment {name!r} is not in memory and its Tier 2 manifest does not keep all"
                f" of it (storage length {manifest.storage_length}, state"
                f" {'missing' if manifest.state is None else manifest.state.length})"
            )
            log.error("container %d: %s", self._container_id, reason)
            raise ContainerUnavailableError(self._container_id, reason)
        accepted = self._host.accepted
        if accepted is None or name in accepted.segments:
            return  # stopped, or created anew meanwhile (a delete reached Tier 2)
        segment = _from_manifest(manifest)
        segment.logged = False
        self._host.insert(segment)
        self.loads += 1

    async def _manifest(self, name: str) -> SegmentManifest | None:
        try:
            return await self._lookups.get(name)
        except Tier2Error as error:
            raise ContainerUnavailableError(
                self._container_id, f"cannot read the manifest of {name!r} in Tier 2: {error}"
            ) from error

    # -- eviction -------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"active-segments-{self._container_id}"
        )

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task])
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self._retention_due()
                evicted, active = self.evict_round()
                if self._host.accepted is None:
                    self._evicted_since_checkpoint = 0  # stopped: its next start writes one
                    continue
                self._evicted_since_checkpoint += evicted
                since = self._evicted_since_checkpoint
                if since and since >= active - evicted:
                    await self._host.checkpoint()
                    self._evicted_since_checkpoint = 0
                if evicted >= _TRIM_AFTER:
                    give_back_freed_memory()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                # A checkpoint refused because the container stopped: the next start writes
                # one anyway. Anything else is logged and the next round tries again.
                log.warning("container %d: eviction round failed: %s", self._container_id, error)

    async def _retention_due(self) -> None:
        """Load the inactive segments whose time retention has data to expire now: the
        retention enforcer sees only what is in memory."""
        accepted = self._host.accepted
        now_ms = time.time_ns() // 1_000_000
        while accepted is not None and accepted.retention_watch:
            due_ms, name = accepted.retention_watch[0]
            if due_ms > now_ms:
                return
            heapq.heappop(accepted.retention_watch)
            try:
                await self.load(name)
            except SegmentNotFoundError:
                continue  # deleted (or merged) since it left memory
            except ContainerUnavailableError:
                heapq.heappush(accepted.retention_watch, (due_ms, name))  # Tier 2 is away
                return

    def evict_round(self) -> tuple[int, int]:
        """Evict the idle segments and the least recently used beyond the bound that may
        leave now; returns how many left and how many were active before."""
        accepted = self._host.accepted
        if accepted is None:
            return 0, 0
        durable = self._host.durable_metadata
        active = len(accepted.segments)
        idle_before = time.monotonic() - self._idle_s
        candidates = [s for s in accepted.segments.values() if s.last_used <= idle_before]
        excess = active - self._max_active - len(candidates)
        if excess > 0:
            chosen = {s.id for s in candidates}
            busy = (s for s in accepted.segments.values() if s.id not in chosen)
            candidates.extend(heapq.nsmallest(excess, busy, key=lambda s: s.last_used))
        evicted = 0
        for segment in candidates:
            twin = durable.by_id.get(segment.id)
            if (
                twin is None
                or segment.pins
                or twin.pins
                or segment.last_sequence != twin.last_sequence
                or not self._host.at_rest(twin)
            ):
                continue
            self._host.evict(segment.id)
            evicted += 1
        self.evictions += evicted
        return evicted, active


def _from_manifest(manifest: SegmentManifest) -> SegmentMetadata:
    """The metadata of an inactive segment, as its (complete) manifest keeps it."""
    state = manifest.state
    assert state is not None
    time_index = SegmentTimeIndex()
    time_index.last_entry_offset = state.time_index_last_offset
    time_index.last_time_ms = state.time_index_last_time_ms
    return SegmentMetadata(
        id=manifest.segment_id,
        name=manifest.name,
        created_ms=state.created_ms,
        last_modified_ms=state.last_modified_ms,
        start_offset=manifest.start_offset,
        length=manifest.storage_length,
        storage_length=manifest.storage_length,
        sealed=manifest.sealed,
        sealed_in_storage=manifest.sealed,
        attributes=dict(state.attributes),
        writers=dict(state.writers),
        retention=dict(state.retention),
        time_index=time_index,
    )
