"""The containers of one store, and which of them this process holds (Pravega's segment
container registry).

Every container is built at once over the parts they share: one cache, one view of Tier 2
(reads, manifest lookups), each its own Tier 1 log. This process holds them all, unless a
cluster shares them out (then each is taken as its lease is won) or the process is one worker
of a node (then only its share). The ones held recover in the background
(:mod:`.recoveries`) and are watched by the supervisor (:mod:`.supervisor`); one is recovered
in place again on request, taken, or released, one such change at a time per container.
"""

from __future__ import annotations

import asyncio
import logging

from segmentstore.cache import BlockArenaCache
from segmentstore.containers.container import SegmentContainer
from segmentstore.containers.manifest_lookups import ManifestLookups
from segmentstore.containers.parts import default_parts
from segmentstore.containers.recoveries import Recoveries
from segmentstore.containers.supervisor import ContainerSupervisor, stays_read_only
from segmentstore.containers.tier1_logs import tier1_log
from segmentstore.logs.observed_data_log import observed
from segmentstore.observations import Observations
from segmentstore.reading.cache_manager import CacheManager
from segmentstore.reading.tier2_reads import Tier2Reads
from segmentstore.settings import Settings
from segmentstore.tier1 import DurableDataLog
from segmentstore.tier2 import ChunkStorage
from segmentstore.writer.observed_chunk_storage import ObservedChunkStorage

log = logging.getLogger(__name__)


class ContainerRegistry:
    """The containers over Tier 2's ``storage`` (opened, and closed, by the store), reporting
    their figures to ``observations``; ``share``: the containers of this worker of a node."""

    def __init__(
        self,
        settings: Settings,
        storage: ChunkStorage,
        observations: Observations,
        share: frozenset[int] | None,
    ) -> None:
        self._settings = settings
        self._observations = observations
        cache = settings.cache
        self.cache_manager = CacheManager(
            BlockArenaCache(cache.max_bytes, block_bytes=cache.block_bytes),
            settings.durable_log.throttle_max_delay_ms,
        )
        self.tier2 = Tier2Reads(
            ObservedChunkStorage(storage, observations),
            self.cache_manager,
            settings.storage_writer.read_block_bytes,
            settings.storage_writer.verify_checksums,
        )
        parts = default_parts(
            data_log=self._data_log,
            durable_log=settings.durable_log,
            cache=cache,
            cache_manager=self.cache_manager,
            storage_writer=settings.storage_writer,
            storage=self.tier2.storage,
            tier1_segment_bytes=settings.tier1.segment_bytes,
        )
        self._lookups = ManifestLookups(self.tier2.storage)
        self.containers = [
            SegmentContainer(
                i,
                settings.store,
                parts,
                self.cache_manager,
                self.tier2,
                settings.metadata,
                self._lookups,
            )
            for i in range(settings.store.containers)
        ]
        # In a cluster the containers are taken one by one, as their leases are won.
        initial = [] if settings.cluster.enabled else self.containers
        if share is not None:
            initial = [c for c in initial if c.id in share]
        self._initial = initial
        self.owned = {c.id for c in initial}
        self._restarts: dict[int, asyncio.Lock] = {}
        self._recoveries = Recoveries(observations)
        self._supervisor = ContainerSupervisor(
            self.containers,
            lambda i: self.restart(self.containers[i]),
            settings.store,
            self.owned.__contains__,
        )

    def _data_log(self, container_id: int) -> DurableDataLog:
        tier1 = self._settings.tier1
        jetstream = tier1.jetstream if tier1.mode == "jetstream" else None
        data_log = tier1_log(self._settings.store.data_dir, tier1, jetstream, container_id)
        return observed(data_log, self._observations)

    def start(self) -> None:
        """Recover the containers held from the start, in the background, and supervise."""
        log.info(
            "starting %d of %d containers over %s",
            len(self._initial),
            len(self.containers),
            self._settings.store.data_dir,
        )
        self._recoveries.begin(self._initial)
        self._supervisor.start()

    async def recovered(self) -> None:
        await self._recoveries.wait()

    async def close(self) -> None:
        """Stop supervising, let a recovery under way finish (stopping it midway would race
        with it), then stop every container and free the cache."""
        await self._supervisor.stop()
        await self._recoveries.settle()
        await asyncio.gather(*(c.stop() for c in self.containers))
        self._lookups.close()
        self.cache_manager.cache.close()

    def _one_change_at_a_time(self, container: SegmentContainer) -> asyncio.Lock:
        """Restarts, takes and releases of one container run one at a time."""
        return self._restarts.setdefault(container.id, asyncio.Lock())

    async def restart(self, container: SegmentContainer) -> SegmentContainer:
        """Recover ``container`` in place, unless it is to stay read-only."""
        async with self._one_change_at_a_time(container):
            refusal = stays_read_only(container, self._settings.store.recovery_room_bytes)
            if refusal is not None:
                raise refusal
            await container.stop()
            await self._recoveries.recover(container)
        return container

    async def take(self, container: SegmentContainer) -> SegmentContainer:
        """Hold ``container`` from now on, and recover it."""
        async with self._one_change_at_a_time(container):
            self.owned.add(container.id)
            await container.stop()
            await self._recoveries.recover(container)
        return container

    async def release(self, container: SegmentContainer) -> None:
        """Hold ``container`` no more: it stops for good here (another holds it now)."""
        async with self._one_change_at_a_time(container):
            self.owned.discard(container.id)
            await container.release()
