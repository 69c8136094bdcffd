"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from segmentstore import SegmentStore
from segmentstore.bench.jetstream_cluster import JetStreamCluster

# Small enough that files roll, checkpoints happen and Tier 1 truncates within a test.
SMALL = {
    "tier1": {"segment_bytes": 64 * 1024},
    "durable_log": {"checkpoint_every_frames": 8, "max_frame_bytes": 16 * 1024},
}


@pytest.fixture(scope="session")
def jetstream_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JetStreamCluster]:
    """A three-node JetStream cluster on loopback, shared by the whole run (each user takes
    streams of its own prefix)."""
    with JetStreamCluster.running(tmp_path_factory.mktemp("jetstream")) as cluster:
        yield cluster


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SegmentStore]:
    async with SegmentStore.open(tmp_path / "data", **SMALL) as opened:
        yield opened
