"""The drill's read-back against a real store (its HTTP app in this process): read whole, or
only beyond what an earlier check read, and a record missing there is found lost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from segmentstore import SegmentStore
from segmentstore.api.app import create_app
from segmentstore.drill.load import Load, segment_path
from segmentstore.drill.payload import record
from segmentstore.drill.verify import verify_all
from segmentstore.loopback import free_port
from segmentstore.tier2 import ManifestStore, open_chunk_storage

NAME = "drill/segment-000"


def in_process(store: SegmentStore) -> httpx.AsyncClient:
    """A client of the store's HTTP app in this process."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(store)), base_url="http://store"
    )


async def until(condition: Callable[[], bool], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the load acknowledged too little in time"
        await asyncio.sleep(0.05)


async def test_a_check_from_where_the_last_one_ended_reads_and_checks_only_the_rest(
    tmp_path: Path,
) -> None:
    async with SegmentStore.open(tmp_path) as store, in_process(store) as client:
        load = Load(client, [NAME], writers=3, readers=0, payload_bytes=(100, 2000), seed=5)
        await load.create_segments()
        load.start()
        ledger = load.ledgers[NAME]
        await until(lambda: len(ledger.acknowledged) > 10)
        await load.stop()
        whole = await verify_all(load, client, timeout_s=5)
        assert whole.checked == len(ledger.acknowledged) > 10
        assert (whole.lost, whole.torn_bytes, whole.duplicated) == (0, 0, 0)
        first_end = whole.ends[NAME]
        assert first_end == (await store.get_info(NAME)).length

        # Two more appends; the next check reads only them.
        for seq in (1, 2):
            answer = await client.post(segment_path(NAME) + ":append", content=record(9, seq, 64))
            ledger.acknowledged[(9, seq)] = (answer.json()["offset"], 88)
        beyond = await verify_all(load, client, timeout_s=5, since=whole.ends)
        assert (beyond.checked, beyond.lost) == (2, 0)
        assert beyond.ends[NAME] == first_end + 2 * 88

        # An acknowledged record that is not at its offset beyond the start is lost.
        ledger.acknowledged[(9, 3)] = (first_end + 10, 88)
        assert (await verify_all(load, client, timeout_s=5, since=whole.ends)).lost == 1

        # Acknowledged records beyond the segment's end are lost, and say so.
        ledger.acknowledged[(9, 4)] = (first_end + 10_000, 88)
        past = await verify_all(load, client, timeout_s=5, since=whole.ends)
        assert past.lost == 2
        assert past.lost_reasons == {"not at its offset": 1, "past the segment's end": 1}


async def test_what_cannot_be_read_back_is_lost_with_the_reason(tmp_path: Path) -> None:
    """A store that does not answer loses every acknowledged append it holds, as far as the
    drill can tell: counted as lost beside the reason, never only as 'could not verify'."""
    async with SegmentStore.open(tmp_path) as store, in_process(store) as client:
        load = Load(client, [NAME], writers=2, readers=0, payload_bytes=(100, 200), seed=6)
        await load.create_segments()
        load.start()
        await asyncio.sleep(0.3)
        await load.stop()
    acknowledged = len(load.ledgers[NAME].acknowledged)
    assert acknowledged > 0
    port = free_port()  # nothing listens there
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as nobody:
        verdict = await verify_all(load, nobody, timeout_s=0.3)
    assert verdict.lost == acknowledged
    assert verdict.lost_reasons == {"unreadable: no answer": acknowledged}
    assert verdict.problems and verdict.problems[0].startswith("could not verify")


async def test_a_damaged_chunk_loses_what_lies_past_the_damage_and_says_why(
    tmp_path: Path,
) -> None:
    """A byte flipped in a flushed chunk: the read back stops there (the store answers
    data_corrupted); what was read before is checked, and the acknowledged appends from the
    damage on are lost under that reason."""
    settings = {
        "storage_writer": {"flush_interval_ms": 20, "checksum_block_bytes": 4096},
        "durable_log": {"checkpoint_every_frames": 4},
    }
    async with SegmentStore.open(tmp_path, **settings) as store, in_process(store) as client:
        load = Load(client, [NAME], writers=2, readers=0, payload_bytes=(200, 400), seed=7)
        await load.create_segments()
        load.start()
        await asyncio.sleep(0.5)
        await load.stop()
        for container in store.containers:
            assert container.storage_writer is not None
            await container.storage_writer.flush_all()
        for seq in range(1, 13):  # checkpoints, so that Tier 1 is truncated behind Tier 2
            await store.append(NAME, record(99, seq, 16))
    storage = open_chunk_storage((tmp_path / "tier2").as_uri())
    loaded = ManifestStore(storage).load(NAME)
    assert loaded is not None
    chunk = loaded[0].chunks[0]
    assert chunk.length > 3 * 4096
    data = bytearray(storage.read(chunk.key, 0, chunk.length))
    data[chunk.length // 2] ^= 0x01
    storage.delete(chunk.key)
    storage.create(chunk.key, [bytes(data)])
    storage.close()
    acknowledged = load.ledgers[NAME].acknowledged
    async with SegmentStore.open(tmp_path, **settings) as store, in_process(store) as client:
        verdict = await verify_all(load, client, timeout_s=0.5)
    damaged_at = chunk.start_offset + chunk.length // 2 // 4096 * 4096
    past = sum(1 for offset, _ in acknowledged.values() if offset + 400 > damaged_at)
    assert 0 < verdict.lost <= past
    assert verdict.lost_reasons == {"unreadable: 502 data_corrupted": verdict.lost}
    assert verdict.checked == len(acknowledged) - verdict.lost > 0
    assert verdict.torn_bytes == 0


async def test_untouched_segments_are_read_by_no_check_but_the_last_asks_that_they_exist(
    tmp_path: Path,
) -> None:
    """With many segments most are untouched between two faults: a check after a fault reads
    none of them, and the final check finds one that vanished through the listing."""
    names = [f"drill/segment-{i:03d}" for i in range(40)]
    async with SegmentStore.open(tmp_path) as store, in_process(store) as client:
        load = Load(client, names, writers=1, readers=0, payload_bytes=(100, 200), seed=7)
        await load.create_segments()
        answer = await client.post(segment_path(names[0]) + ":append", content=record(9, 1, 64))
        load.ledgers[names[0]].acknowledged[(9, 1)] = (answer.json()["offset"], 88)
        await store.delete_segment(names[7])  # never appended to: nothing of it is in a ledger
        after_fault = await verify_all(load, client, timeout_s=5, since={})
        assert (after_fault.checked, after_fault.lost) == (1, 0)
        assert set(after_fault.ends) == {names[0]}  # the only one read
        final = await verify_all(load, client, timeout_s=5)
        assert (final.checked, final.lost) == (1, 1)
        assert final.lost_reasons == {"created, then missing from the listing": 1}
        assert final.problems == [f"segment {names[7]} was created and is no longer listed"]


async def test_a_check_after_a_fault_reads_at_most_its_share_and_the_final_one_all(
    tmp_path: Path,
) -> None:
    names = [f"drill/segment-{i:03d}" for i in range(12)]
    async with SegmentStore.open(tmp_path) as store, in_process(store) as client:
        load = Load(client, names, writers=1, readers=0, payload_bytes=(100, 200), seed=8)
        await load.create_segments()
        for i, name in enumerate(names):
            answer = await client.post(segment_path(name) + ":append", content=record(9, i, 64))
            load.ledgers[name].acknowledged[(9, i)] = (answer.json()["offset"], 88)
        sampled = await verify_all(load, client, timeout_s=5, since={}, most=5)
        assert (sampled.checked, sampled.lost, len(sampled.ends)) == (5, 0, 5)
        rest = await verify_all(load, client, timeout_s=5, since=sampled.ends, most=100)
        assert (rest.checked, len(rest.ends)) == (7, 7)  # only those not checked yet
        assert set(rest.ends) | set(sampled.ends) == set(names)
        final = await verify_all(load, client, timeout_s=5)
        assert (final.checked, final.lost) == (12, 0)
