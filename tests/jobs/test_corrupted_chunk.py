"""One byte flipped inside a flushed chunk, read every way there is: through HTTP from a
``segmentstore serve`` started again over the data (its cache empty, Tier 1 truncated behind
Tier 2), through ``segmentstore tier2 cat``, and through the Spark source, batch and
streaming. Each refuses the damaged block with an error naming the segment, the chunk and the
byte range; with ``failOnDataLoss=false`` Spark leaves out exactly the events that touch the
damaged block and returns every other one byte for byte as the store returned it before."""

from __future__ import annotations

import asyncio
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from store_checks import flush
from tier2_cli import run_tier2_cli

from segmentstore import SegmentStore
from segmentstore.contracts.mapping import container_of
from segmentstore.harness.served_store import ServedStore
from segmentstore.tier2 import ManifestStore, load_chunk_index, open_chunk_storage
from segmentstore.tier2.chunk_index import Block

from .conftest import Event, events_of, scan
from .test_damaged_spark import one_line_error, stream
from .test_datasource import store_events

pytestmark = pytest.mark.integration

NAME = "crc/flipped"
BLOCK_BYTES = 4096
WRITER = {
    "flush_threshold_bytes": 64 * 1024,
    "flush_interval_ms": 50,
    "max_chunk_bytes": 64 * 1024,
    "checksum_block_bytes": BLOCK_BYTES,
}


@dataclass
class Flipped:
    data_dir: Path
    uri: str
    chunk: str
    block: Block
    events: list[Event]  # as the store returned them before the damage


def touches(event: Event, block: Block) -> bool:
    _, offset, payload = event
    return offset < block.end and offset + 8 + len(payload) > block.start


async def _write(root: Path) -> Flipped:
    rng = random.Random(36)
    data_dir = root / "data"
    async with SegmentStore.open(
        data_dir, storage_writer=WRITER, durable_log={"checkpoint_every_frames": 4}
    ) as store:
        await store.create_segment(NAME)
        for _ in range(900):  # one event per append: each begins a possible boundary
            await store.append_events(NAME, [rng.randbytes(rng.randint(20, 400))])
        await flush(store)
        events = await store_events(store, NAME)
        # Frames after the flush: checkpoints that Tier 1 is truncated at, so that a store
        # opened again recovers (and caches) nothing of the flushed bytes.
        containers = len(store.containers)
        other = next(
            name
            for name in (f"crc/other-{i}" for i in range(1000))
            if container_of(name, containers) == container_of(NAME, containers)
        )
        await store.create_segment(other)
        for i in range(12):
            await store.append_events(other, [b"after the flush %d" % i])
    uri = (data_dir / "tier2").resolve().as_uri()
    storage = open_chunk_storage(uri)
    try:
        loaded = ManifestStore(storage).load(NAME)
        assert loaded is not None
        chunk = loaded[0].chunks[0]
        index = load_chunk_index(storage, chunk)
        assert len(index.blocks) >= 8, index.blocks
        block = index.blocks[5]  # a block in the middle of its chunk
        at = (block.start + block.end) // 2 - chunk.start_offset
        data = bytearray(storage.read(chunk.key, 0, chunk.length))
        data[at] = data[at] ^ 0x04  # one digit's worth: '0' <-> '4'
        storage.delete(chunk.key)
        storage.create(chunk.key, [bytes(data)])
    finally:
        storage.close()
    return Flipped(data_dir, uri, chunk.key, block, events)


@pytest.fixture(scope="module")
def flipped(tmp_path_factory: pytest.TempPathFactory) -> Flipped:
    return asyncio.run(_write(tmp_path_factory.mktemp("flipped")))


def _range(flipped: Flipped) -> str:
    return f"bytes [{flipped.block.start}, {flipped.block.end})"


def test_http_after_a_restart_refuses_the_block_naming_it(flipped: Flipped, tmp_path: Path) -> None:
    served = ServedStore(flipped.data_dir, tmp_path / "serve.log", environ=os.environ)
    try:
        url = served.wait_listening(60)
        served.wait_ready(60)
        with httpx.Client(base_url=url, timeout=30) as http:
            path = "/v1/segments/" + NAME + ":read"
            block = flipped.block
            before = http.get(path, params={"offset": 0, "max_length": block.start})
            assert before.status_code == 200 and len(before.content) == block.start
            answer = http.get(path, params={"offset": block.start + 10, "max_length": 100})
            assert answer.status_code == 502, answer.text
            error = answer.json()["error"]
            assert error["code"] == "data_corrupted"
            assert (error["segment"], error["chunk"]) == (NAME, flipped.chunk)
            assert (error["start"], error["end"]) == (block.start, block.end)
            metrics = http.get("/metrics").text
            assert any(
                line.startswith("segmentstore_container_tier2_corrupted_reads_total")
                and not line.endswith(" 0.0")
                for line in metrics.splitlines()
            ), metrics
    finally:
        served.stop()


async def test_tier2_cat_refuses_the_block_naming_it(flipped: Flipped) -> None:
    code, out, err = await run_tier2_cli("cat", flipped.uri, NAME)
    assert code == 1
    assert f"segment {NAME!r}: {_range(flipped)} of chunk {flipped.chunk} are damaged" in err
    assert "CRC32C" in err
    assert len(out) <= flipped.block.start  # nothing of the damaged block is printed


@pytest.mark.spark
def test_spark_batch_and_stream_fail_or_skip_exactly_the_damaged_block(
    spark: Any, flipped: Flipped, tmp_path: Path
) -> None:
    options = {"tier2": flipped.uri, "segments": NAME}
    problem = f"data loss in segment {NAME!r}, chunk {flipped.chunk}: {_range(flipped)} are damaged"
    with pytest.raises(Exception) as batch:
        scan(spark, **options)
    one_line_error(batch.value, problem)
    with pytest.raises(Exception) as streamed:
        stream(spark, tmp_path / "fail", **options)
    one_line_error(streamed.value, problem)

    expected = [e for e in flipped.events if not touches(e, flipped.block)]
    missing = len(flipped.events) - len(expected)
    assert 5 < missing < 40, missing  # the events of one 4 KiB block, and those across its edges
    assert events_of(scan(spark, **options, failOnDataLoss="false")) == expected
    assert stream(spark, tmp_path / "skip", **options, failOnDataLoss="false") == expected
