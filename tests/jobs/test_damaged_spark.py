"""Damaged inputs through Spark, batch and streaming, with ``fail_on_data_loss`` both ways:
a truncation inside an event, a manifest that cannot be read, a Tier 2 location that does not
exist, a selection that matches nothing. The data is written by the real store; the events
read are compared, byte for byte, with what the store returned before the damage. A failure
reaches the driver as the project's error in one line, without a Python traceback."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from store_checks import flush

from segmentstore import SegmentStore
from segmentstore.jobs.schema import EVENTS_DDL
from segmentstore.tier2 import ManifestStore, manifest_key, open_chunk_storage, read_time_index

from .conftest import FAST_WRITER, Event, events_of, scan
from .test_datasource import random_events, store_events

pytestmark = [pytest.mark.spark, pytest.mark.integration]

STREAM_TIMEOUT_S = 240


@dataclass
class Damaged:
    uri: str
    cut: int  # where dmg/cut was truncated, inside an event
    resumed: int  # the next event's offset
    events: dict[str, list[Event]]  # per segment, as the store returned them before damage
    bad_key: str  # the manifest of dmg/bad, cut in half


async def _write(root: Path) -> Damaged:
    rng = random.Random(41)
    names = ["dmg/cut", "dmg/ok", "dmg/bad", "other/ok"]
    async with SegmentStore.open(root / "data", storage_writer=FAST_WRITER) as store:
        for name in names:
            await store.create_segment(name)
            for _ in range(40 if name == "dmg/cut" else 12):
                await store.append_events(name, random_events(rng, rng.randint(1, 8)))
        await flush(store)
        events = {name: await store_events(store, name) for name in names}
        uri = (root / "data" / "tier2").resolve().as_uri()
        storage = open_chunk_storage(uri)
        try:
            loaded = ManifestStore(storage).load("dmg/cut")
            assert loaded is not None
            manifest = loaded[0]
            recorded = sorted(
                e.offset for c in manifest.chunks for e in read_time_index(storage, c)
            )
        finally:
            storage.close()
        # an event in the middle, with a recorded boundary before it in the same chunk
        cut_events = events["dmg/cut"]
        index = next(
            i
            for i, (_, offset, payload) in enumerate(cut_events)
            if i > len(cut_events) // 3
            and len(payload) >= 20
            and any(
                c.start_offset <= r <= offset and offset + 12 < c.end_offset
                for c in manifest.chunks
                for r in recorded
            )
        )
        cut = cut_events[index][1] + 12
        await store.truncate("dmg/cut", cut)
        await flush(store)
    storage = open_chunk_storage(uri)
    try:
        key = manifest_key("dmg/bad")
        found = storage.get(key)
        assert found is not None
        storage.put_if(key, found[0][: len(found[0]) // 2], found[1])
    finally:
        storage.close()
    return Damaged(uri, cut, cut_events[index + 1][1], events, key)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Damaged:
    return asyncio.run(_write(tmp_path_factory.mktemp("damaged")))


def stream(spark: Any, where: Path, **options: str) -> list[Event]:
    """Every event a ``Trigger.AvailableNow`` query delivers to a Parquet sink."""
    sink, checkpoint = where / "sink", where / "checkpoint"
    query = (
        spark.readStream.format("segmentstore")
        .options(**options)
        .load()
        .writeStream.format("parquet")
        .option("path", str(sink))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(STREAM_TIMEOUT_S), "the query did not stop by itself"
    finally:
        query.stop()
    rows = spark.read.schema(EVENTS_DDL).parquet(str(sink)).collect() if sink.exists() else []
    return sorted((r["segment"], r["offset"], bytes(r["event"])) for r in rows)


def one_line_error(error: BaseException, expected: str) -> None:
    text = str(error)
    assert expected in text, text
    assert "Traceback" not in text and 'File "' not in text, text


def test_a_truncation_inside_an_event_batch_and_stream(
    spark: Any, damaged: Damaged, tmp_path: Path
) -> None:
    cut, resumed = damaged.cut, damaged.resumed
    expected = [e for e in damaged.events["dmg/cut"] if e[1] >= resumed]
    assert len(expected) > 20
    problem = (
        f"DataLossError: data loss in segment 'dmg/cut': a truncation at offset {cut} cut the "
        f"event there: bytes [{cut}, {resumed}) are the rest of it"
    )
    options = {"tier2": damaged.uri, "segments": "dmg/cut"}
    with pytest.raises(Exception) as batch:
        scan(spark, **options)
    one_line_error(batch.value, problem)
    assert events_of(scan(spark, **options, fail_on_data_loss="false")) == expected

    with pytest.raises(Exception) as streamed:
        stream(spark, tmp_path / "fail", **options)
    one_line_error(streamed.value, problem)
    assert stream(spark, tmp_path / "skip", **options, failOnDataLoss="false") == expected


def test_a_corrupt_manifest_fails_only_reads_that_include_its_segment(
    spark: Any, damaged: Damaged, tmp_path: Path
) -> None:
    intact = sorted(damaged.events["dmg/ok"] + damaged.events["other/ok"])
    assert events_of(scan(spark, tier2=damaged.uri, segments="dmg/ok,other/*")) == intact
    assert stream(spark, tmp_path / "intact", tier2=damaged.uri, segments="dmg/ok,other/*") == (
        intact
    )
    problem = f"data loss in segment 'dmg/bad': its manifest {damaged.bad_key}"
    for segments in ("dmg/*", "dmg/bad"):
        with pytest.raises(Exception) as batch:
            scan(spark, tier2=damaged.uri, segments=segments)
        one_line_error(batch.value, problem)
    with pytest.raises(Exception) as streamed:
        stream(spark, tmp_path / "fail", tier2=damaged.uri, segments="dmg/*")
    one_line_error(streamed.value, problem)

    # skipped: the other segments' events, dmg/cut's from its first event after the cut
    after_cut = [e for e in damaged.events["dmg/cut"] if e[1] >= damaged.resumed]
    expected = sorted(after_cut + damaged.events["dmg/ok"])
    lenient = {"tier2": damaged.uri, "segments": "dmg/*", "fail_on_data_loss": "false"}
    assert events_of(scan(spark, **lenient)) == expected
    assert stream(spark, tmp_path / "skip", **lenient) == expected


def test_a_missing_location_is_an_error_and_an_empty_selection_reads_nothing(
    spark: Any, damaged: Damaged, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-tier2"
    problem = f"InvalidTier2UriError: invalid Tier 2 location '{missing.as_uri()}'"
    with pytest.raises(Exception) as batch:
        scan(spark, tier2=missing.as_uri(), segments="dmg/*")
    one_line_error(batch.value, problem)
    with pytest.raises(Exception) as streamed:
        stream(spark, tmp_path / "missing", tier2=missing.as_uri(), segments="dmg/*")
    one_line_error(streamed.value, problem)
    assert not missing.exists()

    assert scan(spark, tier2=damaged.uri, segments="nothing/*") == []
    assert stream(spark, tmp_path / "empty", tier2=damaged.uri, segments="nothing/*") == []
