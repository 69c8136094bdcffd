"""A Tier 1 in memory, for component tests that need a real log but no disk: fast, and honest
about the contract of ``DurableDataLog`` (tests/tier1 runs its contract suite against it).

The records live in an :class:`InMemoryTier1` medium, which outlives the logs opened on it: a
test opens a log, appends, closes (or abandons) it, and a new log on the same medium recovers
what was acknowledged. "Durable" here means "in the medium's list": an append is acknowledged
on a later turn of the event loop, in order, and a record is in the list before its future
resolves. The medium can refuse writes (:attr:`InMemoryTier1.refuse_writes`, an error as a
full disk gives) and fences an owner whose epoch is no longer the newest.
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from segmentstore.tier1 import (
    DataLogClosedError,
    DataLogFencedError,
    DataLogWriteError,
    DurableDataLog,
    LogRecord,
)
from segmentstore.tier1.log import Buffer


@dataclass
class InMemoryTier1:
    """The medium: records by address, the epoch, and whether writes are refused now."""

    records: list[LogRecord] = field(default_factory=list)
    epoch: int = 0
    next_address: int = 1
    refuse_writes: bool = False
    errno: int = errno.ENOSPC  # what a refused write says

    @property
    def size_bytes(self) -> int:
        return sum(len(r.data) for r in self.records)


class InMemoryDataLog(DurableDataLog):
    def __init__(self, medium: InMemoryTier1) -> None:
        self.medium = medium
        self._epoch = 0
        self._open = False
        self._failure: BaseException | None = None
        self._pending: list[asyncio.Future[int]] = []

    async def open(self, min_epoch: int = 0) -> int:
        medium = self.medium
        medium.epoch = max(medium.epoch + 1, min_epoch)
        self._epoch = medium.epoch
        self._open, self._failure = True, None
        return self._epoch

    @property
    def epoch(self) -> int:
        return self._epoch

    def append(self, parts: Sequence[Buffer]) -> asyncio.Future[int]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        error = self._refusal()
        if error is not None:
            self._failure = self._failure or error
            future.set_exception(error)
            return future
        medium = self.medium
        address = medium.next_address
        medium.next_address += 1
        medium.records.append(LogRecord(address, b"".join(bytes(p) for p in parts)))
        self._pending.append(future)
        # Acknowledged on a later turn of the loop, as a real log's sync would be.
        loop.call_soon(self._acknowledge, future, address)
        return future

    def _refusal(self) -> BaseException | None:
        if not self._open:
            return DataLogClosedError("in-memory data log is not open")
        if self._failure is not None:
            return DataLogWriteError(f"the log failed earlier: {self._failure}")
        if self.medium.epoch != self._epoch:
            return DataLogFencedError(self._epoch, self.medium.epoch)
        if self.medium.refuse_writes:
            return DataLogWriteError("the in-memory medium refuses writes", self.medium.errno)
        return None

    def _acknowledge(self, future: asyncio.Future[int], address: int) -> None:
        self._pending.remove(future)
        if not future.done():
            future.set_result(address)

    async def read(self, from_address: int = 0) -> AsyncIterator[LogRecord]:
        for record in list(self.medium.records):
            if record.address >= from_address:
                yield record

    async def truncate(self, below_address: int) -> None:
        if self.medium.epoch != self._epoch:
            raise DataLogFencedError(self._epoch, self.medium.epoch)
        if below_address > self.medium.next_address:
            raise ValueError(f"cannot truncate below {below_address}: the log ends earlier")
        self.medium.records = [r for r in self.medium.records if r.address >= below_address]

    @property
    def size_bytes(self) -> int:
        return self.medium.size_bytes

    def has_room(self, nbytes: int) -> bool:
        return not self.medium.refuse_writes

    async def close(self) -> None:
        if self._pending:
            await asyncio.wait(list(self._pending))
        self._open = False
