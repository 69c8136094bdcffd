"""``segmentstore bench spark``: how fast the data source scans events in Tier 2, against plain
pyarrow reading and decoding the same chunks in one process, in the same run (and, with
``standalone``, the data source on a Spark standalone cluster started on this machine too, whose
executors are separate JVMs with their own Python workers, each reading Tier 2 on its own).

The data is written straight into a local Tier 2 as the Storage Writer lays it out
(:mod:`segmentstore.jobs.synthetic`: chunks that cut events, time index sidecars, manifests). The
baseline reads every chunk whole with ``pyarrow.fs`` and decodes it with the same framing code into
the same Arrow batches, one process, no Spark. The data source runs on a local session; Spark's
scan is timed as a ``noop`` write (every row of every column is produced, nothing is stored),
after ``warmups`` untimed scans: the JVM needs a few scans of this size to compile its hot
paths (the first is 2-3 times slower than the fifth), and a long scan runs compiled. Both
report the median of ``runs`` timed scans. The data source is timed with its checksum checks
on (the default) and off (``verify_checksums=false``), the two scans taking turns in one
session, so that the cost of verifying every block is a ratio within the run.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import pyarrow.fs as pafs

from segmentstore.jobs.framing import events_batch, walk_events
from segmentstore.jobs.synthetic import framed_appends, write_segment
from segmentstore.tier2 import SegmentManifest, open_chunk_storage

MiB = 1 << 20


def write_data(
    uri: str, segments: int, segment_bytes: int, event_bytes: int, chunk_bytes: int
) -> tuple[list[SegmentManifest], int]:
    """Event segments ``bench/<i>`` in Tier 2 at ``uri``; their manifests and event count."""
    storage = open_chunk_storage(uri)
    per_segment = max(1, segment_bytes // (event_bytes + 8))
    try:
        manifests = [
            write_segment(
                storage,
                f"bench/{i}",
                framed_appends(i, per_segment, event_bytes, max(1, 4096 // (event_bytes + 8))),
                chunk_bytes=chunk_bytes,
            )
            for i in range(segments)
        ]
        return manifests, per_segment * segments
    finally:
        storage.close()


def pyarrow_scan(uri: str, manifests: list[SegmentManifest]) -> int:
    """Read every chunk whole with pyarrow and decode its events; how many there were."""
    filesystem, root = pafs.FileSystem.from_uri(uri)
    events = 0
    for manifest in manifests:
        carry = b""
        position = manifest.start_offset
        for chunk in manifest.chunks:
            with filesystem.open_input_file(f"{root}/{chunk.key}") as file:
                data = file.read()
            if carry:
                data = carry + data
            walk = walk_events(data, manifest.name, position)
            events += events_batch(data, walk, manifest.name, position, chunk.key).num_rows
            carry = data[walk.whole :]
            position += walk.whole
    return events


@dataclass(frozen=True)
class _Master:
    label: str
    url: str | None  # None: a standalone cluster started for the case


def _spark_scan(
    master: _Master,
    uri: str,
    expected: int,
    runs: int,
    warmups: int,
    say: Callable[[str], None],
    environ: Mapping[str, str],
) -> tuple[list[float], list[float]]:
    """The timed ``noop`` scans of the data source on ``master``, with checksums verified and
    not, taking turns; one session, stopped after."""
    from segmentstore.jobs.session import start_session  # only now: the baseline never loads it
    from segmentstore.jobs.standalone import StandaloneCluster

    with contextlib.ExitStack() as stack:
        url, conf = master.url, {}
        if url is None:
            say("starting a standalone cluster (a Master and a 2-core Worker on 127.0.0.1) ...")
            begun = time.perf_counter()
            cluster = stack.enter_context(StandaloneCluster(environ, worker_cores=2))
            url, conf = cluster.master_url, cluster.session_conf()
            say(f"  {url} in {time.perf_counter() - begun:.1f} s")
        say(f"starting Spark ({master.label}) ...")
        begun = time.perf_counter()
        spark = start_session(url, "segmentstore-bench", conf)
        stack.callback(spark.stop)
        say(f"  {time.perf_counter() - begun:.1f} s")
        events = spark.read.format("segmentstore").options(tier2=uri, segments="bench/*").load()
        begun = time.perf_counter()
        counted = events.count()
        assert counted == expected, f"the data source returned {counted} of {expected} events"
        first = time.perf_counter() - begun
        say(f"  first query (a count; it starts the Python workers): {first:.1f} s")
        noop = events.write.format("noop").mode("overwrite")
        unverified = (
            spark.read.format("segmentstore")
            .options(tier2=uri, segments="bench/*", verify_checksums="false")
            .load()
            .write.format("noop")
            .mode("overwrite")
        )
        say(f"data source: {warmups} untimed + {runs} timed scans, checksums on and off ...")
        warm = _timed(noop.save, warmups) + _timed(unverified.save, 1)
        say(f"  untimed: {', '.join(f'{s:.2f} s' for s in warm)}")
        verified_s, unverified_s = [], []
        for _ in range(runs):
            verified_s += _timed(noop.save, 1)
            unverified_s += _timed(unverified.save, 1)
        say(f"  verified: {', '.join(f'{s:.2f} s' for s in verified_s)}")
        say(f"  not verified: {', '.join(f'{s:.2f} s' for s in unverified_s)}")
        return verified_s, unverified_s


def _timed(scan: Callable[[], Any], runs: int) -> list[float]:
    seconds = []
    for _ in range(runs):
        begun = time.perf_counter()
        scan()
        seconds.append(time.perf_counter() - begun)
    return seconds


def run(
    *,
    segments: int = 4,
    segment_mib: int = 128,
    event_bytes: int = 1024,
    chunk_mib: int = 64,
    runs: int = 5,
    warmups: int = 3,
    master: str = "local[2]",
    standalone: bool = False,
    environ: Mapping[str, str] | None = None,
    directory: str | None = None,
    out: TextIO | None = None,
) -> list[dict[str, Any]]:
    """The measurements as table rows (``events_per_s``, ``ratio`` to the baseline): pyarrow,
    the data source on ``master``, and with ``standalone`` the data source on a Spark
    standalone cluster started on this machine (:mod:`segmentstore.jobs.standalone`) with
    the daemons' environment ``environ``."""
    out = out or sys.stderr
    masters = [_Master(master, master)]
    if standalone:
        masters.append(_Master("standalone cluster", None))

    def say(text: str) -> None:
        print(text, file=out, flush=True)

    with tempfile.TemporaryDirectory(dir=directory, prefix="bench-spark-") as scratch:
        uri = Path(scratch, "tier2").resolve().as_uri()
        total_bytes = segments * segment_mib * MiB
        say(f"writing {total_bytes // MiB} MiB of {event_bytes}-byte events into {uri} ...")
        begun = time.perf_counter()
        manifests, expected = write_data(
            uri, segments, segment_mib * MiB, event_bytes, chunk_mib * MiB
        )
        chunks = sum(len(m.chunks) for m in manifests)
        say(f"  {expected} events in {chunks} chunks, {time.perf_counter() - begun:.1f} s")

        say(f"pyarrow, one process: 1 untimed + {runs} timed scans ...")
        found = pyarrow_scan(uri, manifests)
        assert found == expected, f"the baseline decoded {found} of {expected} events"
        baseline = _timed(lambda: pyarrow_scan(uri, manifests), runs)
        say(f"  {', '.join(f'{s:.2f} s' for s in baseline)}")

        cases = [("pyarrow, 1 process", baseline)]
        for case_master in masters:
            verified, unverified = _spark_scan(
                case_master, uri, expected, runs, warmups, say, environ or {}
            )
            cases.append((f"data source, {case_master.label}", verified))
            cases.append((f"data source, {case_master.label}, checksums off", unverified))

    base_rate = expected / statistics.median(baseline)
    rows = []
    for case, seconds in cases:
        median = statistics.median(seconds)
        rows.append(
            {
                "case": case,
                "events": expected,
                "mib": round(total_bytes / MiB),
                "seconds": median,
                "events_per_s": expected / median,
                "mib_per_s": total_bytes / MiB / median,
                "ratio": expected / median / base_rate,
            }
        )
    return rows
