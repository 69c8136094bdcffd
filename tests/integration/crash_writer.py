"""The victim process of the SIGKILL recovery test: many writers appending until it is killed.

Run as ``python -m tests.integration.crash_writer DATA_DIR --segments S --writers W --round R
--seed N`` from the repository root. It opens the store on DATA_DIR with settings small enough
that Tier 1 files roll and checkpoints are written many times per run, creates its segments if
they are missing, prints ``READY`` and then runs W concurrent writers forever. Each writer
``r{R}-w{i}`` appends self-describing records (see :func:`encode_record`) with an increasing
sequence number and, right after each append is acknowledged, prints

    ACK <segment> <offset> <length_after> <writer> <seq>

Trimmers ``r{R}-t{i}`` append the same records to their own segments, all in container
``TRIMMED_CONTAINER`` (no other segment lives there), and truncate each segment right behind
the record they just appended, so that container's Tier 1 keeps being truncated while the
process is killed. After both the append and the truncation are acknowledged they print

    TRIM <segment> <offset> <length_after> <writer> <seq>

Nothing else goes to stdout. This module also owns the record format and the deterministic
payloads, so the test can tell exactly which bytes every (writer, seq) must have produced.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import struct
import zlib
from pathlib import Path
from typing import Any

from segmentstore import SegmentStore
from segmentstore.contracts.errors import SegmentExistsError
from segmentstore.contracts.mapping import container_of

CONTAINERS = 4
# Small enough that a run of a second or two rolls Tier 1 files, spans frames with the large
# appends and writes checkpoints (and so attempts truncations) many times over.
STORE_OPTIONS: dict[str, Any] = {
    "tier1": {"segment_bytes": 256 * 1024},
    "durable_log": {"checkpoint_every_frames": 20, "max_frame_bytes": 64 * 1024},
}

MAGIC = b"CWR1"
WRITER_ID_BYTES = 16
# magic, writer id (ASCII, NUL-padded), seq, payload length, payload crc32, header crc32.
# The header has its own CRC so that a torn or shifted header can never pass as a record.
HEADER = struct.Struct(">4s16sQIII")
_HEADER_CRC_OFFSET = HEADER.size - 4


# The one container that holds only trimmed segments: only there can Tier 1 be truncated,
# since every byte of the other segments stays needed (there is no Tier 2 to move it to).
TRIMMED_CONTAINER = 3
TRIMMERS = 2


def _names(prefix: str, count: int, in_trimmed_container: bool) -> list[str]:
    names = []
    k = 0
    while len(names) < count:
        name = f"{prefix}-{k:03d}"
        if (container_of(name, CONTAINERS) == TRIMMED_CONTAINER) == in_trimmed_container:
            names.append(name)
        k += 1
    return names


def segment_names(count: int) -> list[str]:
    return _names("crash/segment", count, in_trimmed_container=False)


def trimmed_names() -> list[str]:
    return _names("crash/trimmed", TRIMMERS, in_trimmed_container=True)


def writer_name(round_no: int, index: int) -> str:
    return f"r{round_no}-w{index}"


def trimmer_name(round_no: int, index: int) -> str:
    return f"r{round_no}-t{index}"


def payload_for(writer: str, seq: int) -> bytes:
    """The payload that ``writer`` appends as ``seq``: the same in every process.

    Mostly tiny and ~1 KiB records, so that many share a data frame, and now and then one of
    ~100 KiB, larger than a frame, so that some appends span several Tier 1 records.
    """
    rng = random.Random(f"{writer}/{seq}")  # str seeds hash with SHA-512: process independent
    roll = rng.random()
    if roll < 0.02:
        size = rng.randint(80 * 1024, 120 * 1024)
    elif roll < 0.40:
        size = rng.randint(512, 2048)
    else:
        size = rng.randint(1, 64)
    return rng.randbytes(size)


def encode_record(writer: str, seq: int) -> bytes:
    payload = payload_for(writer, seq)
    raw_writer = writer.encode("ascii")
    if len(raw_writer) > WRITER_ID_BYTES:
        raise ValueError(f"writer id {writer!r} is longer than {WRITER_ID_BYTES} bytes")
    header = HEADER.pack(MAGIC, raw_writer, seq, len(payload), zlib.crc32(payload), 0)
    header_crc = zlib.crc32(header[:_HEADER_CRC_OFFSET])
    return header[:_HEADER_CRC_OFFSET] + header_crc.to_bytes(4, "big") + payload


def record_size(writer: str, seq: int) -> int:
    return HEADER.size + len(payload_for(writer, seq))


class RecordError(Exception):
    """Bytes that are not a whole, valid record where one must start."""


def decode_record(data: bytes | memoryview, offset: int) -> tuple[str, int, int]:
    """The record starting at ``offset``: ``(writer, seq, size)``; raises :class:`RecordError`.

    Checks everything: header CRC, payload CRC and that the payload is exactly what the
    writer deterministically produces for that sequence number.
    """
    end_of_header = offset + HEADER.size
    if end_of_header > len(data):
        raise RecordError(f"only {len(data) - offset} bytes left, a header needs {HEADER.size}")
    magic, raw_writer, seq, length, payload_crc, header_crc = HEADER.unpack_from(data, offset)
    if magic != MAGIC:
        raise RecordError(f"bad magic {bytes(magic)!r}")
    if zlib.crc32(data[offset : offset + _HEADER_CRC_OFFSET]) != header_crc:
        raise RecordError("header CRC mismatch")
    writer = bytes(raw_writer).rstrip(b"\0").decode("ascii")
    payload = data[end_of_header : end_of_header + length]
    if len(payload) != length:
        raise RecordError(f"{writer} seq {seq}: payload of {length} bytes is cut at {len(payload)}")
    if zlib.crc32(payload) != payload_crc:
        raise RecordError(f"{writer} seq {seq}: payload CRC mismatch")
    if bytes(payload) != payload_for(writer, seq):
        raise RecordError(f"{writer} seq {seq}: payload differs from the one written")
    return writer, seq, HEADER.size + length


def _emit(line: str) -> None:
    # One write(2) per line on a pipe (< PIPE_BUF) is atomic and unbuffered: a line that the
    # reader sees was printed after its append was acknowledged, and a SIGKILL never leaves
    # an acknowledgement sitting in a userspace buffer.
    os.write(1, line.encode("ascii") + b"\n")


async def _writer(store: SegmentStore, writer: str, segments: list[str], seed: int) -> None:
    rng = random.Random(f"{seed}/{writer}")
    seq = 0
    while True:
        name = rng.choice(segments)
        record = encode_record(writer, seq)
        result = await store.append(name, record, writer_id=writer, writer_seq=seq)
        if (
            result.duplicate
            or result.offset is None
            or result.length != result.offset + len(record)
        ):
            raise RuntimeError(f"{writer} seq {seq} on {name}: unexpected result {result}")
        _emit(f"ACK {name} {result.offset} {result.length} {writer} {seq}")
        seq += 1


async def _trimmer(store: SegmentStore, writer: str, name: str) -> None:
    seq = 0
    while True:
        record = encode_record(writer, seq)
        result = await store.append(name, record, writer_id=writer, writer_seq=seq)
        if result.duplicate or result.offset is None:
            raise RuntimeError(f"{writer} seq {seq} on {name}: unexpected result {result}")
        await store.truncate(name, result.offset)
        _emit(f"TRIM {name} {result.offset} {result.length} {writer} {seq}")
        seq += 1


async def _create(store: SegmentStore, name: str) -> None:
    with contextlib.suppress(SegmentExistsError):  # made by an earlier round
        await store.create_segment(name)


def store_options(jetstream: str | None) -> dict[str, Any]:
    """STORE_OPTIONS, with Tier 1 on JetStream when ``jetstream`` is ``SERVERS/PREFIX``."""
    if jetstream is None:
        return STORE_OPTIONS
    servers, _, prefix = jetstream.rpartition("/")
    return {
        **STORE_OPTIONS,
        "tier1": {
            "mode": "jetstream",
            "jetstream": {"servers": servers, "stream_prefix": prefix, "ack_timeout_ms": 2000},
        },
    }


async def run(
    data_dir: Path, segments: int, writers: int, round_no: int, seed: int, jetstream: str | None
) -> None:
    names = segment_names(segments)
    trimmed = trimmed_names()
    options = store_options(jetstream)
    async with SegmentStore.open(data_dir, containers=CONTAINERS, **options) as store:
        await asyncio.gather(*(_create(store, name) for name in names + trimmed))
        _emit("READY")
        await asyncio.gather(
            *(_writer(store, writer_name(round_no, i), names, seed) for i in range(writers)),
            *(_trimmer(store, trimmer_name(round_no, i), n) for i, n in enumerate(trimmed)),
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--segments", type=int, default=8)
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--round", type=int, default=0, dest="round_no")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jetstream", default=None, help="Tier 1 on JetStream: SERVERS/PREFIX")
    args = parser.parse_args(argv)
    asyncio.run(
        run(args.data_dir, args.segments, args.writers, args.round_no, args.seed, args.jetstream)
    )


if __name__ == "__main__":
    main()
