"""``segmentstore bench ...``: every benchmark, each against a baseline measured in the same run."""

from __future__ import annotations

import argparse
import json
import logging
import os
from typing import Any

from segmentstore.cli.spark import use_this_python_for_spark_workers


def sizes(text: str) -> list[int]:
    """``1k,1m`` -> ``[1024, 1048576]``."""
    units = {"k": 1 << 10, "m": 1 << 20}
    found = []
    for item in text.split(","):
        item = item.strip().lower()
        factor = units.get(item[-1:], 1)
        found.append(int(item[:-1] if factor > 1 else item) * factor)
    return found


def _directory(text: str) -> str:
    """``--dir``: made if missing, as a user naming a fresh folder expects."""
    try:
        os.makedirs(text, exist_ok=True)
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot use {text!r}: {e.strerror}") from e
    return text


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def add_command(commands: Any) -> None:
    bench = commands.add_parser("bench", help="benchmarks, each against a baseline")
    benches = bench.add_subparsers(dest="bench", required=True)
    append = benches.add_parser("append", help="durable appends vs raw grouped fdatasync")
    append.add_argument("--sizes", type=sizes, default=[1024, 1 << 20], help="e.g. 1k,1m")
    append.add_argument("--writers", type=_ints, default=[1, 256], help="e.g. 1,256")
    append.add_argument("--seconds", type=float, default=5.0, help="per case")
    append.add_argument("--segments", type=int, default=16, help="writers share these")
    append.add_argument(
        "--dir", type=_directory, default=None, help="where to write (default: temp dir)"
    )
    append.add_argument("--json", default=None, help="also write the results here")
    append.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    append.add_argument(
        "--rounds", type=int, default=3, help="store and raw alternate; medians are reported"
    )
    append.set_defaults(run=_append)
    writer = benches.add_parser("writer", help="sustained ingest flushing to Tier 2 vs raw")
    writer.add_argument("--seconds", type=float, default=20.0)
    writer.add_argument("--writers", type=int, default=16)
    writer.add_argument("--segments", type=int, default=8)
    writer.add_argument("--size", type=sizes, default=[64 * 1024], help="append size, e.g. 64k")
    writer.add_argument("--flush-threshold", type=sizes, default=[4 << 20], help="e.g. 4m")
    writer.add_argument(
        "--dir", type=_directory, default=None, help="where to write (default: temp dir)"
    )
    writer.add_argument("--json", default=None, help="also write the results here")
    writer.set_defaults(run=_writer)
    read = benches.add_parser("read", help="cached reads vs a plain copy; tail-read latency")
    read.add_argument("--seconds", type=float, default=3.0, help="per read size")
    read.add_argument("--appends", type=int, default=1000, help="per tail-latency case")
    read.add_argument(
        "--dir", type=_directory, default=None, help="where to write (default: temp dir)"
    )
    read.add_argument("--json", default=None, help="also write the results here")
    read.set_defaults(run=_read)
    offset_at = benches.add_parser(
        "offset-at", help="time index memory and :offsetAt latency vs get_info / a sidecar read"
    )
    offset_at.add_argument("--mib", type=int, default=256, help="data written, in MiB")
    offset_at.add_argument("--json", default=None, help="also write the results here")
    offset_at.set_defaults(run=_offset_at)
    http = benches.add_parser(
        "http", help="the HTTP API vs bare FastAPI and ASGI endpoints on the same server"
    )
    http.add_argument("--seconds", type=float, default=6.0, help="per case and server")
    http.add_argument(
        "--cases",
        type=lambda text: text.split(","),
        default=None,
        help="e.g. append-1k,append-1m,read-1m,events,events-1000 (default: all)",
    )
    http.add_argument(
        "--loadgen",
        choices=["auto", "wrk", "python"],
        default="auto",
        help="wrk if installed (apt-get install wrk), else a multi-process asyncio generator",
    )
    http.add_argument("--processes", type=int, default=2, help="for --loadgen python")
    http.add_argument(
        "--rounds", type=int, default=3, help="the whole set again, the servers' order rotated"
    )
    http.add_argument(
        "--dir", type=_directory, default=None, help="where the store writes (default: temp dir)"
    )
    http.add_argument("--json", default=None, help="also write the results here")
    http.add_argument(
        "--workers",
        type=_ints,
        default=None,
        help="e.g. 1,2: instead, 1 KiB appends through the node's port against a node of each"
        " count of worker processes, as ratios to 1 worker",
    )
    http.set_defaults(run=_http)
    tier1 = benches.add_parser(
        "tier1", help="appends on the JetStream Tier 1 (3 local nodes) vs the local Tier 1"
    )
    tier1.add_argument("--seconds", type=float, default=5.0, help="per case and Tier 1")
    tier1.add_argument("--rounds", type=int, default=3, help="local and JetStream alternate")
    tier1.add_argument("--segments", type=int, default=16, help="writers share these")
    tier1.add_argument(
        "--dir", type=_directory, default=None, help="where to write (default: temp dir)"
    )
    tier1.add_argument("--json", default=None, help="also write the results here")
    tier1.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    tier1.add_argument("--replicas", type=int, default=3, help="copies of each stream")
    tier1.set_defaults(run=_tier1)
    cluster = benches.add_parser(
        "cluster", help="cluster mode: takeover after SIGKILL, forwarding, a second node"
    )
    cluster.add_argument("--kills", type=int, default=10, help="SIGKILLs to time takeovers")
    cluster.add_argument("--seconds", type=float, default=5.0, help="per throughput case")
    cluster.add_argument("--tasks", type=int, default=32, help="concurrent appenders")
    cluster.add_argument("--lease-ms", type=int, default=5000, help="the nodes' lease")
    cluster.add_argument(
        "--dir", type=_directory, default=None, help="where to run (default: temp dir)"
    )
    cluster.add_argument("--json", default=None, help="also write the results here")
    cluster.set_defaults(run=_cluster)
    client = benches.add_parser(
        "client", help="the Python client and EventWriter vs wrk on the same server"
    )
    client.add_argument("--seconds", type=float, default=5.0, help="per case")
    client.add_argument(
        "--loadgen",
        choices=["auto", "wrk", "python"],
        default="auto",
        help="the baseline: wrk if installed, else a multi-process asyncio generator",
    )
    client.add_argument("--processes", type=int, default=2, help="for --loadgen python")
    client.add_argument(
        "--loop", choices=["asyncio", "uvloop"], default="asyncio", help="the client's loop"
    )
    client.add_argument(
        "--dir", type=_directory, default=None, help="where the store writes (default: temp dir)"
    )
    client.add_argument("--json", default=None, help="also write the results here")
    client.add_argument(
        "--workers",
        type=_ints,
        default=None,
        help="e.g. 1,2: instead, the routing client and the EventWriter against a node of each"
        " count of worker processes, as ratios to 1 worker",
    )
    client.add_argument(
        "--rounds", type=int, default=3, help="with --workers: the loads again, nodes rotated"
    )
    client.set_defaults(run=_client)
    segments = benches.add_parser(
        "segments", help="what a node pays per segment, for many small segments"
    )
    segments.add_argument(
        "--segments", type=_ints, default=[10_000, 100_000, 1_000_000], help="e.g. 10000,100000"
    )
    segments.add_argument(
        "--dir", type=_directory, default=None, help="where the nodes write (default: temp dir)"
    )
    segments.add_argument("--json", default=None, help="also write the results here")
    segments.add_argument(
        "--settings",
        type=json.loads,
        default=None,
        help='JSON settings over the defaults, e.g. \'{"metadata": {"idle_eviction_ms": 2000}}\'',
    )
    segments.set_defaults(run=_segments)
    spark = benches.add_parser("spark", help="the Spark data source vs pyarrow in one process")
    spark.add_argument("--segments", type=int, default=4, help="event segments to scan")
    spark.add_argument("--segment-mib", type=int, default=128, help="MiB of events per segment")
    spark.add_argument("--event-bytes", type=int, default=1024, help="payload bytes per event")
    spark.add_argument(
        "--chunk-mib", type=int, default=64, help="Tier 2 chunk size (the writer's default)"
    )
    spark.add_argument("--runs", type=int, default=5, help="timed scans per case (median)")
    spark.add_argument("--warmups", type=int, default=3, help="untimed Spark scans first")
    spark.add_argument("--master", default="local[2]", help="Spark master URL")
    spark.add_argument(
        "--standalone",
        action="store_true",
        help="also scan on a standalone cluster started on 127.0.0.1 (same data, same run)",
    )
    spark.add_argument(
        "--dir", type=_directory, default=None, help="where Tier 2 is written (default: temp dir)"
    )
    spark.add_argument("--json", default=None, help="also write the results here")
    spark.set_defaults(run=_spark)


def _append(args: argparse.Namespace) -> int:
    from segmentstore.bench import append

    append.run(
        args.sizes,
        args.writers,
        args.seconds,
        args.segments,
        args.dir,
        args.json,
        args.loop,
        args.rounds,
    )
    return 0


def _tier1(args: argparse.Namespace) -> int:
    from segmentstore.bench import tier1

    tier1.run(
        args.seconds, args.rounds, args.segments, args.dir, args.json, args.loop, args.replicas
    )
    return 0


def _cluster(args: argparse.Namespace) -> int:
    from segmentstore.bench import cluster

    cluster.run(
        args.kills, args.seconds, args.tasks, args.lease_ms, args.dir, args.json, os.environ
    )
    return 0


def _writer(args: argparse.Namespace) -> int:
    from segmentstore.bench import writer

    writer.run(
        args.seconds,
        args.writers,
        args.segments,
        args.size[0],
        args.flush_threshold[0],
        args.dir,
        args.json,
    )
    return 0


def _read(args: argparse.Namespace) -> int:
    from segmentstore.bench import read

    read.run(args.seconds, args.appends, args.dir, args.json)
    return 0


def _segments(args: argparse.Namespace) -> int:
    import sys

    from segmentstore.bench import segments

    return segments.run(args.segments, args.dir, args.json, sys.stdout, args.settings)


def _offset_at(args: argparse.Namespace) -> int:
    from segmentstore.bench import offset_at

    offset_at.run(args.mib, args.json)
    return 0


def _http(args: argparse.Namespace) -> int:
    if args.workers is not None:
        return _workers("http", args, "uvloop")
    from segmentstore.bench import http

    http.run(
        args.seconds,
        args.cases,
        args.loadgen,
        args.processes,
        args.dir,
        args.json,
        os.environ,
        rounds=args.rounds,
    )
    return 0


def _workers(kind: str, args: argparse.Namespace, loop: str) -> int:
    from segmentstore.bench import workers

    workers.run(
        kind,
        args.workers,
        args.seconds,
        args.rounds,
        args.loadgen,
        args.processes,
        loop,
        args.dir,
        args.json,
        os.environ,
    )
    return 0


def _client(args: argparse.Namespace) -> int:
    if args.workers is not None:
        return _workers("client", args, args.loop)
    from segmentstore.bench import client

    client.run(
        args.seconds, args.loadgen, args.processes, args.loop, args.dir, args.json, os.environ
    )
    return 0


def _spark(args: argparse.Namespace) -> int:
    use_this_python_for_spark_workers()
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO lines say nothing here
    from segmentstore.bench import spark as spark_bench  # lazily, like every Spark import
    from segmentstore.bench.report import print_table, write_json

    rows = spark_bench.run(
        segments=args.segments,
        segment_mib=args.segment_mib,
        event_bytes=args.event_bytes,
        chunk_mib=args.chunk_mib,
        runs=args.runs,
        warmups=args.warmups,
        master=args.master,
        standalone=args.standalone,
        environ=os.environ,
        directory=args.dir,
    )
    print_table(
        rows,
        [
            ("case", "case", ""),
            ("events", "events", "d"),
            ("mib", "MiB", "d"),
            ("seconds", "seconds", ".2f"),
            ("events_per_s", "events/s", ",.0f"),
            ("mib_per_s", "MiB/s", ".0f"),
            ("ratio", "ratio", ".2f"),
        ],
    )
    write_json(args.json, "spark", rows)
    return 0
