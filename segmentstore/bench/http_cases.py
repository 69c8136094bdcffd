"""The requests of ``segmentstore bench http``: each case's route, body and concurrency."""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass

KiB = 1 << 10
MiB = 1 << 20
EVENTS_PER_BATCH = 100
EVENTS_PER_BIG_BATCH = 1000
EVENT_BYTES = 100
READ_SEGMENT_MIB = 16
SEGMENTS = 16
TAIL_SEGMENT = "bench/tail"


def payload(size: int, seed: int) -> bytes:
    """Bytes that look random to the disk and the CPU (no compression shortcut), and are the
    same in every run: the runs of a benchmark send the same requests."""
    return random.Random(seed).randbytes(size)


@dataclass(frozen=True, slots=True)
class Case:
    key: str
    title: str
    method: str
    paths: tuple[str, ...]
    body: bytes
    connections: int
    payload_bytes: int  # per request: the body sent, or for reads the body answered
    events: int = 0  # per request, for :appendEvents


def _event_batch(events: int) -> bytes:
    header = struct.pack(">ii", 0, EVENT_BYTES)
    return b"".join(header + payload(EVENT_BYTES, seed=n) for n in range(events))


def _segment_paths(action: str) -> tuple[str, ...]:
    return tuple(f"/v1/segments/bench/http-{i:02d}:{action}" for i in range(SEGMENTS))


def cases() -> dict[str, Case]:
    batch = _event_batch(EVENTS_PER_BATCH)
    # A producer batching like Kafka's (up to ~100 KB per request) sends far fewer requests.
    big_batch = _event_batch(EVENTS_PER_BIG_BATCH)
    reads = tuple(
        f"/v1/segments/bench/read:read?offset={k * MiB}&max_length={MiB}"
        for k in range(READ_SEGMENT_MIB)
    )
    return {
        case.key: case
        for case in (
            Case(
                key="append-1k",
                title="append 1 KiB",
                method="POST",
                paths=_segment_paths("append"),
                body=payload(KiB, seed=2),
                connections=32,
                payload_bytes=KiB,
            ),
            Case(
                key="append-1m",
                title="append 1 MiB",
                method="POST",
                paths=_segment_paths("append"),
                body=payload(MiB, seed=3),
                connections=8,
                payload_bytes=MiB,
            ),
            Case(
                key="read-1m",
                title="read 1 MiB",
                method="GET",
                paths=reads,
                body=b"",
                connections=8,
                payload_bytes=MiB,
            ),
            Case(
                key="events",
                title=f"appendEvents {EVENTS_PER_BATCH}x{EVENT_BYTES} B",
                method="POST",
                paths=_segment_paths("appendEvents"),
                body=batch,
                connections=16,
                payload_bytes=len(batch),
                events=EVENTS_PER_BATCH,
            ),
            Case(
                key="events-1000",
                title=f"appendEvents {EVENTS_PER_BIG_BATCH}x{EVENT_BYTES} B",
                method="POST",
                paths=_segment_paths("appendEvents"),
                body=big_batch,
                connections=16,
                payload_bytes=len(big_batch),
                events=EVENTS_PER_BIG_BATCH,
            ),
        )
    }
