"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from store_cluster import StoreCluster

from segmentstore import SegmentStore
from segmentstore.drill.network import DrillNetwork
from segmentstore.harness.jetstream_cluster import JetStreamCluster

# Small enough that files roll, checkpoints happen and Tier 1 truncates within a test.
SMALL = {
    "tier1": {"segment_bytes": 64 * 1024},
    "durable_log": {"checkpoint_every_frames": 8, "max_frame_bytes": 16 * 1024},
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files of slow tests first (those that start a Spark cluster, the longest, before the
    rest), each file's tests kept together and in order: the test processes (``make test``'s
    ``-n``) then start the longest files at once and share out the short ones at the end,
    instead of one process running a long file after the rest are done."""

    def files(marker: str) -> set[Path]:
        return {item.path for item in items if item.get_closest_marker(marker)}

    standalone, slow = files("standalone"), files("slow")
    items.sort(key=lambda item: (item.path not in standalone, item.path not in slow))


@pytest.fixture(scope="session")
def jetstream_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JetStreamCluster]:
    """A three-node JetStream cluster on loopback, shared by the whole run (each user takes
    streams of its own prefix)."""
    with JetStreamCluster.running(tmp_path_factory.mktemp("jetstream")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def shared_store_cluster(
    tmp_path_factory: pytest.TempPathFactory, jetstream_cluster: JetStreamCluster
) -> Iterator[StoreCluster]:
    """Three ``segmentstore serve --cluster`` nodes over the session's JetStream cluster and a
    shared Tier 2 directory, for tests that only use the cluster (never stop its nodes)."""
    root = tmp_path_factory.mktemp("store-cluster")
    cluster = StoreCluster(
        root, jetstream_cluster.servers, (root / "tier2").as_uri(), prefix=f"shared{os.getpid()}",
        containers=4,
        # Nothing here stops a node: a long lease keeps containers where they are even when
        # a loaded machine starves a node of CPU for seconds.
        lease_ms=20_000,
    )  # fmt: skip
    try:
        cluster.start(3)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def switchboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DrillNetwork]:
    """The drill's switchboard of loopback proxies (one process for the whole run): each user
    names links of its own."""
    root = tmp_path_factory.mktemp("switchboard")
    network = DrillNetwork(root / "network", root / "nodes")
    try:
        yield network
    finally:
        network.close()


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """One moto S3 server on a free port of 127.0.0.1 for the whole run (each user takes a
    bucket or prefix of its own)."""
    from segmentstore.harness.moto_s3 import MotoServer

    with MotoServer() as server:
        yield server.endpoint


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SegmentStore]:
    async with SegmentStore.open(tmp_path / "data", **SMALL) as opened:
        yield opened
