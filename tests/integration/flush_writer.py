"""The victim process of the flush-kill test: appends and transaction commits while the Storage
Writer flushes to Tier 2 all the time, until it is killed.

Run as ``python -m tests.integration.flush_writer DATA_DIR --round R --seed N`` from the
repository root. It opens the store on DATA_DIR (Tier 2 at ``DATA_DIR/tier2``) with a flush
threshold and interval so small that some flush is nearly always under way, and chunks so
small that they roll all the time; creates its segments if they are missing; prints ``READY``;
then runs concurrent writers forever:

* writers ``r{R}-w{i}`` append records (:func:`tests.integration.crash_writer.encode_record`)
  to random segments and, once an append is acknowledged, print
  ``ACK <segment> <offset> <length_after> <writer> <seq>``;
* committers ``r{R}-x{i}`` put each record into a new transaction of a random segment, merge
  it, and once the merge is acknowledged print the same line for where the record now is.

Nothing else goes to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
from pathlib import Path
from typing import Any

from segmentstore import SegmentStore
from segmentstore.contracts.errors import SegmentExistsError

from .crash_writer import encode_record

CONTAINERS = 4
SEGMENTS = 6
WRITERS = 8
COMMITTERS = 2
STORE_OPTIONS: dict[str, Any] = {
    "containers": CONTAINERS,
    "tier1": {"segment_bytes": 64 * 1024},
    "durable_log": {"checkpoint_every_frames": 8, "max_frame_bytes": 16 * 1024},
    "storage_writer": {
        "flush_threshold_bytes": 512,
        "flush_interval_ms": 5,
        "max_chunk_bytes": 4096,
        "retry_min_ms": 10,
        "retry_max_ms": 100,
    },
}


def segment_names() -> list[str]:
    return [f"flush/segment-{k}" for k in range(SEGMENTS)]


def writer_name(round_no: int, index: int) -> str:
    return f"r{round_no}-w{index}"


def committer_name(round_no: int, index: int) -> str:
    return f"r{round_no}-x{index}"


def _emit(line: str) -> None:
    # One write(2) per line: an acknowledgement is never left in a userspace buffer.
    os.write(1, line.encode("ascii") + b"\n")


async def _writer(store: SegmentStore, writer: str, seed: int) -> None:
    rng = random.Random(f"{seed}/{writer}")
    names = segment_names()
    seq = 0
    while True:
        name = rng.choice(names)
        record = encode_record(writer, seq)
        result = await store.append(name, record, writer_id=writer, writer_seq=seq)
        if result.duplicate or result.offset is None:
            raise RuntimeError(f"{writer} seq {seq} on {name}: unexpected result {result}")
        _emit(f"ACK {name} {result.offset} {result.length} {writer} {seq}")
        seq += 1


async def _committer(store: SegmentStore, writer: str, seed: int) -> None:
    rng = random.Random(f"{seed}/{writer}")
    names = segment_names()
    seq = 0
    while True:
        name = rng.choice(names)
        record = encode_record(writer, seq)
        transaction = await store.begin_transaction(name)
        await store.append(transaction, record)
        result = await store.merge(name, transaction)
        if result.offset is None or result.length - result.offset != len(record):
            raise RuntimeError(f"{writer} seq {seq}: merged {result} for {len(record)} bytes")
        _emit(f"ACK {name} {result.offset} {result.length} {writer} {seq}")
        seq += 1


async def _create(store: SegmentStore, name: str) -> None:
    with contextlib.suppress(SegmentExistsError):  # made by an earlier round
        await store.create_segment(name)


async def run(data_dir: Path, round_no: int, seed: int) -> None:
    async with SegmentStore.open(data_dir, **STORE_OPTIONS) as store:
        await asyncio.gather(*(_create(store, name) for name in segment_names()))
        _emit("READY")
        await asyncio.gather(
            *(_writer(store, writer_name(round_no, i), seed) for i in range(WRITERS)),
            *(_committer(store, committer_name(round_no, i), seed) for i in range(COMMITTERS)),
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--round", type=int, default=0, dest="round_no")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    asyncio.run(run(args.data_dir, args.round_no, args.seed))


if __name__ == "__main__":
    main()
