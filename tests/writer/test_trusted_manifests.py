"""A manifest that an owner killed mid-save left visible but not durable (renamed into place,
its directory not yet synced) is made durable before the next owner trusts it: the next owner
frees Tier 1 behind its storage length and lets the segment leave memory on its state, and a
power loss must not then take it back (the drill lost appends that way, on lazyfs)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from lazy_mounts import mount_or_skip

import segmentstore.tier2.file_storage as file_storage
from segmentstore.containers.manifest_lookups import ManifestLookups
from segmentstore.tier2 import (
    ChunkStorage,
    ManifestStore,
    SegmentManifest,
    SegmentState,
    open_chunk_storage,
)
from segmentstore.writer.segment_flusher import SegmentFlusher

pytestmark = pytest.mark.integration


def _manifest(length: int, writers: dict[str, int]) -> SegmentManifest:
    return SegmentManifest(
        name="devices/42", segment_id=7, chunks=(), storage_length=0, start_offset=0,
        sealed=False, owner_epoch=1, version=0,
        state=SegmentState(length=length, created_ms=1, last_modified_ms=1, writers=writers),
    )  # fmt: skip


def _by_the_writer(storage: ChunkStorage) -> SegmentManifest | None:
    """The next owner's Storage Writer, which frees Tier 1 and evicts on what it reads."""
    flusher = SegmentFlusher(
        storage, ManifestStore(storage), "devices/42", 7, 2, 4096, 3_600_000, 4096
    )
    return flusher.load()


def _by_a_load(storage: ChunkStorage) -> SegmentManifest | None:
    """The next owner loading the inactive segment back, to take appends."""

    async def load() -> SegmentManifest | None:
        lookups = ManifestLookups(storage)
        try:
            return await lookups.get("devices/42")
        finally:
            lookups.close()

    return asyncio.run(load())


@pytest.mark.parametrize("read", [_by_the_writer, _by_a_load])
def test_a_manifest_left_unsynced_by_a_killed_owner_is_synced_before_it_is_trusted(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    read: Callable[[ChunkStorage], SegmentManifest | None],
) -> None:
    mount = mount_or_skip(tmp_path)  # strict: only a directory fsync makes a name durable
    try:
        storage = open_chunk_storage((mount.mountpoint / "tier2").as_uri())
        manifests = ManifestStore(storage)
        token = manifests.save(_manifest(0, {}), None, epoch=1)
        # The old owner renames the next version into place and is killed before it syncs
        # the directory: others see it, a power loss would take it back.
        with monkeypatch.context() as killed:
            killed.setattr(file_storage, "fsync_directory", lambda _path: None)
            later = dataclasses.replace(_manifest(0, {"w": 1}), version=1)
            manifests.save(later, token, epoch=1)
        # The next owner reads it: what it trusts must survive a power loss.
        loaded = read(storage)
        assert loaded is not None and loaded.state is not None
        assert loaded.state.writers == {"w": 1}
        storage.close()
        mount.lose_power(seed=1, keep="none")
        storage = open_chunk_storage((mount.mountpoint / "tier2").as_uri())
        after = ManifestStore(storage).load("devices/42")
        assert after is not None and after[0].state is not None
        assert after[0].state.writers == {"w": 1}, "the power loss took back what was trusted"
        storage.close()
    finally:
        mount.unmount()
