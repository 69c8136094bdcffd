"""Retention: segments with a policy are truncated automatically, Kafka style.

A policy keeps *at least* ``time_ms`` of appends (by when they were made) and *at least* the
last ``bytes`` bytes; with both, the stricter cut wins, as in Kafka, where a segment goes once
either limit says so. Every ``retention_check_interval_ms`` the enforcer computes each policy's
cut and truncates there through the Durable Log, like a user's truncate. Cuts are always append
boundaries from the time index (or the segment's length), so they never fall inside an event
written by ``:appendEvents``; the Storage Writer then deletes the Tier 2 chunks wholly below the
new start offset.

Retention is a lower bound: data may outlive its policy by up to one check interval, plus one
time-index interval of appends (the cut is the boundary at or before the exact point), plus the
rest of the chunk that holds the cut (chunks are deleted whole; they roll at
``max_chunk_bytes`` or ``max_chunk_age_ms``). ``lag_ms`` measures it: how long ago the oldest
append still stored should have gone under a time policy.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from segmentstore.contracts.errors import SegmentStoreError
from segmentstore.metadata.container_metadata import ContainerMetadata, SegmentMetadata
from segmentstore.reading.time_lookup import TimeLookup
from segmentstore.tier2 import Tier2Error

log = logging.getLogger(__name__)


class RetentionEnforcer:
    def __init__(
        self,
        container_id: int,
        metadata: Callable[[], ContainerMetadata],
        lookup: TimeLookup,
        truncate: Callable[[str, int], Awaitable[object]],
        interval_ms: int,
    ) -> None:
        self._container_id = container_id
        self._metadata = metadata
        self._lookup = lookup
        self._truncate = truncate
        self._interval_s = interval_ms / 1000
        self._task: asyncio.Task[None] | None = None
        self.lag_ms = 0
        self.truncated_bytes = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"retention-{self._container_id}"
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
                await self.enforce()
            except (SegmentStoreError, Tier2Error) as error:
                # The container is stopping or Tier 2 is unreachable: the next round retries.
                log.warning("container %d: retention round failed: %s", self._container_id, error)

    async def enforce(self, now_ms: int | None = None) -> None:
        """One round over every segment with a policy."""
        now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        lag_ms = 0
        for segment in list(self._metadata().segments.values()):
            if not segment.retention:
                continue
            lag_ms = max(lag_ms, await self._lag_ms(segment, now_ms))
            cut = await self.cut(segment, now_ms)
            await self._note_due(segment, cut)
            if cut > segment.start_offset:
                before = segment.start_offset
                try:
                    await self._truncate(segment.name, cut)
                except SegmentStoreError as error:  # deleted or merged meanwhile
                    log.debug("retention skipped %r: %s", segment.name, error)
                    continue
                self.truncated_bytes += cut - before
                log.info("retention truncated %r at %d (%d bytes)", segment.name, cut, cut - before)
        self.lag_ms = lag_ms

    async def cut(self, segment: SegmentMetadata, now_ms: int) -> int:
        """Where the policy of ``segment`` lets it be truncated now (an append boundary)."""
        cuts = [segment.start_offset]
        time_ms = segment.retention.get("time_ms")
        if time_ms is not None:
            cuts.append(await self._lookup.offset_at(segment, now_ms - time_ms))
        keep_bytes = segment.retention.get("bytes")
        if keep_bytes is not None and segment.length - keep_bytes > segment.start_offset:
            cuts.append(
                await self._lookup.boundary_at_or_below(segment, segment.length - keep_bytes)
            )
        return max(cuts)

    async def _note_due(self, segment: SegmentMetadata, cut: int) -> None:
        """When the segment's time policy next has data to expire: once the segment is idle
        and leaves memory, the container brings it back then (the retention watch)."""
        time_ms = segment.retention.get("time_ms")
        if time_ms is None:
            return
        if cut > segment.start_offset:
            segment.retention_due_ms = 0  # to be truncated now: known again next round
            return
        oldest = await self._lookup.oldest_time(segment)
        # Nothing stored (or no time known): look again at the next appends' pace.
        segment.retention_due_ms = (
            oldest + time_ms if oldest is not None else self._now_ms() + time_ms
        )

    @staticmethod
    def _now_ms() -> int:
        return time.time_ns() // 1_000_000

    async def _lag_ms(self, segment: SegmentMetadata, now_ms: int) -> int:
        time_ms = segment.retention.get("time_ms")
        if time_ms is None:
            return 0
        oldest = await self._lookup.oldest_time(segment)
        return 0 if oldest is None else max(0, now_ms - time_ms - oldest)
