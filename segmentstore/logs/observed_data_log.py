"""A Tier 1 log that reports how long each record took to become durable.

:class:`ObservedDataLog` wraps any :class:`~segmentstore.tier1.DurableDataLog` and changes
nothing of its contract: it times each :meth:`append` from the call to the resolution of its
future (the write and the sync, queueing included) and reports it to the store's
:class:`~segmentstore.observations.Observations`. One record is a frame, which carries a whole
batch of appends, so this costs one callback per frame, not per append.

A log that can stall (one that overrides ``available``, like a replicated log electing a
leader) is wrapped in :class:`ObservedStallingDataLog`, which asks it; any other keeps the base
``available``, so the Durable Log still knows it never stalls and never asks
(:func:`observed`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence

from segmentstore.observations import Observations
from segmentstore.tier1 import DurableDataLog
from segmentstore.tier1.log import Buffer, LogRecord


class ObservedDataLog(DurableDataLog):
    def __init__(self, inner: DurableDataLog, observations: Observations) -> None:
        self.inner = inner
        self._observations = observations

    async def open(self, min_epoch: int = 0) -> int:
        return await self.inner.open(min_epoch)

    @property
    def epoch(self) -> int:
        return self.inner.epoch

    def append(self, parts: Sequence[Buffer]) -> asyncio.Future[int]:
        future = self.inner.append(parts)
        if self._observations.observers:
            started = time.perf_counter()

            def written(done: asyncio.Future[int]) -> None:
                if not done.cancelled() and done.exception() is None:
                    self._observations.tier1_written(time.perf_counter() - started)

            future.add_done_callback(written)
        return future

    def read(self, from_address: int = 0) -> AsyncIterator[LogRecord]:
        return self.inner.read(from_address)

    async def truncate(self, below_address: int) -> None:
        await self.inner.truncate(below_address)

    @property
    def size_bytes(self) -> int:
        return self.inner.size_bytes

    def has_room(self, nbytes: int) -> bool:
        return self.inner.has_room(nbytes)

    async def close(self) -> None:
        await self.inner.close()


class ObservedStallingDataLog(ObservedDataLog):
    @property
    def available(self) -> bool:
        return self.inner.available


def observed(inner: DurableDataLog, observations: Observations) -> ObservedDataLog:
    """``inner``, observed, with its ability to stall kept visible."""
    if type(inner).available is DurableDataLog.available:
        return ObservedDataLog(inner, observations)
    return ObservedStallingDataLog(inner, observations)
