"""The ``power_loss`` fault of a spawned node: what its disks had not synced is lost.

The node's data directory (its local Tier 1 and ``store.json``) and its file Tier 2 directory
are each a lazyfs mount (:mod:`segmentstore.drill.lazyfs`) over a backing directory, which
remembers every write, creation, rename and removal no ``fsync`` has made durable. A power loss
SIGKILLs the node and, at the same moment, drops or keeps each un-synced operation at random
from a seed the drill draws (so a loss replays: the seed is in the fault's note); the mounts
then show only what survived, and the node is started again on them, to recover by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
from pathlib import Path
from typing import Any

from segmentstore.drill.lazyfs import FuseUnavailable, LazyMount

_MAX_HOLD_S = 0.5


class LazyDisks:
    """Directories that lose what was not synced: each a lazyfs mount over ``<name>.disk``."""

    def __init__(self, work_dir: Path, model: str = "strict") -> None:
        self.work_dir = work_dir
        self.model = model  # which sync makes a name durable (lazyfs.unsynced_names)
        self.mounts: list[LazyMount] = []
        self.labels: dict[Path, str] = {}  # mount point -> what the notes call it
        self.unavailable: str | None = None  # why not, if a mount failed

    @staticmethod
    def backing(path: Path) -> Path:
        return path.with_name(path.name + ".disk")

    def mount(self, path: Path, label: str | None = None) -> Path:
        """Mount lazyfs at ``path`` over its backing directory; the directory to use: ``path``,
        or the backing directory itself where FUSE cannot be mounted (then
        :attr:`unavailable` says why)."""
        backing = self.backing(path)
        label = label or path.name
        if self.unavailable is None:
            self.labels[path] = label
            log = self.work_dir / f"lazyfs-{label}.log"
            mount = LazyMount(backing, path, model=self.model, log=log)
            try:
                mount.mount()
            except FuseUnavailable as reason:
                self.unavailable = f"lazyfs cannot be mounted: {reason}"
            else:
                self.mounts.append(mount)
                return path
        backing.mkdir(parents=True, exist_ok=True)
        return backing

    def mount_at(self, path: Path) -> LazyMount | None:
        """The lazyfs mount at ``path``, if there is one."""
        return next((m for m in self.mounts if m.mountpoint == path), None)

    def hold_syncs(self) -> None:
        for mount in self.mounts:
            mount.hold_syncs()

    def lose_power(self, rng: random.Random, keep: str = "random") -> str:
        """Every mount loses what it had not synced (kill the processes using them first).
        The note says how much; ``power-losses-<label>.jsonl`` in the work directory names
        the files cut and the names dropped (kept with the logs of a drill that failed)."""
        notes = []
        for mount in self.mounts:
            label = self.labels[mount.mountpoint]
            report = mount.lose_power(rng.randrange(1 << 31), keep)
            with open(self.work_dir / f"power-losses-{label}.jsonl", "a") as record:
                record.write(json.dumps(report) + "\n")
            notes.append(describe(label, report))
        return "; ".join(notes)

    def unmount(self) -> None:
        for mount in self.mounts:
            mount.unmount()
        self.mounts = []


async def cut_power(
    lazy: list[LazyDisks],
    processes: list[subprocess.Popen[bytes]],
    rng: random.Random,
    workers: list[int] | None = None,
) -> str:
    """Power goes: the disks stop completing syncs for a moment drawn from ``rng`` (up to
    half a second, as a disk would in its last moments: the processes go on writing, and
    nothing they wrote since is acknowledged), then every process is SIGKILLed and every disk
    loses what it had not synced. Returns once the processes are gone; the note says what
    was lost. ``workers``: the PIDs of the processes' workers, killed with them (each must be
    gone before its disk forgets, or a sync it made after would acknowledge what was lost)."""
    held_s = rng.uniform(0, _MAX_HOLD_S)
    notes: list[str] = []
    try:
        for disks in lazy:
            await asyncio.to_thread(disks.hold_syncs)
        await asyncio.sleep(held_s)
        for proc in processes:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for pid in workers or ():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        # Only now may they be waited for: a thread in a held fsync dies when its mount goes.
        for disks in lazy:
            notes.append(await asyncio.to_thread(disks.lose_power, rng))
    finally:
        if len(notes) < len(lazy):  # interrupted: no process may be left stuck in a sync
            for disks in lazy[len(notes) :]:
                await asyncio.to_thread(disks.lose_power, rng, "all")
    for proc in processes:
        await asyncio.to_thread(proc.wait, 60)
    return f"syncs held {held_s:.2f} s; " + "; ".join(notes)


def describe(label: str, report: dict[str, Any]) -> str:
    """One fault note's part: the seed that replays this loss, and what it dropped."""
    writes, names = report["unsynced_writes"], report["unsynced_names"]
    dropped = writes - report["writes_kept"], names - report["names_kept"]
    return (
        f"{label} seed {report['seed']}: dropped {dropped[0]}/{writes} writes"
        f" in {report['files_with_unsynced_data']} files, {dropped[1]}/{names} name changes"
    )
