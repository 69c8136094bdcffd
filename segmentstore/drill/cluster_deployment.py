"""A cluster the drill spawns itself (``--spawn --nodes N``), and the faults only a cluster has.

In a temporary directory: a JetStream cluster of three ``nats-server`` processes on loopback
(Tier 1, and the leases by which nodes share the containers), ``N`` segment store nodes in
cluster mode, and one Tier 2 that all of them share: S3 on a moto server in a process of its
own, or a plain directory. The drill's requests are spread over every node that can answer.

Its faults are each *broken* and, once the survivors have healed, *mended*:

- ``kill``: a node is SIGKILLed; the others take over its containers when its leases expire.
  Mended by starting it again on the same port: it rejoins and gets its share back.
- ``node_pause``: a node is SIGSTOPped, as in a long pause of its process or VM, and stays
  stopped until its containers have been taken over (its leases expired). Mended by SIGCONT:
  the node wakes up as a stale owner, must be fenced (nothing it accepts then is acknowledged),
  gives its containers up and rejoins.
- ``node_leave``: a node is stopped gracefully (SIGTERM): it hands its containers over before
  it exits. Mended by starting it again: it rejoins and takes its share back.
- ``jetstream_kill``: a JetStream server is SIGKILLed (the streams it led elect new leaders).
  Mended by starting it again on the same ports and store directory.

Every link (client to node, node to node, node to JetStream server, server to server) passes
through the drill's switchboard of proxies (:mod:`.network`), and the partition faults
(:mod:`.partitions`) cut, black-hole, hold one way or slow down some of them for longer than the
lease, then heal them. Meanwhile the drill samples which node serves which container
(:mod:`.ownership`), to check afterwards that no node acknowledged an append after it had been
fenced out.

Container restarts (sent to any node, which forwards them) and Tier 2 outages (moto stopped and
started) work as for one node. Tier 1 here is JetStream, so the tmpfs faults (``tier1_full``,
``torn_tail``) do not apply, nor does a full Tier 2.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from segmentstore.contracts.members import node_of
from segmentstore.drill.deployment import flush_interval_ms
from segmentstore.drill.network import DrillNetwork
from segmentstore.drill.ownership import OwnershipSampler
from segmentstore.drill.partitions import Partitions, fencing_lines
from segmentstore.drill.spread import CLUSTER_URL, SpreadTransport
from segmentstore.harness.jetstream_cluster import JetStreamCluster, JetStreamNode
from segmentstore.harness.moto_s3 import URI as S3_URI
from segmentstore.harness.moto_s3 import MotoTier2
from segmentstore.harness.store_nodes import StoreNode, StoreNodes

CONTAINERS = 6  # two per node of the documented three
_SETTINGS = {
    "SEGMENTSTORE_STORAGE_WRITER__RETRY_MAX_MS": "1000",
    "SEGMENTSTORE_STORE__RECOVERY_RETRY_MIN_MS": "200",
    "SEGMENTSTORE_STORE__RECOVERY_RETRY_MAX_MS": "2000",
    "SEGMENTSTORE_TIER1__JETSTREAM__ACK_TIMEOUT_MS": "2000",
    "SEGMENTSTORE_CACHE__MAX_BYTES": str(256 << 20),
    # Tier 2 must become the only copy within seconds (deployment.CHECKPOINT_EVERY_FRAMES).
    "SEGMENTSTORE_DURABLE_LOG__CHECKPOINT_EVERY_FRAMES": "20",
}


class SpawnedCluster:
    url = CLUSTER_URL
    shape = "cluster"

    def __init__(
        self,
        tier2_kind: str,
        nodes: int,
        parent_env: Mapping[str, str],
        lease_ms: int = 5000,
        work_dir: Path | None = None,
        settings: Mapping[str, str] | None = None,
        workers: int = 1,
    ) -> None:
        """``settings``: the nodes' settings (``SEGMENTSTORE_...`` variables) over the drill's;
        ``workers``: each node's worker processes, each a member of its own."""
        if nodes < 2:
            raise ValueError("a cluster has at least two nodes")
        self.workers = workers
        self._own_dir = work_dir is None
        self.work_dir = work_dir or Path(tempfile.mkdtemp(prefix="segmentstore-drill-"))
        self.tier2_kind = tier2_kind
        self.node_count = nodes
        self.lease_ms = lease_ms
        self._settings = {**_SETTINGS, **(settings or {})}
        self._parent_env = parent_env  # the nodes' environment, less its segmentstore settings
        self.unavailable: dict[str, str] = {}
        if tier2_kind != "s3":
            self.unavailable["tier2_outage"] = "only S3 (moto) can be taken away from every node"
        if workers == 1:
            self.unavailable["worker_kill"] = "each node runs one process (--workers 2 or more)"
        else:
            from segmentstore.drill.faults import PARTITION_KINDS

            for kind in PARTITION_KINDS:  # the workers' own addresses are reached directly
                self.unavailable[kind] = "a node's workers are not behind the switchboard"
        self._jetstream = JetStreamCluster(self.work_dir / "jetstream")
        self._moto: MotoTier2 | None = None
        self.nodes: StoreNodes | None = None
        self._broken_node: StoreNode | None = None
        self._down: set[str] = set()  # nodes a fault took down on purpose, until mended
        self._broken_jetstream: JetStreamNode | None = None
        self._fencing_before = 0
        self.network: DrillNetwork | None = None
        self.ownership: OwnershipSampler | None = None
        self.partitions: Partitions | None = None

    async def start(self) -> None:
        self.network = DrillNetwork(self.work_dir / "network", self.work_dir / "nodes")
        self.network.route_jetstream(self._jetstream)
        await asyncio.to_thread(self._jetstream.start)
        env = {**self._settings, "SEGMENTSTORE_CLUSTER__LEASE_MS": str(self.lease_ms)}
        if self.tier2_kind == "s3":
            self._moto = MotoTier2()
            await asyncio.to_thread(self._moto.start)
            uri = S3_URI
            env["SEGMENTSTORE_TIER2__OPTIONS"] = json.dumps(self._moto.options)
        else:
            uri = (self.work_dir / "tier2").as_uri()
        # Tier 2 gets data within a fault's seconds, so fencing there is drilled too.
        flush_key = "SEGMENTSTORE_STORAGE_WRITER__FLUSH_INTERVAL_MS"
        env.setdefault(flush_key, str(flush_interval_ms(uri)))
        self.nodes = StoreNodes(
            self.work_dir / "nodes",
            self._jetstream.servers,
            uri,
            prefix="drill",
            containers=CONTAINERS,
            parent_env=self._parent_env,
            env=env,
            workers=self.workers,
        )
        for _ in range(self.node_count):
            self.network.prepare_node(self.nodes).start()
        try:
            await asyncio.to_thread(self.nodes.wait_settled, 180)
        except TimeoutError as error:
            raise RuntimeError(str(error)) from error
        if dead := self._dead():
            raise RuntimeError(f"nodes {dead} did not start (see their logs in {self.work_dir})")
        self.partitions = Partitions(self.network, self.nodes, self.lease_ms)
        self.ownership = OwnershipSampler(self.nodes)
        self.ownership.start()

    def live_urls(self) -> list[str]:
        """Where the drill's requests go: the proxies in front of the nodes that can answer."""
        if self.nodes is None or self.network is None:
            return []
        return [self.network.client_url(node.node_id) for node in self.nodes.live]

    def node_urls(self) -> dict[str, str]:
        return {} if self.nodes is None else {node.node_id: node.url for node in self.nodes.live}

    def transport(self, limits: httpx.Limits, seed: int) -> httpx.AsyncBaseTransport:
        return SpreadTransport(self.live_urls, seed, limits=limits)

    async def settled(self) -> bool:
        """Every node up (but one a fault took down), ready, every container held by one of
        them, shares even."""
        assert self.nodes is not None
        if self._dead():
            return False
        return await asyncio.to_thread(self.nodes.settled)

    def _dead(self) -> list[str]:
        """Nodes that should answer and cannot: a node that died by itself, or that did not
        come back from a fault."""
        assert self.nodes is not None
        return [
            node_id
            for node_id, node in self.nodes.nodes.items()
            if node_id not in self._down and not node.alive
        ]

    async def close(self, keep: bool = False) -> Path | None:
        if self.ownership is not None:
            await self.ownership.stop()
        if self.nodes is not None:
            # Thrown away with its directory: no hand-over of containers (a SIGTERM's) needed.
            for node in self.nodes.nodes.values():
                await asyncio.to_thread(node.sigkill)
        await asyncio.to_thread(self._jetstream.stop)
        if self.network is not None:
            await asyncio.to_thread(self.network.close)
        if self._moto is not None:
            await asyncio.to_thread(self._moto.close)
        if keep:
            return self.work_dir
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)
        return None

    # -- the faults of its processes: each broken by one method, mended by another ----------

    async def kill_node(self, rng: random.Random) -> str:
        victim, held = await self._break_node(rng)
        await asyncio.to_thread(victim.sigkill)
        return held

    async def stop_node(self, rng: random.Random) -> str:
        """A graceful stop (SIGTERM): the node hands its containers over first."""
        victim, held = await self._break_node(rng)
        await asyncio.to_thread(victim.stop)
        return held

    async def restart_node(self) -> str:
        """Start the node that was killed or stopped again; it rejoins."""
        assert self.nodes is not None and self._broken_node is not None
        self._down = set()
        self.nodes.add(self._broken_node.node_id)
        return "restarted"

    async def pause_node(self, rng: random.Random) -> str:
        victim, held = await self._break_node(rng)
        victim.pause()
        return held

    async def resume_node(self) -> str:
        assert self._broken_node is not None
        self._down = set()
        self._broken_node.resume()
        return "woken up"

    def paused_node_said(self) -> str:
        """Once woken and settled: what the node that was paused logged on waking up."""
        assert self._broken_node is not None
        said = fencing_lines(self._broken_node) - self._fencing_before
        return f"; on waking it logged {said} lost leases or fencings"

    async def kill_worker(self, rng: random.Random) -> str:
        """SIGKILL one worker of a live node; its supervisor starts it again at once, and it
        takes back the leases it held under its id (or the others take them as they expire)."""
        assert self.nodes is not None
        node = rng.choice(self.nodes.live)
        workers = sorted(node.worker_pids())
        if not workers:
            return f"{node.node_id} had no worker running"
        victim = rng.choice(workers)
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGKILL)
        return f"{node.node_id}: worker {workers.index(victim)} of {len(workers)} (pid {victim})"

    async def kill_jetstream_server(self, rng: random.Random) -> str:
        self._broken_jetstream = rng.choice(self._jetstream.nodes)
        await asyncio.to_thread(self._broken_jetstream.sigkill)
        return f"JetStream {self._broken_jetstream.name}"

    async def restart_jetstream_server(self) -> str:
        assert self._broken_jetstream is not None
        self._broken_jetstream.start()
        await self._jetstream.ready()
        return "restarted"

    async def _break_node(self, rng: random.Random) -> tuple[StoreNode, str]:
        """A live node picked to be broken, and what it held (for the note)."""
        assert self.nodes is not None
        victim = rng.choice(self.nodes.live)
        held = await asyncio.to_thread(self._held_by, victim)
        self._broken_node = victim
        self._down = {victim.node_id}
        self._fencing_before = fencing_lines(victim)
        return victim, f"{victim.node_id} (held containers {held})"

    def stale_acknowledgements(self, answered_by: dict[str, Any]) -> list[str]:
        """Appends acknowledged by a node after another had taken its container over."""
        assert self.ownership is not None and self.network is not None
        network, ownership = self.network, self.ownership

        def node_at(url: str) -> str | None:
            """The node of a proxy's URL, or of a worker's own address as the map gave it."""
            return network.node_at(url) or ownership.node_at(url)

        return ownership.stale_acknowledgements(answered_by, CONTAINERS, node_at)

    def _held_by(self, node: StoreNode) -> list[int]:
        assert self.nodes is not None
        owners = self.nodes.owners(node.url).items()
        return [c for c, owner in owners if owner is not None and node_of(owner) == node.node_id]

    def rss_bytes(self) -> int | None:
        return None  # a figure per node would not say which one a read was served by

    # The effect of a fault it shares with a single node.

    async def tier2_outage(self, on: bool) -> None:
        assert self._moto is not None
        await asyncio.to_thread(self._moto.stop if on else self._moto.start)
