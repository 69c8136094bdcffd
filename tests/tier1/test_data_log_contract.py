"""The ``DurableDataLog`` contract, run against every implementation in ``HARNESSES``.

Only behaviour the contract promises is checked here; what one medium does beyond it (file
names, torn tails, locks) is tested next to that implementation.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from typing import TYPE_CHECKING

import pytest

from segmentstore.tier1 import DataLogClosedError, DataLogWriteError, DurableDataLog, LogRecord
from segmentstore.tier1.log import Buffer

if TYPE_CHECKING:
    from conftest import LogHarness

MIB = 1024 * 1024


async def read_all(log: DurableDataLog, from_address: int = 0) -> list[LogRecord]:
    return [record async for record in log.read(from_address)]


async def append_all(log: DurableDataLog, payloads: list[bytes]) -> list[int]:
    return list(await asyncio.gather(*(log.append([p]) for p in payloads)))


def numbered(count: int, size: int = 100) -> list[bytes]:
    return [i.to_bytes(4, "little") * (size // 4) for i in range(count)]


class TestDurableDataLogContract:
    async def test_round_trip_of_mixed_sizes_and_part_kinds(self, harness: LogHarness) -> None:
        rng = random.Random(7)
        sizes = [0, 1, 7, 100, 1000, 4096, 65536, 300_000] * 12 + [MIB, 2 * MIB] * 4
        rng.shuffle(sizes)
        log = harness.new_log()
        await log.open()
        payloads, futures = [], []
        for i, size in enumerate(sizes):
            data = rng.randbytes(size)
            payloads.append(data)
            # Records arrive as bytes, bytearray or memoryview, in one part or several.
            cut = rng.randint(0, size)
            parts: list[Buffer] = (
                [data]
                if i % 3 == 0
                else [bytearray(data[:cut]), memoryview(data)[cut:]]
                if i % 3 == 1
                else [b"", data[:cut], b"", data[cut:]]
            )
            futures.append(log.append(parts))
        addresses = list(await asyncio.gather(*futures))
        assert all(a < b for a, b in itertools.pairwise(addresses))
        assert await read_all(log) == [
            LogRecord(a, p) for a, p in zip(addresses, payloads, strict=True)
        ]
        await log.close()

    async def test_futures_resolve_in_append_order(self, harness: LogHarness) -> None:
        log = harness.new_log()
        await log.open()
        order: list[int] = []
        futures = []
        for i, payload in enumerate(numbered(2000, size=64)):
            future = log.append([payload])
            future.add_done_callback(lambda _, i=i: order.append(i))
            futures.append(future)
        await asyncio.gather(*futures)
        assert order == list(range(2000))
        await log.close()

    async def test_concurrent_appends_from_many_coroutines(self, harness: LogHarness) -> None:
        log = harness.new_log()
        await log.open()
        writers, each = 64, 40

        async def writer(w: int) -> list[int]:
            addresses = []
            for seq in range(each):
                payload = bytes([w]) + seq.to_bytes(4, "little") + bytes(w * 10)
                addresses.append(await log.append([payload]))
            return addresses

        per_writer = await asyncio.gather(*(writer(w) for w in range(writers)))
        for addresses in per_writer:
            assert addresses == sorted(addresses)
        records = await read_all(log)
        assert len(records) == writers * each
        assert sorted(a for addresses in per_writer for a in addresses) == [
            r.address for r in records
        ]
        seen: dict[int, list[int]] = {}
        for record in records:
            seen.setdefault(record.data[0], []).append(int.from_bytes(record.data[1:5], "little"))
        assert seen == {w: list(range(each)) for w in range(writers)}
        await log.close()

    async def test_reopened_log_reads_exactly_what_was_acknowledged(
        self, harness: LogHarness
    ) -> None:
        log = harness.new_log()
        await log.open()
        payloads = numbered(300, size=3000)
        addresses = await append_all(log, payloads)
        await log.close()

        reopened = harness.new_log()
        await reopened.open()
        expected = [LogRecord(a, p) for a, p in zip(addresses, payloads, strict=True)]
        assert await read_all(reopened) == expected
        # Appends continue after the recovered records.
        more = await reopened.append([b"after reopen"])
        assert more > addresses[-1]
        assert (await read_all(reopened))[-1] == LogRecord(more, b"after reopen")
        await reopened.close()

    async def test_close_waits_for_queued_appends(self, harness: LogHarness) -> None:
        log = harness.new_log()
        await log.open()
        payloads = numbered(500, size=1000)
        futures = [log.append([p]) for p in payloads]
        await log.close()
        assert all(f.done() for f in futures)
        addresses = [f.result() for f in futures]

        reopened = harness.new_log()
        await reopened.open()
        assert [r.address for r in await read_all(reopened)] == addresses
        await reopened.close()

    async def test_epoch_increases_on_every_open(self, harness: LogHarness) -> None:
        epochs = []
        log = harness.new_log()
        for _ in range(3):
            epochs.append(await log.open())
            assert log.epoch == epochs[-1]
            await log.close()
        other = harness.new_log()
        epochs.append(await other.open())
        await other.close()
        assert all(a < b for a, b in itertools.pairwise(epochs))

    async def test_open_raises_the_epoch_to_a_floor_and_never_lowers_it(
        self, harness: LogHarness
    ) -> None:
        log = harness.new_log()
        assert await log.open(min_epoch=40) == 40  # a new log starts at the floor
        await log.close()
        assert await log.open(min_epoch=7) == 41  # a floor below the epoch changes nothing
        await log.close()
        assert await log.open(min_epoch=50) == 50
        await log.close()
        assert await log.open() == 51
        await log.close()

    async def test_read_from_an_address(self, harness: LogHarness) -> None:
        log = harness.new_log()
        await log.open()
        payloads = numbered(50)
        addresses = await append_all(log, payloads)
        records = await read_all(log)
        assert await read_all(log, addresses[20]) == records[20:]
        # An address between two records starts at the next one.
        assert await read_all(log, addresses[20] + 1) == records[21:]
        assert await read_all(log, addresses[-1] + 1) == []
        await log.close()

    async def test_truncate_hides_records_below_and_survives_reopen(
        self, harness: LogHarness
    ) -> None:
        log = harness.new_log()
        await log.open()
        payloads = numbered(400, size=8000)  # several MiB: pieces (files, ledgers) roll
        addresses = await append_all(log, payloads)
        expected = [LogRecord(a, p) for a, p in zip(addresses, payloads, strict=True)]
        size_before = log.size_bytes

        await log.truncate(addresses[300])
        assert await read_all(log) == expected[300:]
        assert await read_all(log, addresses[100]) == expected[300:]
        assert log.size_bytes < size_before  # whole pieces below were reclaimed
        await log.truncate(addresses[10])  # lower than before: nothing changes
        assert await read_all(log) == expected[300:]
        await log.close()

        reopened = harness.new_log()
        await reopened.open()
        assert await read_all(reopened) == expected[300:]
        await reopened.close()

    async def test_truncate_everything_then_append(self, harness: LogHarness) -> None:
        log = harness.new_log()
        await log.open()
        addresses = await append_all(log, numbered(20))
        end = addresses[-1] + 1  # beyond the last record's address, not beyond the log
        await log.truncate(end)
        assert await read_all(log) == []
        address = await log.append([b"new"])
        assert address >= end
        assert await read_all(log) == [LogRecord(address, b"new")]
        await log.close()

    async def test_close_is_idempotent(self, harness: LogHarness) -> None:
        log = harness.new_log()
        await log.close()  # never opened
        await log.open()
        await log.append([b"x"])
        await asyncio.gather(log.close(), log.close())
        await log.close()
        with pytest.raises(DataLogClosedError):
            await log.append([b"after close"])

    async def test_append_after_a_write_failure_fails(self, harness: LogHarness) -> None:
        log = harness.new_log()
        await log.open()
        acknowledged = await append_all(log, numbered(10))
        with harness.failing_writes():
            failing = [log.append([bytes(1000)]) for _ in range(5)]
            results = await asyncio.gather(*failing, return_exceptions=True)
        assert all(isinstance(r, DataLogWriteError) for r in results), results
        # The log accepts nothing more, even now that the medium would.
        with pytest.raises(DataLogWriteError):
            await log.append([b"refused"])
        await log.close()

        reopened = harness.new_log()
        await reopened.open()
        addresses = [r.address for r in await read_all(reopened)]
        # What was acknowledged is there; a failed append may or may not be.
        assert addresses[: len(acknowledged)] == acknowledged
        assert len(addresses) <= len(acknowledged) + len(failing)
        assert await reopened.append([b"working again"]) > acknowledged[-1]
        await reopened.close()
