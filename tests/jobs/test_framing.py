"""The event decoder of jobs/: whole events only, exact offsets, loud on broken headers; and the
benchmark's baseline, which decodes the same chunks with it."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from segmentstore.bench.spark import pyarrow_scan, write_data
from segmentstore.jobs.errors import BrokenFramingError
from segmentstore.jobs.framing import HEADER, events_batch, walk_events
from segmentstore.jobs.schema import EVENTS_SCHEMA


def frame(payloads: list[bytes]) -> bytes:
    return b"".join(HEADER.pack(0, len(p)) + p for p in payloads)


def test_a_batch_holds_every_whole_event_with_its_segment_offset() -> None:
    rng = random.Random(7)
    payloads = [rng.randbytes(rng.choice([0, 1, 7, 8, 100, 5000])) for _ in range(500)]
    data = frame(payloads)
    walk = walk_events(data, "s", 1000)
    assert (walk.whole, walk.need) == (len(data), 0)
    batch = events_batch(data, walk, "s", 1000, "chunk-key")
    assert batch.schema == EVENTS_SCHEMA
    assert batch.column("event").to_pylist() == payloads
    expected_offsets, position = [], 1000
    for payload in payloads:
        expected_offsets.append(position)
        position += 8 + len(payload)
    assert batch.column("offset").to_pylist() == expected_offsets
    assert set(batch.column("segment").to_pylist()) == {"s"}
    assert set(batch.column("chunk").to_pylist()) == {"chunk-key"}


@pytest.mark.parametrize("cut", [1, 7, 8, 9, 20])
def test_a_cut_event_is_left_out_and_its_size_reported(cut: int) -> None:
    data = frame([b"a" * 10, b"b" * 30])
    walk = walk_events(data[: 18 + cut], "s", 0)
    assert walk.whole == 18
    assert walk.starts == [0]
    assert walk.need == (38 if cut >= 8 else 8)


def test_an_empty_buffer_has_no_events() -> None:
    assert walk_events(b"", "s", 0) == ([], 0, 0)


@pytest.mark.parametrize(
    "header", [struct.pack(">ii", 1, 4), struct.pack(">ii", 0, -1), struct.pack(">ii", 0, 1 << 30)]
)
def test_a_header_that_is_no_event_header_fails_naming_segment_and_offset(header: bytes) -> None:
    data = frame([b"ok"]) + header + b"xxxx"
    with pytest.raises(BrokenFramingError, match=r"offset 510 of segment 'scope/s'"):
        walk_events(data, "scope/s", 500)


def test_the_bench_baseline_decodes_every_event_of_the_chunks(tmp_path: Path) -> None:
    uri = (tmp_path / "tier2").as_uri()
    manifests, expected = write_data(uri, 2, 300_000, 1000, 64 * 1024)
    assert sum(len(m.chunks) for m in manifests) > 8
    assert pyarrow_scan(uri, manifests) == expected == 2 * (300_000 // 1008)
