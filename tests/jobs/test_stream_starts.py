"""Where a streaming query starts and when it stops, while a writer appends to a real
``segmentstore serve`` process over HTTP: from ``latest``, from a timestamp (exactly where
``:offsetAt`` says), and with ``Trigger.AvailableNow`` (micro-batches within
``maxBytesPerTrigger`` plus one event, stopping once it has read what was flushed when it
started). Each query is stopped and started again from its checkpoint; the sink must hold
every expected event exactly once, byte for byte as the HTTP API reads it back."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from segmentstore.harness.served_store import ServedStore
from segmentstore.jobs.schema import EVENTS_DDL

from .conftest import Event, http_events, wait_until
from .test_stream import append, flushed

# two queries each, of many micro-batches: minutes on a loaded 2-core machine
pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(900),
]

KiB = 1024
NAME = "live/0"
TIMEOUT_S = 240
MAX_APPENDS = 300


class Writer:
    """Appends batches of events to ``NAME`` from a thread, ten a second, until stopped (or
    ``MAX_APPENDS`` are made: a loaded machine must not make the test's data grow without
    end)."""

    def __init__(self, url: str, seed: int, most: int = MAX_APPENDS) -> None:
        self._url = url
        self._most = most
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="writer")
        self.error: BaseException | None = None

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        assert self.error is None, self.error

    def _run(self) -> None:
        try:
            with httpx.Client(base_url=self._url, timeout=30) as http:
                appended = 0
                while not self._stop.wait(0.1) and appended < self._most:
                    append(http, NAME, self._rng, 1)
                    appended += 1
        except BaseException as error:
            self.error = error


def start(spark: Any, where: Path, trigger: dict[str, Any], **options: str) -> Any:
    reader = spark.readStream.format("segmentstore").option("segments", NAME)
    return (
        reader.options(**options)
        .load()
        .writeStream.format("parquet")
        .option("path", str(where / "sink"))
        .option("checkpointLocation", str(where / "checkpoint"))
        .trigger(**trigger)
        .start()
    )


def delivered(spark: Any, where: Path) -> list[Event]:
    rows = spark.read.schema(EVENTS_DDL).parquet(str(where / "sink")).collect()
    found = sorted((r["segment"], r["offset"], bytes(r["event"])) for r in rows)
    assert len(found) == len(set(found)), "an event was delivered twice"
    return found


def storage_length(http: httpx.Client) -> int:
    return int(http.get(f"/v1/segments/{NAME}").json()["storage_length"])


def ends_by(events: list[Event], offset: int) -> list[Event]:
    return [e for e in events if e[1] + 8 + len(e[2]) <= offset]


def run_until_rows(query: Any) -> None:
    wait_until(lambda: any(p["numInputRows"] for p in query.recentProgress), timeout_s=TIMEOUT_S)


def written_before(http: httpx.Client, seed: int, batches: int) -> int:
    """``NAME`` created with ``batches`` of events, all in Tier 2; its storage length."""
    assert http.put(f"/v1/segments/{NAME}").status_code == 201
    append(http, NAME, random.Random(seed), batches)
    wait_until(lambda: flushed(http, [NAME]), timeout_s=TIMEOUT_S)
    return storage_length(http)


def started_twice(spark: Any, where: Path, trigger: dict[str, Any], **options: str) -> Any:
    """Start a query, stop it once it has delivered events, start it again from its
    checkpoint: the second query, running, once it has delivered events too."""
    query = start(spark, where, trigger, **options)
    try:
        run_until_rows(query)
    finally:
        query.stop()
    query = start(spark, where, trigger, **options)
    try:
        run_until_rows(query)
    except BaseException:
        query.stop()
        raise
    return query


def finish(http: httpx.Client, query: Any) -> None:
    """Wait for Tier 2 to hold everything, and for the query to read it all; stop it."""
    try:
        wait_until(lambda: flushed(http, [NAME]), timeout_s=TIMEOUT_S)
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()


def test_a_query_from_latest_delivers_only_what_is_flushed_after_it_starts(
    spark: Any, served: ServedStore, tmp_path: Path
) -> None:
    tier2 = (tmp_path / "data" / "tier2").resolve().as_uri()
    trigger = {"processingTime": "200 milliseconds"}
    with httpx.Client(base_url=served.url, timeout=30) as http:
        before = written_before(http, 50, 20)
        with Writer(served.url, 51):
            query = started_twice(spark, tmp_path, trigger, tier2=tier2, startingOffsets="latest")
            started_by = storage_length(http)
        finish(http, query)
        written = http_events(http, NAME, storage_length(http))
    got = delivered(spark, tmp_path)
    first = got[0][1]
    assert got == [e for e in written if e[1] >= first], "every event from there, once"
    assert not [e for e in got if e in ends_by(written, before)], "nothing flushed before it"
    assert first <= started_by and first in {e[1] for e in written}


def test_a_query_from_a_timestamp_starts_where_offset_at_says(
    spark: Any, served: ServedStore, tmp_path: Path
) -> None:
    tier2 = (tmp_path / "data" / "tier2").resolve().as_uri()
    trigger = {"processingTime": "200 milliseconds"}
    with httpx.Client(base_url=served.url, timeout=30) as http:
        written_before(http, 52, 30)
        time.sleep(0.05)
        stamp = int(time.time() * 1000)
        time.sleep(0.05)
        length_at_stamp = storage_length(http)
        with Writer(served.url, 53):
            # the appends around the timestamp are in Tier 2 before the query asks
            wait_until(lambda: storage_length(http) > length_at_stamp + 16 * KiB, timeout_s=60)
            answer = http.get(f"/v1/segments/{NAME}:offsetAt", params={"timestamp_ms": stamp})
            offset_at = int(answer.json()["offset"])
            query = started_twice(
                spark, tmp_path, trigger, tier2=tier2, startingTimestamp=str(stamp)
            )
        finish(http, query)
        written = http_events(http, NAME, storage_length(http))
    got = delivered(spark, tmp_path)
    assert 0 < offset_at <= length_at_stamp
    assert got[0][1] == offset_at
    assert got == [e for e in written if e[1] >= offset_at]


@pytest.fixture
def every_progress(spark: Any) -> Iterator[None]:
    """Queries keep every micro-batch's progress, not Spark's default last 100."""
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
    yield
    spark.conf.unset("spark.sql.streaming.numRecentProgressUpdates")


@pytest.mark.usefixtures("every_progress")
def test_available_now_reads_what_was_flushed_at_its_start_in_limited_batches(
    spark: Any, served: ServedStore, tmp_path: Path
) -> None:
    tier2 = (tmp_path / "data" / "tier2").resolve().as_uri()
    limit = 32 * KiB
    trigger = {"availableNow": True}

    with httpx.Client(base_url=served.url, timeout=30) as http:
        written_before(http, 54, 40)
        with Writer(served.url, 55, most=100):
            before = storage_length(http)
            query = start(spark, tmp_path, trigger, tier2=tier2, maxBytesPerTrigger=str(limit))
            try:
                stopped = query.awaitTermination(TIMEOUT_S)
            finally:
                query.stop()
            assert stopped, "it stops by itself while the writer writes"
            after = storage_length(http)
            first_run = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
            got = delivered(spark, tmp_path)
        wait_until(lambda: flushed(http, [NAME]), timeout_s=TIMEOUT_S)
        written = http_events(http, NAME, storage_length(http))
        # again: the rest, up to what is flushed now
        query = start(spark, tmp_path, trigger, tier2=tier2, maxBytesPerTrigger=str(limit))
        try:
            assert query.awaitTermination(TIMEOUT_S)
        finally:
            query.stop()
        second_run = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert ends_by(written, before) == got[: len(ends_by(written, before))]
    assert got == written[: len(got)] and got == ends_by(written, got[-1][1] + 8 + len(got[-1][2]))
    assert len(got) <= len(ends_by(written, after))
    assert len(first_run) > 3 and sum(first_run) == len(got)
    everything = delivered(spark, tmp_path)
    assert everything == written and sum(second_run) == len(written) - len(got)
    # each micro-batch: whole events, at most the limit, or one event more
    position = 0
    for rows in first_run + second_run:
        batch = everything[position : position + rows]
        position += rows
        sizes = [8 + len(e[2]) for e in batch]
        assert sum(sizes) - max(sizes) <= limit, (sum(sizes), max(sizes))
