"""A store on lazyfs through a simulated power loss: a data directory the store made itself
keeps what was acknowledged in it.

A store used to make its data directory without syncing the directory above it: under POSIX
the new directory's name, and with it everything acknowledged inside, could vanish in a power
loss. lazyfs seed 2 (``keep="random"``) dropped that ``mkdir`` and lost the append; so does any
loss that keeps nothing un-synced (``keep="none"``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from lazy_mounts import mount_or_skip

from segmentstore import SegmentStore

pytestmark = pytest.mark.integration

_STORE = """
import asyncio, sys
from segmentstore import SegmentStore

async def main():
    async with SegmentStore.open(sys.argv[1], tier2=sys.argv[2]) as store:
        await store.create_segment("s")
        await store.append("s", b"acknowledged")
        print("acked", flush=True)
        await asyncio.sleep(600)

asyncio.run(main())
"""


@pytest.mark.parametrize(("seed", "keep"), [(2, "random"), (1, "none")])
async def test_a_data_directory_the_store_made_survives_a_power_loss(
    tmp_path: Path, seed: int, keep: str
) -> None:
    mount = mount_or_skip(tmp_path)
    try:
        data, tier2 = mount.mountpoint / "node" / "data", (tmp_path / "tier2").as_uri()
        store = subprocess.Popen(
            [sys.executable, "-c", _STORE, str(data), tier2], stdout=subprocess.PIPE, text=True
        )
        try:
            assert store.stdout is not None and store.stdout.readline() == "acked\n"
            store.kill()
            mount.lose_power(seed, keep)
        finally:
            store.kill()
            store.wait()
            if store.stdout is not None:
                store.stdout.close()
        async with SegmentStore.open(data, tier2=tier2) as reopened:
            assert bytes(await reopened.read("s", 0)) == b"acknowledged"
    finally:
        mount.unmount()
