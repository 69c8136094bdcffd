"""The Storage Writer against a local Tier 2 (``file://<data>/tier2``).

What these tests hold it to (DESIGN.md, "Tier 2 and the Storage Writer"; docs/formats.md,
Tier 2): every acknowledged byte reaches Tier 2 and reads back identically through the
manifest alone (``segmentstore tier2 ls|cat``, run as a real process); Tier 1 and the cache stay
bounded because Tier 2 holds the rest; a truncation deletes exactly the chunks wholly below the
new start; a merge adopts the transaction's chunks; a delete removes the segment's objects and
a replayed old delete spares a newer incarnation's; a stale epoch never replaces a manifest;
and no segment name, however hostile, puts a file outside its own hash prefix.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from segmentstore import (
    ContainerUnavailableError,
    SegmentNotFoundError,
    SegmentStore,
    SegmentTruncatedError,
)
from segmentstore.container_mapping import container_of
from segmentstore.segment_flusher import SegmentFlusher
from segmentstore.storage_writer import DeleteEvent, StorageWriter
from tier2 import (
    ChunkStorage,
    FencedError,
    ManifestStore,
    SegmentManifest,
    SegmentReader,
    open_chunk_storage,
    segment_key,
)

REPO = Path(__file__).resolve().parents[2]
KiB = 1024
MiB = 1024 * KiB
# Flush almost at once, in chunks small enough that a few appends roll several of them.
WRITER = {"flush_threshold_bytes": 1024, "flush_interval_ms": 50, "max_chunk_bytes": 64 * KiB}
# For tests that decide themselves when Tier 2 catches up (flush_all): the writer never
# flushes on its own within a test.
MANUAL = {"flush_threshold_bytes": 64 * MiB, "flush_interval_ms": 600_000}
SEGMENT_DIR = re.compile(r"segments/[0-9a-f]{32}")


# -- helpers ------------------------------------------------------------------------------


def open_store(data: Path, **overrides: Any) -> SegmentStore:
    writer = {**WRITER, **overrides.pop("storage_writer", {})}
    return SegmentStore.open(data, storage_writer=writer, **overrides)


def tier2_root(data: Path) -> Path:
    return data / "tier2"


async def flush(store: SegmentStore) -> None:
    """Everything pending goes to Tier 2 now, in every container."""
    for container in store.containers:
        writer = container.storage_writer
        assert writer is not None, f"container {container.id} has no storage writer"
        await writer.flush_all()


async def read_all(store: SegmentStore, name: str) -> bytes:
    """The segment's readable bytes, from its start offset to its length."""
    info = await store.get_info(name)
    out = bytearray()
    while info.start_offset + len(out) < info.length:
        chunk = await store.read(name, info.start_offset + len(out), 1 << 20)
        assert len(chunk) > 0, f"{name}: empty read at {info.start_offset + len(out)} of {info}"
        out += chunk
    return bytes(out)


def tier2_files(data: Path) -> list[str]:
    """Every file under the Tier 2 directory (dot files too), relative, sorted."""
    root = tier2_root(data)
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def chunk_files(data: Path, name: str) -> list[str]:
    """The chunks of ``name`` (not their time index sidecars)."""
    prefix = segment_key(name) + "/chunk-"
    return [f for f in tier2_files(data) if f.startswith(prefix) and not f.endswith(".tidx")]


def sidecar_files(data: Path, name: str) -> list[str]:
    prefix = segment_key(name) + "/chunk-"
    return [f for f in tier2_files(data) if f.startswith(prefix) and f.endswith(".tidx")]


def storage_of(data: Path) -> ChunkStorage:
    return open_chunk_storage(tier2_root(data).as_uri())


def load_manifest(data: Path, name: str) -> SegmentManifest | None:
    storage = storage_of(data)
    try:
        loaded = ManifestStore(storage).load(name)
    finally:
        storage.close()
    return None if loaded is None else loaded[0]


def tier2_bytes(data: Path, name: str) -> tuple[SegmentManifest, bytes]:
    """The manifest and every byte it names, ``[start_offset, storage_length)``."""
    storage = storage_of(data)
    try:
        loaded = ManifestStore(storage).load(name)
        assert loaded is not None, f"{name} has no manifest in Tier 2"
        manifest = loaded[0]
        length = manifest.storage_length - manifest.start_offset
        return manifest, SegmentReader(storage).read_from(manifest, manifest.start_offset, length)
    finally:
        storage.close()


async def cli(*args: str) -> tuple[int, bytes, str]:
    """``segmentstore tier2 ARGS`` in a process of its own, as a user runs it."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "segmentstore.cli",
        "tier2",
        *args,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, stdout, stderr.decode(errors="replace")


def parse_ls(text: str) -> dict[str, tuple[int, int, bool]]:
    """``tier2 ls`` output: name -> (start offset, storage length, sealed)."""
    lines = text.splitlines()
    assert lines and lines[0].split() == ["start_offset", "storage_length", "sealed", "name"]
    listed = {}
    for line in lines[1:]:
        start, length, sealed, name = line.split(maxsplit=3)
        assert sealed in ("true", "false"), line
        listed[name] = (int(start), int(length), sealed == "true")
    return listed


async def wait_until(condition: Callable[[], Awaitable[bool]], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await condition():
            return True
        await asyncio.sleep(0.01)
    return await condition()


# -- every byte reaches Tier 2 ------------------------------------------------------------


async def test_every_byte_reaches_tier2_and_the_cli_reads_it_back(tmp_path: Path) -> None:
    data = tmp_path / "data"
    rng = random.Random(20240611)
    names = [f"scope/stream-{i}/{i % 3}" for i in range(8)]
    expected = {name: bytearray() for name in names}
    max_chunk = WRITER["max_chunk_bytes"]
    async with open_store(data) as store:
        for name in names:
            await store.create_segment(name)

        async def writer(name: str, seed: int) -> None:
            own = random.Random(seed)
            for _ in range(25):
                roll = own.random()
                if roll < 0.15:  # larger than a chunk: one flush spans several chunks
                    size = own.randint(max_chunk + 1, 3 * max_chunk)
                elif roll < 0.5:
                    size = own.randint(1000, 20_000)
                else:
                    size = own.randint(1, 300)
                payload = own.randbytes(size)
                result = await store.append(name, payload)
                assert result.offset == len(expected[name])
                expected[name] += payload

        await asyncio.gather(*(writer(n, rng.randrange(1 << 30)) for n in names))
        sealed = set(names[:2])
        for name in sealed:
            await store.seal(name)
        await flush(store)
        for name in names:
            info = await store.get_info(name)
            assert info.storage_length == info.length == len(expected[name]), info
            assert await read_all(store, name) == expected[name]
        assert [c.tier2_lag_bytes for c in store.containers] == [0] * len(store.containers)

    for name in names:
        manifest, stored = tier2_bytes(data, name)
        assert stored == expected[name], name
        assert manifest.sealed == (name in sealed)
        assert all(c.length <= max_chunk for c in manifest.chunks), manifest.chunks
        assert len(manifest.chunks) >= len(expected[name]) // max_chunk

    uri = tier2_root(data).as_uri()
    code, out, err = await cli("ls", uri)
    assert code == 0, err
    assert parse_ls(out.decode()) == {
        name: (0, len(expected[name]), name in sealed) for name in names
    }
    code, out, err = await cli("ls", uri, "--prefix", "scope/stream-1")
    assert code == 0, err
    assert sorted(parse_ls(out.decode())) == ["scope/stream-1/1"]
    results = await asyncio.gather(*(cli("cat", uri, name) for name in names))
    for name, (code, out, err) in zip(names, results, strict=True):
        assert code == 0, f"{name}: {err}"
        assert out == expected[name], f"{name}: cat gave {len(out)} bytes of {len(expected[name])}"
    code, out, err = await cli("cat", uri, names[3], "--offset", "1000", "--length", "70000")
    assert code == 0, err
    assert out == expected[names[3]][1000:71000]


async def test_a_small_append_reaches_tier2_within_the_flush_interval(tmp_path: Path) -> None:
    """Below the threshold, the interval alone must move the bytes, also when the writer had
    nothing to do before the append came."""
    async with open_store(tmp_path / "data") as store:
        await store.create_segment("quiet")
        await asyncio.sleep(0.2)  # the writer has caught up and waits for work
        await store.append("quiet", b"0123456789")

        async def flushed() -> bool:
            return (await store.get_info("quiet")).storage_length == 10

        # 100 flush intervals.
        assert await wait_until(flushed, 5.0), await store.get_info("quiet")


async def test_bytes_reach_tier2_without_being_forced(tmp_path: Path) -> None:
    """Appends above the threshold are flushed by the writer's own loop, not only by
    ``flush_all``."""
    async with open_store(tmp_path / "data") as store:
        await store.create_segment("busy")
        payload = os.urandom(100 * KiB)
        for _ in range(10):
            await store.append("busy", payload)

        async def flushed() -> bool:
            return (await store.get_info("busy")).storage_length >= 1000 * KiB

        assert await wait_until(flushed, 10.0), await store.get_info("busy")


# -- Tier 1 and the cache stay bounded ----------------------------------------------------


async def test_tier1_stays_bounded_because_it_is_truncated_behind_tier2(tmp_path: Path) -> None:
    file_bytes = 128 * KiB
    async with open_store(
        tmp_path / "data",
        tier1={"segment_bytes": file_bytes},
        durable_log={"checkpoint_every_frames": 8, "max_frame_bytes": 16 * KiB},
    ) as store:
        names = ["bound/0", "bound/3", "bound/5"]  # all three in container 1
        container = store.containers[1]
        assert {container_of(n, 4) for n in names} == {container.id}
        for name in names:
            await store.create_segment(name)
        payload = os.urandom(4 * KiB)
        written = peak = peak_beyond_lag = 0
        while written < 40 * file_bytes:
            await asyncio.gather(*(store.append(n, payload) for n in names))
            written += len(payload) * len(names)
            peak = max(peak, container.tier1_bytes)
            beyond = container.tier1_bytes - container.tier2_lag_bytes
            peak_beyond_lag = max(peak_beyond_lag, beyond)
        print(
            f"wrote {written} bytes; Tier 1 peaked at {peak} ({peak / file_bytes:.1f} files),"
            f" at {peak_beyond_lag / file_bytes:.1f} files beyond what Tier 2 still lacks"
        )
        # Without Tier 2 behind it, Tier 1 would hold all 40 files' worth. It holds what Tier 2
        # still lacks, plus the granularity of truncation (whole files, at checkpoints).
        assert peak <= 10 * file_bytes, peak
        await flush(store)
        for name in names:
            info = await store.get_info(name)
            assert info.storage_length == info.length


async def test_reads_that_miss_the_cache_come_from_tier2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache_bytes = 4 * MiB
    async with open_store(
        tmp_path / "data",
        store={"max_append_bytes": 256 * KiB},
        cache={"max_bytes": cache_bytes, "max_entry_bytes": 64 * KiB},
        storage_writer={"max_chunk_bytes": 256 * KiB, "read_block_bytes": 64 * KiB},
        durable_log={"throttle_max_delay_ms": 5000},
    ) as store:
        fetched = 0
        read_into = store.tier2.read_into

        async def counting_read_into(*args: Any) -> bytes:
            nonlocal fetched
            fetched += 1
            return await read_into(*args)

        monkeypatch.setattr(store.tier2, "read_into", counting_read_into)
        rng = random.Random(7)
        names = [f"cache/{i}" for i in range(4)]
        expected = {name: bytearray() for name in names}
        for name in names:
            await store.create_segment(name)
        total = 0
        while total < 4 * cache_bytes:
            name = rng.choice(names)
            payload = rng.randbytes(rng.randint(1, 256 * KiB))
            await store.append(name, payload)
            expected[name] += payload
            total += len(payload)
        assert store.cache_manager.stats.evictions > 0
        for name in names:
            assert await read_all(store, name) == expected[name], name
        stats = store.cache_manager.stats
        print(f"wrote {total} bytes through a {cache_bytes}-byte cache: {stats}, {fetched} fetches")
        assert stats.used_bytes <= cache_bytes
        assert fetched > 0


# -- truncation ---------------------------------------------------------------------------


async def test_truncate_deletes_whole_chunks_below_the_start_offset(tmp_path: Path) -> None:
    data = tmp_path / "data"
    chunk = 4 * KiB
    name = "trunc/me"
    payload = os.urandom(40_000)
    async with open_store(data, storage_writer={**MANUAL, "max_chunk_bytes": chunk}) as store:
        await store.create_segment(name)
        for i in range(0, len(payload), 1000):
            await store.append(name, payload[i : i + 1000])
        await flush(store)
        before = chunk_files(data, name)
        starts = [int(f.rsplit("/chunk-", 1)[1].split("-")[0]) for f in before]
        assert starts == list(range(0, len(payload), chunk))

        await store.truncate(name, 10_000)  # inside the chunk [8192, 12288)
        await flush(store)
        after = chunk_files(data, name)
        assert after == before[2:]  # [0, 4096) and [4096, 8192) are gone, [8192, ...) stays
        # Time index sidecars go with their chunks (a chunk without a boundary has none).
        assert sidecar_files(data, name)
        assert set(sidecar_files(data, name)) <= {f + ".tidx" for f in after}
        manifest, stored = tier2_bytes(data, name)
        assert (manifest.start_offset, manifest.storage_length) == (10_000, len(payload))
        assert [c.start_offset for c in manifest.chunks] == starts[2:]
        assert stored == payload[10_000:]

        await store.truncate(name, 3 * chunk)  # exactly where a chunk starts: it stays
        await flush(store)
        assert chunk_files(data, name) == before[3:]

        # Truncated beyond what Tier 2 holds: every chunk goes, and the manifest says so.
        await store.append(name, b"tail" * 1000)
        length = len(payload) + 4000
        await store.truncate(name, length)
        await flush(store)
        assert chunk_files(data, name) == []
        manifest, stored = tier2_bytes(data, name)
        assert (manifest.start_offset, manifest.storage_length, stored) == (length, length, b"")
        await store.append(name, b"after")
        await flush(store)

    code, out, err = await cli("cat", tier2_root(data).as_uri(), name)
    assert (code, out) == (0, b"after"), err
    async with open_store(data, storage_writer=MANUAL) as store:
        with pytest.raises(SegmentTruncatedError):
            await store.read(name, length - 1, 10)
        assert bytes(await store.read(name, length, 10)) == b"after"


# -- merge --------------------------------------------------------------------------------


@pytest.mark.parametrize("flushed", ["all", "part", "none"])
@pytest.mark.parametrize("restart", [False, True], ids=["running", "restarted"])
async def test_merge_concatenates_in_tier2(tmp_path: Path, flushed: str, restart: bool) -> None:
    """The transaction's bytes end up in the target's manifest, whether they were in Tier 2
    before the merge (their chunks are adopted), partly, or not at all; ``restarted``: the
    store stops before the writer applies the merge and recovery has to."""
    data = tmp_path / "data"
    target = "merge/target"
    head, body, tail = os.urandom(10_000), os.urandom(9_000), os.urandom(3_000)
    writer = {**MANUAL, "max_chunk_bytes": 4 * KiB}
    async with open_store(data, storage_writer=writer) as store:
        await store.create_segment(target)
        await store.append(target, head)
        await flush(store)
        txn = await store.begin_transaction(target)
        await store.append(txn, body)
        if flushed in ("all", "part"):
            await flush(store)
        if flushed in ("part", "none"):
            await store.append(txn, tail)
            merged = body + tail
        else:
            merged = body
        txn_chunks = chunk_files(data, txn)
        assert bool(txn_chunks) == (flushed != "none")
        result = await store.merge(target, txn)
        assert (result.offset, result.length) == (len(head), len(head) + len(merged))
        expected = head + merged
        assert await read_all(store, target) == expected
        if not restart:
            await flush(store)
    if restart:
        async with open_store(data, storage_writer=writer) as store:
            assert await read_all(store, target) == expected
            await flush(store)

    manifest, stored = tier2_bytes(data, target)
    assert stored == expected
    assert manifest.storage_length == len(expected)
    named = {c.key for c in manifest.chunks}
    # The transaction's chunks were adopted where they lie, not copied.
    assert {*txn_chunks} <= named
    assert load_manifest(data, txn) is None
    # Nothing of the transaction is left but the chunks the target names.
    txn_prefix = segment_key(txn) + "/"
    left = [f for f in tier2_files(data) if f.startswith(txn_prefix)]
    assert [f for f in left if not f.endswith(".tidx")] == sorted(txn_chunks)
    assert {f.removesuffix(".tidx") for f in left} == set(txn_chunks)  # and their sidecars
    code, out, err = await cli("cat", tier2_root(data).as_uri(), target)
    assert (code, out == expected) == (0, True), err
    async with open_store(data, storage_writer=writer) as store:
        assert await read_all(store, target) == expected
        with pytest.raises(SegmentNotFoundError):
            await store.get_info(txn)
        # Deleting the target deletes the adopted chunks too.
        await store.delete_segment(target)
        await flush(store)
    assert [f for f in tier2_files(data) if "/chunk-" in f or f.endswith("manifest.json")] == []


@pytest.mark.parametrize("evicted", [False, True], ids=["cached", "evicted"])
async def test_truncating_into_a_merged_range_before_the_writer_applies_the_merge(
    tmp_path: Path, evicted: bool
) -> None:
    """The target is truncated to an offset inside the transaction's bytes in the same batch
    as the merge, before the writer has caught the target up to the merge offset. The
    transaction's bytes above the new start must stay readable and reach the target's
    manifest; its chunks must not be left behind unnamed (``evicted``: the cache no longer
    has them, so Tier 2 is their only copy)."""
    data = tmp_path / "data"
    target = "merge/truncated"
    async with open_store(
        data,
        store={"max_append_bytes": 256 * KiB},
        cache={"max_bytes": 2 * MiB, "max_entry_bytes": 64 * KiB},
        storage_writer={**MANUAL, "max_chunk_bytes": 64 * KiB, "read_block_bytes": 64 * KiB},
    ) as store:
        await store.create_segment(target)
        await store.append(target, b"A" * 1000)
        txn = await store.begin_transaction(target)
        body = os.urandom(300 * KiB)
        for i in range(0, len(body), 100 * KiB):
            await store.append(txn, body[i : i + 100 * KiB])
        await flush(store)
        if evicted:
            filler = "filler"
            await store.create_segment(filler)
            for _ in range(20):  # twice the cache, flushed as it goes
                await store.append(filler, os.urandom(200 * KiB))
                await flush(store)
            assert store.cache_manager.stats.evictions > 0
        await store.append(target, b"B" * 500)  # not in Tier 2 yet: Tier 2 is behind 1500
        merged, truncated = await asyncio.gather(
            store.merge(target, txn), store.truncate(target, 1600)
        )
        assert (merged.offset, truncated.start_offset) == (1500, 1600)
        await flush(store)
        container = store.containers[container_of(target, 4)]
        assert container.status.value == "running", container.failure
        assert await read_all(store, target) == body[100:]
    manifest, stored = tier2_bytes(data, target)
    assert (manifest.start_offset, stored) == (1600, body[100:])
    named = {c.key for c in manifest.chunks}
    txn_prefix = segment_key(txn) + "/"
    leftovers = [
        f
        for f in tier2_files(data)
        if f.startswith(txn_prefix) and f.removesuffix(".tidx") not in named
    ]
    assert leftovers == [], "the transaction's chunks were left behind, named by no manifest"


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
        prefix = segment_key(name) + "/"
        assert [f for f in tier2_files(data) if f.startswith(prefix)] == []

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
            storage, manifests, name, manifest.segment_id, stale_epoch, 4096, 3_600_000
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

HOSTILE_NAMES = [
    "..a/..b",
    "x/.../y",
    "~/.ssh/authorized_keys",
    ".hidden/..../.x",
    "segments/manifest.json",
    "tier2/segments/0123456789abcdef0123456789abcdef/manifest.json",
    "a#b/~~/-_.",
    "..." + "/..." * 63,  # 255 characters
    "n" * 255,
]


async def test_hostile_names_stay_under_their_hash_prefix(tmp_path: Path) -> None:
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
    allowed = {segment_key(n) for n in HOSTILE_NAMES}
    for key in tier2:
        directory, _, leaf = key.rpartition("/")
        assert SEGMENT_DIR.fullmatch(directory), key
        assert "/" not in leaf and leaf not in ("", ".", "..")
        # Transactions have prefixes of their own; everything else is one of the names'.
        if directory not in allowed:
            assert leaf.startswith("chunk-") or leaf == ".manifest.json.lock", key
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

    reconcile = StorageWriter._reconcile

    async def slow_reconcile(self: StorageWriter) -> None:
        await asyncio.sleep(1.0)  # a Tier 2 that takes a second to list its manifests
        await reconcile(self)

    monkeypatch.setattr(StorageWriter, "_reconcile", slow_reconcile)
    async with SegmentStore.open(data, **options) as store:
        after = await store.get_info("x")
        assert after.storage_length >= before.storage_length, (before, after)
        first = bytes(await store.read("x", 0, 2000))
        whole = b"a" * 500 + b"b" + b"c" * 600 + b"d"
        assert len(first) > 0 and first == whole[: len(first)], first[:20]
