"""The read index alone, over a real block cache wrapped in a ``FlakyCache``, and with the
cache manager that evicts across indexes: its preconditions, what a refusing cache leaves
behind, eviction, and tail waits. No container, log or Tier 2."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from fault_injection import FaultInjector
from flaky_cache import FlakyCache

from segmentstore.cache import BlockArenaCache, CacheFullError
from segmentstore.reading.cache_manager import CacheManager
from segmentstore.reading.read_index import GenerationClock, SegmentReadIndex

KiB = 1024


@pytest.fixture
def cache() -> Iterator[FlakyCache]:
    flaky = FlakyCache(BlockArenaCache(8 << 20, block_bytes=4 * KiB), FaultInjector())
    yield flaky
    flaky.close()


def index_over(cache: FlakyCache, max_entry: int = 16 * KiB) -> SegmentReadIndex:
    return SegmentReadIndex(cache, GenerationClock(), max_entry)


def test_an_append_over_indexed_bytes_is_refused_and_changes_nothing(cache: FlakyCache) -> None:
    index = index_over(cache)
    index.append(0, b"a" * 100)
    index.append(100, b"b" * 100)
    used = cache.used_bytes
    for offset in (0, 50, 199):
        with pytest.raises(ValueError, match="overlaps"):
            index.append(offset, b"x" * 10)
    assert index.read(0, 200) == b"a" * 100 + b"b" * 100
    assert cache.used_bytes == used and index.entries == 1


def test_an_append_past_a_gap_is_taken(cache: FlakyCache) -> None:
    # After a recovery the index starts empty, and what lies below is in Tier 2.
    index = index_over(cache)
    index.append(1000, b"tail")
    index.append(1004, b"!")
    assert index.read(1000, 10) == b"tail!"
    assert index.read(0, 10) == b""  # not cached: the caller goes to Tier 2
    assert index.gap_around(500) == (0, 1000)


def test_fetched_bytes_must_fill_a_gap(cache: FlakyCache) -> None:
    index = index_over(cache)
    index.append(0, b"h" * 100)
    index.append(400, b"t" * 100)  # a gap [100, 400) between them
    with pytest.raises(ValueError, match="overlap"):
        index.insert_fetched(90, b"f" * 20)  # into the entry below
    with pytest.raises(ValueError, match="overlap"):
        index.insert_fetched(390, b"f" * 20)  # into the entry above
    with pytest.raises(ValueError, match="overlap"):
        index.insert_fetched(50, b"f" * 500)  # over both
    assert index.entries == 2
    assert index.read(50, 1000) == b"h" * 50  # up to the gap, never past it
    index.insert_fetched(100, b"f" * 300)  # exactly the gap
    assert index.read(0, 500) == b"h" * 100 + b"f" * 300 + b"t" * 100
    assert index.read(50, 100) == b"h" * 50 + b"f" * 50  # across entries, within max_length


@pytest.mark.parametrize("method", ["insert", "append"])
def test_a_cache_that_refuses_leaves_the_index_as_it_was(cache: FlakyCache, method: str) -> None:
    index = index_over(cache)
    index.append(0, b"a" * 100)  # one entry: the next append grows it (cache.append)
    entries, used = index.entries, cache.used_bytes
    cache.injector.add(method, "fail", nth=cache.injector.calls[method] + 1)
    grow = index.append if method == "append" else (lambda o, d: index.insert_fetched(o + 900, d))
    with pytest.raises(CacheFullError):
        grow(100, b"b" * 50)
    assert cache.injector.count(method, "fail") == 1
    assert (index.entries, cache.used_bytes) == (entries, used)
    assert index.read(0, 200) == b"a" * 100
    grow(100, b"b" * 50)  # the same call succeeds once the cache has room
    if method == "append":
        assert index.read(0, 200) == b"a" * 100 + b"b" * 50
    else:
        assert index.read(1000, 100) == b"b" * 50


def test_eviction_takes_only_bytes_in_tier2_least_recently_used_first(cache: FlakyCache) -> None:
    manager = CacheManager(cache, max_delay_ms=0)
    old, recent = (SegmentReadIndex(cache, manager.clock, 4 * KiB) for _ in range(2))
    manager.register(lambda: [old, recent])
    for index in (old, recent):
        for i in range(8):
            index.append(i * 4 * KiB, bytes([i]) * 4 * KiB)  # 8 entries of one block each
        index.storage_length = 6 * 4 * KiB  # the last two entries are in Tier 1 only
    manager.clock.now += 1
    recent.read(0, 6 * 4 * KiB)  # used since: kept while older entries can go
    freed = manager.evict(cache.max_bytes - cache.used_bytes + 6 * 4 * KiB)
    assert freed == 6 * 4 * KiB
    assert old.read(0, 10) == b"" and recent.read(0, 10) == bytes(10)
    # Under any pressure, bytes only Tier 1 has are never evicted.
    manager.evict(cache.max_bytes)
    for index in (old, recent):
        assert index.read(6 * 4 * KiB, 8 * KiB) == bytes([6]) * 4 * KiB + bytes([7]) * 4 * KiB


async def test_a_full_cache_makes_room_by_evicting_tier2_bytes(cache: FlakyCache) -> None:
    manager = CacheManager(cache, max_delay_ms=200)
    index = SegmentReadIndex(cache, manager.clock, 1 << 20)
    manager.register(lambda: [index])
    chunk = 1 << 20
    for i in range(7):
        reserved = await manager.reserve(chunk)
        index.append(i * chunk, bytes(chunk))
        manager.release(reserved)
    index.storage_length = 7 * chunk  # all in Tier 2 now
    reserved = await manager.reserve(2 * chunk)  # needs eviction to fit
    assert cache.stats.evictions > 0
    manager.release(reserved)


async def test_a_full_cache_of_tier1_bytes_pushes_back(cache: FlakyCache) -> None:
    manager = CacheManager(cache, max_delay_ms=100)
    index = SegmentReadIndex(cache, manager.clock, 1 << 20)
    manager.register(lambda: [index])
    for i in range(7):
        index.append(i << 20, bytes(1 << 20))  # in Tier 1 only: nothing may be evicted
    with pytest.raises(Exception, match="cache is full"):
        await manager.reserve(2 << 20)
    assert cache.stats.evictions == 0


async def test_tail_readers_wake_on_a_change_and_not_on_a_fetch(cache: FlakyCache) -> None:
    index = index_over(cache)
    index.append(1000, b"x" * 100)  # the tail; below it, Tier 2
    waiting = [asyncio.create_task(index.wait_for_change(10)) for _ in range(2)]
    expiring = asyncio.create_task(index.wait_for_change(0.01))
    await asyncio.sleep(0)  # all three wait
    index.insert_fetched(0, b"y" * 10)  # readable already: no one is woken
    await asyncio.sleep(0.05)
    assert expiring.done() and not any(w.done() for w in waiting)  # its timeout ended it
    index.append(1100, b"z")
    await asyncio.wait_for(asyncio.gather(*waiting), 1)
    for change in (index.notify, index.drop):  # a seal or merge notifies; a delete drops
        waiter = asyncio.create_task(index.wait_for_change(10))
        await asyncio.sleep(0)
        assert not waiter.done()
        change()
        await asyncio.wait_for(waiter, 1)


def test_bytes_fetched_for_a_dropped_index_are_not_cached(cache: FlakyCache) -> None:
    # A fetch from Tier 2 that outlives its segment (deleted, evicted, its container stopped)
    # must not cache its bytes: nothing would ever free them.
    index = index_over(cache)
    index.append(0, b"a" * 100)
    index.drop()
    merged, target = index_over(cache), index_over(cache)
    merged.append(0, b"m" * 100)
    target.absorb(merged, 0)  # a merged source is gone as a dropped one is
    used = cache.used_bytes
    for gone in (index, merged):
        gone.insert_fetched(100, b"f" * 100)
        assert gone.entries == 0 and gone.read(100, 10) == b""
    assert cache.used_bytes == used
    assert target.read(0, 100) == b"m" * 100
