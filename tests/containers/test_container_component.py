"""The segment container alone, built from its parts (``ContainerParts``) as the store builds
it, but over doubles: an in-memory Tier 1 and Tier 2 wrapped in fault injectors, and factories
that wrap the real Durable Log, read index and Storage Writer where a test breaks one of them.
No store, HTTP or disk.

A restart is a new container over the same Tier 1 medium and Tier 2 location.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fault_injection import FaultInjector
from flaky_tier1 import FlakyDataLog
from flaky_tier2 import FlakyChunkStorage
from loop_checks import every_exception_retrieved
from memory_tier1 import InMemoryDataLog, InMemoryTier1
from memory_tier2 import InMemoryTier2

from segmentstore.cache import BlockArenaCache
from segmentstore.containers.container import SegmentContainer
from segmentstore.containers.failures import is_permanent
from segmentstore.containers.parts import ContainerParts, default_parts
from segmentstore.containers.status import ContainerStatus
from segmentstore.contracts.attributes import AttributeUpdate, UpdateType
from segmentstore.contracts.errors import (
    BadAttributeUpdateError,
    BadOffsetError,
    ContainerUnavailableError,
    EndOfSegmentError,
    InsufficientStorageError,
    SegmentNotFoundError,
    SegmentSealedError,
    SegmentTruncatedError,
    Tier2ReconciliationError,
)
from segmentstore.contracts.names import transaction_name
from segmentstore.reading.cache_manager import CacheManager
from segmentstore.reading.read_index import SegmentReadIndex
from segmentstore.reading.tier2_reads import Tier2Reads
from segmentstore.settings import (
    CacheSettings,
    DurableLogSettings,
    StorageWriterSettings,
    StoreSettings,
)
from segmentstore.tier1 import DataLogWriteError
from segmentstore.writer.storage_writer import StorageWriter
from segmentstore.writer.writer import Writer, WriterHost

pytestmark = pytest.mark.timeout(30)
NAME = "scope/stream/0"
WRITER = StorageWriterSettings(
    flush_threshold_bytes=1 << 20, flush_interval_ms=20, retry_min_ms=1, retry_max_ms=20
)
MANUAL_WRITER = StorageWriterSettings(flush_threshold_bytes=1 << 20, flush_interval_ms=600_000)


@pytest.fixture(autouse=True)
async def _every_exception_retrieved() -> AsyncIterator[None]:
    async with every_exception_retrieved():
        yield


class Rig:
    """One container's world: Tier 1 and Tier 2 that outlive it, the shared cache, and the
    fault injectors; :meth:`container` builds a container over them, from ``parts``."""

    def __init__(self) -> None:
        self.medium = InMemoryTier1()
        self.tier1_faults = FaultInjector()
        self.tier2_faults = FaultInjector()
        self.storage = FlakyChunkStorage(InMemoryTier2().client(), self.tier2_faults)
        self.cache = CacheManager(BlockArenaCache(16 << 20), max_delay_ms=200)
        self.tier2 = Tier2Reads(self.storage, self.cache, 64 * 1024)
        self.running: list[SegmentContainer] = []

    def parts(self, **replaced: Any) -> ContainerParts:
        parts = default_parts(
            data_log=lambda _: FlakyDataLog(InMemoryDataLog(self.medium), self.tier1_faults),
            durable_log=DurableLogSettings(max_frame_bytes=64 * 1024),
            cache=CacheSettings(max_bytes=16 << 20),
            cache_manager=self.cache,
            storage_writer=WRITER,
            storage=self.storage,
            tier1_segment_bytes=1 << 20,
        )
        return ContainerParts(**{**vars(parts), **replaced})

    async def container(self, **replaced: Any) -> SegmentContainer:
        container = SegmentContainer(
            0, StoreSettings(), self.parts(**replaced), self.cache, self.tier2
        )
        await container.start()
        self.running.append(container)
        return container

    async def stop_all(self) -> None:
        for container in self.running:
            await container.stop()
        self.storage.close()
        self.cache.cache.close()


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    world = Rig()
    yield world
    await world.stop_all()


async def read_all(container: SegmentContainer, name: str = NAME) -> bytes:
    info = await container.get_info(name)
    out = bytearray()
    while info.start_offset + len(out) < info.length:
        out += await container.read(name, info.start_offset + len(out), 1 << 20, 0)
    return bytes(out)


async def test_every_operation_against_doubles(rig: Rig) -> None:
    container = await rig.container()
    assert container.status is ContainerStatus.RUNNING
    await container.create_segment(NAME, attributes={"owner": 7})
    assert (await container.append(NAME, b"hello ")).offset == 0
    with pytest.raises(BadOffsetError):
        await container.append(NAME, b"x", expected_offset=3)
    assert (await container.append(NAME, b"world", expected_offset=6)).length == 11
    first = await container.append(NAME, b"!", writer_id="w", writer_seq=1)
    again = await container.append(NAME, b"!", writer_id="w", writer_seq=1)
    assert (first.duplicate, again.duplicate, again.length) == (False, True, 12)
    assert await read_all(container) == b"hello world!"
    assert await container.read(NAME, 3, 4, 0) == b"lo w"  # at most max_length

    # A reader at the tail waits for the next append.
    tail = asyncio.create_task(container.read(NAME, 12, 100, 5_000))
    await asyncio.sleep(0.01)
    await container.append(NAME, b" more")
    assert await tail == b" more"

    txn = transaction_name(NAME)
    await container.create_segment(txn)
    await container.append(txn, b" (txn)")
    merged = await container.merge(NAME, txn)
    assert (merged.offset, merged.length) == (17, 23)
    with pytest.raises(SegmentNotFoundError):
        await container.get_info(txn)

    updated = await container.update_attributes(
        NAME, [AttributeUpdate("count", 5, UpdateType.ACCUMULATE)]
    )
    assert updated == {"owner": 7, "count": 5}
    with pytest.raises(BadAttributeUpdateError):
        await container.update_attributes(
            NAME, [AttributeUpdate("owner", 1, UpdateType.REPLACE_IF_ABSENT)]
        )
    assert (await container.set_retention(NAME, {"bytes": 1 << 20})).retention == {"bytes": 1 << 20}
    await container.truncate(NAME, 6)
    with pytest.raises(SegmentTruncatedError):
        await container.read(NAME, 0, 10, 0)
    await container.seal(NAME)
    with pytest.raises(SegmentSealedError):
        await container.append(NAME, b"late")
    with pytest.raises(EndOfSegmentError):
        await container.read(NAME, 23, 10, 1_000)
    assert await read_all(container) == b"world! more (txn)"
    await container.delete_segment(NAME)
    assert container.active_names() == []


async def test_reads_that_miss_the_cache_come_from_tier2(rig: Rig) -> None:
    container = await rig.container()
    await container.create_segment(NAME)
    data = bytes(range(256)) * 1024
    await container.append(NAME, data)
    writer = container.storage_writer
    assert writer is not None
    await writer.flush_all()
    assert (await container.get_info(NAME)).storage_length == len(data)
    rig.cache.evict(rig.cache.cache.max_bytes)  # everything in Tier 2 may go, and goes
    reads_before = rig.tier2_faults.calls["read"]
    assert await read_all(container) == data
    assert rig.tier2_faults.calls["read"] > reads_before


async def test_a_writer_keeps_half_of_what_its_tier2_takes_at_once_under_way(
    rig: Rig,
) -> None:
    """Small segments are flushed several at once (one after another, a million would take
    a million syncs in a row), but no more than the backend's ``concurrent_writes`` says pay
    off, halved so that another container's writer finds a thread too."""
    rig.storage.concurrent_writes = 8
    under_way = peak = 0
    lock = threading.Lock()
    create = rig.storage.create

    def slow_create(key: str, parts: Any) -> None:
        nonlocal under_way, peak
        with lock:
            under_way += 1
            peak = max(peak, under_way)
        time.sleep(0.05)  # long enough for every call that may overlap to do so
        try:
            create(key, parts)
        finally:
            with lock:
                under_way -= 1

    rig.storage.create = slow_create  # type: ignore[method-assign]
    container = await rig.container(
        writer=lambda cid, epoch, host: StorageWriter(cid, epoch, rig.storage, MANUAL_WRITER, host)
    )
    names = [f"small/{i}" for i in range(16)]
    for name in names:
        await container.create_segment(name)
        await container.append(name, b"x" * 100)
    writer = container.storage_writer
    assert writer is not None
    await writer.flush_all()
    assert peak == 4
    for name in names:
        assert (await container.get_info(name)).storage_length == 100


async def test_recovery_restores_every_acknowledged_change(rig: Rig) -> None:
    container = await rig.container()
    await container.create_segment(NAME)
    for i in range(50):
        await container.append(NAME, bytes([i]) * 100)
    await container.update_attributes(NAME, [AttributeUpdate("k", 1)])
    await container.stop()
    again = await rig.container()
    assert again.epoch > container.epoch
    assert await read_all(again) == b"".join(bytes([i]) * 100 for i in range(50))
    assert await again.get_attributes(NAME) == {"k": 1}


async def test_a_log_that_lost_a_record_in_its_middle_is_not_replayed(rig: Rig) -> None:
    """Replay past a missing record would serve a segment without an acknowledged append, and
    answer its writer's retry as a new append: nothing else in the log shows the loss."""
    container = await rig.container()
    await container.create_segment(NAME)
    await container.create_segment("other")
    await container.append("other", b"acknowledged", writer_id="w", writer_seq=1)
    lost = len(rig.medium.records) - 1
    for i in range(3):
        await container.append(NAME, bytes([i]) * 100)
    await container.stop()
    del rig.medium.records[lost]
    again = await rig.container()
    assert again.status is ContainerStatus.OFFLINE
    assert again.failure is not None and "sequence" in again.failure
    with pytest.raises(ContainerUnavailableError):
        await again.append("other", b"retried", writer_id="w", writer_seq=1)


async def test_a_tier1_failure_takes_the_container_offline_and_a_recovery_brings_it_back(
    rig: Rig,
) -> None:
    container = await rig.container()
    await container.create_segment(NAME)
    await container.append(NAME, b"kept")
    rig.tier1_faults.add("append", "fail", nth=rig.tier1_faults.calls["append"] + 1)
    with pytest.raises(ContainerUnavailableError):
        await container.append(NAME, b"lost")
    assert container.status is ContainerStatus.OFFLINE
    assert isinstance(container.failure_error, DataLogWriteError)
    assert not is_permanent(container.failure_error)  # the supervisor will try again
    with pytest.raises(ContainerUnavailableError):
        await container.append(NAME, b"refused at once")
    await container.stop()
    again = await rig.container()
    assert await read_all(again) == b"kept"


async def test_tier1_out_of_space_leaves_reads_working(rig: Rig) -> None:
    container = await rig.container()
    await container.create_segment(NAME)
    await container.append(NAME, b"acknowledged")
    rig.medium.refuse_writes, rig.medium.errno = True, errno.ENOSPC
    with pytest.raises((InsufficientStorageError, ContainerUnavailableError)):
        await container.append(NAME, b"no room")
    assert container.status is ContainerStatus.READ_ONLY
    with pytest.raises(InsufficientStorageError):
        await container.append(NAME, b"still no room")
    assert await read_all(container) == b"acknowledged"
    assert not container.tier1_has_room(1)
    rig.medium.refuse_writes = False
    await container.stop()
    again = await rig.container()
    await again.append(NAME, b", and more")
    assert await read_all(again) == b"acknowledged, and more"


async def test_a_tier2_outage_does_not_stop_the_container(rig: Rig) -> None:
    container = await rig.container()
    await container.create_segment(NAME)
    outage = [rig.tier2_faults.add(m, "fail") for m in ("create", "append", "put_if", "get")]
    for i in range(20):
        await container.append(NAME, bytes([i]) * 1000)
    await asyncio.sleep(0.1)  # the writer meets the outage and backs off
    assert container.status is ContainerStatus.RUNNING
    assert container.tier2_error is not None
    assert (await container.get_info(NAME)).storage_length == 0
    assert len(await read_all(container)) == 20_000
    for fault in outage:
        rig.tier2_faults.remove(fault)
    # The writer moves the segment's storage length during its step and clears its error
    # when the whole step is done, a moment later: wait for both.
    for _ in range(200):
        flushed = (await container.get_info(NAME)).storage_length == 20_000
        if flushed and container.tier2_error is None:
            break
        await asyncio.sleep(0.02)
    assert (await container.get_info(NAME)).storage_length == 20_000
    assert container.tier2_error is None


async def test_a_writer_that_cannot_reconcile_keeps_the_container_offline(rig: Rig) -> None:
    def refusing_writer(container_id: int, epoch: int, host: WriterHost) -> Writer:
        writer = StorageWriter(container_id, epoch, rig.storage, WRITER, host)

        async def reconcile() -> None:
            raise Tier2ReconciliationError(NAME, 100, 10)

        writer.reconcile = reconcile  # type: ignore[method-assign]
        return writer

    container = await rig.container(writer=refusing_writer)
    assert container.status is ContainerStatus.OFFLINE
    assert isinstance(container.failure_error, Tier2ReconciliationError)
    assert is_permanent(container.failure_error)
    with pytest.raises(ContainerUnavailableError):
        await container.create_segment(NAME)


async def test_a_read_index_that_breaks_takes_the_container_offline_instead_of_hanging(
    rig: Rig,
) -> None:
    class BrokenIndex(SegmentReadIndex):
        def append(self, offset: int, data: Any) -> None:
            raise RuntimeError("a bug in the read index")

    cache = rig.cache
    broken = functools.partial(BrokenIndex, cache.cache, cache.clock, 1 << 20)
    container = await rig.container(read_index=broken)
    await container.create_segment(NAME)
    with pytest.raises(ContainerUnavailableError):
        await asyncio.wait_for(container.append(NAME, b"x"), 5)
    assert container.status is ContainerStatus.OFFLINE
    await container.stop()
    # Tier 1 has the append; a container with a sound index recovers it.
    again = await rig.container()
    assert await read_all(again) == b"x"


async def test_a_tier1_that_cannot_open_leaves_the_container_offline(rig: Rig) -> None:
    rig.tier1_faults.add("open", "fail", nth=1)
    container = await rig.container()
    assert container.status is ContainerStatus.OFFLINE
    assert isinstance(container.failure_error, DataLogWriteError)
    await container.stop()
    assert (await rig.container()).status is ContainerStatus.RUNNING


async def test_stop_during_appends_loses_nothing_acknowledged(rig: Rig) -> None:
    container = await rig.container()
    await container.create_segment(NAME)
    rig.tier1_faults.add("append", "delay", delay_s=0.01)  # every Tier 1 write is slow
    sizes = [100 + i for i in range(40)]

    async def put(i: int) -> tuple[int, int] | None:
        try:
            return i, (await container.append(NAME, bytes([i]) * sizes[i])).offset
        except ContainerUnavailableError:
            return None

    tasks = [asyncio.create_task(put(i)) for i in range(40)]
    await asyncio.sleep(0.03)
    await container.stop()
    done = [r for r in await asyncio.gather(*tasks) if r is not None]
    assert container.status is ContainerStatus.STOPPED
    rig.tier1_faults.remove()
    again = await rig.container()
    recovered = await read_all(again)
    # Every acknowledged append is there, whole, once, at the offset it was acknowledged
    # with; nothing else is (a refused append is absent): the recovered bytes are exactly the
    # acknowledged appends in the order of their offsets.
    acknowledged = sorted(done, key=lambda r: r[1])
    for i, offset in acknowledged:
        assert recovered[offset : offset + sizes[i]] == bytes([i]) * sizes[i]
    assert recovered == b"".join(bytes([i]) * sizes[i] for i, _ in acknowledged)
