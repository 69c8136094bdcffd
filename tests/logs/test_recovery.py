"""Recovery from Tier 1: torn tails, corruption, and bounded replay through checkpoints."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from faults import fail_processing_of

from segmentstore import ContainerUnavailableError, SegmentStore
from segmentstore.contracts.mapping import container_of

NAME = "scope/stream/0"  # container 3 of 4


def log_files(data: Path, container: int) -> list[Path]:
    return sorted((data / "tier1" / f"container-{container:04d}").glob("*.log"))


async def test_torn_last_frame_is_dropped(tmp_path: Path) -> None:
    async with SegmentStore.open(tmp_path) as store:
        await store.create_segment(NAME)
        await store.append(NAME, b"acknowledged")
    async with SegmentStore.open(tmp_path) as store:
        await store.append(NAME, os.urandom(5000))
    # The last record holds the second append: cut it in half, as a crash mid-write would.
    last = log_files(tmp_path, 3)[-1]
    os.truncate(last, last.stat().st_size - 2500)
    async with SegmentStore.open(tmp_path) as store:
        assert (await store.get_info(NAME)).length == 12
        assert bytes(await store.read(NAME, 0)) == b"acknowledged"
        await store.append(NAME, b"+more")
    async with SegmentStore.open(tmp_path) as store:
        assert bytes(await store.read(NAME, 0)) == b"acknowledged+more"


async def test_garbage_tail_is_dropped(tmp_path: Path) -> None:
    async with SegmentStore.open(tmp_path) as store:
        await store.create_segment(NAME)
        await store.append(NAME, b"acknowledged")
    with open(log_files(tmp_path, 3)[-1], "ab") as f:
        f.write(os.urandom(3000))
    async with SegmentStore.open(tmp_path) as store:
        assert bytes(await store.read(NAME, 0)) == b"acknowledged"
        await store.append(NAME, b"+more")
    async with SegmentStore.open(tmp_path) as store:
        assert bytes(await store.read(NAME, 0)) == b"acknowledged+more"


async def test_corrupt_middle_frame_takes_only_its_container_offline(tmp_path: Path) -> None:
    other = next(n for n in ("a", "foo", "segment") if container_of(n, 4) != 3)
    async with SegmentStore.open(tmp_path) as store:
        await store.create_segment(NAME)
        await store.create_segment(other)
        for i in range(20):
            await store.append(NAME, bytes([i]) * 1000)
        await store.append(other, b"unaffected")
    # Flip one payload byte of an early record: not a torn tail, so it must not be guessed past.
    first = log_files(tmp_path, 3)[0]
    with open(first, "r+b") as f:
        f.seek(first.stat().st_size // 3)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    async with SegmentStore.open(tmp_path) as store:
        broken = store.container(3)
        assert broken.status.value == "offline"
        assert broken.failure is not None and "corrupt" in broken.failure
        with pytest.raises(ContainerUnavailableError) as unavailable:
            await store.read(NAME, 0)
        assert unavailable.value.fields()["container"] == 3
        with pytest.raises(ContainerUnavailableError):
            await store.append(NAME, b"x")
        assert bytes(await store.read(other, 0)) == b"unaffected"
        await store.append(other, b"!")


async def test_a_bug_while_processing_fails_its_container_instead_of_hanging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fault injected where operations are prepared: the operations already queued must fail
    # at once (not wait forever), only that container goes offline, and a restart recovers
    # everything acknowledged before.
    # Each step is bounded: a hang fails here, at the step that hung, in a minute.
    async with asyncio.timeout(60):
        other = next(n for n in ("a", "foo", "segment") if container_of(n, 4) != 3)
        async with SegmentStore.open(tmp_path) as store:
            await store.create_segment(NAME)
            await store.create_segment(other)
            await store.append(NAME, b"kept")
            fail_processing_of(monkeypatch, b"boom")
            queued = [asyncio.ensure_future(store.append(NAME, b"queued")) for _ in range(3)]
            with pytest.raises(ContainerUnavailableError):
                await asyncio.wait_for(store.append(NAME, b"boom"), timeout=5)
            for append in queued:
                with pytest.raises(ContainerUnavailableError):
                    await asyncio.wait_for(append, timeout=5)
            assert store.container(3).status.value == "offline"
            await store.append(other, b"unaffected")
            monkeypatch.undo()
            await store.restart_container(3)
            assert bytes(await store.read(NAME, 0)) == b"kept"
            await store.append(NAME, b"!")


async def test_checkpoints_keep_recovery_bounded(tmp_path: Path) -> None:
    settings = {
        "tier1": {"segment_bytes": 64 * 1024},
        "durable_log": {"checkpoint_every_frames": 16, "max_frame_bytes": 16 * 1024},
    }
    replayed, total_written, last = [], 0, b""
    for _round in range(4):
        async with SegmentStore.open(tmp_path, **settings) as store:
            if not await store.list_segments():
                await store.create_segment(NAME)
            for _ in range(300):
                last = os.urandom(4096)
                result = await store.append(NAME, last)
                total_written += 4096
                # A consumer that truncates what it has read: Tier 1 need not keep it.
                await store.truncate(NAME, result.length - 4096)
            assert store.container(3).tier1_bytes < 512 * 1024
        async with SegmentStore.open(tmp_path, **settings) as store:
            container = store.container(3)
            replayed.append(container.recovery.operations_replayed)
            info = await store.get_info(NAME)
            assert info.length == total_written
            assert info.length - info.start_offset == 4096
            assert bytes(await store.read(NAME, info.start_offset)) == last
    assert total_written == 4 * 300 * 4096
    # Each round wrote ~600 operations; replay stays at a few checkpoints' worth.
    assert max(replayed) < 150, replayed
