"""``segmentstore bench append``: durable appends through the embedded API against raw disk.

For each payload size and writer count it runs the store for a fixed time (every append
awaited, so every figure is of acknowledged, fsynced data), then, in the same run and on the
same disk, a raw loop of ``os.write`` + ``os.fdatasync`` of the same records in groups, and
reports the ratio store / raw. A second baseline is the bare append path
(:mod:`segmentstore.bench.bare_path`: the same writers, batching, CRC and fsync, nothing else),
so store / bare is what the store's features cost. Store, raw and bare alternate for
``rounds`` rounds; the table gives medians, with the store's slowest and fastest round. It
runs on uvloop, as ``segmentstore serve`` does (``--loop asyncio`` for the standard loop). The
machines are noisy; compare ratios, not absolutes.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from segmentstore.bench.bare_path import run_bare_path
from segmentstore.bench.report import percentile, print_table, run_loop, write_json
from segmentstore.store import SegmentStore

MiB = 1 << 20


def raw_grouped_fdatasync(directory: Path, size: int, group: int, seconds: float) -> float:
    """Records per second of ``group`` records written together and fdatasynced once."""
    payload = os.urandom(size) * group
    path = directory / "raw.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        records = 0
        written = 0
        start = time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            os.write(fd, payload)
            os.fdatasync(fd)
            records += group
            written += len(payload)
            if written > 1 << 30:  # keep the file (and the page cache) bounded
                os.ftruncate(fd, 0)
                os.lseek(fd, 0, os.SEEK_SET)
                written = 0
        return records / elapsed
    finally:
        os.close(fd)
        path.unlink()


async def run_store(
    directory: Path,
    size: int,
    writers: int,
    segments: int,
    seconds: float,
    tier1: dict[str, Any] | None = None,
) -> dict[str, float]:
    """Appends/s and latencies of a store over ``directory`` (``tier1``: that section)."""
    payload = os.urandom(size)
    latencies: list[float] = []
    count = 0
    async with SegmentStore.open(directory / "store", tier1=tier1 or {}) as store:
        names = [f"bench/segment-{i}" for i in range(segments)]
        for name in names:
            await store.create_segment(name)
        stop_at = 0.0
        measuring = False

        async def writer(index: int) -> None:
            nonlocal count
            name = names[index % segments]
            clock = time.perf_counter
            while True:
                begun = clock()
                if begun >= stop_at:
                    return
                await store.append(name, payload)
                if measuring:
                    latencies.append(clock() - begun)
                    count += 1

        stop_at = time.perf_counter() + min(1.0, seconds / 4)  # warm-up
        await asyncio.gather(*(writer(i) for i in range(writers)))
        measuring = True
        started = time.perf_counter()
        stop_at = started + seconds
        await asyncio.gather(*(writer(i) for i in range(writers)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "appends_per_s": count / elapsed,
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
    }


def run(
    sizes: list[int],
    writer_counts: list[int],
    seconds: float,
    segments: int,
    directory: str | None,
    json_path: str | None,
    loop: str = "uvloop",
    rounds: int = 3,
) -> list[dict[str, Any]]:
    base = Path(tempfile.mkdtemp(prefix="bench-append-", dir=directory))
    rows: list[dict[str, Any]] = []
    try:
        for size in sizes:
            for writers in writer_counts:
                # The raw loop groups as the store can: as many records as there are writers,
                # up to 4 MiB per fdatasync.
                group = max(1, min(writers, (4 * MiB) // size))
                stores: list[dict[str, float]] = []
                raws: list[float] = []
                bares: list[float] = []
                # Store and raw alternate, round after round: the machines drift by tens of
                # percent over minutes, and each figure is the median of its rounds.
                for round_ in range(1, rounds + 1):
                    case = base / f"{size}-{writers}-{round_}"
                    case.mkdir()
                    label = f"... {size} B x {writers} writers, round {round_}/{rounds}"
                    print(f"{label}: store", flush=True)
                    stores.append(
                        run_loop(
                            run_store(case, size, writers, min(segments, writers), seconds), loop
                        )
                    )
                    print(f"{label}: raw, {group} per fdatasync", flush=True)
                    raws.append(raw_grouped_fdatasync(case, size, group, seconds))
                    print(f"{label}: bare append path", flush=True)
                    bares.append(run_loop(run_bare_path(case, size, writers, seconds), loop))
                    shutil.rmtree(case)
                appends = statistics.median(s["appends_per_s"] for s in stores)
                raw = statistics.median(raws)
                bare = statistics.median(bares)
                rows.append(
                    {
                        "size_bytes": size,
                        "writers": writers,
                        "appends_per_s": appends,
                        "appends_per_s_min": min(s["appends_per_s"] for s in stores),
                        "appends_per_s_max": max(s["appends_per_s"] for s in stores),
                        "mb_per_s": appends * size / 1e6,
                        "p50_ms": statistics.median(s["p50_ms"] for s in stores),
                        "p99_ms": statistics.median(s["p99_ms"] for s in stores),
                        "raw_group": group,
                        "raw_records_per_s": raw,
                        "raw_mb_per_s": raw * size / 1e6,
                        "ratio": appends / raw,
                        "bare_appends_per_s": bare,
                        "bare_ratio": appends / bare,
                    }
                )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"event loop: {loop}")
    print_table(
        rows,
        [
            ("size_bytes", "size", "d"),
            ("writers", "writers", "d"),
            ("appends_per_s", "appends/s", ",.0f"),
            ("appends_per_s_min", "min", ",.0f"),
            ("appends_per_s_max", "max", ",.0f"),
            ("mb_per_s", "MB/s", ".1f"),
            ("p50_ms", "p50 ms", ".2f"),
            ("p99_ms", "p99 ms", ".2f"),
            ("raw_group", "raw group", "d"),
            ("raw_records_per_s", "raw rec/s", ",.0f"),
            ("raw_mb_per_s", "raw MB/s", ".1f"),
            ("ratio", "store/raw", ".2f"),
            ("bare_appends_per_s", "bare/s", ",.0f"),
            ("bare_ratio", "store/bare", ".2f"),
        ],
    )
    write_json(json_path, "append", rows)
    return rows
