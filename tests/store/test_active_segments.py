"""Segments leave memory when idle (or past the bound) and come back on first use, answering
every call exactly as if they had never left: bytes, lengths, seals, truncations, attributes,
retention, times, the time index, and the writer sequences of exactly-once appends."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from store_checks import read_all

from segmentstore import SegmentNotFoundError, SegmentStore
from segmentstore.tier2 import ManifestStore, open_chunk_storage

# Segments idle for 200 ms leave memory; flushes every 50 ms.
FAST: dict[str, Any] = {
    "metadata": {"idle_eviction_ms": 200},
    "storage_writer": {"flush_interval_ms": 50},
}


def active(store: SegmentStore) -> int:
    return sum(c.active_segment_count for c in store.containers)


def evictions(store: SegmentStore) -> int:
    return sum(c.active_segments.evictions for c in store.containers)


async def until_evicted(store: SegmentStore, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while active(store):
        assert time.monotonic() < deadline, f"{active(store)} segments stay in memory"
        await asyncio.sleep(0.02)


async def test_an_evicted_segment_answers_every_call_as_before(tmp_path: Path) -> None:
    async with SegmentStore.open(tmp_path, containers=2, **FAST) as store:
        await store.create_segment("s/a", attributes={"k": 1}, retention={"bytes": 1 << 20})
        first = await store.append("s/a", b"x" * 5000, writer_id="w", writer_seq=3)
        await store.append("s/a", b"y" * 5000)
        await store.truncate("s/a", 100)
        await store.create_segment("s/sealed")
        await store.append("s/sealed", b"done")
        await store.seal("s/sealed")
        await store.create_segment("s/empty")
        before = {n: await store.get_info(n) for n in ("s/a", "s/sealed", "s/empty")}
        offset_at = await store.offset_at("s/a", before["s/a"].created_ms + 60_000)
        await until_evicted(store)
        assert evictions(store) >= 3

        # Each answer as before (all of it is in Tier 2 now), from Tier 2 alone.
        for name, info in before.items():
            assert await store.get_info(name) == replace(info, storage_length=info.length)
        assert await store.get_attributes("s/a") == {"k": 1}
        assert await read_all(store, "s/a") == b"x" * 4900 + b"y" * 5000
        assert await store.offset_at("s/a", before["s/a"].created_ms + 60_000) == offset_at
        assert await store.list_segments("s/") == ["s/a", "s/empty", "s/sealed"]
        # A retry of an append applied before the eviction is still a duplicate.
        again = await store.append("s/a", b"x" * 5000, writer_id="w", writer_seq=3)
        assert again.duplicate and again.length == 10_000 and first.offset == 0
        assert (await store.append("s/a", b"z", writer_id="w", writer_seq=4)).offset == 10_000
        with pytest.raises(Exception, match="sealed"):
            await store.append("s/sealed", b"more")
        # Every kind of change loads the segment first, and is kept.
        await until_evicted(store)
        await store.update_attributes("s/empty", [{"key": "k", "value": 2}])
        await until_evicted(store)
        await store.seal("s/empty")
        await until_evicted(store)
        assert (await store.get_info("s/empty")).sealed
        assert await store.get_attributes("s/empty") == {"k": 2}
        await store.delete_segment("s/sealed")
        with pytest.raises(SegmentNotFoundError):
            await store.get_info("s/sealed")
        await store.create_segment("s/sealed")  # a new incarnation starts empty
        assert (await store.get_info("s/sealed")).length == 0
    # And after a restart: what is inactive still answers, and exactly-once holds.
    async with SegmentStore.open(tmp_path, containers=2, **FAST) as store:
        assert (await store.get_info("s/a")).length == 10_001
        assert (await store.append("s/a", b"z", writer_id="w", writer_seq=4)).duplicate
        assert await store.get_attributes("s/empty") == {"k": 2}
        assert sum(c.segment_count for c in store.containers) == 3


async def test_a_create_of_an_inactive_name_is_refused(tmp_path: Path) -> None:
    async with SegmentStore.open(tmp_path, containers=1, **FAST) as store:
        await store.create_segment("taken")
        await until_evicted(store)
        with pytest.raises(Exception, match="exists"):
            await store.create_segment("taken")
        txn = await store.begin_transaction("taken")  # its parent is loaded to check it
        await store.append(txn, b"t")
        await until_evicted(store)
        await store.merge("taken", txn)
        assert (await store.get_info("taken")).length == 1
        with pytest.raises(SegmentNotFoundError):
            await store.get_info(txn)


async def test_eviction_and_loads_under_concurrent_appends_and_reads(tmp_path: Path) -> None:
    """Eight writers append to 200 segments with a skewed popularity, and readers read them
    back, while segments idle for 50 ms leave memory and at most 20 per container stay: every
    acknowledged byte is there, once, in order."""
    settings: dict[str, Any] = {
        "metadata": {"idle_eviction_ms": 50, "max_active_segments": 20},
        "storage_writer": {"flush_interval_ms": 20},
    }
    names = [f"busy/{i}" for i in range(200)]
    written = {name: bytearray() for name in names}
    async with SegmentStore.open(tmp_path, containers=2, **settings) as store:
        for name in names:
            await store.create_segment(name)

        async def writer(seed: int) -> None:
            rng = random.Random(seed)
            for _ in range(150):
                name = names[min(int(rng.expovariate(1 / 20)), len(names) - 1)]
                data = rng.randbytes(rng.randint(1, 300))
                result = await store.append(name, data, expected_offset=None)
                assert result.offset == len(written[name]), name
                written[name] += data
                await asyncio.sleep(rng.random() / 100)

        async def reader(seed: int) -> None:
            rng = random.Random(seed)
            for _ in range(100):
                name = rng.choice(names)
                known = bytes(written[name])
                got = await read_all(store, name)
                assert got[: len(known)] == known, name
                await asyncio.sleep(rng.random() / 100)

        await asyncio.gather(*(writer(i) for i in range(8)), *(reader(100 + i) for i in range(4)))
        loads = sum(c.active_segments.loads for c in store.containers)
        assert evictions(store) > 50 and loads > 50, (evictions(store), loads)
        for name in names:
            assert await read_all(store, name) == written[name], name
    async with SegmentStore.open(tmp_path, containers=2, **settings) as store:
        for name in names:
            assert await read_all(store, name) == written[name], name


async def test_an_evicted_segments_manifest_keeps_all_of_it(tmp_path: Path) -> None:
    async with SegmentStore.open(tmp_path, containers=1, **FAST) as store:
        await store.create_segment("kept", attributes={"a": 7})
        await store.append("kept", b"abc", writer_id="me", writer_seq=9)
        await until_evicted(store)
    storage = open_chunk_storage((tmp_path / "tier2").as_uri())
    try:
        loaded = ManifestStore(storage).load("kept")
    finally:
        storage.close()
    assert loaded is not None
    manifest = loaded[0]
    assert manifest.complete and manifest.state is not None
    assert (manifest.storage_length, manifest.state.length) == (3, 3)
    assert dict(manifest.state.attributes) == {"a": 7}
    assert dict(manifest.state.writers) == {"me": 9}


async def test_time_retention_reaches_a_segment_that_left_memory(tmp_path: Path) -> None:
    """A segment with a time policy leaves memory once the enforcer knows when its data next
    expires, comes back then (the container's retention watch, kept by checkpoints), and is
    truncated as if it had never left, also across a restart."""
    settings: dict[str, Any] = {
        **FAST,
        "store": {"retention_check_interval_ms": 50, "time_index_interval_bytes": 128},
    }
    async with SegmentStore.open(tmp_path, containers=1, **settings) as store:
        await store.create_segment("ttl", retention={"time_ms": 1_500})
        for _ in range(10):
            await store.append("ttl", b"e" * 100)
        await until_evicted(store)  # it left memory well before its data expires
        (container,) = store.containers
        assert container.durable_metadata.by_id == {}
    async with SegmentStore.open(tmp_path, containers=1, **settings) as store:
        # Nothing asks for it: only the watch can bring it back. Tier 2 shows the truncation.
        storage = open_chunk_storage((tmp_path / "tier2").as_uri())
        try:
            deadline = time.monotonic() + 10
            while (manifest := ManifestStore(storage).load("ttl")) is None or (
                manifest[0].start_offset < 1000
            ):
                assert time.monotonic() < deadline, "retention never reached it"
                await asyncio.sleep(0.05)
        finally:
            storage.close()
        info = await store.get_info("ttl")
        assert (info.start_offset, info.length) == (1000, 1000)
