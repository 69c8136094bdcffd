"""A ``DurableDataLog`` that wraps a real one and injects the faults a FaultInjector decides
(Pravega's ``TestDurableDataLog``). Methods, as the injector knows them:

``open``, ``truncate``, ``close``
    ``fail`` raises (``DataLogWriteError`` unless the fault names an error), ``delay`` waits;
``append``
    ``fail``: the record is not written and its future fails; ``fail_after``: the record is
    written but its future fails (a lost acknowledgement: recovery may find it); ``delay``: the
    future resolves ``delay_s`` late; ``corrupt``: the record is written with its first byte
    changed and acknowledged. After a failed append every later one fails too, without
    reaching the real log, as the contract says of any log;
``read``
    ``fail`` raises when the iteration starts;
``read_record``
    one count per record yielded: ``fail`` raises there, ``corrupt`` yields it changed.

Futures still resolve in the order of the appends, whatever the delays.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

from fault_injection import Fault, FaultInjector, corrupted

from segmentstore.tier1 import DataLogWriteError, DurableDataLog, LogRecord
from segmentstore.tier1.log import Buffer


def _error(fault: Fault) -> BaseException:
    if fault.error is not None:
        return fault.error()
    return DataLogWriteError(f"injected: {fault.method} call fails")


class FlakyDataLog(DurableDataLog):
    def __init__(self, inner: DurableDataLog, injector: FaultInjector) -> None:
        self.inner = inner
        self.injector = injector
        self._failure: BaseException | None = None
        self._previous: asyncio.Future[int] | None = None  # the last future handed out
        self._settling: set[asyncio.Task[None]] = set()

    async def open(self, min_epoch: int = 0) -> int:
        await self._before("open")
        self._failure = None
        return await self.inner.open(min_epoch)

    @property
    def epoch(self) -> int:
        return self.inner.epoch

    def append(self, parts: Sequence[Buffer]) -> asyncio.Future[int]:
        loop = asyncio.get_running_loop()
        outer: asyncio.Future[int] = loop.create_future()
        fault = self.injector.decide("append")
        if self._failure is not None or (fault is not None and fault.action == "fail"):
            if self._failure is None and fault is not None:
                self._failure = _error(fault)
            error = DataLogWriteError(f"the log failed earlier: {self._failure}")
            inner: asyncio.Future[int] | None = None
        else:
            if fault is not None and fault.action == "corrupt":
                parts = [corrupted(b"".join(bytes(p) for p in parts))]
            inner = self.inner.append(parts)
            error = None
            if fault is not None and fault.action == "fail_after":
                self._failure = error = _error(fault)
        delay = fault.delay_s if fault is not None and fault.action == "delay" else 0.0
        task = loop.create_task(self._settle(outer, inner, error, delay, self._previous))
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)
        self._previous = outer
        return outer

    async def _settle(
        self,
        outer: asyncio.Future[int],
        inner: asyncio.Future[int] | None,
        error: BaseException | None,
        delay_s: float,
        previous: asyncio.Future[int] | None,
    ) -> None:
        result: int | None = None
        if inner is not None:
            try:
                result = await inner
            except Exception as inner_error:  # the real log's own failure passes through
                error = error or inner_error
        if delay_s:
            await asyncio.sleep(delay_s)
        if previous is not None:
            # In order, whatever each waited for: a later record is never acknowledged first.
            await asyncio.wait([previous])
        if outer.done():
            return
        if error is not None:
            outer.set_exception(error)
        else:
            assert result is not None
            outer.set_result(result)

    async def read(self, from_address: int = 0) -> AsyncIterator[LogRecord]:
        await self._before("read")
        async for record in self.inner.read(from_address):
            fault = self.injector.decide("read_record")
            if fault is not None and fault.action == "fail":
                raise _error(fault)
            if fault is not None and fault.action == "corrupt":
                record = LogRecord(record.address, corrupted(record.data))
            yield record

    async def truncate(self, below_address: int) -> None:
        await self._before("truncate")
        await self.inner.truncate(below_address)

    @property
    def available(self) -> bool:
        return self.inner.available

    @property
    def size_bytes(self) -> int:
        return self.inner.size_bytes

    def has_room(self, nbytes: int) -> bool:
        return self.inner.has_room(nbytes)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._before("close")
        if self._settling:
            await asyncio.wait(list(self._settling))
        await self.inner.close()

    async def _before(self, method: str) -> None:
        fault = self.injector.decide(method)
        if fault is None:
            return
        if fault.action == "delay":
            await asyncio.sleep(fault.delay_s)
        elif fault.action == "fail":
            raise _error(fault)
