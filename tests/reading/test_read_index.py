"""The read index over the off-heap cache: reads against a model, coalescing, eviction rules."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segmentstore.cache import BlockArenaCache
from segmentstore.reading.read_index import GenerationClock, SegmentReadIndex

KiB = 1024


@pytest.fixture
def cache() -> Iterator[BlockArenaCache]:
    arena = BlockArenaCache(64 << 20)
    yield arena
    arena.close()


def new_index(cache: BlockArenaCache, max_entry: int = 64 * KiB) -> SegmentReadIndex:
    return SegmentReadIndex(cache, GenerationClock(), max_entry)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 20 * KiB), min_size=1, max_size=40),
    reads=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 100 * KiB)), max_size=30),
    truncate_at=st.floats(0, 1),
)
def test_reads_across_entries_equal_the_model(
    sizes: list[int], reads: list[tuple[float, int]], truncate_at: float
) -> None:
    cache = BlockArenaCache(16 << 20)
    try:
        index = new_index(cache, max_entry=16 * KiB)
        model = bytearray()
        rng = random.Random(len(sizes))
        for size in sizes:
            data = rng.randbytes(size)
            index.append(len(model), data)
            model += data
        for where, length in reads:
            offset = int(where * (len(model) - 1))
            assert index.read(offset, length) == bytes(model[offset : offset + length])
        start = int(truncate_at * len(model))
        index.truncate(start)
        assert index.read(start, len(model)) == bytes(model[start:])
        index.drop()
        assert cache.stats.used_bytes == 0
    finally:
        cache.close()


def test_small_appends_share_entries_and_blocks(cache: BlockArenaCache) -> None:
    index = new_index(cache, max_entry=64 * KiB)
    for i in range(1000):
        index.append(i * 100, bytes([i % 256]) * 100)
    assert index.entries == 2  # 100,000 bytes in entries of at most 64 KiB
    assert cache.stats.used_bytes == 25 * 4 * KiB  # blocks filled, not one per append
    assert index.read(99_900, 100) == bytes([999 % 256]) * 100


def test_truncate_frees_whole_entries_only(cache: BlockArenaCache) -> None:
    index = new_index(cache, max_entry=8 * KiB)
    for i in range(10):
        index.append(i * 8 * KiB, bytes([i]) * 8 * KiB)
    index.truncate(3 * 8 * KiB + 5)  # inside the fourth entry: it stays
    assert index.entries == 7
    assert index.read(3 * 8 * KiB + 5, 3) == bytes([3]) * 3
    index.truncate(5 * 8 * KiB)  # on a boundary: the fifth goes too
    assert index.entries == 5
    assert cache.stats.entries == 5


def test_absorb_moves_entries_without_copying(cache: BlockArenaCache) -> None:
    target, source = new_index(cache), new_index(cache)
    target.append(0, b"head")
    source.append(0, b"txn-1 ")
    source.append(6, b"txn-2")
    used = cache.stats.used_bytes
    target.absorb(source, 4)
    assert target.read(0, 100) == b"headtxn-1 txn-2"
    assert source.entries == 0 and cache.stats.used_bytes == used


def test_eviction_only_below_storage_length_and_least_recently_used(
    cache: BlockArenaCache,
) -> None:
    clock = GenerationClock()
    index = SegmentReadIndex(cache, clock, 4 * KiB)
    for i in range(8):
        index.append(i * 4 * KiB, bytes([i]) * 4 * KiB)
    assert index.evict(oldest_kept_generation=100) == 0  # nothing is in Tier 2 yet
    index.storage_length = 6 * 4 * KiB
    clock.now = 5
    index.read(2 * 4 * KiB, 10)  # entry 2 used in generation 5
    freed = index.evict(oldest_kept_generation=5)
    assert freed == 5 * 4 * KiB  # entries 0, 1, 3, 4, 5; not 2 (recent), not 6, 7 (Tier 1 only)
    assert index.read(2 * 4 * KiB, 4) == bytes([2]) * 4
    assert index.read(6 * 4 * KiB, 4) == bytes([6]) * 4
    assert index.read(0, 4) == b""  # evicted: a miss (Tier 2 serves it once it exists)
    assert cache.stats.evictions == 5


def test_absorb_keeps_offsets_when_the_source_head_was_evicted(cache: BlockArenaCache) -> None:
    target, source = new_index(cache, max_entry=4 * KiB), new_index(cache, max_entry=4 * KiB)
    target.append(0, b"T" * 100)
    for i in range(3):
        source.append(i * 4 * KiB, bytes([i]) * 4 * KiB)
    source.storage_length = 4 * KiB
    assert source.evict(oldest_kept_generation=1) == 4 * KiB  # its head is in Tier 2 only
    target.absorb(source, 100)
    assert target.read(100 + 4 * KiB, 4) == bytes([1]) * 4  # not shifted down to offset 100
    assert target.read(100, 4) == b""  # the evicted head: a miss, served from Tier 2


def test_pinned_views_outlive_a_truncation_and_a_drop(cache: BlockArenaCache) -> None:
    """The Storage Writer writes pinned views from a worker thread while the event loop goes
    on: a truncation or a delete meanwhile must not hand their blocks to new appends."""
    index = new_index(cache, max_entry=16 * KiB)
    data = random.Random(3).randbytes(100 * KiB)
    for i in range(0, len(data), 10 * KiB):
        index.append(i, data[i : i + 10 * KiB])
    views = index.pin_views(5 * KiB, 80 * KiB)
    assert b"".join(views) == data[5 * KiB : 85 * KiB]
    used = cache.stats.used_bytes
    index.truncate(90 * KiB)
    assert index.evict(1 << 60) == 0  # nothing is evicted while pinned either
    assert cache.stats.used_bytes == used  # freed only at the unpin
    other = new_index(cache)
    other.append(0, b"\xff" * 100 * KiB)  # would reuse freed blocks
    assert b"".join(views) == data[5 * KiB : 85 * KiB]
    index.unpin()
    assert cache.stats.used_bytes < used + 100 * KiB
    assert index.read(90 * KiB, 10 * KiB) == data[90 * KiB :]

    views = index.pin_views(90 * KiB, 10 * KiB)
    index.drop()
    other.append(100 * KiB, b"\xee" * 50 * KiB)
    assert b"".join(views) == data[90 * KiB :]
    index.unpin()
    other.drop()
    assert cache.stats.used_bytes == 0
    with pytest.raises(AssertionError):
        new_index(cache).pin_views(0, 1)  # nothing indexed there
