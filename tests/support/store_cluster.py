"""A cluster of ``segmentstore serve --cluster`` processes on loopback, for tests that kill
nodes: each node a :class:`~served_store.ServedStore`, all sharing one JetStream cluster
(Tier 1 and the leases) and one Tier 2 (a shared directory, or S3 on a moto server)."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any

import httpx

from segmentstore.cluster.secret import ClusterSecret
from segmentstore.harness.served_store import ServedStore
from segmentstore.harness.store_nodes import unsettled

# Short enough that a takeover test takes seconds, as long as the one the cluster documents.
LEASE_MS = 5_000


class StoreCluster:
    def __init__(
        self,
        root: Path,
        nats_servers: list[str],
        tier2_uri: str,
        *,
        prefix: str,
        containers: int = 8,
        settings: dict[str, str] | None = None,
        lease_ms: int = LEASE_MS,
    ) -> None:
        self.lease_ms = lease_ms
        self.root = root
        self.nats = ",".join(nats_servers)
        self.tier2_uri = tier2_uri
        self.prefix = prefix
        self.containers = containers
        self.settings = settings or {}
        self.secret = secrets.token_hex(16)  # the nodes' shared cluster secret
        self.nodes: dict[str, ServedStore] = {}

    def start_node(self, node_id: str) -> ServedStore:
        settings = {
            "SEGMENTSTORE_TIER1__JETSTREAM__STREAM_PREFIX": self.prefix,
            "SEGMENTSTORE_CLUSTER__LEASE_MS": str(self.lease_ms),
            "SEGMENTSTORE_CLUSTER__SECRET": self.secret,
            "SEGMENTSTORE_CACHE__MAX_BYTES": str(64 << 20),
            **self.settings,
        }
        args = [
            "--tier1", "jetstream", "--nats", self.nats, "--tier2", self.tier2_uri,
            "--containers", str(self.containers), "--cluster", "--node-id", node_id,
            "--log-level", "info",
        ]  # fmt: skip
        node = ServedStore(
            self.root / node_id, self.root / f"{node_id}.log", settings, args, environ=os.environ
        )
        self.nodes[node_id] = node
        return node

    def start(self, count: int, timeout_s: float = 90) -> None:
        started = [self.start_node(f"n{i}") for i in range(1, count + 1)]
        for node in started:
            node.wait_listening(timeout_s)
        self.wait_settled(timeout_s)

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes.values() if n.proc.poll() is None]

    def cluster_map(self, via: str | None = None) -> dict[str, Any]:
        url = via or self.urls[0]
        return dict(httpx.get(f"{url}/v1/cluster", timeout=5).json())

    def wait_settled(self, timeout_s: float = 90, nodes: int | None = None) -> float:
        """Until the live nodes (``nodes`` of them, if given) have settled
        (:func:`~segmentstore.harness.store_nodes.unsettled`): every container held by a live
        node, each holding its share; the seconds it took."""
        started = time.monotonic()
        while (why := self._unsettled(nodes)) is not None:
            if time.monotonic() - started > timeout_s:
                logs = "\n".join(f"--- {i}\n{n.log()}" for i, n in self.nodes.items())
                raise AssertionError(f"the cluster did not settle in {timeout_s} s: {why}\n{logs}")
            time.sleep(0.1)
        return time.monotonic() - started

    def _unsettled(self, nodes: int | None) -> str | None:
        live = self.live
        if nodes is not None and len(live) != nodes:
            return f"{len(live)} nodes run, not {nodes}"
        return unsettled(live)

    @property
    def live(self) -> dict[str, str]:
        """node id -> URL of every node whose process runs."""
        return {i: n.url for i, n in self.nodes.items() if n.proc.poll() is None}

    def as_member(
        self,
        method: str,
        path: str,
        node: str = "test",
        body: bytes = b"",
        query: bytes = b"",
        at_ms: int | None = None,
    ) -> dict[str, str]:
        """Headers that make a request with ``body`` look forwarded by member ``node``
        (signed with the cluster's secret, now or at ``at_ms``), for tests that play a
        forwarding node."""
        signature, _ = ClusterSecret(self.secret.encode()).sign_request(
            node, method, path.encode(), query, body, at_ms
        )
        return {"Segment-Forwarded-By": node, "Segment-Forwarded-Signature": signature}

    def stop(self) -> None:
        for node in self.nodes.values():
            if node.proc.poll() is None:
                node.proc.kill()
            node.stop()
