"""The cache bound holds at the store level: memory stays bounded, a full cache pushes back."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from faults import fail_processing_of

from segmentstore import (
    BadOffsetError,
    ContainerUnavailableError,
    SegmentStore,
    ThrottledError,
)

MiB = 1 << 20
CACHE = 16 * MiB


def resident_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


async def test_writing_ten_times_the_cache_keeps_memory_bounded(tmp_path: Path) -> None:
    async with SegmentStore.open(
        tmp_path,
        cache={"max_bytes": CACHE, "max_entry_bytes": MiB},
        tier1={"segment_bytes": 4 * MiB},
        durable_log={"checkpoint_every_frames": 16, "throttle_max_delay_ms": 100},
    ) as store:
        names = [f"s{i}" for i in range(4)]
        for name in names:
            await store.create_segment(name)
        payload = os.urandom(256 * 1024)
        baseline = resident_bytes()
        peak_used = peak_resident = throttled = 0

        async def writer(name: str) -> None:
            nonlocal peak_used, peak_resident, throttled
            written = 0
            while written < 10 * CACHE // len(names):
                try:
                    result = await store.append(name, payload)
                except ThrottledError:
                    # The cache is full: this segment's consumer catches up, then we retry.
                    throttled += 1
                    await store.truncate(name, (await store.get_info(name)).length)
                    continue
                written += len(payload)
                # A consumer that lags 6 MiB behind: four of them hold more than the cache.
                await store.truncate(name, max(0, result.length - 6 * MiB))
                peak_used = max(peak_used, store.cache_manager.stats.used_bytes)
                peak_resident = max(peak_resident, resident_bytes())

        await asyncio.gather(*(writer(n) for n in names))
        written = sum([(await store.get_info(n)).length for n in names])
        growth = peak_resident - baseline
        print(
            f"wrote {written / MiB:.0f} MiB, peak cache use {peak_used / MiB:.1f} MiB,"
            f" {throttled} throttled appends,"
            f" {store.cache_manager.stats.evictions} evictions,"
            f" resident growth {growth / MiB:.1f} MiB"
        )
        assert written >= 10 * CACHE
        assert CACHE * 3 // 4 <= peak_used <= CACHE  # the bound was reached, and held:
        # by evicting what the Storage Writer had moved to Tier 2, or by pushing back.
        assert throttled > 0 or store.cache_manager.stats.evictions > 0
        # The cache's own bound plus a fixed allowance for in-flight payloads and the runtime.
        assert growth <= CACHE + 48 * MiB, growth / MiB


async def test_a_full_cache_throttles_appends_instead_of_growing(tmp_path: Path) -> None:
    async with SegmentStore.open(
        tmp_path,
        store={"max_append_bytes": MiB},
        cache={"max_bytes": 4 * MiB},
        durable_log={"throttle_max_delay_ms": 50},
    ) as store:
        await store.create_segment("s")
        payload = os.urandom(512 * 1024)
        acknowledged = 0
        for _ in range(16):
            try:
                await store.append("s", payload)
                acknowledged += 1
            except ThrottledError as error:
                assert error.fields() == {"retry_after_ms": 1000}
                break
        else:
            raise AssertionError("32 MiB went into a 4 MiB cache without push-back")
        # Nothing is in Tier 2 yet, so nothing could be evicted: everything acked is readable.
        assert store.cache_manager.stats.used_bytes <= 4 * MiB
        info = await store.get_info("s")
        assert info.length == acknowledged * len(payload)
        assert bytes(await store.read("s", 0, MiB)) == (payload * 2)[: min(MiB, info.length)]
        # Making room (here by truncation) lets appends in again.
        await store.truncate("s", info.length)
        await store.append("s", payload)


async def test_a_tail_reader_wakes_within_milliseconds(store: SegmentStore) -> None:
    await store.create_segment("s")
    delays = []
    for i in range(20):
        reader = asyncio.create_task(store.read("s", i, wait_ms=5_000))
        await asyncio.sleep(0.005)
        appended = time.perf_counter()
        await store.append("s", b"x")
        assert await reader == b"x"
        delays.append(time.perf_counter() - appended)
    delays.sort()
    assert delays[len(delays) // 2] < 0.05, delays


async def test_cache_room_is_held_until_an_append_is_settled_however_it_ends(
    store: SegmentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.create_segment("s")
    manager = store.cache_manager
    await store.append("s", b"acknowledged")
    with pytest.raises(BadOffsetError):
        await store.append("s", b"refused", expected_offset=0)
    assert manager.reserved_bytes == 0

    # A caller that stops waiting does not take its room back early: the append goes on, and
    # its bytes still reach the cache when it commits.
    abandoned = asyncio.ensure_future(store.append("s", b"abandoned"))
    await asyncio.sleep(0)  # admitted into the Durable Log
    abandoned.cancel()
    assert manager.reserved_bytes > 0
    await store.append("s", b"!")  # settles everything before it
    assert manager.reserved_bytes == 0
    assert bytes(await store.read("s", 0)) == b"acknowledgedabandoned!"

    # A container that fails gives back the room of everything in flight.
    fail_processing_of(monkeypatch, b"boom")
    queued = [asyncio.ensure_future(store.append("s", b"queued")) for _ in range(3)]
    with pytest.raises(ContainerUnavailableError):
        await store.append("s", b"boom")
    await asyncio.gather(*queued, return_exceptions=True)
    assert manager.reserved_bytes == 0
