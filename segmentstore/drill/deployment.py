"""What the drill drills: a deployment it spawns itself, or one that is already running.

A spawned deployment is one node (``segmentstore serve``) in a temporary directory, its data
directory on a small tmpfs (so Tier 1 can be filled up) and its Tier 2 either a directory on a
second tmpfs (``file``: it can be filled up, or remounted read-only for an outage) or S3 on a
moto server in a process of its own (``s3``: stopped and started again on the same port for an
outage; moto keeps its objects meanwhile). Where tmpfs cannot be mounted, the faults that need
one are left out and the reason is reported. A running deployment (``--url``) can only be
drilled through its API and the operator's kill command.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from segmentstore.drill.power_loss import LazyDisks, cut_power
from segmentstore.drill.small_disk import SmallDisk, SmallDiskUnavailable
from segmentstore.harness.moto_s3 import URI as S3_URI
from segmentstore.harness.moto_s3 import MotoTier2
from segmentstore.harness.store_node import SpawnedNode


class Deployment(Protocol):
    url: str
    # what it is, for the faults it has (segmentstore.drill.faults.fault.SHAPES)
    shape: str
    # fault kind -> why it cannot be injected here, though deployments of its shape can have it
    unavailable: dict[str, str]

    async def start(self) -> None: ...

    async def close(self, keep: bool = False) -> Path | None:
        """Stop everything it started. ``keep``: the drill failed, so its logs and data stay
        for a person to read; returns where (None if nothing was kept)."""
        ...

    # Each fault's effect is a method of the deployments that have it: the fault asks for it
    # by a protocol of its own (segmentstore.drill.faults), so a deployment lists none of the
    # effects it lacks.

    def rss_bytes(self) -> int | None:
        """The node's resident memory, where the drill can see it."""
        ...

    def node_urls(self) -> dict[str, str]:
        """Node name -> URL of every node that should answer now (for resource samples)."""
        ...


def flush_interval_ms(tier2_uri: str) -> int:
    """How often a spawned node flushes to Tier 2: every half second, so that faults strike
    Tier 2 writes too, but every 5 s on S3, where each flush is an object of its own (half a
    second's appends per object made reading back an hour of load take a GET per few KiB)."""
    return 5000 if tier2_uri.startswith("s3://") else 500


# Tier 1 is truncated only at a metadata checkpoint. At the default interval (1,000 frames) no
# container of a drill reaches one between two faults, so every recovery replays all of Tier 1
# and Tier 2 is never the only copy of anything: a Tier 2 that lost unsynced chunk bytes went
# unnoticed. A spawned deployment checkpoints every few dozen frames instead, the interval
# drawn from the drill's seed (so that runs differ), and its containers hold data that only
# Tier 2 has within seconds of the load's start.
CHECKPOINT_EVERY_FRAMES = (10, 20, 50, 200)


def checkpoint_every_frames(seed: int) -> int:
    """The checkpoint interval of the deployment a drill of ``seed`` spawns."""
    return CHECKPOINT_EVERY_FRAMES[seed % len(CHECKPOINT_EVERY_FRAMES)]


def node_settings(
    tier2_uri: str, tier2_options: dict[str, Any], checkpoint_frames: int = 20
) -> dict[str, Any]:
    return {
        "store": {
            "containers": 4,
            "recovery_retry_min_ms": 200,
            "recovery_retry_max_ms": 2000,
            "recovery_room_bytes": 4 << 20,
        },
        "storage_writer": {
            "flush_interval_ms": flush_interval_ms(tier2_uri),
            "retry_min_ms": 50,
            "retry_max_ms": 1000,
        },
        "durable_log": {"checkpoint_every_frames": checkpoint_frames},
        # Segments idle for two seconds leave memory and are loaded back on their next append
        # or read: a drill over many segments keeps evicting and loading under its faults.
        "metadata": {"idle_eviction_ms": 2000, "max_active_segments": 20_000},
        "tier1": {"segment_bytes": 4 << 20},
        "cache": {"max_bytes": 256 << 20},
        "tier2": {"uri": tier2_uri, "options": tier2_options},
    }


class SpawnedDeployment:
    shape = "node"

    def __init__(
        self,
        tier2_kind: str,
        work_dir: Path | None = None,
        power_loss: bool = False,
        fs_model: str = "strict",
        checkpoint_frames: int = 20,
        workers: int = 1,
    ) -> None:
        self._own_dir = work_dir is None
        self.checkpoint_frames = checkpoint_frames
        self.workers = workers
        self.work_dir = work_dir or Path(tempfile.mkdtemp(prefix="segmentstore-drill-"))
        self.tier2_kind = tier2_kind
        self.unavailable: dict[str, str] = {}
        # power_loss: the data and Tier 2 directories on lazyfs, over the small disks.
        self._lazy = LazyDisks(self.work_dir, fs_model) if power_loss else None
        if not power_loss:
            self.unavailable["power_loss"] = "the deployment was started without lazyfs"
        if workers == 1:
            self.unavailable["worker_kill"] = (
                "the node runs one process (drill it with --workers 2)"
            )
        self._tier1_disk: SmallDisk | None = None
        self._tier2_disk: SmallDisk | None = None
        self._moto: MotoTier2 | None = None
        self.node: SpawnedNode | None = None
        self.url = ""

    async def start(self) -> None:
        data = self.work_dir / "node-1"
        self._tier1_disk, data = self._mount(data, 256 << 20, "tier1_full")
        if self._lazy is not None:  # the node makes its directories on the disk that loses power
            data = data / "data"
        if self.tier2_kind == "s3":
            self._moto = MotoTier2()
            self._moto.start()
            uri, options = S3_URI, self._moto.options
            self.unavailable["tier2_full"] = "S3 (moto) has no size limit to fill"
        else:
            tier2_dir = self.work_dir / "tier2"
            self._tier2_disk, tier2_dir = self._mount(tier2_dir, 2 << 30, "tier2_full")
            if self._lazy is not None:
                tier2_dir = tier2_dir / "data"
            if self._tier2_disk is None:
                self.unavailable["tier2_outage"] = self.unavailable["tier2_full"]
            uri, options = f"file://{tier2_dir}", {}
        settings = node_settings(uri, options, self.checkpoint_frames)
        self.node = SpawnedNode("node-1", data, self.work_dir, settings, self.workers)
        self.url = self.node.url
        self.node.start()
        await asyncio.to_thread(self.node.wait_listening, 120)

    def _mount(self, path: Path, size_bytes: int, fault: str) -> tuple[SmallDisk | None, Path]:
        """A small disk for ``path`` (and lazyfs over it); the disk, and the path to use."""
        disk = SmallDisk(path if self._lazy is None else self._lazy.backing(path), size_bytes)
        mounted: SmallDisk | None = disk
        try:
            disk.mount()
        except SmallDiskUnavailable as reason:
            disk.path.mkdir(parents=True, exist_ok=True)
            self.unavailable[fault] = str(reason)
            mounted = None
        if self._lazy is not None:
            path = self._lazy.mount(path)
            if self._lazy.unavailable is not None:
                self.unavailable["power_loss"] = self._lazy.unavailable
        return mounted, path

    async def close(self, keep: bool = False) -> Path | None:
        if self.node is not None:
            await asyncio.to_thread(self.node.stop)
        if self._moto is not None:
            await asyncio.to_thread(self._moto.close)
        if self._lazy is not None:
            await asyncio.to_thread(self._lazy.unmount)
        for disk in (self._tier1_disk, self._tier2_disk):
            if disk is not None:
                if keep:  # a small disk is memory: what it holds goes with it unless copied
                    kept = disk.path.with_name(disk.path.name + ".kept")
                    await asyncio.to_thread(disk.copy_to, kept)
                disk.unmount()
        if keep:
            return self.work_dir
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)
        return None

    def rss_bytes(self) -> int | None:
        if self.node is None or self.node.proc is None:
            return None
        try:
            status = Path(f"/proc/{self.node.proc.pid}/status").read_text()
        except OSError:
            return None
        found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
        return None if found is None else int(found.group(1)) << 10

    def node_urls(self) -> dict[str, str]:
        return {"node-1": self.url} if self.node is not None else {}

    async def kill(self, rng: random.Random) -> None:
        assert self.node is not None
        await asyncio.to_thread(self.node.sigkill)
        self.node.start()

    async def kill_worker(self, rng: random.Random) -> str:
        """SIGKILL one of the node's workers; its supervisor starts it again at once."""
        assert self.node is not None
        workers = sorted(self.node.worker_pids())
        if not workers:
            return "no worker was running"
        victim = rng.choice(workers)
        os.kill(victim, signal.SIGKILL)
        return f"worker {workers.index(victim)} of {len(workers)} (pid {victim})"

    async def kill_tearing_tail(self, rng: random.Random) -> None:
        assert self.node is not None
        await asyncio.to_thread(self.node.sigkill)
        await asyncio.to_thread(_tear_tail, self.node.data_dir, rng)
        self.node.start()

    async def lose_power(self, rng: random.Random) -> str:
        """SIGKILL, and the loss of what the node's disks had not synced; then start it."""
        assert self.node is not None and self.node.proc is not None and self._lazy is not None
        note = await cut_power([self._lazy], [self.node.proc], rng, self.node.worker_pids())
        self.node.start()
        return note

    async def tier2_outage(self, on: bool) -> None:
        if self._moto is not None:
            await asyncio.to_thread(self._moto.stop if on else self._moto.start)
            return
        lazy = None if self._lazy is None else self._lazy.mount_at(self.work_dir / "tier2")
        if lazy is not None:
            # Refused above the disk: a remount read-only waits until no file on the disk is
            # open for writing, and a node flushing many small segments always has one.
            await asyncio.to_thread(lazy.set_read_only, on)
            return
        assert self._tier2_disk is not None
        await asyncio.to_thread(self._tier2_disk.set_read_only, on)

    async def tier2_full(self, on: bool) -> None:
        if self._moto is not None:
            raise RuntimeError(self.unavailable["tier2_full"])
        assert self._tier2_disk is not None
        if on:
            await asyncio.to_thread(self._tier2_disk.fill)
        else:
            self._tier2_disk.make_room()

    async def tier1_full(self, on: bool) -> None:
        assert self._tier1_disk is not None
        if on:
            await asyncio.to_thread(self._tier1_disk.fill)
        else:
            self._tier1_disk.make_room()


def _tear_tail(data_dir: Path, rng: random.Random) -> None:
    """Leave a torn record at the end of one container's last Tier 1 file, as a write cut short
    by the kill would (the bytes of an append that was never acknowledged)."""
    logs = sorted((data_dir / "tier1").glob("container-*/*.log"))
    if not logs:
        return
    last_of = {path.parent: path for path in logs}  # names sort: the last file of each
    victim = rng.choice(sorted(last_of.values()))
    with open(victim, "ab") as f:
        f.write(rng.randbytes(rng.randint(1, 3000)))
        f.flush()
        os.fsync(f.fileno())


class RunningDeployment:
    """A deployment someone else runs: container restarts through the API, and node kills
    through ``kill_cmd`` (``{node}`` is replaced by the node's host:port), after which the
    operator's orchestrator must bring the node back."""

    shape = "running"

    def __init__(self, urls: list[str], kill_cmd: str | None) -> None:
        self.url = urls[0].rstrip("/")
        self._urls = urls
        self._kill_cmd = kill_cmd
        self.unavailable: dict[str, str] = {}
        if kill_cmd is None:
            self.unavailable["kill"] = "no --kill-cmd was given"

    async def start(self) -> None:
        return None

    async def close(self, keep: bool = False) -> Path | None:
        return None  # nothing of its own: the deployment's logs are where it keeps them

    def node_urls(self) -> dict[str, str]:
        return {url: url for url in self._urls}

    async def kill(self, rng: random.Random) -> None:
        assert self._kill_cmd is not None
        node = urlsplit(rng.choice(self._urls)).netloc
        command = self._kill_cmd.replace("{node}", shlex.quote(node))
        await asyncio.to_thread(subprocess.run, command, shell=True, check=False)

    def rss_bytes(self) -> int | None:
        return None
