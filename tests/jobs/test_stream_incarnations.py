"""A running stream over a real ``segmentstore serve`` whose segments are deleted, or deleted
and created again, under it; real Spark, ``failOnDataLoss`` both ways.

Offsets name each segment's incarnation (its id), so the stream notices: with
``failOnDataLoss=true`` the query fails naming the segment; with ``false`` a deleted segment is
dropped and a re-created one is read from its start, so the 150 events of the new one are all
delivered, none skipped because its bytes happen to lie below the old incarnation's offset.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from segmentstore.client import SegmentStoreClient
from segmentstore.harness.served_store import ServedStore
from segmentstore.tier2 import ManifestStore, open_chunk_storage

pytestmark = [pytest.mark.spark, pytest.mark.integration]

FAST_FLUSH = {
    "SEGMENTSTORE_STORAGE_WRITER__FLUSH_INTERVAL_MS": "50",
    "SEGMENTSTORE_STORAGE_WRITER__FLUSH_THRESHOLD_BYTES": "4096",
}


def payloads(tag: str, count: int) -> list[bytes]:
    return [f"{tag}-{i:04d}".encode() * 3 for i in range(count)]


def flushed(client: SegmentStoreClient, name: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while (info := client.get_info(name)).storage_length < info.length:
        assert time.monotonic() < deadline, f"{name} was not flushed: {info}"
        time.sleep(0.05)


def deleted(client: SegmentStoreClient, uri: str, name: str, timeout_s: float = 30) -> None:
    """Delete ``name`` and wait for its Storage Writer to take it out of Tier 2: the store
    answers a delete once it is durable in Tier 1, and a micro-batch that ran before the
    writer got to it would rightly see the segment as it was."""
    client.delete_segment(name)
    storage = open_chunk_storage(uri)
    try:
        deadline = time.monotonic() + timeout_s
        while ManifestStore(storage).load(name) is not None:
            assert time.monotonic() < deadline, f"{name} is still in Tier 2"
            time.sleep(0.05)
    finally:
        storage.close()


@contextmanager
def served(tmp_path: Path) -> Iterator[tuple[SegmentStoreClient, str]]:
    store = ServedStore(tmp_path / "data", tmp_path / "serve.log", FAST_FLUSH, environ=os.environ)
    try:
        url = store.wait_listening(60)
        store.wait_ready(60)
        with SegmentStoreClient(url) as client:
            yield client, (tmp_path / "data" / "tier2").resolve().as_uri()
    finally:
        store.stop()


@contextmanager
def running_stream(
    spark: Any, uri: str, name: str, fail: str, out: Path | None = None
) -> Iterator[Any]:
    """Into the memory table ``name``; or, with ``out``, into Parquet files there with their
    checkpoint beside them, so that a query stopped can start again where it was."""
    writer = (
        spark.readStream.format("segmentstore")
        .options(tier2=uri, segments="inc/*", failOnDataLoss=fail)
        .load()
        .writeStream.trigger(processingTime="200 milliseconds")
    )
    if out is None:
        writer = writer.format("memory").queryName(name)
    else:
        writer = writer.format("parquet").options(
            path=str(out / "files"), checkpointLocation=str(out / "checkpoint")
        )
    query = writer.start()
    try:
        yield query
    finally:
        query.stop()


def delivered(spark: Any, table: str) -> list[tuple[str, bytes]]:
    rows = spark.sql(f"SELECT segment, event FROM {table}").collect()
    return sorted((r["segment"], bytes(r["event"])) for r in rows)


def failure_of(query: Any) -> str:
    """The failure of the first micro-batch to start from now. One already under way may have
    listed Tier 2 before the change and end with nothing new, which ends the first wait."""
    for _ in range(2):
        try:
            query.processAllAvailable()
        except Exception as failed:
            return str(failed)
    pytest.fail("the query went on after a micro-batch that started after the change")


@pytest.mark.parametrize("again", [False, True], ids=["deleted", "deleted_and_created_again"])
def test_fail_on_data_loss_fails_the_query_naming_the_segment(
    spark: Any, tmp_path: Path, again: bool
) -> None:
    """A running query fails at its next micro-batch after a delete. One that is to see the
    name created again must not run meanwhile (a micro-batch between the delete and the new
    incarnation's flush would see a delete, and say so): it stops, and starts again from its
    checkpoint once the new incarnation is in Tier 2."""
    out = tmp_path / "out" if again else None
    with served(tmp_path) as (client, uri):
        client.create_segment("inc/s")
        client.append_events("inc/s", payloads("old", 100))
        flushed(client, "inc/s")
        with running_stream(spark, uri, "strict", "true", out) as query:
            query.processAllAvailable()
            rows = spark.read.parquet(str(out / "files")) if out else spark.table("strict")
            assert rows.count() == 100
            if not again:
                deleted(client, uri, "inc/s")
                problem = failure_of(query)
        if again:
            client.delete_segment("inc/s")
            client.create_segment("inc/s")
            client.append_events("inc/s", payloads("new", 150))
            flushed(client, "inc/s")
            with running_stream(spark, uri, "strict", "true", out) as query:
                problem = failure_of(query)
    assert "DataLossError: data loss in segment 'inc/s'" in problem, problem
    if again:
        assert "it was deleted and created again (segment id" in problem, problem
    else:
        assert "it was deleted since the streaming query read it" in problem, problem


def test_without_fail_on_data_loss_deleted_segments_drop_and_new_ones_read_whole(
    spark: Any, tmp_path: Path
) -> None:
    """``inc/a`` is deleted, a micro-batch sees it gone, then it is created again; ``inc/b``
    is deleted and created again between two micro-batches. Both new incarnations are shorter
    than the offsets the query had reached in the old ones, and are delivered whole."""
    with served(tmp_path) as (client, uri):
        for name in ("inc/a", "inc/b"):
            client.create_segment(name)
            client.append_events(name, payloads(f"{name}-old", 100))
            flushed(client, name)
        with running_stream(spark, uri, "lenient", "false") as query:
            query.processAllAvailable()
            old = delivered(spark, "lenient")
            assert len(old) == 200
            deleted(client, uri, "inc/a")
            query.processAllAvailable()
            assert delivered(spark, "lenient") == old  # nothing new, and no failure
            for name in ("inc/a", "inc/b"):
                if name == "inc/b":
                    client.delete_segment(name)
                client.create_segment(name)
                client.append_events(name, payloads(f"{name}-new", 150))
                flushed(client, name)
            query.processAllAvailable()
            assert query.exception() is None
            new = [(n, p) for n in ("inc/a", "inc/b") for p in payloads(f"{n}-new", 150)]
            assert delivered(spark, "lenient") == sorted(old + new)
