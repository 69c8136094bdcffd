"""A node cut off from JetStream while clients still reach it, on a cluster whose every link
passes through the drill's switchboard: it stops serving its containers within its lease, even
when each call it makes to JetStream meanwhile waits longer than a lease for an answer."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import httpx
import pytest

from segmentstore.drill.cluster_deployment import SpawnedCluster

pytestmark = [pytest.mark.cluster, pytest.mark.integration]

LEASE_MS = 4000


async def _serving(url: str, node: str) -> set[int]:
    async with httpx.AsyncClient(timeout=2) as client:
        view = (await client.get(f"{url}/v1/cluster")).json()
    return {c["id"] for c in view["containers"] if c["owner"] == node}


async def test_a_node_black_holed_from_jetstream_stops_serving_within_its_lease(
    tmp_path: Path,
) -> None:
    # Every call to an unanswering JetStream waits twice a lease before it fails: a node that
    # looked at its leases only between calls would notice after they had expired.
    slow_calls = {"SEGMENTSTORE_TIER1__JETSTREAM__ACK_TIMEOUT_MS": str(2 * LEASE_MS)}
    cluster = SpawnedCluster("file", 2, os.environ, LEASE_MS, tmp_path, slow_calls)
    await cluster.start()
    try:
        assert cluster.nodes is not None and cluster.network is not None
        victim = cluster.nodes.nodes["n1"]
        held = await _serving(victim.url, "n1")
        assert held, "a settled cluster of two gives each node its share"
        cut = time.monotonic()
        for server in cluster.network.jetstream:
            await asyncio.to_thread(cluster.network.set, "n1", server, "black_hole")
        while await _serving(victim.url, "n1"):  # asked directly, not through the switchboard
            assert time.monotonic() - cut < 3 * LEASE_MS / 1000, "it never stopped serving"
            await asyncio.sleep(0.05)
        stopped_s = time.monotonic() - cut
        assert stopped_s < LEASE_MS / 1000, f"it served its containers {stopped_s:.1f} s"
        await asyncio.to_thread(cluster.network.heal)
    finally:
        await cluster.close()
