"""The cache manager: one bounded cache shared by every container, and who may use it.

Appends reserve room before they are admitted (their bytes go into the cache when they commit),
so the cache never has to refuse a committed append. When a reservation does not fit, the
manager first evicts: it starts a new generation and evicts entries already in Tier 2 that were
not used in the current generation, then, if that is not enough, every entry already in Tier 2.
What still does not fit waits, up to ``max_delay_ms``, for truncations, deletions and
evictions to make room, and is then refused with ``ThrottledError``: a full cache slows
appends down instead of growing memory. Data that exists only in Tier 1 is never evicted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable

from segmentstore.cache import Cache, CacheStats
from segmentstore.contracts.errors import ThrottledError
from segmentstore.reading.read_index import GenerationClock, SegmentReadIndex

IndexSource = Callable[[], Iterable[SegmentReadIndex]]

_POLL_S = 0.02  # truncations and deletions free room without telling: look again this often


class CacheManager:
    def __init__(self, cache: Cache, max_delay_ms: int) -> None:
        self.cache = cache
        self.clock = GenerationClock()
        self._max_delay_s = max_delay_ms / 1000
        self._reserved = 0
        self._sources: list[IndexSource] = []
        self._room: asyncio.Future[None] | None = None
        # Fixed for the cache's life; read on every append.
        self._block_bytes = cache.block_bytes
        self._max_bytes = cache.max_bytes

    def register(self, source: IndexSource) -> None:
        """Add a container's read indexes to those that eviction looks through."""
        self._sources.append(source)

    def unregister(self, source: IndexSource) -> None:
        """Idempotent: a container that went offline is unregistered again when stopped."""
        if source in self._sources:
            self._sources.remove(source)

    @property
    def reserved_bytes(self) -> int:
        return self._reserved

    @property
    def stats(self) -> CacheStats:
        return self.cache.stats

    def _fits(self, size: int) -> bool:
        return self.cache.used_bytes + self._reserved + size <= self.cache.max_bytes

    def try_reserve(self, payload_bytes: int) -> int | None:
        """:meth:`reserve` if there is room now (the common case, with no coroutine)."""
        size = payload_bytes + self._block_bytes
        if self.cache.used_bytes + self._reserved + size > self._max_bytes:
            return None
        self._reserved += size
        return size

    async def reserve(self, payload_bytes: int) -> int:
        """Reserve room for an append of ``payload_bytes``; returns what to :meth:`release`."""
        # An append may open one block more than its own size needs (the last one is partial).
        size = payload_bytes + self.cache.block_bytes
        if not self._fits(size):
            self.evict(size)
            deadline = time.monotonic() + self._max_delay_s
            while not self._fits(size):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ThrottledError("the cache is full", retry_after_ms=1000)
                if self._room is None or self._room.done():
                    self._room = asyncio.get_running_loop().create_future()
                await asyncio.wait([self._room], timeout=min(remaining, _POLL_S))
                self.evict(size)
        self._reserved += size
        return size

    def release(self, reserved: int) -> None:
        self._reserved -= reserved
        if self._room is not None and not self._room.done():
            self._room.set_result(None)

    def evict(self, needed: int) -> int:
        """Evict Tier 2 data, least recently used generations first, until ``needed`` bytes
        would fit; returns the bytes evicted."""
        self.clock.now += 1
        freed = 0
        for oldest_kept in (self.clock.now - 1, self.clock.now + 1):
            for source in self._sources:
                for index in source():
                    freed += index.evict(oldest_kept)
                    if self._fits(needed):
                        return freed
        return freed
