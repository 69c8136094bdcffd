"""The command line: the composition root that alone builds settings and the store."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from segmentstore.settings import Settings


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

    serve = commands.add_parser("serve", help="run the store (embedded single node)")
    serve.add_argument("--data-dir", type=Path, default=None, help="default ./data")
    serve.add_argument("--containers", type=int, default=None, help="default 4")
    serve.add_argument("--print-config", action="store_true", help="print settings and exit")

    bench = commands.add_parser("bench", help="benchmarks, each against a baseline")
    benches = bench.add_subparsers(dest="bench", required=True)
    append = benches.add_parser("append", help="durable appends vs raw grouped fdatasync")
    append.add_argument("--sizes", type=_sizes, default=[1024, 1 << 20], help="e.g. 1k,1m")
    append.add_argument("--writers", type=_ints, default=[1, 256], help="e.g. 1,256")
    append.add_argument("--seconds", type=float, default=5.0, help="per case")
    append.add_argument("--segments", type=int, default=16, help="writers share these")
    append.add_argument("--dir", default=None, help="where to write (default: temp dir)")
    append.add_argument("--json", default=None, help="also write the results here")
    read = benches.add_parser("read", help="cached reads vs a plain copy; tail-read latency")
    read.add_argument("--seconds", type=float, default=3.0, help="per read size")
    read.add_argument("--appends", type=int, default=1000, help="per tail-latency case")
    read.add_argument("--dir", default=None, help="where to write (default: temp dir)")
    read.add_argument("--json", default=None, help="also write the results here")
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    store = {}
    if args.data_dir is not None:
        store["data_dir"] = args.data_dir
    if args.containers is not None:
        store["containers"] = args.containers
    return Settings().with_overrides(store=store)


async def _serve(settings: Settings) -> None:
    from segmentstore.store import SegmentStore

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with SegmentStore(settings) as store:
        for c in store.containers:
            print(
                f"container {c.id}: {c.status.value}, epoch {c.epoch}, {c.segment_count} segments"
            )
        data_dir = settings.store.data_dir.resolve()
        print(
            f"segment store running on {data_dir} ({len(store.containers)} containers).\n"
            "Reach it from Python (the HTTP API is not part of this build yet):\n"
            f"    async with SegmentStore.open({str(data_dir)!r}) as store: ...\n"
            "after stopping this process (one process owns a data directory).\n"
            "Press Ctrl-C to stop.",
            flush=True,
        )
        await stop.wait()
        print("stopping: finishing pending operations", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.command == "serve":
        settings = _settings(args)
        if args.print_config:
            print(settings.model_dump_json(indent=2))
            return 0
        asyncio.run(_serve(settings))
        return 0
    if args.command == "bench" and args.bench == "append":
        from segmentstore.bench import append

        append.run(args.sizes, args.writers, args.seconds, args.segments, args.dir, args.json)
        return 0
    if args.command == "bench" and args.bench == "read":
        from segmentstore.bench import read

        read.run(args.seconds, args.appends, args.dir, args.json)
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
