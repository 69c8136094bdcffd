"""``segmentstore bench read``: cached reads and append-to-tail-read latency.

Cached reads of random ranges go through the embedded API and are compared with copying the
same ranges out of a plain ``bytes`` in the same run (``bytes(memoryview(...)[a:b])``), which
is what any read that hands out a stable buffer must at least do. Tail latency is measured
end to end: from the moment a writer calls ``append`` to the moment each of the waiting
readers has the bytes, so it includes the Tier 1 fsync; the append's own latency is shown
beside it.

Reads that miss the cache are measured too: a segment flushed to Tier 2 (a local directory),
read through a store opened again over it (its cache empty), in 1 MiB reads, with the checks of
the Tier 2 chunks' checksums on and off (``storage_writer.verify_checksums``), the two taking
turns in one run (each first in every other turn); the ratio is what verifying costs.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from segmentstore.bench.report import percentile, print_table, write_json
from segmentstore.store import SegmentStore

MiB = 1 << 20
SEGMENT_BYTES = 64 * MiB


def _copy_baseline(data: bytes, size: int, seconds: float) -> float:
    view = memoryview(data)
    rng = random.Random(1)
    copied = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(64):
            offset = rng.randrange(0, len(data) - size + 1)
            copied += len(bytes(view[offset : offset + size]))
    return copied / elapsed / 1e6


async def _cached_reads(store: SegmentStore, size: int, seconds: float) -> float:
    rng = random.Random(1)
    read = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(64):
            offset = rng.randrange(0, SEGMENT_BYTES - size + 1)
            read += len(await store.read("bench/cached", offset, size))
    return read / elapsed / 1e6


async def _tier2_pass(directory: Path, verify: bool) -> float:
    """MB/s of reading the whole flushed segment from Tier 2 through a store just opened."""
    async with SegmentStore.open(
        directory, storage_writer={"verify_checksums": verify}, cache={"max_bytes": 16 * MiB}
    ) as store:
        begun = time.perf_counter()
        read = 0
        for offset in range(0, SEGMENT_BYTES, MiB):
            read += len(await store.read("bench/tier2", offset, MiB))
        assert read >= SEGMENT_BYTES
        return read / (time.perf_counter() - begun) / 1e6


async def _tier2_reads(directory: Path, passes: int) -> list[dict[str, Any]]:
    data = os.urandom(SEGMENT_BYTES)
    # Frequent checkpoints: once flushed, Tier 1 is truncated, and the stores opened again
    # recover (and cache) nothing of the segment.
    async with SegmentStore.open(directory, durable_log={"checkpoint_every_frames": 4}) as store:
        await store.create_segment("bench/tier2")
        for offset in range(0, SEGMENT_BYTES, MiB):
            await store.append("bench/tier2", data[offset : offset + MiB])
        for container in store.containers:
            assert container.storage_writer is not None
            await container.storage_writer.flush_all()
        for i in range(16):  # frames after the flush: checkpoints that Tier 1 is cut at
            await store.append("bench/tier2", b"%d" % i)
    await _tier2_pass(directory, True)  # untimed: the files into the page cache, for both
    passes_of: dict[bool, list[float]] = {True: [], False: []}
    for i in range(passes):
        for verify in (True, False) if i % 2 == 0 else (False, True):  # neither always first
            passes_of[verify].append(await _tier2_pass(directory, verify))
    on, off = passes_of[True], passes_of[False]
    median_on, median_off = statistics.median(on), statistics.median(off)
    return [
        {"case": "tier2 miss, checksums on", "mb_s": median_on, "ratio": median_on / median_off},
        {"case": "tier2 miss, checksums off", "mb_s": median_off, "ratio": 1.0},
    ]


async def _tail_latency(store: SegmentStore, readers: int, appends: int) -> dict[str, float]:
    name = f"bench/tail-{readers}"
    await store.create_segment(name)
    sent: dict[int, float] = {}
    delays: list[float] = []
    append_delays: list[float] = []
    payload = os.urandom(1024)
    total = appends * len(payload)

    async def reader() -> None:
        offset = 0
        while offset < total:
            data = await store.read(name, offset, 1 << 20, wait_ms=10_000)
            now = time.perf_counter()
            delays.append(now - sent[offset])
            offset += len(data)

    tasks = [asyncio.create_task(reader()) for _ in range(readers)]
    await asyncio.sleep(0.05)
    for _ in range(appends):
        offset = (await store.get_info(name)).length
        sent[offset] = begun = time.perf_counter()
        await store.append(name, payload)
        append_delays.append(time.perf_counter() - begun)
        await asyncio.sleep(0.001)  # one append at a time: latency, not throughput
    await asyncio.gather(*tasks)
    delays.sort()
    append_delays.sort()
    return {
        "p50_ms": percentile(delays, 0.5) * 1000,
        "p99_ms": percentile(delays, 0.99) * 1000,
        "append_p50_ms": percentile(append_delays, 0.5) * 1000,
    }


async def _run(directory: Path, seconds: float, appends: int) -> dict[str, Any]:
    data = os.urandom(SEGMENT_BYTES)
    async with SegmentStore.open(directory, cache={"max_bytes": 2 * SEGMENT_BYTES}) as store:
        await store.create_segment("bench/cached")
        for offset in range(0, SEGMENT_BYTES, MiB):
            await store.append("bench/cached", data[offset : offset + MiB])
        reads = []
        for size in (4096, MiB):
            print(f"... cached reads of {size} B", flush=True)
            store_mb = await _cached_reads(store, size, seconds)
            baseline = _copy_baseline(data, size, seconds)
            reads.append(
                {"size_bytes": size, "store_mb_s": store_mb, "copy_mb_s": baseline,
                 "ratio": store_mb / baseline}
            )  # fmt: skip
        tails = []
        for readers in (1, 100):
            print(f"... append to tail read, {readers} waiting readers", flush=True)
            tails.append({"readers": readers, **await _tail_latency(store, readers, appends)})
    print("... reads from Tier 2 (cache misses), checksums on and off in turns", flush=True)
    misses = await _tier2_reads(directory / "tier2-reads", passes=11)
    return {"reads": reads, "tail": tails, "misses": misses}


def run(seconds: float, appends: int, directory: str | None, json_path: str | None) -> None:
    base = Path(tempfile.mkdtemp(prefix="bench-read-", dir=directory))
    try:
        results = asyncio.run(_run(base, seconds, appends))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print_table(
        results["reads"],
        [
            ("size_bytes", "read size", "d"),
            ("store_mb_s", "store MB/s", ",.0f"),
            ("copy_mb_s", "copy MB/s", ",.0f"),
            ("ratio", "store/copy", ".2f"),
        ],
    )
    print()
    print_table(
        results["tail"],
        [
            ("readers", "readers", "d"),
            ("p50_ms", "tail p50 ms", ".3f"),
            ("p99_ms", "tail p99 ms", ".3f"),
            ("append_p50_ms", "append p50 ms", ".3f"),
        ],
    )
    print()
    print_table(
        results["misses"],
        [("case", "reads missing the cache", "s"), ("mb_s", "MB/s", ",.0f"),
         ("ratio", "on/off", ".2f")],
    )  # fmt: skip
    write_json(json_path, "read", [*results["reads"], *results["tail"], *results["misses"]])
