"""The command line: the composition root that alone builds settings and the store."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from segmentstore.config import load_settings
from segmentstore.errors import InvalidArgumentError
from segmentstore.settings import Settings

log = logging.getLogger("segmentstore")


def _sizes(text: str) -> list[int]:
    units = {"k": 1 << 10, "m": 1 << 20}
    sizes = []
    for item in text.split(","):
        item = item.strip().lower()
        factor = units.get(item[-1:], 1)
        sizes.append(int(item[:-1] if factor > 1 else item) * factor)
    return sizes


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="segmentstore", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the service (HTTP API on the store)")
    serve.add_argument("--config", type=Path, default=None, help="a TOML or YAML settings file")
    serve.add_argument("--data-dir", type=Path, default=None, help="default ./data")
    serve.add_argument("--host", default=None, help="default 127.0.0.1")
    serve.add_argument("--port", type=int, default=None, help="default 9090")
    serve.add_argument("--containers", type=int, default=None, help="default 4")
    serve.add_argument("--tier2", default=None, help="default file://<data-dir>/tier2")
    serve.add_argument("--tier1", default=None, help="local (the only Tier 1 of this build)")
    serve.add_argument("--nats", default=None, help="JetStream URL (for --tier1 jetstream)")
    serve.add_argument("--print-config", action="store_true", help="print settings and exit")

    tier2 = commands.add_parser("tier2", help="read Tier 2 directly, without the service")
    tier2_commands = tier2.add_subparsers(dest="tier2_command", required=True)
    ls = tier2_commands.add_parser("ls", help="segments with manifests under a Tier 2 URI")
    ls.add_argument("uri", help="file:///path, s3://bucket/prefix, hdfs://host:port/path")
    ls.add_argument("--prefix", default="", help="only names starting with this")
    cat = tier2_commands.add_parser("cat", help="a segment's bytes, read through its manifest")
    cat.add_argument("uri")
    cat.add_argument("name")
    cat.add_argument("--offset", type=int, default=None, help="default: the start offset")
    cat.add_argument("--length", type=int, default=None, help="default: to the storage length")
    for command in (ls, cat):
        command.add_argument(
            "--option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="backend option, e.g. endpoint_url=http://127.0.0.1:9000 (repeatable)",
        )

    bench = commands.add_parser("bench", help="benchmarks, each against a baseline")
    benches = bench.add_subparsers(dest="bench", required=True)
    append = benches.add_parser("append", help="durable appends vs raw grouped fdatasync")
    append.add_argument("--sizes", type=_sizes, default=[1024, 1 << 20], help="e.g. 1k,1m")
    append.add_argument("--writers", type=_ints, default=[1, 256], help="e.g. 1,256")
    append.add_argument("--seconds", type=float, default=5.0, help="per case")
    append.add_argument("--segments", type=int, default=16, help="writers share these")
    append.add_argument("--dir", default=None, help="where to write (default: temp dir)")
    append.add_argument("--json", default=None, help="also write the results here")
    append.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    append.add_argument(
        "--rounds", type=int, default=3, help="store and raw alternate; medians are reported"
    )
    writer = benches.add_parser("writer", help="sustained ingest flushing to Tier 2 vs raw")
    writer.add_argument("--seconds", type=float, default=20.0)
    writer.add_argument("--writers", type=int, default=16)
    writer.add_argument("--segments", type=int, default=8)
    writer.add_argument("--size", type=_sizes, default=[64 * 1024], help="append size, e.g. 64k")
    writer.add_argument("--flush-threshold", type=_sizes, default=[4 << 20], help="e.g. 4m")
    writer.add_argument("--dir", default=None, help="where to write (default: temp dir)")
    writer.add_argument("--json", default=None, help="also write the results here")
    read = benches.add_parser("read", help="cached reads vs a plain copy; tail-read latency")
    read.add_argument("--seconds", type=float, default=3.0, help="per read size")
    read.add_argument("--appends", type=int, default=1000, help="per tail-latency case")
    read.add_argument("--dir", default=None, help="where to write (default: temp dir)")
    read.add_argument("--json", default=None, help="also write the results here")
    offset_at = benches.add_parser(
        "offset-at", help="time index memory and :offsetAt latency vs get_info / a sidecar read"
    )
    offset_at.add_argument("--mib", type=int, default=256, help="data written, in MiB")
    offset_at.add_argument("--json", default=None, help="also write the results here")
    http = benches.add_parser("http", help="the HTTP API vs a bare FastAPI endpoint")
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
    http.add_argument("--dir", default=None, help="where the store writes (default: temp dir)")
    http.add_argument("--json", default=None, help="also write the results here")
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
    spark.add_argument("--dir", default=None, help="where Tier 2 is written (default: temp dir)")
    spark.add_argument("--json", default=None, help="also write the results here")
    _spark_jobs(commands)
    return parser


def _spark_jobs(commands: Any) -> None:
    spark = commands.add_parser(
        "spark", help="Spark batch jobs over Tier 2 (local Spark unless --master)"
    )
    jobs = spark.add_subparsers(dest="job", required=True)
    for job, about in (
        ("stats", "events, bytes, first/last offset per segment"),
        ("export", "events to Parquet, partitioned by segment"),
        ("compact", "the last value per key (payload: key length u16be | key | value)"),
    ):
        command = jobs.add_parser(job, help=about)
        command.add_argument("tier2", help="file:///path, s3://bucket/prefix, hdfs://host/path")
        if job != "stats":
            command.add_argument("output", help="where Spark writes the Parquet files")
            command.add_argument("--overwrite", action="store_true", help="replace the output")
        command.add_argument(
            "--segments", default="*", help="names, or prefixes ending in '*' (default: all)"
        )
        command.add_argument(
            "--option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="Tier 2 backend option, e.g. endpoint_url=http://127.0.0.1:9000 (repeatable)",
        )
        command.add_argument("--starting-offsets", default="earliest", help='or {"seg": N}')
        command.add_argument("--ending-offsets", default="latest", help='or {"seg": N}')
        command.add_argument("--fail-on-data-loss", choices=["true", "false"], default="true")
        command.add_argument("--master", default="local[2]", help="Spark master URL")
        command.add_argument("--json", default=None, help="also write the summary here")


def _settings(args: argparse.Namespace) -> Settings:
    """Flags over ``SEGMENTSTORE_*`` variables over the config file (API.md)."""
    flags: dict[str, dict[str, Any]] = {"store": {}, "api": {}, "tier1": {}, "tier2": {}}
    for section, key, value in (
        ("store", "data_dir", args.data_dir),
        ("store", "containers", args.containers),
        ("api", "host", args.host),
        ("api", "port", args.port),
        ("tier1", "mode", args.tier1),
        ("tier2", "uri", args.tier2),
    ):
        if value is not None:
            flags[section][key] = value
    if args.nats is not None:
        raise InvalidArgumentError("--nats needs the JetStream Tier 1, which this build lacks")
    return load_settings(args.config, os.environ, flags)


def _serve(settings: Settings) -> None:
    from api.server import serve  # lazily: 'segmentstore tier2 cat' never loads FastAPI
    from segmentstore.store import SegmentStore

    api = settings.api
    log.info(
        "serving %s on http://%s:%d (%d containers, Tier 2 %s, auth %s)",
        settings.store.data_dir.resolve(),
        api.host,
        api.port,
        settings.store.containers,
        settings.tier2_uri(),
        "on" if settings.auth.tokens else "off",
    )
    service = serve(SegmentStore(settings), api.host, api.port, settings.auth.tokens)
    try:
        import uvloop  # uvicorn[standard] brings it: a faster event loop
    except ImportError:  # pragma: no cover
        asyncio.run(service)
    else:
        uvloop.run(service)


def _use_this_python_for_spark_workers() -> None:
    # A local Spark starts its Python workers with PYSPARK_PYTHON (else "python3"): make it
    # this interpreter, the one with jobs/ installed. A cluster's own setting wins.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def _spark_job(args: argparse.Namespace) -> int:
    _use_this_python_for_spark_workers()
    from jobs.command import run_job  # lazily: only the spark jobs load Spark
    from segmentstore.bench.report import print_table, write_json

    options = {
        "tier2": args.tier2,
        "segments": args.segments,
        "starting_offsets": args.starting_offsets,
        "ending_offsets": args.ending_offsets,
        "fail_on_data_loss": args.fail_on_data_loss,
    }
    for option in args.option:
        key, _, value = option.partition("=")
        options[f"tier2.{key}"] = value
    try:
        summary = run_job(
            args.job,
            options,
            master=args.master,
            output=getattr(args, "output", None),
            overwrite=getattr(args, "overwrite", False),
        )
    except Exception as error:  # Spark's errors carry the data source's message inside
        print(f"segmentstore spark {args.job}: failed: {error}", file=sys.stderr)
        return 1
    print_table(summary.rows, summary.columns)
    write_json(args.json, f"spark-{args.job}", summary.rows)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "tier2":
        logging.disable(logging.INFO)  # stdout carries the data
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.command == "serve":
        try:
            settings = _settings(args)
        except InvalidArgumentError as error:
            print(f"segmentstore: {error}", file=sys.stderr)
            return 2
        if args.print_config:
            print(settings.model_dump_json(indent=2))
            return 0
        _serve(settings)
        return 0
    if args.command == "tier2":
        from segmentstore import tier2_tools

        options = dict(option.split("=", 1) for option in args.option)
        if args.tier2_command == "ls":
            return tier2_tools.list_segments(args.uri, args.prefix, options, sys.stdout)
        return tier2_tools.cat_segment(
            args.uri, args.name, args.offset, args.length, options, sys.stdout.buffer
        )
    if args.command == "bench" and args.bench == "append":
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
    if args.command == "bench" and args.bench == "writer":
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
    if args.command == "bench" and args.bench == "read":
        from segmentstore.bench import read

        read.run(args.seconds, args.appends, args.dir, args.json)
        return 0
    if args.command == "bench" and args.bench == "offset-at":
        from segmentstore.bench import offset_at

        offset_at.run(args.mib, args.json)
        return 0
    if args.command == "bench" and args.bench == "http":
        from segmentstore.bench import http

        http.run(
            args.seconds,
            args.cases,
            args.loadgen,
            args.processes,
            args.dir,
            args.json,
            os.environ,
        )
        return 0
    if args.command == "bench" and args.bench == "spark":
        _use_this_python_for_spark_workers()
        from jobs import bench as spark_bench  # lazily, like every Spark import
        from segmentstore.bench.report import print_table, write_json

        rows = spark_bench.run(
            segments=args.segments,
            segment_mib=args.segment_mib,
            event_bytes=args.event_bytes,
            chunk_mib=args.chunk_mib,
            runs=args.runs,
            warmups=args.warmups,
            master=args.master,
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
    if args.command == "spark":
        return _spark_job(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
