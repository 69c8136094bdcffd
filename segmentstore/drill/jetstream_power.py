"""One node whose Tier 1 is a JetStream cluster of three servers that can all lose power at
once (``segmentstore drill --spawn --tier1 jetstream``).

Each ``nats-server``'s store directory is a lazyfs mount (:mod:`segmentstore.drill.power_loss`);
``jetstream_power_loss`` SIGKILLs the three servers together, drops what each had not synced
(a seed per server, in the note) and starts them again on what survived, while the node keeps
running and must recover its containers by itself. With ``sync_interval: always`` (what the
store requires) nothing acknowledged may be lost; with NATS's default (a sync every two
minutes, ``--jetstream-sync default``) the drill shows what that requirement protects.

The servers' disks follow the ``journaled`` model by default: an ``fsync`` of a file also
makes its name durable, as on ext4 and XFS, which NATS relies on (it never syncs a directory:
under the ``strict`` POSIX model, ``--fs-model strict``, a power loss takes every stream created
since the servers started). The node's own faults: ``kill`` and ``container_restart``. Tier 2
is a plain directory.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from segmentstore.drill.deployment import SpawnedDeployment, node_settings
from segmentstore.drill.power_loss import LazyDisks, cut_power
from segmentstore.harness.jetstream_cluster import JetStreamCluster
from segmentstore.harness.store_node import SpawnedNode

_NOT_HERE = "this deployment's Tier 1 is JetStream and its Tier 2 a plain directory"


class SpawnedJetStreamNode(SpawnedDeployment):
    shape = "jetstream_node"

    def __init__(
        self,
        sync_interval: str | None = "always",
        fs_model: str = "journaled",
        work_dir: Path | None = None,
        checkpoint_frames: int = 20,
    ) -> None:
        super().__init__("file", work_dir, checkpoint_frames=checkpoint_frames)
        self.sync_interval = sync_interval
        self.fs_model = fs_model
        self._lazy = LazyDisks(self.work_dir, fs_model)
        self._jetstream = JetStreamCluster(self.work_dir / "jetstream", sync_interval=sync_interval)

    async def start(self) -> None:
        assert self._lazy is not None
        for server in self._jetstream.nodes:
            store = server.directory / "store"
            if self._lazy.mount(store, server.name) != store:  # FUSE cannot be mounted
                self._lazy.backing(store).rename(store)
        if self._lazy.unavailable is not None:
            self.unavailable["jetstream_power_loss"] = self._lazy.unavailable
        await asyncio.to_thread(self._jetstream.start)
        settings = node_settings(
            self.work_dir.joinpath("tier2").as_uri(), {}, self.checkpoint_frames
        )
        settings["tier1"] = {
            "mode": "jetstream",
            "jetstream": {
                "servers": self._jetstream.servers,
                "stream_prefix": "drill",
                "ack_timeout_ms": 2000,
            },
        }
        self.node = SpawnedNode("node-1", self.work_dir / "node-1", self.work_dir, settings)
        self.url = self.node.url
        self.node.start()
        await asyncio.to_thread(self.node.wait_listening, 120)

    async def close(self, keep: bool = False) -> Path | None:
        if self.node is not None:
            await asyncio.to_thread(self.node.stop)
        await asyncio.to_thread(self._jetstream.stop)
        return await super().close(keep)  # the lazyfs mounts, the directory

    async def lose_power(self, rng: random.Random) -> str:
        raise RuntimeError(_NOT_HERE)

    async def lose_jetstream_power(self, rng: random.Random) -> str:
        """All three JetStream servers lose power together and are started again; the node
        keeps running."""
        assert self._lazy is not None
        processes = [server.proc for server in self._jetstream.nodes if server.proc is not None]
        note = await cut_power([self._lazy], processes, rng)
        for server in self._jetstream.nodes:
            server.start()
        await self._jetstream.ready(120)
        return note
