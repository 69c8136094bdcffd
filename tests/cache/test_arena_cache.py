"""What ``BlockArenaCache`` does beyond the contract: payload off the Python heap, buffers mapped
lazily, few runs per view, and views that never dangle."""

from __future__ import annotations

import gc
import random
import tracemalloc

import pytest

from segmentstore.cache import BlockArenaCache

KIB, MIB = 1024, 1024 * 1024
BLOCK = 4096


def test_payload_stays_off_the_python_heap() -> None:
    chunk = random.Random(1).randbytes(MIB)  # allocated before tracing starts
    view = memoryview(chunk)
    cache = BlockArenaCache(80 * MIB)
    gc.collect()
    tracemalloc.start()
    try:
        addresses = [cache.insert(view[: 64 * KIB]) for _ in range(512)]  # 32 MiB
        for address in addresses[:256]:  # 32 MiB more, 1 KiB at a time
            for i in range(128):
                cache.append(address, view[i * KIB : (i + 1) * KIB])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert cache.stats.stored_bytes == 64 * MIB
    assert cache.mapped_bytes >= 64 * MIB
    # Bookkeeping only: an entry object, two small arrays per entry, the free-block stack.
    assert peak < MIB, f"{peak} bytes of Python heap for 64 MiB of payload"
    assert cache.read(addresses[0], 64 * KIB, 128 * KIB) == chunk[: 128 * KIB]
    cache.close()


def test_buffers_are_mapped_as_needed_plus_one_ahead() -> None:
    cache = BlockArenaCache(10 * BLOCK + 5, BLOCK, buffer_bytes=4 * BLOCK)
    assert cache.mapped_bytes == 0
    cache.insert(b"x")
    assert cache.mapped_bytes == 8 * BLOCK  # the buffer in use and the next one
    cache.insert(b"y" * 4 * BLOCK)
    assert cache.mapped_bytes == 10 * BLOCK  # the one ahead is cut at max_bytes
    cache.insert(b"z" * 5 * BLOCK)
    assert cache.mapped_bytes == 10 * BLOCK
    assert cache.stats.used_bytes == 10 * BLOCK
    cache.close()


def test_the_buffer_mapped_ahead_is_the_next_one_used() -> None:
    cache = BlockArenaCache(64 * BLOCK, BLOCK, buffer_bytes=4 * BLOCK)
    arena = cache._arena
    first = cache.insert(b"a" * BLOCK)
    assert arena._ahead is not None
    ahead = arena._ahead.result()
    second = cache.insert(b"b" * 4 * BLOCK)  # three blocks left in the first buffer
    assert ahead in arena._buffers
    assert cache.read(first, 0, BLOCK) == b"a" * BLOCK
    assert cache.read(second, 0, 4 * BLOCK) == b"b" * 4 * BLOCK
    cache.close()
    assert ahead.closed
    assert arena._mapper is None


def test_an_insert_into_free_space_is_one_run_cut_only_at_buffer_edges() -> None:
    cache = BlockArenaCache(64 * BLOCK, BLOCK, buffer_bytes=16 * BLOCK)
    data = random.Random(2).randbytes(40 * BLOCK)
    address = cache.insert(data)
    views = cache.view(address, 0, len(data))
    assert [len(v) for v in views] == [16 * BLOCK, 16 * BLOCK, 8 * BLOCK]
    assert len(cache.view(address, 100, 15 * BLOCK)) == 1
    assert len(cache.view(address, 15 * BLOCK, 2 * BLOCK)) == 2
    # Freed blocks come back together: a same-sized insert is again three runs.
    cache.delete(address)
    again = cache.insert(data)
    assert [len(v) for v in cache.view(again, 0, len(data))] == [16 * BLOCK, 16 * BLOCK, 8 * BLOCK]
    cache.close()


def test_appends_extend_the_last_run_when_the_next_block_is_free() -> None:
    cache = BlockArenaCache(64 * BLOCK, BLOCK, buffer_bytes=64 * BLOCK)
    address = cache.insert(b"")
    for _ in range(32):
        cache.append(address, b"a" * 1000)
    assert len(cache.view(address, 0, 32_000)) == 1
    # Interleaved with another entry's appends, the runs alternate but the bytes stay right.
    other = cache.insert(b"")
    for i in range(20):
        cache.append(address, bytes([i]) * BLOCK)
        cache.append(other, bytes([i + 100]) * BLOCK)
    assert cache.read(other, 0, 20 * BLOCK) == b"".join(bytes([i + 100]) * BLOCK for i in range(20))
    assert cache.read(address, 32_000, 20 * BLOCK) == b"".join(
        bytes([i]) * BLOCK for i in range(20)
    )
    cache.close()


def test_scattered_free_blocks_are_sorted_into_runs() -> None:
    cache = BlockArenaCache(16 * BLOCK, BLOCK, buffer_bytes=16 * BLOCK)
    singles = [cache.insert(bytes([i]) * BLOCK) for i in range(16)]
    for i in (9, 2, 3, 8, 1):  # frees blocks 1-3 and 8-9 out of order
        cache.delete(singles[i])
    address = cache.insert(b"n" * 5 * BLOCK)
    assert [len(v) for v in cache.view(address, 0, 5 * BLOCK)] == [3 * BLOCK, 2 * BLOCK]
    assert cache.read(address, 0, 5 * BLOCK) == b"n" * 5 * BLOCK
    assert cache.read(singles[4], 0, BLOCK) == bytes([4]) * BLOCK
    cache.close()


def test_views_outlive_close_without_dangling() -> None:
    cache = BlockArenaCache(16 * BLOCK, BLOCK)
    address = cache.insert(b"kept" * 1000)
    views = cache.view(address, 0, 4000)
    cache.close()  # the buffer stays mapped while the views exist
    assert b"".join(views) == b"kept" * 1000


@pytest.mark.parametrize(
    ("max_bytes", "block_bytes", "buffer_bytes"),
    [(100, 4096, 4096), (BLOCK, 0, BLOCK), (MIB, BLOCK, BLOCK + 1), (MIB, BLOCK, 100)],
)
def test_a_bad_shape_is_refused(max_bytes: int, block_bytes: int, buffer_bytes: int) -> None:
    with pytest.raises(ValueError):
        BlockArenaCache(max_bytes, block_bytes, buffer_bytes)
