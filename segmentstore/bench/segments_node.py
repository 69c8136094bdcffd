"""The node that ``segmentstore bench segments`` measures: one process that embeds a store
(default settings but the data directory and port), serves it over HTTP, and, when asked,
creates many small segments through the embedded API.

It speaks to the bench by JSON lines: on standard output it reports progress and, on a line
``status`` from standard input, what it holds (active segments, lag, checkpoint and Tier 1
bytes). The bench kills it with SIGKILL and starts it again to time a recovery. Run as
``python -m segmentstore.bench.segments_node DATA_DIR PORT [--create N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from segmentstore.gc_tuning import tune_for_many_segments
from segmentstore.store import SegmentStore

PAYLOAD = b"s" * 100
CONCURRENCY = 512
PROGRESS_EVERY = 10_000


def segment_name(i: int) -> str:
    """The name of the ``i``-th segment: a 100-segment prefix is ``bench/seg-NNNNN``."""
    return f"bench/seg-{i:07d}"


def _say(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


async def _create(store: SegmentStore, count: int) -> None:
    names = iter(range(count))
    done = 0
    started = time.monotonic()

    async def creator() -> None:
        nonlocal done
        for i in names:
            name = segment_name(i)
            await store.create_segment(name)
            await store.append(name, PAYLOAD)
            done += 1
            if done % PROGRESS_EVERY == 0:
                _say(created=done, seconds=round(time.monotonic() - started, 3))

    await asyncio.gather(*(creator() for _ in range(min(CONCURRENCY, count))))
    _say(created=count, seconds=round(time.monotonic() - started, 3), done=True)


def _status(store: SegmentStore) -> dict[str, Any]:
    containers = store.containers
    return {
        "segments": sum(c.segment_count for c in containers),
        "active": sum(c.active_segment_count for c in containers),
        "lag_bytes": sum(c.tier2_lag_bytes for c in containers),
        "checkpoint_bytes": sum(c.checkpoint_bytes for c in containers),
        "tier1_written_bytes": sum(c.tier1_written_bytes for c in containers),
        "statuses": sorted({c.status.value for c in containers}),
    }


async def _answer(store: SegmentStore) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        if line.strip() == b"status":
            _say(status=_status(store))


async def _main(data_dir: str, port: int, create: int, overrides: dict[str, Any]) -> None:
    from segmentstore.api.server import serve

    store = SegmentStore.open(data_dir, **overrides)
    started = time.monotonic()
    server = asyncio.ensure_future(serve(store, "127.0.0.1", port, log_level="warning"))
    while not store.containers:
        await asyncio.sleep(0.001)  # the server starts the store (recoveries begin with it)
    await store.recovered()
    _say(recovered_s=round(time.monotonic() - started, 3))
    answering = asyncio.ensure_future(_answer(store))
    if create:
        await _create(store, create)
    await server
    answering.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("data_dir")
    parser.add_argument("port", type=int)
    parser.add_argument("--create", type=int, default=0)
    parser.add_argument("--settings", default="{}", help="JSON: {section: {key: value}}")
    args = parser.parse_args()
    tune_for_many_segments()
    running = _main(args.data_dir, args.port, args.create, json.loads(args.settings))
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        asyncio.run(running)
    else:
        uvloop.run(running)


if __name__ == "__main__":
    main()
