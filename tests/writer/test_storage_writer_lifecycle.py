"""The Storage Writer against a local Tier 2: deletes, ownership, names and restarts.

A delete removes the segment's objects and a replayed old delete spares a newer incarnation's;
a stale epoch never replaces a manifest; no segment name, however hostile, puts a file outside
its own hash prefix; closing does not wait out a step under way; storage lengths never go back
across a restart.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from store_checks import flush, read_all
from tier2_cli import parse_ls, wait_until

from segmentstore import (
    ContainerUnavailableError,
    SegmentStore,
)
from segmentstore.contracts.mapping import container_of
from segmentstore.tier2 import (
    FencedError,
    ManifestStore,
    chunks_of,
    manifest_key,
)
from segmentstore.tier2.layout import name_of
from segmentstore.writer.segment_flusher import SegmentFlusher
from segmentstore.writer.storage_writer import StorageWriter
from segmentstore.writer.writer import DeleteEvent

from .writer_harness import (
    CHUNK_DIR,
    MANUAL,
    KiB,
    chunk_files,
    cli,
    load_manifest,
    open_store,
    storage_of,
    tier2_bytes,
    tier2_files,
    tier2_root,
)

# -- delete -------------------------------------------------------------------------------


async def test_delete_removes_the_segment_and_a_replayed_delete_spares_a_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    name = "doomed/segment"
    old, new = os.urandom(30_000), os.urandom(20_000)
    writer = {**MANUAL, "max_chunk_bytes": 8 * KiB}
    async with open_store(data, storage_writer=writer) as store:
        await store.create_segment(name)
        await store.append(name, old)
        await flush(store)
        old_files = chunk_files(data, name)
        old_manifest = load_manifest(data, name)
        assert old_files and old_manifest is not None
        await store.delete_segment(name)
        await flush(store)
        gone = (chunks_of(name), manifest_key(name))
        assert [f for f in tier2_files(data) if f.startswith(gone)] == []

        await store.create_segment(name)
        await store.append(name, new)
        await flush(store)
        new_files = chunk_files(data, name)
        new_manifest = load_manifest(data, name)
        assert new_manifest is not None
        assert new_manifest.segment_id != old_manifest.segment_id
        assert not set(new_files) & set(old_files)

    replayed: list[DeleteEvent] = []
    enqueue = StorageWriter.enqueue

    def spying_enqueue(self: StorageWriter, event: Any) -> None:
        if isinstance(event, DeleteEvent):
            replayed.append(event)
        enqueue(self, event)

    monkeypatch.setattr(StorageWriter, "enqueue", spying_enqueue)
    async with open_store(data, storage_writer=writer) as store:
        await flush(store)
        # The old incarnation's delete was replayed (else this test proves nothing) ...
        assert [(e.name, e.segment_id) for e in replayed] == [(name, old_manifest.segment_id)]
        # ... and left the new incarnation's objects alone.
        assert chunk_files(data, name) == new_files
        assert load_manifest(data, name) == new_manifest
        assert await read_all(store, name) == new
    assert tier2_bytes(data, name)[1] == new


async def test_delete_then_create_before_the_writer_catches_up(tmp_path: Path) -> None:
    """The delete is still queued when the new incarnation writes: its objects survive."""
    data = tmp_path / "data"
    name = "quick/reuse"
    writer = {**MANUAL, "max_chunk_bytes": 4 * KiB}
    async with open_store(data, storage_writer=writer) as store:
        await store.create_segment(name)
        await store.append(name, os.urandom(10_000))
        await flush(store)
        await store.delete_segment(name)
        await store.create_segment(name)
        await store.append(name, b"second life" * 1000)
        await flush(store)
        assert tier2_bytes(data, name)[1] == b"second life" * 1000
    async with open_store(data, storage_writer=writer) as store:
        await flush(store)
        assert await read_all(store, name) == b"second life" * 1000
    assert tier2_bytes(data, name)[1] == b"second life" * 1000


# -- fencing ------------------------------------------------------------------------------


async def test_a_stale_epoch_cannot_replace_a_manifest(tmp_path: Path) -> None:
    data = tmp_path / "data"
    name = "fenced/segment"
    async with open_store(data, storage_writer=MANUAL) as store:
        await store.create_segment(name)
        await store.append(name, b"first owner " * 100)
        await flush(store)
        container = store.containers[container_of(name, 4)]
        stale_epoch = container.epoch
        stale = load_manifest(data, name)
        assert stale is not None and stale.owner_epoch == stale_epoch
        # A new owner (the restart bumps the epoch) writes on.
        await store.restart_container(container.id)
        assert container.epoch > stale_epoch
        await store.append(name, b"second owner " * 100)
        await flush(store)
        expected = await read_all(store, name)

    current = load_manifest(data, name)
    assert current is not None and current.owner_epoch > stale_epoch
    storage = storage_of(data)
    try:
        manifests = ManifestStore(storage)
        loaded = manifests.load(name)
        assert loaded is not None
        manifest, token = loaded
        # Even holding the current version token, the stale owner is refused ...
        with pytest.raises(FencedError):
            manifests.save(manifest, token, epoch=stale_epoch)
        # ... and a stale owner's flusher is refused at each step that saves a manifest.
        flusher = SegmentFlusher(
            storage, manifests, name, manifest.segment_id, stale_epoch, 4096, 3_600_000, 4096
        )
        assert flusher.load() == manifest
        with pytest.raises(FencedError):
            flusher.write(manifest.storage_length, [b"stale bytes"], 11)
        steps: list[Callable[[], None]] = [lambda: flusher.truncate(10), flusher.seal]
        for step in steps:
            flusher.load()
            with pytest.raises(FencedError):
                step()
        assert manifests.load(name) == loaded
    finally:
        storage.close()
    assert tier2_bytes(data, name)[1] == expected
    code, out, err = await cli("cat", tier2_root(data).as_uri(), name)
    assert (code, out == expected) == (0, True), err


async def test_a_newer_owner_in_tier2_takes_the_container_offline(tmp_path: Path) -> None:
    data = tmp_path / "data"
    name = "fenced/out"
    async with open_store(data, storage_writer=MANUAL) as store:
        await store.create_segment(name)
        await store.append(name, b"x" * 5000)
        await flush(store)
        container = store.containers[container_of(name, 4)]
        storage = storage_of(data)
        try:
            manifests = ManifestStore(storage)
            loaded = manifests.load(name)
            assert loaded is not None
            manifests.save(loaded[0], loaded[1], epoch=container.epoch + 1)  # taken over
            reloaded = manifests.load(name)
            assert reloaded is not None
            taken_over = reloaded[0]
        finally:
            storage.close()
        await store.append(name, b"y" * 5000)
        writer = container.storage_writer
        assert writer is not None
        with pytest.raises(FencedError):
            await writer.flush_all()
        assert load_manifest(data, name) == taken_over

        # The writer's own loop meets the same fence and stops the container.
        await store.append(name, b"z" * 5000)
        await store.seal(name)

        async def offline() -> bool:
            return container.status.value == "offline"

        assert await wait_until(offline, 5.0), container.status
        assert "fenced" in (container.failure or "")
        with pytest.raises(ContainerUnavailableError):
            await store.append(name, b"refused")
        assert load_manifest(data, name) == taken_over
        # The other containers carry on.
        other = next(n for n in ("a", "b", "c", "d", "e") if container_of(n, 4) != container.id)
        await store.create_segment(other)
        await store.append(other, b"fine")


# -- names --------------------------------------------------------------------------------

CHUNK_LEAF = re.compile(r"[0-9a-f]{32}-\d{20}-e\d{10}-s\d{10}(\.tidx)?")
HOSTILE_NAMES = [
    "..a/..b",
    "x/.../y",
    "~/.ssh/authorized_keys",
    ".hidden/..../.x",
    "segments/manifest.json",
    "tier2/names/1a1b.m",
    "chunks/00/0123456789abcdef0123456789abcdef-00000000000000000000-e0000000001-s0000000001",
    "a#b/~~/-_.",
    "..." + "/..." * 63,  # 255 characters
    "n" * 255,
]


async def test_hostile_names_stay_under_their_own_keys(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert all(len(n) <= 255 for n in HOSTILE_NAMES) and len(HOSTILE_NAMES[-2]) == 255
    contents = {name: f"bytes of {name!r} ".encode() * 50 for name in HOSTILE_NAMES}
    async with open_store(data, storage_writer={"max_chunk_bytes": 4 * KiB}) as store:
        for name, payload in contents.items():
            await store.create_segment(name)
            await store.append(name, payload)
            if len(name) <= 255 - len("#transaction.") - 32:  # else its transaction's is not
                txn = await store.begin_transaction(name)
                await store.append(txn, b"+txn")
                await store.merge(name, txn)
                contents[name] = payload + b"+txn"
        await store.truncate(HOSTILE_NAMES[0], 100)
        await store.seal(HOSTILE_NAMES[1])
        await flush(store)

    outside = tmp_path / "data" / "tier2"
    every = [p for p in tmp_path.rglob("*") if p.is_file()]
    tier2 = [p.relative_to(outside).as_posix() for p in every if outside in p.parents]
    names = set(HOSTILE_NAMES)
    for key in tier2:
        directory, _, leaf = key.rpartition("/")
        if directory == ".locks":
            continue  # the backend's shared lock files
        if key.startswith("names/"):
            # A manifest: its key spells one of the names (transactions were merged away).
            assert name_of(key) in names, key
            continue
        # A chunk (or its sidecar), in the directory of its hash: one of the names' own, or
        # a merged transaction's.
        assert CHUNK_DIR.fullmatch(directory), key
        assert CHUNK_LEAF.fullmatch(leaf) and leaf[:2] == directory[-2:], key
    # Nothing escaped the data directory either: every file is under tier1/ or tier2/.
    for path in every:
        assert path.relative_to(data).parts[0] in ("tier1", "tier2", "store.json"), path
    uri = outside.as_uri()
    code, out, err = await cli("ls", uri)
    assert code == 0, err
    listed = parse_ls(out.decode())
    assert sorted(listed) == sorted(HOSTILE_NAMES)
    assert listed[HOSTILE_NAMES[0]][0] == 100 and listed[HOSTILE_NAMES[1]][2]
    results = await asyncio.gather(*(cli("cat", uri, name) for name in HOSTILE_NAMES))
    for name, (code, out, err) in zip(HOSTILE_NAMES, results, strict=True):
        expected = contents[name][100:] if name == HOSTILE_NAMES[0] else contents[name]
        assert (code, out == expected) == (0, True), f"{name}: {err}"


# -- lifecycle ----------------------------------------------------------------------------


async def test_close_does_not_wait_out_a_step_that_was_under_way(tmp_path: Path) -> None:
    """``stop`` lets the writer finish the step it is in; then the writer must stop, not go
    back to sleep until its next flush is due."""
    async with open_store(tmp_path / "data", storage_writer=MANUAL) as store:
        await store.create_segment("t")
        await store.append("t", b"target")
        txn = await store.begin_transaction("t")
        await store.append(txn, b"transaction")
        await store.merge("t", txn)  # wakes the writer: it applies the merge right now
        started = time.monotonic()
    elapsed = time.monotonic() - started
    assert elapsed < 5.0, f"closing took {elapsed:.1f} s"


# -- recovery -----------------------------------------------------------------------------


async def test_storage_length_does_not_go_back_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tier 1 is truncated behind what Tier 2 holds *now*, but the checkpoint it is truncated
    to recorded the storage length of *its* time. Right after recovery, before the writer has
    re-read the manifests (slow on S3 with many segments, endless during an outage), the bytes
    in between are in neither Tier 1 nor, as far as the metadata knows, Tier 2."""
    data = tmp_path / "data"
    options: dict[str, Any] = {
        "containers": 1,
        "storage_writer": {"flush_threshold_bytes": 1000, "flush_interval_ms": 600_000},
        "durable_log": {"checkpoint_every_frames": 1},
    }
    async with SegmentStore.open(data, **options) as store:
        await store.create_segment("x")
        await store.create_segment("y")
        await store.append("x", b"a" * 500)  # below the threshold: stays in Tier 1 for now
        await store.append("x", b"b")  # a checkpoint follows: x 501 bytes, none in Tier 2
        await store.append("y", b"y" * 10)  # needed by Tier 1 for good (never flushed)
        await store.append("x", b"c" * 600)  # over the threshold: x goes to Tier 2

        async def x_flushed() -> bool:
            return (await store.get_info("x")).storage_length == 1101

        assert await wait_until(x_flushed, 5.0)
        await store.append("x", b"d")  # the next checkpoint lets Tier 1 drop x's first bytes
        await store.append("y", b"z")
        before = await store.get_info("x")
    meta = json.loads((data / "tier1" / "container-0000" / "META").read_text())
    assert meta["truncated_below"] > 0

    refresh = StorageWriter.refresh

    async def slow_refresh(self: StorageWriter, segment_id: int) -> None:
        await asyncio.sleep(1.0)  # a Tier 2 that takes a second to read a manifest
        await refresh(self, segment_id)

    monkeypatch.setattr(StorageWriter, "refresh", slow_refresh)
    async with SegmentStore.open(data, **options) as store:
        after = await store.get_info("x")
        assert after.storage_length >= before.storage_length, (before, after)
        first = bytes(await store.read("x", 0, 2000))
        whole = b"a" * 500 + b"b" + b"c" * 600 + b"d"
        assert len(first) > 0 and first == whole[: len(first)], first[:20]
