"""The streaming source end to end: a real ``segmentstore serve`` process takes appends over
HTTP while a query streams its Tier 2 into a Parquet sink with a checkpoint; the query is
stopped and started again from the checkpoint with more appends and a new segment in between.
The sink must hold every event exactly once: what the HTTP API reads back, no more, no less."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from segmentstore.harness.served_store import ServedStore

from .conftest import Event, frame, http_events, wait_until
from .test_datasource import random_events

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

KiB = 1024
MAX_BYTES_PER_TRIGGER = 64 * KiB


def append(http: httpx.Client, name: str, rng: random.Random, batches: int) -> None:
    for _ in range(batches):
        body = frame(random_events(rng, rng.randint(1, 12)))
        response = http.post(f"/v1/segments/{name}:appendEvents", content=body)
        assert response.is_success, response.text


def flushed(http: httpx.Client, names: list[str]) -> bool:
    infos = [http.get(f"/v1/segments/{n}").json() for n in names]
    return all(i["storage_length"] == i["length"] for i in infos)


def start_query(spark: Any, tier2: str, sink: Path, checkpoint: Path) -> Any:
    events = (
        spark.readStream.format("segmentstore")
        .option("tier2", tier2)
        .option("segments", "stream/*")
        .option("maxBytesPerTrigger", str(MAX_BYTES_PER_TRIGGER))
        .load()
    )
    return (
        events.writeStream.format("parquet")
        .option("path", str(sink))
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def test_a_stream_delivers_every_event_once_across_a_restart_and_flushes(
    spark: Any, served: ServedStore, tmp_path: Path
) -> None:
    rng = random.Random(20)
    tier2 = (tmp_path / "data" / "tier2").resolve().as_uri()
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    with httpx.Client(base_url=served.url, timeout=30) as http:
        assert http.put("/v1/segments/stream/0").status_code == 201
        append(http, "stream/0", rng, 15)
        wait_until(lambda: flushed(http, ["stream/0"]))

        query = start_query(spark, tier2, sink, checkpoint)
        try:
            # appends while the query runs: it sees them as the Storage Writer flushes them
            writer = threading.Thread(target=append, args=(http, "stream/0", rng, 30))
            writer.start()
            writer.join()
            wait_until(lambda: flushed(http, ["stream/0"]))
            query.processAllAvailable()
        finally:
            query.stop()
        batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        first_run = len(spark.read.parquet(str(sink)).collect())

        # while no query runs: more events, and a new segment that matches the prefix
        append(http, "stream/0", rng, 8)
        assert http.put("/v1/segments/stream/1").status_code == 201
        append(http, "stream/1", rng, 8)
        query = start_query(spark, tier2, sink, checkpoint)
        try:
            append(http, "stream/1", rng, 8)
            wait_until(lambda: flushed(http, ["stream/0", "stream/1"]))
            query.processAllAvailable()
            assert query.exception() is None
        finally:
            query.stop()
        batches += [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]

        written: list[Event] = []
        for name in ("stream/0", "stream/1"):
            length = http.get(f"/v1/segments/{name}").json()["length"]
            written += http_events(http, name, length)
    rows = spark.read.parquet(str(sink)).collect()
    delivered = sorted((r["segment"], r["offset"], bytes(r["event"])) for r in rows)
    assert 0 < first_run < len(rows)
    # the limit cut the data into several micro-batches, each of whole events
    assert len(batches) > 4 and sum(batches) == len(rows)
    assert len(delivered) == len(set(delivered)), "an event was delivered twice"
    assert delivered == sorted(written)
