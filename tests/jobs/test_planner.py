"""Planning and reading a scan without Spark, over a Tier 2 built with the tier2 APIs: chunks
that cut events, time index sidecars with append boundaries, manifests.

Every split is proven at read time (a partition must decode exactly up to the next one's
start), a boundary that is no event boundary fails loudly, and lost data is an error or, with
``fail_on_data_loss=false``, skipped and counted.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pyarrow as pa
import pytest

from segmentstore.jobs.errors import BrokenFramingError, DataLossError, ScanOptionsError
from segmentstore.jobs.options import ScanOptions
from segmentstore.jobs.partition_reader import read_partition
from segmentstore.jobs.planner import ScanPlan, plan_scan
from segmentstore.jobs.synthetic import write_segment
from segmentstore.tier2 import (
    ChunkStorage,
    ManifestStore,
    SegmentManifest,
    TimeIndexEntry,
    load_chunk_index,
    open_chunk_storage,
)
from segmentstore.tier2.chunk_index import index_object_key

from .conftest import HEADER, Event, unframe

CHUNK_BYTES = 700


@pytest.fixture
def storage(tmp_path: Path) -> ChunkStorage:
    return open_chunk_storage((tmp_path / "tier2").as_uri())


def random_appends(seed: int, count: int = 120) -> list[bytes]:
    """Appends of 1 to 4 events of 0 to 300 bytes."""
    rng = random.Random(seed)
    return [
        b"".join(
            HEADER.pack(0, size) + rng.randbytes(size)
            for size in (rng.randint(0, 300) for _ in range(rng.randint(1, 4)))
        )
        for _ in range(count)
    ]


def build(storage: ChunkStorage, name: str, seed: int, *, sidecars: bool = True) -> list[Event]:
    appends = random_appends(seed)
    write_segment(
        storage,
        name,
        iter(appends),
        chunk_bytes=CHUNK_BYTES,
        boundary_every_bytes=250,
        sidecars=sidecars,
    )
    return unframe(name, b"".join(appends), 0)


def options(storage: ChunkStorage, **given: str) -> ScanOptions:
    return ScanOptions.parse({"tier2": storage.uri, "segments": "s/*", **given})


def read_all(
    storage: ChunkStorage, plan: ScanPlan, fail_on_data_loss: bool = True, verify: bool = True
) -> list[Event]:
    events = []
    for partition in plan.partitions:
        for batch in read_partition(
            storage,
            partition,
            fail_on_data_loss=fail_on_data_loss,
            window_bytes=512,
            verify_checksums=verify,
        ):
            events += zip(
                batch.column("segment").to_pylist(),
                batch.column("offset").to_pylist(),
                batch.column("event").to_pylist(),
                strict=True,
            )
    return events


def manifest_of(storage: ChunkStorage, name: str) -> SegmentManifest:
    loaded = ManifestStore(storage).load(name)
    assert loaded is not None
    return loaded[0]


def test_sidecar_boundaries_split_segments_into_proven_partitions(storage: ChunkStorage) -> None:
    expected = build(storage, "s/0", 1) + build(storage, "s/1", 2)
    plan = plan_scan(options(storage), storage)
    per_segment = [p for p in plan.partitions if p.segment == "s/0"]
    chunks = len(manifest_of(storage, "s/0").chunks)
    assert chunks > 10
    assert len(per_segment) > chunks // 2, "most chunks should start a partition"
    event_starts = {offset for segment, offset, _ in expected if segment == "s/0"}
    assert all(p.start in event_starts for p in per_segment)
    assert [p.exact for p in per_segment] == [True] * (len(per_segment) - 1) + [False]
    assert read_all(storage, plan) == expected


def test_without_indexes_a_segment_is_one_partition_read_only_unverified(
    storage: ChunkStorage,
) -> None:
    expected = build(storage, "s/0", 3, sidecars=False)
    plan = plan_scan(options(storage, verify_checksums="false"), storage)
    assert len(plan.partitions) == 1
    assert read_all(storage, plan, verify=False) == expected
    # Chunks without checksums (written before there were any) cannot be verified.
    with pytest.raises(DataLossError, match="no checksum covers"):
        read_all(storage, plan_scan(options(storage), storage))


def test_a_boundary_that_is_not_an_event_boundary_fails_the_partition_before_it(
    storage: ChunkStorage,
) -> None:
    build(storage, "s/0", 4)
    manifest = manifest_of(storage, "s/0")
    chunk = manifest.chunks[5]
    real = plan_scan(options(storage), storage)
    boundary = next(
        p.start for p in real.partitions if chunk.start_offset <= p.start < chunk.end_offset
    )
    bogus = boundary + 3  # inside the header of the event that starts there
    index = load_chunk_index(storage, chunk)
    key = index_object_key(chunk)
    storage.delete(key)
    bogus_index = dataclasses.replace(index, boundaries=(TimeIndexEntry(bogus, 0),))
    storage.create(key, [bogus_index.encode()])
    plan = plan_scan(options(storage), storage)
    assert bogus in [p.start for p in plan.partitions]
    with pytest.raises(BrokenFramingError, match=f"offset {bogus} of segment 's/0'"):
        read_all(storage, plan)


@pytest.mark.parametrize("into", [5, 8, 13])  # into the header, at the payload, in it
def test_an_offset_inside_an_event_is_refused_naming_the_event(
    storage: ChunkStorage, into: int
) -> None:
    expected = build(storage, "s/0", 5)
    event = expected[200][1]
    end = expected[201][1]
    assert end - event > 13
    inside = event + into
    for option, which in (("ending_offsets", "ending"), ("starting_offsets", "starting")):
        with pytest.raises(
            ScanOptionsError,
            match=rf"'s/0': {which} offset {inside} is inside the event \[{event}, {end}\)",
        ):
            plan_scan(options(storage, **{option: f'{{"s/0": {inside}}}'}), storage)
    # an ending offset that is an event's end is where the scan ends, exactly
    plan = plan_scan(options(storage, ending_offsets=f'{{"s/0": {event}}}'), storage)
    assert plan.partitions[-1].exact
    assert read_all(storage, plan) == expected[:200]


def test_a_missing_chunk_fails_the_plan_naming_segment_and_chunk(storage: ChunkStorage) -> None:
    build(storage, "s/0", 6)
    chunk = manifest_of(storage, "s/0").chunks[3]
    storage.delete(chunk.key)
    with pytest.raises(DataLossError, match=f"segment 's/0', chunk {chunk.key}: .* missing"):
        plan_scan(options(storage), storage)


def test_a_missing_chunk_is_skipped_and_counted_when_loss_is_allowed(
    storage: ChunkStorage, caplog: pytest.LogCaptureFixture
) -> None:
    expected = build(storage, "s/0", 7)
    chunk = manifest_of(storage, "s/0").chunks[3]
    storage.delete(chunk.key)
    plan = plan_scan(options(storage, fail_on_data_loss="false"), storage)
    assert [(r.chunk, r.start, r.stop) for r in plan.lost] == [
        (chunk.key, chunk.start_offset, chunk.end_offset)
    ]
    assert "missing" in caplog.text
    events = read_all(storage, plan, fail_on_data_loss=False)
    assert set(events) < set(expected)
    assert not [e for e in events if chunk.start_offset <= e[1] < chunk.end_offset]
    assert [e for e in expected if e[1] < chunk.start_offset - 300] == [
        e for e in events if e[1] < chunk.start_offset - 300
    ]


def test_a_chunk_lost_after_planning_fails_the_read(storage: ChunkStorage) -> None:
    build(storage, "s/0", 8)
    plan = plan_scan(options(storage), storage)
    chunk = manifest_of(storage, "s/0").chunks[-1]
    storage.delete(chunk.key)
    with pytest.raises(DataLossError, match=f"chunk {chunk.key}"):
        read_all(storage, plan)
    assert read_all(storage, plan, fail_on_data_loss=False)  # the rest is there


def test_truncated_bytes_are_not_returned_and_asking_for_them_is_data_loss(
    storage: ChunkStorage,
) -> None:
    expected = build(storage, "s/0", 9)
    start = expected[100][1]
    manifests = ManifestStore(storage)
    loaded = manifests.load("s/0")
    assert loaded is not None
    manifests.save(dataclasses.replace(loaded[0], start_offset=start), loaded[1], 0)
    assert read_all(storage, plan_scan(options(storage), storage)) == expected[100:]
    with pytest.raises(DataLossError, match=rf"\[0, {start}\) were truncated"):
        plan_scan(options(storage, starting_offsets='{"s/0": 0}'), storage)
    plan = plan_scan(
        options(storage, starting_offsets='{"s/0": 0}', fail_on_data_loss="false"), storage
    )
    assert [(r.start, r.stop, r.chunk) for r in plan.lost] == [(0, start, None)]
    assert read_all(storage, plan) == expected[100:]


def test_bytes_mode_returns_the_raw_bytes_chunk_by_chunk(storage: ChunkStorage) -> None:
    appends = random_appends(10)
    write_segment(storage, "s/0", iter(appends), chunk_bytes=CHUNK_BYTES)
    plan = plan_scan(options(storage, mode="bytes"), storage)
    assert len(plan.partitions) == len(manifest_of(storage, "s/0").chunks)
    batches = [b for p in plan.partitions for b in read_partition(storage, p, window_bytes=256)]
    table = pa.Table.from_batches(batches)
    assert b"".join(table.column("data").to_pylist()) == b"".join(appends)
    assert all(len(d) <= 256 for d in table.column("data").to_pylist())


def test_offsets_of_another_incarnation_are_data_loss_not_a_stale_read(
    storage: ChunkStorage,
) -> None:
    """Offsets may name the incarnation they were taken from (as stream offsets and the
    jobs' pinned scans do); a segment that is another one by now is never read from them."""
    expected = build(storage, "s/0", 21)
    manifest = manifest_of(storage, "s/0")
    end = expected[-1][1]

    def pinned(segment_id: int, **given: str) -> ScanOptions:
        offsets = json.dumps({"s/0": {"segment_id": segment_id, "offset": end}})
        return options(storage, ending_offsets=offsets, **given)

    same = plan_scan(pinned(manifest.segment_id), storage)
    assert read_all(storage, same) == expected[:-1]
    with pytest.raises(DataLossError, match="deleted and created again"):
        plan_scan(pinned(manifest.segment_id + 1), storage)
    lenient = plan_scan(pinned(manifest.segment_id + 1, fail_on_data_loss="false"), storage)
    assert lenient.partitions == []
    with pytest.raises(ScanOptionsError, match="name segments directly"):
        options(storage, ending_offsets=json.dumps({"s/0": {"partition": 0}}))
