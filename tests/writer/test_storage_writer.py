"""The Storage Writer against a local Tier 2 (``file://<data>/tier2``): the data path.

Every acknowledged byte reaches Tier 2 and reads back identically through the manifest alone
(``segmentstore tier2 ls|cat``, run as a real process); Tier 1 and the cache stay bounded
because Tier 2 holds the rest; reads that miss the cache come from Tier 2. The structural
changes (truncate, merge, delete, fencing, names) are in ``test_storage_writer_structure.py``.
"""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path
from typing import Any

import pytest
from store_checks import flush, read_all
from tier2_cli import parse_ls, wait_until

from segmentstore.contracts.mapping import container_of

from .writer_harness import (
    WRITER,
    KiB,
    MiB,
    cli,
    open_store,
    tier2_bytes,
    tier2_root,
)

# -- every byte reaches Tier 2 ------------------------------------------------------------


async def test_every_byte_reaches_tier2_and_the_cli_reads_it_back(tmp_path: Path) -> None:
    data = tmp_path / "data"
    rng = random.Random(20240611)
    names = [f"scope/stream-{i}/{i % 3}" for i in range(8)]
    expected = {name: bytearray() for name in names}
    max_chunk = WRITER["max_chunk_bytes"]
    async with open_store(data) as store:
        for name in names:
            await store.create_segment(name)

        async def writer(name: str, seed: int) -> None:
            own = random.Random(seed)
            for _ in range(25):
                roll = own.random()
                if roll < 0.15:  # larger than a chunk: one flush spans several chunks
                    size = own.randint(max_chunk + 1, 3 * max_chunk)
                elif roll < 0.5:
                    size = own.randint(1000, 20_000)
                else:
                    size = own.randint(1, 300)
                payload = own.randbytes(size)
                result = await store.append(name, payload)
                assert result.offset == len(expected[name])
                expected[name] += payload

        await asyncio.gather(*(writer(n, rng.randrange(1 << 30)) for n in names))
        sealed = set(names[:2])
        for name in sealed:
            await store.seal(name)
        await flush(store)
        for name in names:
            info = await store.get_info(name)
            assert info.storage_length == info.length == len(expected[name]), info
            assert await read_all(store, name) == expected[name]
        assert [c.tier2_lag_bytes for c in store.containers] == [0] * len(store.containers)

    for name in names:
        manifest, stored = tier2_bytes(data, name)
        assert stored == expected[name], name
        assert manifest.sealed == (name in sealed)
        assert all(c.length <= max_chunk for c in manifest.chunks), manifest.chunks
        assert len(manifest.chunks) >= len(expected[name]) // max_chunk

    uri = tier2_root(data).as_uri()
    code, out, err = await cli("ls", uri)
    assert code == 0, err
    assert parse_ls(out.decode()) == {
        name: (0, len(expected[name]), name in sealed) for name in names
    }
    code, out, err = await cli("ls", uri, "--prefix", "scope/stream-1")
    assert code == 0, err
    assert sorted(parse_ls(out.decode())) == ["scope/stream-1/1"]
    results = await asyncio.gather(*(cli("cat", uri, name) for name in names))
    for name, (code, out, err) in zip(names, results, strict=True):
        assert code == 0, f"{name}: {err}"
        assert out == expected[name], f"{name}: cat gave {len(out)} bytes of {len(expected[name])}"
    code, out, err = await cli("cat", uri, names[3], "--offset", "1000", "--length", "70000")
    assert code == 0, err
    assert out == expected[names[3]][1000:71000]


async def test_a_small_append_reaches_tier2_within_the_flush_interval(tmp_path: Path) -> None:
    """Below the threshold, the interval alone must move the bytes, also when the writer had
    nothing to do before the append came."""
    async with open_store(tmp_path / "data") as store:
        await store.create_segment("quiet")
        await asyncio.sleep(0.2)  # the writer has caught up and waits for work
        await store.append("quiet", b"0123456789")

        async def flushed() -> bool:
            return (await store.get_info("quiet")).storage_length == 10

        # 100 flush intervals.
        assert await wait_until(flushed, 5.0), await store.get_info("quiet")


async def test_bytes_reach_tier2_without_being_forced(tmp_path: Path) -> None:
    """Appends above the threshold are flushed by the writer's own loop, not only by
    ``flush_all``."""
    async with open_store(tmp_path / "data") as store:
        await store.create_segment("busy")
        payload = os.urandom(100 * KiB)
        for _ in range(10):
            await store.append("busy", payload)

        async def flushed() -> bool:
            return (await store.get_info("busy")).storage_length >= 1000 * KiB

        assert await wait_until(flushed, 10.0), await store.get_info("busy")


# -- Tier 1 and the cache stay bounded ----------------------------------------------------


async def test_tier1_stays_bounded_because_it_is_truncated_behind_tier2(tmp_path: Path) -> None:
    file_bytes = 128 * KiB
    async with open_store(
        tmp_path / "data",
        tier1={"segment_bytes": file_bytes},
        durable_log={"checkpoint_every_frames": 8, "max_frame_bytes": 16 * KiB},
    ) as store:
        names = ["bound/0", "bound/3", "bound/5"]  # all three in container 1
        container = store.containers[1]
        assert {container_of(n, 4) for n in names} == {container.id}
        for name in names:
            await store.create_segment(name)
        payload = os.urandom(4 * KiB)
        written = peak = peak_beyond_lag = 0
        while written < 80 * file_bytes:
            await asyncio.gather(*(store.append(n, payload) for n in names))
            written += len(payload) * len(names)
            peak = max(peak, container.tier1_bytes)
            beyond = container.tier1_bytes - container.tier2_lag_bytes
            peak_beyond_lag = max(peak_beyond_lag, beyond)
        print(
            f"wrote {written} bytes; Tier 1 peaked at {peak} ({peak / file_bytes:.1f} files),"
            f" at {peak_beyond_lag / file_bytes:.1f} files beyond what Tier 2 still lacks"
        )
        # Without Tier 2 behind it, Tier 1 would hold all 80 files' worth. It holds what Tier 2
        # still lacks (how much depends on how fast appends come compared with flushes), plus
        # the granularity of truncation: whole files, cut only when a checkpoint (every 8
        # frames) is durable, below the last checkpoint before the oldest append Tier 2 lacks.
        assert peak_beyond_lag <= 10 * file_bytes, peak_beyond_lag
        assert peak <= 40 * file_bytes, peak
        await flush(store)

        # Tier 2 has everything now: the next checkpoints (made by a few more appends, which
        # Tier 2 gets too) let Tier 1 shrink to its last files.
        async def shrunk() -> bool:
            for _ in range(8):
                await store.append(names[0], b"x" * 100)
            await flush(store)
            return container.tier1_bytes <= 2 * file_bytes

        assert await wait_until(shrunk, 10.0), container.tier1_bytes
        for name in names:
            info = await store.get_info(name)
            assert info.storage_length == info.length


async def test_reads_that_miss_the_cache_come_from_tier2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache_bytes = 4 * MiB
    async with open_store(
        tmp_path / "data",
        store={"max_append_bytes": 256 * KiB},
        cache={"max_bytes": cache_bytes, "max_entry_bytes": 64 * KiB},
        storage_writer={"max_chunk_bytes": 256 * KiB, "read_block_bytes": 64 * KiB},
        durable_log={"throttle_max_delay_ms": 5000},
    ) as store:
        fetched = 0
        read_into = store.tier2.read_into

        async def counting_read_into(*args: Any) -> bytes:
            nonlocal fetched
            fetched += 1
            return await read_into(*args)

        monkeypatch.setattr(store.tier2, "read_into", counting_read_into)
        rng = random.Random(7)
        names = [f"cache/{i}" for i in range(4)]
        expected = {name: bytearray() for name in names}
        for name in names:
            await store.create_segment(name)
        total = 0
        while total < 4 * cache_bytes:
            name = rng.choice(names)
            payload = rng.randbytes(rng.randint(1, 256 * KiB))
            await store.append(name, payload)
            expected[name] += payload
            total += len(payload)
        assert store.cache_manager.stats.evictions > 0
        for name in names:
            assert await read_all(store, name) == expected[name], name
        stats = store.cache_manager.stats
        print(f"wrote {total} bytes through a {cache_bytes}-byte cache: {stats}, {fetched} fetches")
        assert stats.used_bytes <= cache_bytes
        assert fetched > 0
