"""Damaged inputs, planned and read without Spark: a truncation inside an event, a manifest
that cannot be read, a Tier 2 location that does not exist, a selection that matches nothing.
Each has one defined behaviour, with ``fail_on_data_loss`` true and false, and the events read
are exactly those expected. Tier 2 is built with the tier2 APIs as the Storage Writer lays it
out (chunks that cut events, sidecars that record some append boundaries)."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import pytest

from segmentstore.jobs.boundaries import SegmentBoundaries
from segmentstore.jobs.errors import DataLossError
from segmentstore.jobs.options import ScanOptions
from segmentstore.jobs.planner import plan_scan
from segmentstore.jobs.selection import open_read_storage
from segmentstore.jobs.stream_offsets import next_offsets as stamped_next_offsets
from segmentstore.jobs.stream_offsets import split_incarnations
from segmentstore.jobs.synthetic import CHECKSUM_BLOCK_BYTES, framed_appends, write_segment
from segmentstore.settings import StorageWriterSettings
from segmentstore.tier2 import (
    ChunkStorage,
    InvalidTier2UriError,
    ManifestStore,
    SegmentManifest,
    manifest_key,
    open_chunk_storage,
    read_time_index,
)

from .conftest import Event, unframe
from .test_planner import build, manifest_of, read_all


def next_offsets(*args: Any, **kwargs: Any) -> dict[str, int]:
    """The offsets of next_offsets' answer, without the incarnations (tested apart)."""
    return split_incarnations(stamped_next_offsets(*args, **kwargs))[0]


@pytest.fixture
def storage(tmp_path: Path) -> ChunkStorage:
    return open_chunk_storage((tmp_path / "tier2").as_uri())


def options(storage: ChunkStorage, segments: str = "s/*", **given: str) -> ScanOptions:
    return ScanOptions.parse({"tier2": storage.uri, "segments": segments, **given})


def truncate(storage: ChunkStorage, name: str, offset: int) -> SegmentManifest:
    """What the Storage Writer does for ``:truncate``: a new start offset, and the chunks
    wholly below it gone from the manifest and from Tier 2."""
    loaded = ManifestStore(storage).load(name)
    assert loaded is not None
    manifest, token = loaded
    dropped = [c for c in manifest.chunks if c.end_offset <= offset]
    kept = manifest.chunks[len(dropped) :]
    ManifestStore(storage).save(
        dataclasses.replace(manifest, chunks=kept, start_offset=offset), token, 0
    )
    for chunk in dropped:
        storage.delete(chunk.key)
    return manifest_of(storage, name)


def cut_inside(storage: ChunkStorage, events: list[Event], *, recorded_below: bool) -> Event:
    """An event (not the first of its chunk's recorded boundaries) with a payload of at least
    20 bytes, in a chunk that has (or has not) a recorded boundary at or below its middle."""
    manifest = manifest_of(storage, events[0][0])
    boundaries = SegmentBoundaries(storage, manifest)
    for event in events[40:-40]:
        middle = event[1] + 12
        chunk = next(c for c in manifest.chunks if c.start_offset <= middle < c.end_offset)
        recorded = [o for o in boundaries.entries(chunk)[0] if o <= middle]
        if len(event[2]) >= 20 and bool(recorded) == recorded_below:
            return event
    raise AssertionError("no such event in the test data")


@pytest.mark.parametrize("recorded_below", [True, False], ids=["proof-from-below", "forward"])
@pytest.mark.parametrize("into", [3, 12])  # into the header, into the payload
def test_a_truncation_inside_an_event_is_data_loss_up_to_the_next_event(
    storage: ChunkStorage, recorded_below: bool, into: int, caplog: pytest.LogCaptureFixture
) -> None:
    events = build(storage, "s/0", 21)
    event = cut_inside(storage, events, recorded_below=recorded_below)
    at = events.index(event)
    cut = event[1] + into
    truncate(storage, "s/0", cut)
    # with no recorded boundary below the cut, the first one known after it is where reading
    # resumes; decoding from below finds the very next event
    resumed = events[at + 1][1]
    if not recorded_below:
        after = SegmentBoundaries(storage, manifest_of(storage, "s/0")).recorded_between(
            cut, 1 << 40
        )
        resumed = after[0]
    expected = [e for e in events if e[1] >= resumed]
    assert len(expected) > 40

    with pytest.raises(
        DataLossError,
        match=rf"segment 's/0': a truncation at offset {cut} cut the event there: bytes "
        rf"\[{cut}, {resumed}\) are the rest of it",
    ):
        plan_scan(options(storage), storage)
    with caplog.at_level(logging.WARNING):
        plan = plan_scan(options(storage, fail_on_data_loss="false"), storage)
    assert [(r.start, r.stop, r.chunk) for r in plan.lost] == [(cut, resumed, None)]
    assert f"bytes [{cut}, {resumed}) are the rest of it; skipping them" in caplog.text
    assert read_all(storage, plan) == expected

    # a stream that starts there, or whose offset the truncation overtook, does the same
    manifest = manifest_of(storage, "s/0")
    for committed in ({}, {"s/0": events[5][1]}):
        with pytest.raises(DataLossError, match=rf"s/0.*\[{events[5][1] if committed else cut}"):
            next_offsets(committed, [manifest], storage, max_bytes=None, fail_on_data_loss=True)
        ends = next_offsets(committed, [manifest], storage, max_bytes=None, fail_on_data_loss=False)
        assert ends == {"s/0": manifest.storage_length}
        planned = plan_scan(
            options(
                storage,
                starting_offsets=f'{{"s/0": {committed.get("s/0", -2)}}}',
                ending_offsets=f'{{"s/0": {ends["s/0"]}}}',
                fail_on_data_loss="false",
            ),
            storage,
        )
        assert read_all(storage, planned) == expected


def test_a_truncation_at_an_unrecorded_event_boundary_loses_nothing(storage: ChunkStorage) -> None:
    events = build(storage, "s/0", 22)
    manifest = manifest_of(storage, "s/0")
    recorded = set(SegmentBoundaries(storage, manifest).recorded_between(0, 1 << 40))
    event = next(e for e in events[60:] if e[1] not in recorded)
    truncate(storage, "s/0", event[1])
    plan = plan_scan(options(storage), storage)
    assert plan.lost == []
    assert read_all(storage, plan) == events[events.index(event) :]


def test_a_corrupt_manifest_fails_only_reads_that_include_its_segment(
    storage: ChunkStorage, caplog: pytest.LogCaptureFixture
) -> None:
    kept = build(storage, "s/0", 23) + build(storage, "s/1", 24)
    build(storage, "t/0", 25)
    build(storage, "u/0", 26)
    # t/0's manifest cut short (it still names its segment); u/0's overwritten with garbage
    key = manifest_key("t/0")
    document, token = storage.get(key) or (b"", "")
    storage.put_if(key, document[: len(document) // 2], token)
    key_u = manifest_key("u/0")
    storage.put_if(key_u, b"\x00garbage", (storage.get(key_u) or (b"", ""))[1])

    with caplog.at_level(logging.WARNING):
        plan = plan_scan(options(storage, "s/*"), storage)
    assert read_all(storage, plan) == kept
    # The catalog of names narrows the listing to s/: the damaged manifests are never read.
    assert caplog.text == ""

    for segments in ("t/*", "t/0", "s/*,t/*", "*"):
        with pytest.raises(DataLossError, match=rf"segment 't/0': its manifest {key} .*cannot"):
            plan_scan(options(storage, segments), storage)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        plan = plan_scan(options(storage, "s/*,t/*", fail_on_data_loss="false"), storage)
    assert read_all(storage, plan) == kept
    assert f"segment 't/0' is left out: its manifest {key}" in caplog.text


def test_a_tier2_location_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-tier2"
    with pytest.raises(InvalidTier2UriError, match=f"there is no directory {missing}"):
        open_read_storage(missing.as_uri(), {})
    assert not missing.exists(), "reading must never create a Tier 2 location"


def test_a_selection_that_matches_nothing_warns(
    storage: ChunkStorage, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    build(storage, "s/0", 27)
    with caplog.at_level(logging.WARNING):
        plan = plan_scan(options(storage, "x/*"), storage)
    assert plan.partitions == [] and plan.segments == []
    assert f"no segment in Tier 2 at {storage.uri} matches segments=x/*" in caplog.text
    assert "holds no segment at all" not in caplog.text
    empty = open_read_storage(tmp_path.as_uri(), {})
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        plan_scan(options(empty, "s/*"), empty)
    assert "matches segments=s/* (it holds no segment at all)" in caplog.text


def test_synthetic_segments_have_the_stores_checksum_blocks() -> None:
    """What bench spark and these tests read is what the store writes."""
    assert StorageWriterSettings().checksum_block_bytes == CHECKSUM_BLOCK_BYTES


def test_a_chunk_cut_short_loses_only_what_its_checksums_cannot_prove(
    storage: ChunkStorage,
) -> None:
    """A chunk cut short by 1,001 bytes: with fail_on_data_loss the scan fails naming the
    range; without, every event wholly in the blocks still there is read, and the read
    resumes at the first event recorded after the chunk (it used to lose the whole chunk)."""
    appends = list(framed_appends(0, 4000, 300, 1))  # two chunks of 2.5 checksum blocks
    write_segment(storage, "s/0", iter(appends), chunk_bytes=CHECKSUM_BLOCK_BYTES * 5 // 2)
    events = unframe("s/0", b"".join(appends), 0)
    manifest = manifest_of(storage, "s/0")
    chunk = manifest.chunks[0]
    kept_bytes = chunk.length - 1001
    data = storage.read(chunk.key, 0, kept_bytes)
    storage.delete(chunk.key)
    storage.create(chunk.key, [data])
    block = CHECKSUM_BLOCK_BYTES
    damaged_from = chunk.start_offset + kept_bytes // block * block
    with pytest.raises(DataLossError, match=rf"bytes \[{damaged_from}, {chunk.end_offset}\)"):
        read_all(storage, plan_scan(options(storage), storage))
    read = read_all(storage, plan_scan(options(storage), storage), fail_on_data_loss=False)
    resumed = min(
        e.offset
        for c in manifest.chunks[1:]
        for e in read_time_index(storage, c)
        if e.offset >= chunk.end_offset
    )
    kept = [e for e in events if e[1] + 8 + len(e[2]) <= damaged_from or e[1] >= resumed]
    assert read == kept
    assert len(events) - len(read) < len(events) // 4  # far from the whole chunk
