"""``segmentstore bench offset-at``: what the time index costs and how fast ``:offsetAt`` is.

A segment is filled with 1 KiB appends, then ``offset_at`` is asked for random times in the
written span twice: with the data in the Tier 1 tail (entries in memory) and after a flush and
a restart (entries only in the Tier 2 sidecars, read through a small cache). Baselines in the
same run: ``get_info`` (a metadata-only call through the same API) for the tail, and reading
one sidecar straight from the chunk storage for Tier 2. Memory is reported per GiB of data:
the in-memory index of the tail (both metadata copies) and the sidecars' bytes in Tier 2.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from segmentstore.bench.report import percentile, print_table, write_json
from segmentstore.contracts.mapping import container_of
from segmentstore.store import SegmentStore
from segmentstore.tier2 import SegmentReader, open_chunk_storage
from segmentstore.tier2.chunk_index import index_object_key

GiB = 1 << 30
NAME = "bench/time"
APPEND = 1024
WRITERS = 64
QUERIES = 2000


async def _latencies(call: Callable[[], Awaitable[object]], count: int) -> list[float]:
    found = []
    for _ in range(count):
        started = time.perf_counter()
        await call()
        found.append(time.perf_counter() - started)
    return sorted(found)


def _row(where: str, measured: list[float], baseline: list[float], what: str) -> dict[str, Any]:
    p50, base = percentile(measured, 0.5), percentile(baseline, 0.5)
    return {
        "where": where,
        "p50_us": p50 * 1e6,
        "p99_us": percentile(measured, 0.99) * 1e6,
        "baseline": what,
        "baseline_p50_us": base * 1e6,
        "ratio": p50 / base,
    }


async def _fill(store: SegmentStore, total_bytes: int) -> tuple[int, int]:
    await store.create_segment(NAME)
    payload = os.urandom(APPEND)
    per_writer = total_bytes // APPEND // WRITERS
    first = time.time_ns() // 1_000_000

    async def writer() -> None:
        for _ in range(per_writer):
            await store.append(NAME, payload)

    await asyncio.gather(*(writer() for _ in range(WRITERS)))
    return first, time.time_ns() // 1_000_000


async def _run(data_dir: Path, total_bytes: int) -> list[dict[str, Any]]:
    settings = {"flush_threshold_bytes": 1 << 40, "flush_interval_ms": 3_600_000}
    rows = []
    async with SegmentStore.open(data_dir, containers=1, storage_writer=settings) as store:
        print(f"writing {total_bytes >> 20} MiB in {APPEND}-byte appends ...", flush=True)
        first_ms, last_ms = await _fill(store, total_bytes)
        rng = random.Random(1)
        times = [rng.randint(first_ms, last_ms) for _ in range(QUERIES)]
        container = store.containers[container_of(NAME, 1)]
        memory = container.time_index(NAME).memory_bytes
        length = (await container.get_info(NAME)).length
        print("asking offset_at with the data in the Tier 1 tail ...", flush=True)
        queries = iter(times)
        tail = await _latencies(lambda: store.offset_at(NAME, next(queries)), QUERIES)
        info = await _latencies(lambda: store.get_info(NAME), QUERIES)
        rows.append(_row("tier1 tail", tail, info, "get_info"))
        print("flushing to Tier 2 ...", flush=True)
        for container in store.containers:
            assert container.storage_writer is not None
            await container.storage_writer.flush_all()
    storage = open_chunk_storage((data_dir / "tier2").as_uri())
    manifest = SegmentReader(storage).list_segments(NAME)[0]
    sidecars = [index_object_key(c) for c in manifest.chunks]
    sidecar_bytes = sum(storage.size(k) for k in sidecars if storage.exists(k))
    async with SegmentStore.open(data_dir, containers=1) as store:
        print("asking offset_at with the data only in Tier 2 ...", flush=True)
        queries = iter(times)
        tier2 = await _latencies(lambda: store.offset_at(NAME, next(queries)), QUERIES)
        keys = iter(rng.choice(sidecars) for _ in range(QUERIES))

        async def read_sidecar() -> None:
            key = next(keys)
            await asyncio.to_thread(storage.read, key, 0, storage.size(key))

        raw = await _latencies(read_sidecar, QUERIES)
        rows.append(_row("tier2 only", tier2, raw, "one sidecar read"))
    for row in rows:
        row["tail_index_mib_per_gib"] = memory / length * GiB / (1 << 20)
        row["sidecar_mib_per_gib"] = sidecar_bytes / length * GiB / (1 << 20)
    return rows


def run(total_mib: int, json_path: str | None) -> list[dict[str, Any]]:
    directory = Path(tempfile.mkdtemp(prefix="bench-offset-at-"))
    try:
        rows = asyncio.run(_run(directory / "data", total_mib << 20))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print_table(
        rows,
        [
            ("where", "data", ""),
            ("p50_us", "p50 µs", ".0f"),
            ("p99_us", "p99 µs", ".0f"),
            ("baseline", "baseline", ""),
            ("baseline_p50_us", "base p50 µs", ".0f"),
            ("ratio", "ratio", ".2f"),
            ("tail_index_mib_per_gib", "mem MiB/GiB", ".2f"),
            ("sidecar_mib_per_gib", "tidx MiB/GiB", ".2f"),
        ],
    )
    write_json(json_path, "offset-at", rows)
    return rows
