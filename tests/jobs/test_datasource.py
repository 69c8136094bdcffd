"""The ``segmentstore`` data source on a real local SparkSession, over data written by the
real store: it returns exactly the events the HTTP API returns up to the storage length, a
snapshot taken while a writer appends is consistent, truncated data is not returned, and lost
chunks fail the job loudly (or are skipped with ``fail_on_data_loss=false``).
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest
from store_checks import flush

from segmentstore import SegmentStore
from segmentstore.jobs.options import ScanOptions
from segmentstore.jobs.planner import plan_scan
from segmentstore.jobs.synthetic import write_segment
from segmentstore.tier2 import ManifestStore, SegmentReader, open_chunk_storage

from .conftest import (
    FAST_WRITER,
    Event,
    KiB,
    LiveServer,
    events_of,
    frame,
    http_events,
    scan,
    unframe,
    wait_until,
)

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def random_events(rng: random.Random, count: int) -> list[bytes]:
    """Mostly small events, a few larger than a chunk (so they run across chunk edges)."""
    return [
        rng.randbytes(
            rng.randint(20 * KiB, 40 * KiB) if rng.random() < 0.03 else rng.randint(0, 600)
        )
        for _ in range(count)
    ]


async def store_events(store: SegmentStore, name: str, stop: int | None = None) -> list[Event]:
    """The whole events of ``name`` from its start offset (up to ``stop``), read with
    ``read_events``, the call behind the HTTP route ``:readEvents``."""
    info = await store.get_info(name)
    stop = info.length if stop is None else stop
    offset, events = info.start_offset, []
    while offset < stop:
        read = await store.read_events(name, offset)
        events += unframe(name, read.data, offset)
        offset = read.next_offset
    return [e for e in events if e[1] + 8 + len(e[2]) <= stop]


def test_the_data_source_returns_exactly_what_the_http_api_returns(
    spark: Any, live: LiveServer
) -> None:
    rng = random.Random(11)
    names = [f"spark/http/{i}" for i in range(3)]
    with live.client() as http:
        for name in names:
            assert http.put(f"/v1/segments/{name}").status_code == 201
            for _ in range(12):
                body = frame(random_events(rng, rng.randint(1, 30)))
                assert http.post(f"/v1/segments/{name}:appendEvents", content=body).is_success

        def flushed() -> bool:
            infos = [http.get(f"/v1/segments/{n}").json() for n in names]
            return all(i["storage_length"] == i["length"] for i in infos)

        wait_until(flushed)
        lengths = {n: http.get(f"/v1/segments/{n}").json()["storage_length"] for n in names}
        expected = sorted(e for n in names for e in http_events(http, n, lengths[n]))

    rows = scan(spark, tier2=live.tier2_uri, segments="spark/http/*")
    assert events_of(rows) == expected
    storage = open_chunk_storage(live.tier2_uri)
    try:
        # The store's time index sidecars let the scan split each segment at proven
        # event boundaries, not only at segment edges.
        options = ScanOptions.parse({"tier2": live.tier2_uri, "segments": "spark/http/*"})
        assert len(plan_scan(options, storage).partitions) > len(names)
        for name in names:
            manifest = ManifestStore(storage).load(name)
            assert manifest is not None and len(manifest[0].chunks) > 3
            holders = {c.key: c for c in manifest[0].chunks}
            for segment, offset, _, chunk in rows:
                if segment == name:
                    assert holders[chunk].start_offset <= offset < holders[chunk].end_offset
    finally:
        storage.close()


async def test_a_snapshot_taken_while_a_writer_appends_is_consistent(
    spark: Any, tmp_path: Path
) -> None:
    name = "spark/live"
    rng = random.Random(12)
    async with SegmentStore.open(tmp_path / "data", storage_writer=FAST_WRITER) as store:
        uri = (tmp_path / "data" / "tier2").resolve().as_uri()
        await store.create_segment(name)
        await store.append_events(name, random_events(rng, 50))
        await flush(store)
        writing = True

        async def writer() -> None:
            while writing:
                await store.append_events(name, random_events(rng, rng.randint(1, 5)))
                await asyncio.sleep(0.002)

        task = asyncio.create_task(writer())
        try:
            await asyncio.sleep(0.3)
            before = (await store.get_info(name)).storage_length
            rows = await asyncio.to_thread(scan, spark, tier2=uri, segments=name)
            after = (await store.get_info(name)).storage_length
        finally:
            writing = False
            await task
        written = await store_events(store, name)

    returned = events_of(rows)
    assert returned == written[: len(returned)], "a prefix of the events, each whole and exact"
    end = returned[-1][1] + 8 + len(returned[-1][2])
    assert end <= after, "nothing past the storage length of the manifest read"
    assert all(e[1] + 8 + len(e[2]) > before for e in written[len(returned) :]), (
        "every event already in Tier 2 when the scan began is in it"
    )


async def test_truncated_data_is_not_returned(spark: Any, tmp_path: Path) -> None:
    name = "spark/truncated"
    rng = random.Random(13)
    async with SegmentStore.open(tmp_path / "data", storage_writer=FAST_WRITER) as store:
        uri = (tmp_path / "data" / "tier2").resolve().as_uri()
        await store.create_segment(name)
        for _ in range(10):
            await store.append_events(name, random_events(rng, 20))
        events = await store_events(store, name)
        cut = events[len(events) // 2][1]
        await store.truncate(name, cut)
        await flush(store)

    storage = open_chunk_storage(uri)
    try:
        loaded = ManifestStore(storage).load(name)
        assert loaded is not None and loaded[0].start_offset == cut
    finally:
        storage.close()
    assert events_of(scan(spark, tier2=uri, segments=name)) == events[len(events) // 2 :]
    with pytest.raises(Exception, match=rf"bytes \[0, {cut}\) were truncated"):
        scan(spark, tier2=uri, segments=name, starting_offsets=json.dumps({name: 0}))
    skipped = scan(
        spark,
        tier2=uri,
        segments=name,
        starting_offsets=json.dumps({name: 0}),
        fail_on_data_loss="false",
    )
    assert events_of(skipped) == events[len(events) // 2 :]


async def test_a_deleted_chunk_fails_the_job_unless_loss_is_allowed(
    spark: Any, tmp_path: Path
) -> None:
    name = "spark/lost"
    rng = random.Random(14)
    async with SegmentStore.open(tmp_path / "data", storage_writer=FAST_WRITER) as store:
        uri = (tmp_path / "data" / "tier2").resolve().as_uri()
        await store.create_segment(name)
        for _ in range(10):
            await store.append_events(name, random_events(rng, 20))
        await flush(store)
        events = await store_events(store, name)

    storage = open_chunk_storage(uri)
    try:
        loaded = ManifestStore(storage).load(name)
        assert loaded is not None
        chunks = loaded[0].chunks
        middle = len(chunks) // 2
        lost = chunks[middle]
        # The scan splits at time index boundaries: the first one after the lost chunk
        # starts a partition that does not need it.
        reader = SegmentReader(storage)
        resumed = next(e.offset for c in chunks[middle + 1 :] for e in reader.time_index(c))
        storage.delete(lost.key)
    finally:
        storage.close()
    with pytest.raises(Exception, match=f"data loss in segment '{name}', chunk {lost.key}"):
        scan(spark, tier2=uri, segments=name)
    rows = scan(spark, tier2=uri, segments=name, fail_on_data_loss="false")
    # What comes before the lost chunk, and everything from the next proven boundary on.
    assert events_of(rows) == [
        e for e in events if e[1] + 8 + len(e[2]) <= lost.start_offset or e[1] >= resumed
    ]
    assert resumed < events[-1][1]


def test_time_index_boundaries_split_the_scan_across_spark_partitions(
    spark: Any, tmp_path: Path
) -> None:
    uri = (tmp_path / "tier2").as_uri()
    storage = open_chunk_storage(uri)
    rng = random.Random(15)
    expected: list[Event] = []
    try:
        for i in range(2):
            name = f"spark/split/{i}"
            appends = [frame(random_events(rng, rng.randint(1, 4))) for _ in range(120)]
            write_segment(storage, name, iter(appends), chunk_bytes=8 * KiB)
            expected += unframe(name, b"".join(appends), 0)
    finally:
        storage.close()
    frame_ = spark.read.format("segmentstore").options(tier2=uri, segments="spark/split/*").load()
    assert frame_.rdd.getNumPartitions() > 10
    assert events_of(scan(spark, tier2=uri, segments="spark/split/*")) == sorted(expected)
    bytes_rows = (
        spark.read.format("segmentstore")
        .options(tier2=uri, segments="spark/split/0", mode="bytes")
        .load()
        .orderBy("offset")
        .collect()
    )
    assert bytes_rows[0]["offset"] == 0
    assert unframe("spark/split/0", b"".join(bytes(r["data"]) for r in bytes_rows), 0) == [
        e for e in sorted(expected) if e[0] == "spark/split/0"
    ]


def test_min_partitions_cuts_one_large_chunk_into_as_many_partitions_with_the_same_rows(
    spark: Any, tmp_path: Path
) -> None:
    uri = (tmp_path / "tier2").as_uri()
    storage = open_chunk_storage(uri)
    rng = random.Random(16)
    appends = [frame(random_events(rng, rng.randint(1, 6))) for _ in range(400)]
    try:  # one chunk for the whole segment: without the option, one partition
        write_segment(storage, "spark/one/0", iter(appends), chunk_bytes=64 << 20)
    finally:
        storage.close()
    expected = unframe("spark/one/0", b"".join(appends), 0)
    options = {"tier2": uri, "segments": "spark/one/0"}
    whole = spark.read.format("segmentstore").options(**options).load()
    cut = spark.read.format("segmentstore").options(**options, minPartitions="8").load()
    assert whole.rdd.getNumPartitions() == 1
    assert cut.rdd.getNumPartitions() >= 8
    assert events_of(scan(spark, **options, minPartitions="8")) == expected
    assert events_of(scan(spark, **options)) == expected
