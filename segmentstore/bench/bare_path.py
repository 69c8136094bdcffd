"""The bare durable-append path, as a baseline for ``bench append``: what the store's append
path costs when everything but the essentials is taken away.

Writers await one future per append. One coroutine drains what they queued in each loop
iteration into a record (a length-prefixed entry per append, one CRC-32C over the record),
and a single thread writes and ``fdatasync``s records in order. Up to two records are in flight,
and futures are completed in order once their record is durable. There is no metadata, no
cache, no operation log format, no Tier 2: the gap between this and the store is the price of
the store's features, measured in the same run on the same disk.
"""

from __future__ import annotations

import asyncio
import os
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from crc32c import crc32c

_ENTRY = struct.Struct("<I")
_MAX_IN_FLIGHT = 2


async def run_bare_path(directory: Path, size: int, writers: int, seconds: float) -> float:
    """Appends per second of ``writers`` concurrent writers of ``size``-byte appends."""
    payload = os.urandom(size)
    loop = asyncio.get_running_loop()
    pending: list[tuple[bytes, asyncio.Future[None]]] = []
    wakeup = asyncio.Event()
    fd = os.open(directory / "bare.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bare-path-io")
    in_flight = asyncio.Semaphore(_MAX_IN_FLIGHT)
    stop_at = time.perf_counter() + seconds
    count = 0

    def write_and_sync(record: list[bytes]) -> None:
        os.writev(fd, record)
        os.fdatasync(fd)

    async def persist(record: list[bytes], futures: list[asyncio.Future[None]]) -> None:
        try:
            # One I/O thread: records are written, synced and completed in order.
            await loop.run_in_executor(io, write_and_sync, record)
        finally:
            in_flight.release()
        for future in futures:
            future.set_result(None)

    async def processor() -> None:
        persisting: list[asyncio.Task[None]] = []
        while time.perf_counter() < stop_at or pending:
            await wakeup.wait()
            wakeup.clear()
            batch = pending[:]
            pending.clear()
            if not batch:
                continue
            body = b"".join(b for data, _ in batch for b in (_ENTRY.pack(len(data)), data))
            record = [struct.pack("<II", len(body), crc32c(body)), body]
            await in_flight.acquire()
            persisting.append(loop.create_task(persist(record, [f for _, f in batch])))
        await asyncio.gather(*persisting)

    async def writer() -> None:
        nonlocal count
        while time.perf_counter() < stop_at:
            future = loop.create_future()
            pending.append((payload, future))
            wakeup.set()
            await future
            count += 1

    try:
        started = time.perf_counter()
        processing = loop.create_task(processor())
        await asyncio.gather(*(writer() for _ in range(writers)))
        elapsed = time.perf_counter() - started
        wakeup.set()
        await processing
        return count / elapsed
    finally:
        io.shutdown()
        os.close(fd)
