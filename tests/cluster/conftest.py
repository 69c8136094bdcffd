"""A cluster of segment store nodes for the tests of this folder: three ``segmentstore serve
--cluster`` processes over a JetStream cluster of their own (tests kill its nodes) and Tier 2
on S3 (the session's moto server), all on loopback, every process stopped by PID afterwards."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from store_cluster import StoreCluster

from segmentstore.harness.jetstream_cluster import JetStreamCluster

S3_CREDENTIALS = {"access_key": "testing", "secret_key": "testing", "region": "us-east-1"}


@pytest.fixture(scope="module")
def nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JetStreamCluster]:
    with JetStreamCluster.running(tmp_path_factory.mktemp("cluster-jetstream")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def nodes(
    tmp_path_factory: pytest.TempPathFactory, nats: JetStreamCluster, moto_endpoint: str
) -> Iterator[StoreCluster]:
    """Three nodes, settled; a test that stops or adds nodes leaves three settled ones."""
    options = {"endpoint_url": moto_endpoint, "create_bucket": True, **S3_CREDENTIALS}
    settings = {
        "SEGMENTSTORE_TIER2__OPTIONS": json.dumps(options),
        # Tier 2 gets data within the test's seconds, so fencing there is exercised too.
        "SEGMENTSTORE_STORAGE_WRITER__FLUSH_INTERVAL_MS": "500",
        "SEGMENTSTORE_TIER1__JETSTREAM__ACK_TIMEOUT_MS": "2000",
    }
    cluster = StoreCluster(
        tmp_path_factory.mktemp("nodes"),
        nats.servers,
        f"s3://cluster-tests/p{os.getpid()}",
        prefix=f"cl{os.getpid()}",
        settings=settings,
    )
    try:
        cluster.start(3)
        yield cluster
    finally:
        cluster.stop()
