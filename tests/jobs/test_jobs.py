"""The jobs of ``segmentstore spark``: stats, export to Parquet, key-based compaction; and the
command line running one of them on its own local Spark."""

from __future__ import annotations

import io
import json
import os
import random
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from store_checks import flush

from segmentstore import SegmentStore
from segmentstore.jobs.compact import compact_events
from segmentstore.jobs.errors import OutputExistsError
from segmentstore.jobs.export import export_events
from segmentstore.jobs.failures import one_line
from segmentstore.jobs.progress import Progress
from segmentstore.jobs.stats import segment_stats
from segmentstore.tier2 import ManifestStore, open_chunk_storage

from .conftest import FAST_WRITER, Event
from .test_datasource import random_events, store_events

pytestmark = [pytest.mark.spark, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]


def keyed(key: bytes, value: bytes) -> bytes:
    return struct.pack(">H", len(key)) + key + value


async def write(tmp_path: Path, segments: dict[str, list[bytes]]) -> tuple[str, list[Event]]:
    """The segments' events appended by a real store and flushed; its Tier 2 URI and the
    events as the store reads them back."""
    events: list[Event] = []
    async with SegmentStore.open(tmp_path / "data", storage_writer=FAST_WRITER) as store:
        for name, payloads in segments.items():
            await store.create_segment(name)
            for i in range(0, len(payloads), 7):
                await store.append_events(name, payloads[i : i + 7])
        await flush(store)
        for name in segments:
            events += await store_events(store, name)
    return (tmp_path / "data" / "tier2").resolve().as_uri(), events


async def test_stats_counts_events_bytes_and_offsets_per_segment(
    spark: Any, tmp_path: Path
) -> None:
    rng = random.Random(31)
    uri, events = await write(
        tmp_path, {f"stats/{i}": random_events(rng, 60 + 20 * i) for i in range(3)}
    )
    out = io.StringIO()
    rows = segment_stats(spark, {"tier2": uri, "segments": "stats/*"}, Progress(spark, out))
    assert [r["segment"] for r in rows] == ["stats/0", "stats/1", "stats/2"]
    for row in rows:
        mine = [e for e in events if e[0] == row["segment"]]
        assert row["events"] == len(mine)
        assert row["bytes"] == sum(len(e[2]) for e in mine)
        assert (row["first_offset"], row["last_offset"]) == (mine[0][1], mine[-1][1])
        assert row["scan_stop"] == row["storage_length"] == mine[-1][1] + 8 + len(mine[-1][2])
        assert (row["lost_chunks"], row["lost_bytes"]) == (0, 0)
    assert "plan (read manifests): done in" in out.getvalue()


async def test_stats_reports_lost_chunks_when_loss_is_allowed(spark: Any, tmp_path: Path) -> None:
    rng = random.Random(32)
    uri, _ = await write(tmp_path, {"lossy/0": random_events(rng, 150)})
    storage = open_chunk_storage(uri)
    try:
        loaded = ManifestStore(storage).load("lossy/0")
        assert loaded is not None
        lost = loaded[0].chunks[-1]
        storage.delete(lost.key)
    finally:
        storage.close()
    options = {"tier2": uri, "segments": "lossy/0", "fail_on_data_loss": "false"}
    [row] = segment_stats(spark, options, Progress(spark, io.StringIO()))
    assert (row["lost_chunks"], row["lost_bytes"]) == (1, lost.length)
    assert row["last_offset"] < lost.start_offset


async def test_export_writes_every_event_to_parquet_by_segment(spark: Any, tmp_path: Path) -> None:
    rng = random.Random(33)
    uri, events = await write(tmp_path, {f"export/{i}": random_events(rng, 40) for i in range(2)})
    output = str(tmp_path / "export")
    summary = export_events(
        spark, {"tier2": uri, "segments": "export/*"}, output, Progress(spark, io.StringIO())
    )
    assert summary["events"] == len(events)
    assert summary["bytes"] == sum(len(e[2]) for e in events)
    back = spark.read.parquet(output).collect()
    assert sorted((r["segment"], r["offset"], bytes(r["event"])) for r in back) == sorted(events)
    # again, onto the output it wrote: refused, naming how to replace it; then replaced
    quiet = Progress(spark, io.StringIO())
    with pytest.raises(OutputExistsError, match=f"the output {output} already exists") as again:
        export_events(spark, {"tier2": uri, "segments": "export/*"}, output, quiet)
    assert "--overwrite" in one_line(again.value)
    assert export_events(
        spark, {"tier2": uri, "segments": "export/0"}, output, quiet, overwrite=True
    )["events"] == len([e for e in events if e[0] == "export/0"])


async def test_compact_keeps_the_last_value_per_key_and_drops_tombstones(
    spark: Any, tmp_path: Path
) -> None:
    rng = random.Random(34)
    segments: dict[str, list[bytes]] = {"compact/0": [], "compact/1": []}
    last: dict[tuple[str, bytes], bytes] = {}
    for _ in range(400):
        name = rng.choice(list(segments))
        key = f"key-{rng.randint(0, 40)}".encode()
        value = b"" if rng.random() < 0.15 else rng.randbytes(rng.randint(1, 300))
        segments[name].append(keyed(key, value))
        last[(name, key)] = value
    segments["compact/1"].append(keyed(b"", b"the empty key"))
    last[("compact/1", b"")] = b"the empty key"
    uri, _ = await write(tmp_path, segments)
    output = str(tmp_path / "compacted")
    summary = compact_events(
        spark, {"tier2": uri, "segments": "compact/*"}, output, Progress(spark, io.StringIO())
    )
    live = {k: v for k, v in last.items() if v}
    assert summary["events"] == sum(len(p) for p in segments.values())
    assert (summary["keys"], summary["kept"]) == (len(last), len(live))
    assert summary["tombstones"] == len(last) - len(live)
    back = spark.read.parquet(output).collect()
    assert {(r["segment"], bytes(r["key"])): bytes(r["value"]) for r in back} == live


async def test_compact_fails_on_an_event_without_a_key(spark: Any, tmp_path: Path) -> None:
    uri, events = await write(tmp_path, {"nokey/0": [keyed(b"k", b"v"), b"\x00\x09short"]})
    with pytest.raises(Exception, match=f"event at offset {events[1][1]} of segment nokey/0"):
        compact_events(
            spark,
            {"tier2": uri, "segments": "nokey/0"},
            str(tmp_path / "out"),
            Progress(spark, io.StringIO()),
        )


def run_cli(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "segmentstore.cli", *command],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.slow
async def test_the_command_line_runs_stats_on_its_own_local_spark(tmp_path: Path) -> None:
    rng = random.Random(35)
    uri, events = await write(tmp_path, {"cli/0": random_events(rng, 50)})
    report = tmp_path / "stats.json"
    process = run_cli("spark", "stats", uri, "--segments", "cli/*", "--json", str(report))
    assert process.returncode == 0, process.stderr
    summary = json.loads(report.read_text())
    assert summary["job"] == "stats" and "benchmark" not in summary
    [row] = summary["results"]
    assert (row["segment"], row["events"]) == ("cli/0", len(events))
    assert re.search(r"scan 1 segments, \d+ partitions: done in", process.stderr)
    assert "cli/0" in process.stdout


@pytest.mark.slow
async def test_a_failed_job_says_the_projects_error_in_one_line(tmp_path: Path) -> None:
    """A chunk shorter than its manifest says fails a task on an executor (its checksummed
    blocks are not all there): the command says so in one line, naming the range, with no
    Python traceback and no Java stack trace around it."""
    rng = random.Random(36)
    uri, _ = await write(tmp_path, {"cli/0": random_events(rng, 300)})
    storage = open_chunk_storage(uri)
    try:
        loaded = ManifestStore(storage).load("cli/0")
        assert loaded is not None and len(loaded[0].chunks) > 2
        chunk = loaded[0].chunks[1]
    finally:
        storage.close()
    os.truncate(Path(uri.removeprefix("file://")) / chunk.key, 100)
    process = run_cli("spark", "stats", uri, "--segments", "cli/*")
    assert process.returncode == 1
    last = process.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"segmentstore spark stats: failed: DataLossError: data loss in segment 'cli/0', "
        f"chunk {chunk.key}: bytes [{chunk.start_offset}, {chunk.end_offset}) are damaged: "
        f"the chunk holds 100 of its {chunk.length} bytes"
    ), process.stderr
    for noise in ("Traceback", 'File "', "\tat ", "PythonException"):
        assert noise not in process.stderr, process.stderr
