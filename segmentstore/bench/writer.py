"""``segmentstore bench writer``: sustained ingest with the Storage Writer flushing to Tier 2.

Writers append to several segments for a fixed time while the Storage Writer moves the bytes
to local-disk Tier 2. Sampled every 100 ms: bytes acknowledged, bytes in Tier 2 and the lag
between them (in bytes, and in ms as the lag over the ingest rate). In the same run and on
the same disk, a raw sequential write of the same number of bytes, in pieces of the flush
threshold each followed by an fsync (what a Tier 2 flush costs at least), gives the baseline.

Steady-state Tier 2 throughput can only be the ingest rate, so the writer's own capacity is
measured apart: a backlog is built with the writers held back, then drained with
``flush_all`` and compared with a raw sequential write of the same bytes (64 MiB per fsync,
as the writer takes from the cache per chunk write).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from segmentstore.bench.report import print_table, write_json
from segmentstore.contracts.errors import ThrottledError
from segmentstore.store import SegmentStore

MiB = 1 << 20


def raw_sequential_write(directory: Path, total: int, piece: int) -> float:
    """MB/s of writing ``total`` bytes sequentially, fsyncing every ``piece`` bytes."""
    data = os.urandom(piece)
    path = directory / "raw.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        written = 0
        while written < total:
            written += os.write(fd, data)
            os.fsync(fd)
        return written / (time.perf_counter() - start) / 1e6
    finally:
        os.close(fd)
        path.unlink()


async def _ingest(
    directory: Path, seconds: float, writers: int, segments: int, size: int, threshold: int
) -> dict[str, float]:
    payload = os.urandom(size)
    async with SegmentStore.open(
        directory / "store",
        storage_writer={"flush_threshold_bytes": threshold, "flush_interval_ms": 1000},
    ) as store:
        names = [f"bench/writer-{i}" for i in range(segments)]
        for name in names:
            await store.create_segment(name)
        stop_at = time.perf_counter() + seconds
        throttled = 0

        async def writer(index: int) -> None:
            nonlocal throttled
            name = names[index % segments]
            while time.perf_counter() < stop_at:
                try:
                    await store.append(name, payload)
                except ThrottledError:
                    throttled += 1  # Tier 2 is behind and the cache is full: back off
                    await asyncio.sleep(0.01)

        async def totals() -> tuple[int, int]:
            infos = [await store.get_info(n) for n in names]
            return sum(i.length for i in infos), sum(i.storage_length for i in infos)

        samples: list[tuple[float, int, int]] = []

        async def sampler() -> None:
            while time.perf_counter() < stop_at:
                ingested, stored = await totals()
                samples.append((time.perf_counter(), ingested, stored))
                await asyncio.sleep(0.1)

        await asyncio.gather(sampler(), *(writer(i) for i in range(writers)))
    # Steady state: the second half of the run.
    steady = samples[len(samples) // 2 :]
    (t0, in0, st0), (t1, in1, st1) = steady[0], steady[-1]
    ingest_rate = (in1 - in0) / (t1 - t0)
    lags = sorted(ingested - stored for _, ingested, stored in steady)
    mean_lag = sum(lags) / len(lags)
    return {
        "ingest_mb_s": ingest_rate / 1e6,
        "tier2_mb_s": (st1 - st0) / (t1 - t0) / 1e6,
        "lag_mean_bytes": mean_lag,
        "lag_max_bytes": lags[-1],
        "lag_mean_ms": mean_lag / ingest_rate * 1000 if ingest_rate else float("nan"),
        "total_bytes": in1,
        "throttled": throttled,
    }


async def _drain(directory: Path, backlog: int, segments: int, size: int) -> float:
    """MB/s at which the Storage Writers move a backlog of ``backlog`` bytes to Tier 2."""
    payload = os.urandom(size)
    async with SegmentStore.open(
        directory / "drain",
        cache={"max_bytes": backlog + 256 * MiB},
        # Hold the writers back while the backlog builds.
        storage_writer={"flush_threshold_bytes": backlog, "flush_interval_ms": 3_600_000},
    ) as store:
        names = [f"bench/drain-{i}" for i in range(segments)]
        for name in names:
            await store.create_segment(name)
        for i in range(backlog // size):
            await store.append(names[i % segments], payload)
        writers = [c.storage_writer for c in store.containers if c.storage_writer]
        start = time.perf_counter()
        await asyncio.gather(*(w.flush_all() for w in writers))
        elapsed = time.perf_counter() - start
        infos = [await store.get_info(n) for n in names]
        assert all(i.storage_length == i.length for i in infos)
    return backlog / elapsed / 1e6


def run(
    seconds: float,
    writers: int,
    segments: int,
    size: int,
    threshold: int,
    directory: str | None,
    json_path: str | None,
) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="bench-writer-", dir=directory))
    try:
        print(f"... ingest for {seconds:.0f} s: {writers} writers x {size} B, {segments} segments")
        result = asyncio.run(_ingest(base, seconds, writers, segments, size, threshold))
        print(f"... raw sequential write of {result['total_bytes'] / MiB:.0f} MiB", flush=True)
        raw = raw_sequential_write(base, int(result["total_bytes"]), threshold)
        backlog = 512 * MiB
        print(f"... drain a backlog of {backlog // MiB} MiB, then raw write of it", flush=True)
        drain = asyncio.run(_drain(base, backlog, segments, size))
        drain_raw = raw_sequential_write(base, backlog, 64 * MiB)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    row = {
        **result,
        "raw_mb_s": raw,
        "tier2_vs_raw": result["tier2_mb_s"] / raw,
        "lag_vs_threshold": result["lag_mean_bytes"] / threshold,
        "lag_per_segment_vs_threshold": result["lag_mean_bytes"] / segments / threshold,
        "drain_mb_s": drain,
        "drain_raw_mb_s": drain_raw,
        "drain_vs_raw": drain / drain_raw,
    }
    print_table(
        [row],
        [
            ("ingest_mb_s", "ingest MB/s", ".1f"),
            ("tier2_mb_s", "Tier 2 MB/s", ".1f"),
            ("raw_mb_s", "raw MB/s", ".1f"),
            ("tier2_vs_raw", "T2/raw", ".2f"),
            ("lag_mean_bytes", "lag bytes", ",.0f"),
            ("lag_max_bytes", "lag max", ",.0f"),
            ("lag_mean_ms", "lag ms", ".0f"),
            ("lag_per_segment_vs_threshold", "seg lag/thr", ".2f"),
            ("throttled", "throttled", "d"),
        ],
    )
    print()
    print_table(
        [row],
        [
            ("drain_mb_s", "drain MB/s", ".1f"),
            ("drain_raw_mb_s", "raw MB/s", ".1f"),
            ("drain_vs_raw", "drain/raw", ".2f"),
        ],
    )
    write_json(json_path, "writer", [row])
    return row
