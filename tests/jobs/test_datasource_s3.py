"""The data source over Tier 2 on S3 (moto in server mode on 127.0.0.1): the credentials and
endpoint travel as ``tier2.*`` options, and the events match what the HTTP API returns."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from segmentstore import Settings
from segmentstore.harness.moto_s3 import MotoServer
from segmentstore.tier2 import open_chunk_storage

from .conftest import events_of, frame, http_events, scan, serve_store, wait_until
from .test_datasource import random_events

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.integration]

CREDENTIALS = {"access_key": "testing", "secret_key": "testing", "region": "us-east-1"}


@pytest.fixture
def s3_endpoint() -> Iterator[str]:
    with MotoServer() as server:
        yield server.endpoint


def test_the_data_source_reads_s3_through_its_options(
    spark: Any, tmp_path: Path, s3_endpoint: str
) -> None:
    """The service over S3 Tier 2; the data source, given only the bucket, the endpoint and
    the credentials, returns exactly what ``:readEvents`` returns up to the storage length."""
    uri = f"s3://spark-tier2/{uuid.uuid4().hex}"
    options = {"endpoint_url": s3_endpoint, **CREDENTIALS}
    open_chunk_storage(uri, options={**options, "create_bucket": True}).close()
    settings = Settings().with_overrides(tier2={"uri": uri, "options": options})
    rng = random.Random(21)
    names = [f"s3/events/{i}" for i in range(2)]
    with serve_store(tmp_path / "data", settings=settings) as live, live.client() as http:
        assert live.tier2_uri == uri
        for name in names:
            assert http.put(f"/v1/segments/{name}").status_code == 201
            for _ in range(6):
                body = frame(random_events(rng, rng.randint(1, 25)))
                assert http.post(f"/v1/segments/{name}:appendEvents", content=body).is_success

        def flushed() -> bool:
            infos = [http.get(f"/v1/segments/{n}").json() for n in names]
            return all(i["storage_length"] == i["length"] for i in infos)

        wait_until(flushed)
        expected = sorted(e for n in names for e in http_events(http, n, length_of(http, n)))
        rows = scan(
            spark,
            tier2=uri,
            segments=",".join(names),
            **{f"tier2.{key}": value for key, value in options.items()},
        )
    assert events_of(rows) == expected
    assert len({chunk for *_, chunk in rows}) > 4


def length_of(http: Any, name: str) -> int:
    return int(http.get(f"/v1/segments/{name}").json()["storage_length"])
