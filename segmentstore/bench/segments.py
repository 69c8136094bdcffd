"""``segmentstore bench segments``: what a node pays per segment, for many small segments.

For each size (``--segments 10000,100000,1000000``), a node with default settings (a data
directory of its own, file Tier 2) creates that many segments through the embedded API, each
with one 100-byte append, 512 at a time; then the bench waits until they have all gone idle and
left memory, and measures: the creation rate, the node's resident memory after eviction, the
last checkpoint's size, the Tier 1 bytes written and the Tier 2 objects and bytes per segment,
the time to list a 100-segment prefix over HTTP, and the Tier 2 objects read to plan a Spark
read of that prefix; then it kills the node with SIGKILL and times its recovery, three times
(the median is the figure: one recovery of tens of milliseconds varies by as much between
runs). Each figure is also given as a ratio to the smallest size's, measured in the same run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from segmentstore.bench.counting_storage import CountingStorage
from segmentstore.bench.segments_node import segment_name
from segmentstore.loopback import free_port

PREFIX_SIZE = 100  # segments under the listed prefix: bench/seg-0000100 .. bench/seg-0000199
PREFIX = segment_name(PREFIX_SIZE)[:-2]
IDLE_TIMEOUT_S = 1800.0
RECOVERIES = 3  # each size's recovery is the median of this many


@dataclass
class SegmentsResult:
    segments: int
    creation_per_s: float
    rss_after_eviction_mib: float
    recovery_s: float
    checkpoint_bytes: int
    tier1_bytes_per_segment: float
    tier2_objects_per_segment: float
    tier2_bytes_per_segment: float
    tier2_disk_bytes_per_segment: float
    list_prefix_ms: float
    spark_plan_objects_read: int
    spark_plan_selected_objects: int


class _Node:
    """The measured node: a child process and the JSON lines it writes."""

    def __init__(self, data_dir: Path, create: int, settings: dict[str, Any]) -> None:
        self.port = free_port()
        arguments = [str(data_dir), str(self.port), "--settings", json.dumps(settings)]
        if create:
            arguments += ["--create", str(create)]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "segmentstore.bench.segments_node", *arguments],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the node exited ({self.process.wait()}) before it reported")
        found: dict[str, Any] = json.loads(line)
        return found

    def status(self) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write("status\n")
        self.process.stdin.flush()
        while "status" not in (answer := self.read()):
            pass
        status: dict[str, Any] = answer["status"]
        return status

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()


def run_size(
    count: int, base: Path, out: IO[str], settings: dict[str, Any] | None = None
) -> SegmentsResult:
    """Measure ``count`` segments on a node with ``settings`` over the defaults (none: the
    defaults themselves, as the figures are meant)."""
    settings = settings or {}
    data_dir = base / f"segments-{count}"
    shutil.rmtree(data_dir, ignore_errors=True)
    node = _Node(data_dir, count, settings)
    try:
        node.read()  # recovered (an empty store)
        while not (progress := node.read()).get("done"):
            _say(out, f"  {count:,}: created {progress['created']:,} in {progress['seconds']} s")
        creation_per_s = count / progress["seconds"]
        _say(out, f"  {count:,}: created in {progress['seconds']} s ({creation_per_s:,.0f}/s)")
        status = _wait_for_eviction(node, count, out)
        time.sleep(2)  # let memory settle after the last eviction round
        rss = node.rss_mib()
        list_ms = _list_prefix_ms(node.port)
        tier2 = _tier2_footprint(data_dir / "tier2")
        plan_reads, selected = _spark_plan_reads(data_dir / "tier2")
    finally:
        node.kill()
    recovery_s = _recovery_s(data_dir, settings, out, count)
    shutil.rmtree(data_dir, ignore_errors=True)
    return SegmentsResult(
        segments=count,
        creation_per_s=round(creation_per_s),
        rss_after_eviction_mib=round(rss, 1),
        recovery_s=recovery_s,
        checkpoint_bytes=status["checkpoint_bytes"],
        tier1_bytes_per_segment=round(status["tier1_written_bytes"] / count, 1),
        tier2_objects_per_segment=round(tier2[0] / count, 3),
        tier2_bytes_per_segment=round(tier2[1] / count, 1),
        tier2_disk_bytes_per_segment=round(tier2[2] / count, 1),
        list_prefix_ms=list_ms,
        spark_plan_objects_read=plan_reads,
        spark_plan_selected_objects=selected,
    )


def _wait_for_eviction(node: _Node, count: int, out: IO[str]) -> dict[str, Any]:
    """Until every segment is in Tier 2 and none is in memory (their idle time ran out)."""
    deadline = time.monotonic() + IDLE_TIMEOUT_S
    while True:
        status = node.status()
        if status["active"] == 0 and status["lag_bytes"] == 0:
            return status
        if time.monotonic() > deadline:
            raise RuntimeError(f"segments never all left memory: {status}")
        _say(out, f"  {count:,}: waiting for idle eviction: {status['active']:,} active, "
                  f"{status['lag_bytes']:,} bytes not in Tier 2")  # fmt: skip
        time.sleep(5)


def _list_prefix_ms(port: int) -> float:
    prefix = PREFIX
    times = []
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
        for _ in range(5):
            started = time.perf_counter()
            response = http.get("/v1/segments", params={"prefix": prefix, "limit": 1000})
            times.append(time.perf_counter() - started)
            response.raise_for_status()
            names = response.json()["segments"]
            if len(names) != PREFIX_SIZE:
                raise RuntimeError(f"listing {prefix!r} gave {len(names)} names, not 100")
    return round(statistics.median(times) * 1000, 2)


def _tier2_footprint(root: Path) -> tuple[int, int, int]:
    """Objects, their bytes, and the disk they take (blocks), the backend's own files aside."""
    objects = size = disk = 0
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = [d for d in subdirectories if not d.startswith(".")]
        for name in files:
            if name.startswith("."):
                continue
            stat = os.stat(os.path.join(directory, name))
            objects += 1
            size += stat.st_size
            disk += stat.st_blocks * 512
    return objects, size, disk


def _spark_plan_reads(root: Path) -> tuple[int, int]:
    """Tier 2 objects read (and listings made) to plan a Spark read of the 100-segment prefix,
    besides the selected segments' own objects; and how many of those were read."""
    from segmentstore.jobs.options import ScanOptions
    from segmentstore.jobs.planner import plan_scan
    from segmentstore.tier2 import chunks_of, manifest_key, open_chunk_storage

    prefix = PREFIX
    storage = CountingStorage(open_chunk_storage(root.as_uri()))
    try:
        options = ScanOptions.parse({"tier2": root.as_uri(), "segments": prefix + "*"})
        plan = plan_scan(options, storage)
    finally:
        storage.close()
    names = {s.name for s in plan.segments}
    if len(names) != PREFIX_SIZE:
        raise RuntimeError(f"the plan selected {len(names)} segments, not {PREFIX_SIZE}")
    own = tuple(manifest_key(n) for n in names) + tuple(chunks_of(n) for n in names)
    others = [key for key in storage.touched if not key.startswith(own)]
    return len(others), len(storage.touched) - len(others)


def _recovery_s(data_dir: Path, settings: dict[str, Any], out: IO[str], count: int) -> float:
    """The median of ``RECOVERIES`` recoveries, each of a node killed with SIGKILL. A recovery
    costs little CPU and waits for a few syncs (each container's first checkpoint), so the
    disk is let settle first: the writeback of what this size and the one before it wrote
    must not be timed as this size's recovery."""
    os.sync()
    times = []
    for _ in range(RECOVERIES):
        node = _Node(data_dir, 0, settings)
        try:
            times.append(float(node.read()["recovered_s"]))
        finally:
            node.kill()
    _say(out, f"  {count:,}: recovered after SIGKILL in {', '.join(f'{t} s' for t in times)}")
    return statistics.median(times)


def _say(out: IO[str], text: str) -> None:
    out.write(text + "\n")
    out.flush()


_ROWS = (
    ("creation_per_s", "segments created per s (one 100 B append each)"),
    ("rss_after_eviction_mib", "node memory after idle eviction (MiB)"),
    ("recovery_s", "recovery after SIGKILL (s)"),
    ("checkpoint_bytes", "last checkpoint, all containers (bytes)"),
    ("tier1_bytes_per_segment", "Tier 1 bytes written per segment"),
    ("tier2_objects_per_segment", "Tier 2 objects per segment"),
    ("tier2_bytes_per_segment", "Tier 2 bytes per segment"),
    ("tier2_disk_bytes_per_segment", "Tier 2 disk blocks per segment (bytes)"),
    ("list_prefix_ms", "list a 100-segment prefix over HTTP (ms)"),
    ("spark_plan_objects_read", "objects a Spark plan reads besides the segments' own"),
)


def report(results: list[SegmentsResult], out: IO[str]) -> None:
    base = results[0]
    header = "".join(f"{r.segments:>22,}" for r in results)
    _say(out, f"{'':<54}{header}")
    for field, label in _ROWS:
        cells = []
        for r in results:
            value = getattr(r, field)
            reference = getattr(base, field)
            ratio = f"({value / reference:.2f}x)" if reference and r is not base else ""
            cells.append(f"{value:>13,} {ratio:>8}")
        _say(out, f"{label:<54}{''.join(cells)}")


def run(
    counts: list[int],
    directory: str | None,
    json_path: str | None,
    out: IO[str],
    settings: dict[str, Any] | None = None,
) -> int:
    counts = sorted(counts)
    if settings:
        _say(out, f"settings over the defaults: {json.dumps(settings)}")
    with tempfile.TemporaryDirectory(dir=directory, prefix="bench-segments-") as base:
        results = []
        for count in counts:
            _say(out, f"{count:,} segments:")
            results.append(run_size(count, Path(base), out, settings))
    report(results, out)
    if json_path is not None:
        document = {"settings": settings or {}, "results": [asdict(r) for r in results]}
        Path(json_path).write_text(json.dumps(document, indent=2) + "\n")
    return 0
