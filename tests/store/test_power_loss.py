"""A store on lazyfs through a simulated power loss keeps every append it acknowledged.

Each test runs a store in a child process on a lazyfs mount, waits for its acknowledgements,
kills it and loses power: ``keep="none"`` drops every write and every name change that was not
synced, which is exactly what POSIX promises nothing about. The store opened again must read
back every acknowledged byte. Each test aims at one sync the store depends on, so that a build
without it fails here in seconds (``make mutants``, tests/support/mutant_catalog.py):

- the directory above a data directory the store made itself (lazyfs seed 2, ``keep="random"``,
  once dropped that ``mkdir`` and the append with it);
- the directory entry of a Tier 1 file the log rolled to;
- Tier 2 chunks, and the manifest that replaces the old one, once Tier 1 no longer holds the
  bytes (a checkpoint every two frames lets the log truncate them away).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lazy_mounts import mount_or_skip

from segmentstore import SegmentStore

pytestmark = pytest.mark.integration

_STORE = """
import asyncio, json, sys
from segmentstore import SegmentStore

async def main():
    data, tier2, settings, appends, flushed = sys.argv[1:6]
    async with SegmentStore.open(data, tier2=tier2, **json.loads(settings)) as store:
        await store.create_segment("s")
        for i in range(int(appends)):
            await store.append("s", bytes([65 + i % 26]) * 1000)
        info = await store.get_info("s")
        while flushed == "flushed" and info.storage_length < info.length:
            await asyncio.sleep(0.05)
            info = await store.get_info("s")
        await asyncio.sleep(float(flushed == "flushed"))  # an idle segment leaves memory
        print("acked", flush=True)
        await asyncio.sleep(600)

asyncio.run(main())
"""

# Nothing reaches Tier 2 for an hour: Tier 1 is the only copy.
_TIER1_ONLY: dict[str, Any] = {"storage_writer": {"flush_interval_ms": 3_600_000}}
# Tier 1 rolls to a new file about every fourth append.
_ROLLING = {**_TIER1_ONLY, "tier1": {"segment_bytes": 4096}}
# Flushed at once, checkpointed every two frames (Tier 1 truncated), evicted when idle.
_TIER2_ONLY: dict[str, Any] = {
    "storage_writer": {"flush_interval_ms": 20},
    "durable_log": {"checkpoint_every_frames": 2},
    "metadata": {"idle_eviction_ms": 200},
}


def _expected(appends: int) -> bytes:
    return b"".join(bytes([65 + i % 26]) * 1000 for i in range(appends))


async def _survives_power_loss(
    tmp_path: Path,
    settings: dict[str, Any],
    *,
    appends: int,
    tier2_on_mount: bool = False,
    flushed: bool = False,
    seed: int = 1,
    keep: str = "none",
) -> None:
    mount = mount_or_skip(tmp_path)
    try:
        data = mount.mountpoint / "node" / "data"
        tier2_root = mount.mountpoint / "tier2" if tier2_on_mount else tmp_path / "tier2"
        tier2 = tier2_root.as_uri()
        argv = [str(data), tier2, json.dumps({"containers": 1, **settings}), str(appends)]
        store = subprocess.Popen(
            [sys.executable, "-c", _STORE, *argv, "flushed" if flushed else "acked"],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert store.stdout is not None and store.stdout.readline() == "acked\n"
            store.kill()
            store.wait()
            mount.lose_power(seed, keep)
        finally:
            store.kill()
            store.wait()
            if store.stdout is not None:
                store.stdout.close()
        async with SegmentStore.open(data, tier2=tier2, containers=1) as reopened:
            assert bytes(await reopened.read("s", 0)) == _expected(appends)
    finally:
        mount.unmount()


@pytest.mark.parametrize(("seed", "keep"), [(2, "random"), (1, "none")])
async def test_a_data_directory_the_store_made_survives_a_power_loss(
    tmp_path: Path, seed: int, keep: str
) -> None:
    await _survives_power_loss(tmp_path, _TIER1_ONLY, appends=1, seed=seed, keep=keep)


async def test_appends_in_the_files_tier1_rolled_to_survive_a_power_loss(
    tmp_path: Path,
) -> None:
    await _survives_power_loss(tmp_path, _ROLLING, appends=20)


async def test_appends_only_tier2_holds_survive_a_power_loss(tmp_path: Path) -> None:
    await _survives_power_loss(tmp_path, _TIER2_ONLY, appends=12, tier2_on_mount=True, flushed=True)
