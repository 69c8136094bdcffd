"""The Durable Log alone: a real ``DurableLog`` over an in-memory Tier 1 wrapped in a
``FlakyDataLog``, with no container, store or disk. Faults go exactly where each test puts
them (the n-th Tier 1 record), and recovery reads back the same medium.

Tier 1 records, in order: the first is the checkpoint each test writes at start; then, when
operations are handed over one at a time, one record (frame) per operation.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from fault_injection import FaultInjector
from flaky_tier1 import FlakyDataLog
from loop_checks import every_exception_retrieved
from memory_tier1 import InMemoryDataLog, InMemoryTier1

from segmentstore.contracts.errors import (
    ContainerUnavailableError,
    DataCorruptionError,
    ThrottledError,
)
from segmentstore.logs.durable_log import DurableLog
from segmentstore.logs.metadata_operations import CreateSegmentOperation
from segmentstore.logs.operations import AppendOperation, Operation
from segmentstore.logs.recovery import RecoveryStats, replay
from segmentstore.metadata.container_metadata import ContainerMetadata
from segmentstore.settings import DurableLogSettings
from segmentstore.tier1 import DataLogWriteError, DurableDataLog

SEGMENT = "scope/stream/0"
pytestmark = pytest.mark.timeout(30)


@pytest.fixture(autouse=True)
async def _every_exception_retrieved() -> AsyncIterator[None]:
    async with every_exception_retrieved():
        yield


class LogUnderTest:
    """A Durable Log on a medium that outlives it, and what its callbacks saw."""

    def __init__(self, settings: DurableLogSettings | None = None, seed: int = 0) -> None:
        self.medium = InMemoryTier1()
        self.injector = FaultInjector(seed)
        self.settings = settings or DurableLogSettings(max_frame_bytes=64 * 1024)
        self.needed: int | None = None  # what Tier 1 must keep (the container's retention)
        self.committed: list[int] = []  # sequences, in the order they were committed
        self.failures: list[BaseException] = []
        self.released = 0
        self.durable = ContainerMetadata(0)
        self.log: DurableLog | None = None
        self.data_log: FlakyDataLog | None = None

    async def start(self) -> DurableLog:
        """Recover from the medium, as a container's start does, and write a checkpoint; the
        segment is created on the first start."""
        data_log = self.data_log = FlakyDataLog(InMemoryDataLog(self.medium), self.injector)
        epoch = await data_log.open()
        apply = lambda metadata, op: op.apply(metadata)  # noqa: E731
        accepted = await replay(0, epoch, data_log, lambda m: None, apply, RecoveryStats())
        self.durable = accepted.copy()
        self.log = DurableLog(
            0,
            data_log,
            accepted,
            self.settings,
            commit=self._commit,
            needed_sequence=lambda: self.needed,
            on_failure=self.failures.append,
            release=self._release,
        )
        self.log.start()
        await self.log.checkpoint()  # Tier 1 record 1, as a container's start writes
        if SEGMENT not in accepted.segments:
            await self.log.process(CreateSegmentOperation(SEGMENT))  # record 2
        return self.log

    async def stop(self) -> None:
        """Stop the log and close its Tier 1 log, as a container's stop does."""
        assert self.log is not None
        await self.log.stop()
        assert self.data_log is not None
        await self.data_log.close()

    def _commit(self, ops: list[Operation]) -> None:
        for op in ops:
            op.apply(self.durable)
            self.committed.append(op.sequence)

    def _release(self, reserved: int) -> None:
        self.released += reserved

    async def recover(
        self,
        apply: Callable[[ContainerMetadata, Operation], None] | None = None,
        stats: RecoveryStats | None = None,
        flaky: bool = False,
    ) -> ContainerMetadata:
        """What a new owner of the medium replays (the log under test is left as it is);
        ``flaky``: through the fault injector, as the log under test reads."""
        data_log: DurableDataLog = InMemoryDataLog(self.medium)
        if flaky:
            data_log = FlakyDataLog(data_log, self.injector)
        epoch = await data_log.open()
        try:
            return await replay(
                0,
                epoch,
                data_log,
                lambda m: None,
                apply or (lambda m, op: op.apply(m)),
                stats or RecoveryStats(),
            )
        finally:
            await data_log.close()

    async def write(self, appends: int) -> None:
        """Start, append ``appends`` times 100 bytes, stop."""
        log = await self.start()
        for i in range(appends):
            await log.process(append(payload(i)))
        await self.stop()


def append(data: bytes, **kwargs: Any) -> AppendOperation:
    return AppendOperation(SEGMENT, data, kwargs.get("expected_offset"), None, None)


def payload(i: int, size: int = 100) -> bytes:
    return bytes([i % 251]) * size


async def test_appends_are_committed_once_each_in_sequence_order() -> None:
    under = LogUnderTest()
    log = await under.start()
    ops = [append(payload(i)) for i in range(50)]
    await asyncio.gather(*(log.process(op) for op in ops))
    assert [op.refusal for op in ops] == [None] * 50
    assert under.committed == sorted(under.committed)
    assert len(set(under.committed)) == len(under.committed)
    assert under.durable.segments[SEGMENT].length == 50 * 100
    assert (await under.recover()).segments[SEGMENT].length == 50 * 100
    await under.stop()


async def test_a_tier1_failure_fails_that_append_and_every_later_one() -> None:
    under = LogUnderTest()
    log = await under.start()
    under.injector.add("append", "fail", nth=7)  # records 1-2 at start: the 5th append
    outcomes = []
    for i in range(10):
        try:
            await log.process(append(payload(i)))
            outcomes.append("acknowledged")
        except ContainerUnavailableError:
            outcomes.append("failed")
    assert outcomes == ["acknowledged"] * 4 + ["failed"] * 6
    assert under.injector.count("append", "fail") == 1
    assert len(under.failures) == 1 and isinstance(under.failures[0], DataLogWriteError)
    # Only what was acknowledged was committed, once; Tier 1 has exactly that.
    assert under.durable.segments[SEGMENT].length == 4 * 100
    assert (await under.recover()).segments[SEGMENT].length == 4 * 100
    await under.stop()


async def settle(log: DurableLog, op: AppendOperation) -> BaseException | None:
    """Hand ``op`` over as the container's append path does (its size counted, so a window
    is sealed once it holds ``batch_seal_bytes``); what it ended with."""
    try:
        await log.submit(op, op.size)
    except ContainerUnavailableError as error:
        return error
    return op.refusal


async def test_concurrent_appends_around_a_failure_succeed_as_a_prefix() -> None:
    # batch_seal_bytes=1: every append is a window of its own, so each is acknowledged alone.
    under = LogUnderTest(DurableLogSettings(max_frame_bytes=4096, batch_seal_bytes=1))
    log = await under.start()
    under.injector.add("append", "fail", nth=8)
    ops = [append(payload(i, 1000)) for i in range(30)]
    results = await asyncio.gather(*(settle(log, op) for op in ops))
    acknowledged = [op for op, r in zip(ops, results, strict=True) if r is None]
    failed = [op for op, r in zip(ops, results, strict=True) if r is not None]
    assert len(acknowledged) == 5 and len(failed) == 25
    assert all(isinstance(r, ContainerUnavailableError) for r in results if r is not None)
    # Acknowledgement order is Tier 1 order: nothing after the failed record got through.
    assert max(op.sequence for op in acknowledged) < min(op.sequence for op in failed)
    assert len(set(under.committed)) == len(under.committed)
    length = len(acknowledged) * 1000
    assert under.durable.segments[SEGMENT].length == length
    assert (await under.recover()).segments[SEGMENT].length == length
    await under.stop()


async def test_a_window_is_acknowledged_or_failed_whole() -> None:
    under = LogUnderTest(DurableLogSettings(max_frame_bytes=4096))
    log = await under.start()
    under.injector.add("append", "fail", nth=5)  # the 3rd frame of one window of 30 appends
    ops = [append(payload(i, 1000)) for i in range(30)]
    results = await asyncio.gather(*(log.process(op) for op in ops), return_exceptions=True)
    assert all(isinstance(r, ContainerUnavailableError) for r in results)
    assert under.durable.segments[SEGMENT].length == 0
    await under.stop()


async def test_a_lost_acknowledgement_leaves_the_append_whole_or_absent() -> None:
    under = LogUnderTest()
    log = await under.start()
    under.injector.add("append", "fail_after", nth=5)  # written, but reported failed
    await log.process(append(payload(1)))
    await log.process(append(payload(2)))
    with pytest.raises(ContainerUnavailableError):
        await log.process(append(payload(3, 500)))
    assert under.durable.segments[SEGMENT].length == 200  # never committed here
    # Recovery finds it whole: an unacknowledged append is all there or not at all.
    assert (await under.recover()).segments[SEGMENT].length in (200, 700)
    await under.stop()


async def test_acknowledgements_keep_their_order_when_tier1_delays_one() -> None:
    under = LogUnderTest()
    log = await under.start()
    under.injector.add("append", "delay", nth=4, delay_s=0.3)
    done: list[int] = []
    tasks = []
    for i in range(6):
        op = append(payload(i))
        task = asyncio.create_task(log.process(op))
        task.add_done_callback(lambda _, op=op: done.append(op.sequence))
        tasks.append(task)
        await asyncio.sleep(0.01)  # a window (and a Tier 1 record) each
    await asyncio.gather(*tasks)
    assert under.injector.count("append", "delay") == 1
    assert done == sorted(done)
    assert under.committed == sorted(under.committed)
    await under.stop()


async def test_recovery_fails_when_tier1_cannot_be_read_and_succeeds_once_it_can() -> None:
    under = LogUnderTest()
    await under.write(5)
    fault = under.injector.add("read_record", "fail", nth=3)
    with pytest.raises(DataLogWriteError):
        await under.recover(flaky=True)
    under.injector.remove(fault)
    assert (await under.recover(flaky=True)).segments[SEGMENT].length == 500


async def test_recovery_refuses_a_corrupt_record() -> None:
    under = LogUnderTest()
    await under.write(5)
    under.injector.add("read_record", "corrupt", nth=4)
    with pytest.raises(DataCorruptionError):
        await under.recover(flaky=True)


async def test_checkpoints_let_tier1_truncate_and_recovery_stay_short() -> None:
    under = LogUnderTest(DurableLogSettings(max_frame_bytes=4096, checkpoint_every_frames=4))
    log = await under.start()
    for i in range(60):
        await log.process(append(payload(i)))
    await asyncio.sleep(0.05)  # truncation runs in the background
    # Tier 1 keeps a few records from the newest usable checkpoint on, not 60.
    assert len(under.medium.records) < 12
    stats = RecoveryStats()
    recovered = await under.recover(stats=stats)
    assert recovered.segments[SEGMENT].length == 6000
    assert stats.checkpoints_seen >= 1 and stats.records_read < 12
    await under.stop()


async def test_tier1_is_never_truncated_past_an_operation_still_needed() -> None:
    under = LogUnderTest(DurableLogSettings(max_frame_bytes=4096, checkpoint_every_frames=4))
    log = await under.start()
    held = append(payload(0))
    await log.process(held)
    under.needed = held.sequence  # e.g. not yet in Tier 2
    for i in range(40):
        await log.process(append(payload(i)))
    await asyncio.sleep(0.05)
    replayed: list[int] = []

    def note(metadata: ContainerMetadata, op: Operation) -> None:
        op.apply(metadata)
        replayed.append(op.sequence)

    await under.recover(apply=note)
    assert held.sequence in replayed
    under.needed = None
    await under.stop()


async def test_a_failed_truncation_fails_the_log() -> None:
    under = LogUnderTest(DurableLogSettings(max_frame_bytes=4096, checkpoint_every_frames=2))
    log = await under.start()
    under.injector.add("truncate", "fail")
    with pytest.raises(ContainerUnavailableError):
        for i in range(20):
            await log.process(append(payload(i)))
            await asyncio.sleep(0.01)  # lets the background truncation meet its failure
    assert under.injector.count("truncate") >= 1
    assert len(under.failures) == 1
    await under.stop()


async def test_appends_wait_for_room_then_are_throttled() -> None:
    settings = DurableLogSettings(
        max_frame_bytes=1 << 20, max_in_flight_bytes=1 << 20, throttle_max_delay_ms=100
    )
    under = LogUnderTest(settings)
    log = await under.start()
    under.injector.add("append", "delay", from_nth=3, delay_s=0.5)  # Tier 1 slows down
    big = 700 * 1024
    first = append(bytes(big))
    first_done = log.submit(first, big)
    second = append(bytes(big))
    with pytest.raises(ThrottledError):
        await log.submit(second, big)  # no room for 100 ms
    await first_done
    assert first.refusal is None
    # Room again once the first is durable: the next one gets in (and waits for Tier 1).
    third = append(bytes(big))
    await log.submit(third, big)
    assert third.refusal is None
    assert under.durable.segments[SEGMENT].length == 2 * big
    await under.stop()


async def test_stop_settles_what_was_handed_over_and_refuses_the_rest() -> None:
    under = LogUnderTest()
    log = await under.start()
    under.injector.add("append", "delay", from_nth=3, delay_s=0.02)
    ops = [append(payload(i)) for i in range(20)]
    tasks = [asyncio.create_task(log.process(op)) for op in ops]
    await asyncio.sleep(0.03)  # some durable, some in flight, some queued
    await under.stop()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(r is None for r in results), results  # handed over before stop: all made
    with pytest.raises(ContainerUnavailableError):
        await log.process(append(b"late"))
    assert under.failures == []  # a stop is not a failure
    assert (await under.recover()).segments[SEGMENT].length == 20 * 100


async def replayed_bytes(under: LogUnderTest) -> bytes:
    """The segment's bytes as a new owner replays them from Tier 1, append by append (each
    must begin where the one before ended)."""
    data = bytearray()

    def note(metadata: ContainerMetadata, op: Operation) -> None:
        op.apply(metadata)
        if isinstance(op, AppendOperation):
            assert op.offset == len(data), (op.offset, len(data))
            data.extend(op.data)

    await under.recover(apply=note)
    return bytes(data)


@pytest.mark.parametrize("seed", range(5))
async def test_random_tier1_failures_never_lose_or_double_an_acknowledged_append(
    seed: int,
) -> None:
    """Seeded faults of every kind on appends; after each failure a new owner recovers the
    medium and goes on. Every acknowledged append is there, once, in order, byte for byte, at
    the offset it was acknowledged with; an unacknowledged one is whole or absent."""
    under = LogUnderTest(DurableLogSettings(max_frame_bytes=4096, batch_seal_bytes=1), seed)
    acknowledged: list[AppendOperation] = []
    faults = under.injector.remove  # faults hit the appends below, not the restarts
    # Tier 1 is never truncated, so that a replay shows every append's bytes (not only a
    # checkpoint's lengths).
    under.needed = 0
    log = await under.start()
    counter = itertools.count()
    for _ in range(6):
        for action in ("fail", "fail_after", "delay"):
            under.injector.add("append", action, probability=0.04, delay_s=0.01)
        ops = [append(payload(next(counter), 50)) for _ in range(20)]
        results = await asyncio.gather(*(settle(log, op) for op in ops))
        acknowledged += [op for op, r in zip(ops, results, strict=True) if r is None]
        faults()
        check_replay(await replayed_bytes(under), acknowledged)
        await under.stop()
        log = await under.start()
    await under.stop()


def check_replay(data: bytes, acknowledged: list[AppendOperation]) -> None:
    """``data`` holds 50-byte appends, none twice, and every acknowledged one at its offset,
    in the order of their acknowledgements."""
    assert len(data) % 50 == 0
    records = [data[i : i + 50] for i in range(0, len(data), 50)]
    assert all(r == bytes([r[0]]) * 50 for r in records), "an append is torn or mixed"
    assert len(set(records)) == len(records), "an append is there twice"
    for op in acknowledged:
        assert data[op.offset : op.offset + op.size] == op.data, f"append {op.sequence} lost"
    offsets = [op.offset for op in sorted(acknowledged, key=lambda op: op.sequence)]
    assert offsets == sorted(offsets), "acknowledged appends out of order"


def test_the_replay_check_fails_on_a_doubled_a_lost_or_a_reordered_append() -> None:
    ops = [append(payload(i, 50)) for i in range(3)]
    for i, op in enumerate(ops):
        op.sequence, op.offset = i + 1, 50 * i
    good = b"".join(op.data for op in ops)
    check_replay(good, ops)
    for bad in (
        good + ops[2].data,  # doubled
        good[:100],  # the last one lost
        ops[1].data + ops[0].data + ops[2].data,  # reordered
    ):
        with pytest.raises(AssertionError):
            check_replay(bad, ops)


async def test_a_checkpoint_waits_for_the_log_to_grow_by_the_last_one_not_counting_it() -> None:
    """Checkpoints never take more than about half of what Tier 1 writes, whoever asks for
    them (eviction asks for its own): a large one is not what pays for the next."""
    under = LogUnderTest(DurableLogSettings(max_frame_bytes=64 * 1024, checkpoint_every_frames=1))
    log = await under.start()
    for i in range(2_000):  # a checkpoint of 2,000 segments' rows
        await log.process(CreateSegmentOperation(f"scope/many/{i}"))
    await log.checkpoint()
    checkpoint, before = log.checkpoint_bytes, log.written_bytes
    assert checkpoint > 50_000
    for i in range(100):  # about 15 KB of appends, a frame each
        await log.process(append(payload(i)))
    grown = log.written_bytes - before
    assert grown < checkpoint, f"{grown} bytes written after a {checkpoint}-byte checkpoint"
    await under.stop()
