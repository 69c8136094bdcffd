"""The data source over Tier 2 on S3 (moto in server mode on 127.0.0.1): the credentials and
endpoint travel as ``tier2.*`` options, and the events match what the store returns."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from moto.server import ThreadedMotoServer

from segmentstore import SegmentStore, Settings
from tier2 import open_chunk_storage

from .conftest import FAST_WRITER, events_of, scan
from .test_datasource import flush, random_events, store_events

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.integration]

CREDENTIALS = {"access_key": "testing", "secret_key": "testing", "region": "us-east-1"}


@pytest.fixture
def s3_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


async def test_the_data_source_reads_s3_through_its_options(
    spark: Any, tmp_path: Path, s3_endpoint: str
) -> None:
    uri = f"s3://spark-tier2/{uuid.uuid4().hex}"
    options = {"endpoint_url": s3_endpoint, **CREDENTIALS}
    open_chunk_storage(uri, options={**options, "create_bucket": True}).close()
    settings = Settings().with_overrides(tier2={"uri": uri, "options": options})
    rng = random.Random(21)
    names = [f"s3/events/{i}" for i in range(2)]
    async with SegmentStore.open(
        tmp_path / "data", settings=settings, storage_writer=FAST_WRITER
    ) as store:
        for name in names:
            await store.create_segment(name)
            for _ in range(6):
                await store.append_events(name, random_events(rng, rng.randint(1, 25)))
        await flush(store)
        expected = sorted([e for name in names for e in await store_events(store, name)])
        rows = scan(
            spark,
            tier2=uri,
            segments=",".join(names),
            **{f"tier2.{key}": value for key, value in options.items()},
        )
    assert events_of(rows) == expected
    assert len({chunk for *_, chunk in rows}) > 4
