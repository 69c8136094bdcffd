"""A container moves to another node with segments that are not in memory: the new owner
serves them from Tier 1 and Tier 2 alone (their state travels in their manifests, never in a
file of the old node), exactly-once included, on both Tier 1 kinds."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from store_checks import read_all

from segmentstore import SegmentStore, SegmentStoreError
from segmentstore.harness.jetstream_cluster import JetStreamCluster

from .test_jetstream_tier1 import jetstream_tier1

SETTINGS: dict[str, Any] = {
    "metadata": {"idle_eviction_ms": 150},
    "storage_writer": {"flush_interval_ms": 30},
}
NAMES = [f"moved/{i}" for i in range(20)]


async def fill_and_evict(store: SegmentStore) -> dict[str, bytes]:
    written = {}
    for i, name in enumerate(NAMES):
        await store.create_segment(name, attributes={"n": i})
        data = f"{name} once".encode()
        await store.append(name, data, writer_id="w", writer_seq=1)
        written[name] = data
    await store.seal(NAMES[0])
    deadline = time.monotonic() + 10
    while sum(c.active_segment_count for c in store.containers):
        assert time.monotonic() < deadline, "the segments never left memory"
        await asyncio.sleep(0.02)
    return written


async def served_as_before(store: SegmentStore, written: dict[str, bytes]) -> None:
    assert await store.list_segments("moved/") == sorted(NAMES)
    for i, name in enumerate(NAMES):
        assert await read_all(store, name) == written[name]
        assert await store.get_attributes(name) == {"n": i}
        retry = await store.append(name, b"again", writer_id="w", writer_seq=1)
        assert retry.duplicate and retry.length == len(written[name])
    assert (await store.get_info(NAMES[0])).sealed
    fresh = await store.append(NAMES[1], b"+", writer_id="w", writer_seq=2)
    assert fresh.offset == len(written[NAMES[1]])


async def test_a_moved_disk_serves_its_inactive_segments(tmp_path: Path) -> None:
    tier2 = (tmp_path / "tier2").as_uri()
    async with SegmentStore.open(tmp_path / "a", tier2=tier2, **SETTINGS) as store:
        written = await fill_and_evict(store)
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # the node's disk, attached elsewhere
    shutil.rmtree(tmp_path / "a")
    async with SegmentStore.open(tmp_path / "b", tier2=tier2, **SETTINGS) as store:
        await served_as_before(store, written)


async def test_a_new_owner_on_jetstream_serves_the_inactive_segments_and_fences_the_old(
    jetstream_cluster: JetStreamCluster, tmp_path: Path
) -> None:
    tier2 = (tmp_path / "tier2").as_uri()
    tier1 = jetstream_tier1(jetstream_cluster)
    old = SegmentStore.open(tmp_path / "old", tier2=tier2, tier1=tier1, **SETTINGS)
    await old.start()
    try:
        written = await fill_and_evict(old)
        # Another node takes every container over while the old one still runs.
        async with SegmentStore.open(tmp_path / "new", tier2=tier2, tier1=tier1, **SETTINGS) as new:
            await served_as_before(new, written)
            # The old owner, fenced, can change nothing: not even load a segment to append.
            with pytest.raises(SegmentStoreError):
                for _ in range(50):  # its next Tier 1 write finds the new epoch
                    await old.append(NAMES[2], b"stale", writer_id="w", writer_seq=9)
                    await asyncio.sleep(0.05)
            assert (await new.get_info(NAMES[2])).length == len(written[NAMES[2]])
    finally:
        await old.close()
