"""Where the streaming source ends each micro-batch: always at an event boundary, at most
``maxBytesPerTrigger`` on (but at least one event), and truncation below the query's offset
handled as ``fail_on_data_loss`` says. Tier 2 is a real local directory; no Spark is needed."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from segmentstore.jobs.boundaries import SegmentBoundaries
from segmentstore.jobs.errors import DataLossError
from segmentstore.jobs.stream_offsets import flushed_boundary, split_incarnations
from segmentstore.jobs.stream_offsets import next_offsets as stamped_next_offsets
from segmentstore.jobs.synthetic import HEADER, framed_appends, write_segment
from segmentstore.tier2 import ChunkStorage, SegmentManifest, open_chunk_storage

EVENT_BYTES = 100
FRAMED = EVENT_BYTES + 8
EVENTS = 600


def next_offsets(*args: Any, **kwargs: Any) -> dict[str, int]:
    """The offsets of next_offsets' answer, without the incarnations (tested apart)."""
    return split_incarnations(stamped_next_offsets(*args, **kwargs))[0]


@pytest.fixture
def written(tmp_path: Path) -> tuple[ChunkStorage, SegmentManifest]:
    storage = open_chunk_storage(tmp_path.as_uri())
    # 7-event appends, 5 KiB chunks: chunks cut events, sidecars mark some append boundaries
    manifest = write_segment(
        storage,
        "offsets/0",
        framed_appends(0, EVENTS, EVENT_BYTES, 7),
        chunk_bytes=5 * 1024,
        boundary_every_bytes=2048,
    )
    return storage, manifest


def test_micro_batches_end_on_event_boundaries_within_the_limit(
    written: tuple[ChunkStorage, SegmentManifest],
) -> None:
    storage, manifest = written
    assert len(manifest.chunks) > 10
    ends, position = [], 0
    while position < manifest.storage_length:
        end = next_offsets(
            {"offsets/0": position},
            [manifest],
            storage,
            max_bytes=1000,
            fail_on_data_loss=True,
        )["offsets/0"]
        assert end % FRAMED == 0 and 0 < end - position <= 1000
        ends.append(end)
        position = end
    assert position == EVENTS * FRAMED and len(ends) == -(-EVENTS // (1000 // FRAMED))


def test_a_flush_that_ends_inside_an_event_stops_before_it(tmp_path: Path) -> None:
    storage = open_chunk_storage(tmp_path.as_uri())
    whole = list(framed_appends(0, 300, EVENT_BYTES, 7))
    cut = write_segment(
        storage,
        "offsets/0",
        iter([*whole, HEADER.pack(0, EVENT_BYTES) + b"x" * 42]),
        chunk_bytes=5 * 1024,
    )
    assert cut.storage_length == 300 * FRAMED + 50
    unlimited = next_offsets({}, [cut], storage, max_bytes=None, fail_on_data_loss=True)
    assert unlimited == {"offsets/0": 300 * FRAMED}
    assert flushed_boundary(SegmentBoundaries(storage, cut)) == 300 * FRAMED
    # a limit below one event still moves on by one whole event, never into the cut one
    ten = {"offsets/0": 10 * FRAMED}
    one_on = next_offsets(ten, [cut], storage, max_bytes=5, fail_on_data_loss=True)
    assert one_on == {"offsets/0": 11 * FRAMED}
    at_cut = {"offsets/0": 300 * FRAMED}
    assert next_offsets(at_cut, [cut], storage, max_bytes=5, fail_on_data_loss=True) == at_cut


def test_the_limit_is_shared_and_new_segments_start_at_their_start(
    tmp_path: Path, written: tuple[ChunkStorage, SegmentManifest]
) -> None:
    storage, first = written
    second = write_segment(
        storage, "offsets/1", framed_appends(1, 50, EVENT_BYTES, 5), chunk_bytes=4096
    )
    ends = next_offsets(
        {"offsets/0": first.storage_length - 50 * FRAMED, "gone/0": 7},
        [first, second],
        storage,
        max_bytes=100 * FRAMED,
        fail_on_data_loss=True,
    )
    assert ends["gone/0"] == 7  # a segment no longer listed keeps its offset
    assert ends["offsets/0"] == first.storage_length and ends["offsets/1"] == second.storage_length


def test_truncation_below_the_query_offset_is_data_loss_unless_allowed(
    written: tuple[ChunkStorage, SegmentManifest],
) -> None:
    storage, manifest = written
    truncated = dataclasses.replace(manifest, start_offset=200 * FRAMED)
    with pytest.raises(DataLossError, match=r"bytes \[1080, 21600\) were truncated"):
        next_offsets(
            {"offsets/0": 10 * FRAMED}, [truncated], storage, max_bytes=None, fail_on_data_loss=True
        )
    ends = next_offsets(
        {"offsets/0": 10 * FRAMED}, [truncated], storage, max_bytes=FRAMED, fail_on_data_loss=False
    )
    assert ends == {"offsets/0": 201 * FRAMED}
