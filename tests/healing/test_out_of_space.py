"""Full disks heal without a person: Tier 1 out of space answers ``insufficient_storage`` and
keeps serving reads, Tier 2 out of space never stops a container; both resume by themselves
once there is room, with nothing acknowledged lost or duplicated."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from store_checks import flush, read_all

from segmentstore import SegmentStore
from segmentstore.containers.status import ContainerStatus
from segmentstore.contracts.errors import InsufficientStorageError, ThrottledError
from segmentstore.drill.small_disk import SmallDisk

NAME = "scope/stream/0"


def _fast_healing(**sections: dict[str, object]) -> dict[str, dict[str, object]]:
    store = {"recovery_retry_min_ms": 50, "recovery_retry_max_ms": 200}
    store.update(sections.pop("store", {}))
    return {"store": store, **sections}


async def _until(condition: object, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_tier1_out_of_space_answers_507_serves_reads_and_heals(
    small_disk: SmallDisk, tmp_path: Path
) -> None:
    overrides = _fast_healing(
        store={"recovery_room_bytes": 1 << 20},
        tier1={"segment_bytes": 1 << 20},
    )
    async with SegmentStore.open(
        small_disk.path / "data", containers=1, tier2=f"file://{tmp_path}/tier2", **overrides
    ) as store:
        container = store.containers[0]
        await store.create_segment(NAME)
        acknowledged = bytearray()
        for i in range(64):
            piece = bytes([i]) * 1000
            await store.append(NAME, piece, writer_id="w", writer_seq=i)
            acknowledged += piece
        small_disk.fill()
        refused = 0
        seq = 64
        with pytest.raises(InsufficientStorageError):
            while True:  # the first append that meets the full disk is refused with 507
                piece = bytes([seq % 256]) * 64_000
                await store.append(NAME, piece, writer_id="w", writer_seq=seq)
                acknowledged += piece
                seq += 1
        refused += 1
        assert container.status is ContainerStatus.READ_ONLY, container.failure
        # Reads of everything acknowledged go on; appends keep answering 507, not 503.
        assert await read_all(store, NAME) == bytes(acknowledged)
        with pytest.raises(InsufficientStorageError):
            await store.append(NAME, b"x", writer_id="w", writer_seq=seq)
        await asyncio.sleep(0.5)  # the supervisor must not recover it while there is no room
        assert container.status is ContainerStatus.READ_ONLY
        assert container.auto_recoveries == 0

        small_disk.make_room()
        await _until(lambda: container.status is ContainerStatus.RUNNING, 30)
        assert container.auto_recoveries >= 1
        # The refused append's retry is applied once (or answered duplicate if it had landed).
        result = await store.append(NAME, b"after", writer_id="w", writer_seq=seq)
        if not result.duplicate:
            acknowledged += b"after"
        assert await read_all(store, NAME) == bytes(acknowledged)
    # And all of it survives a cold recovery.
    async with SegmentStore.open(
        small_disk.path / "data", containers=1, tier2=f"file://{tmp_path}/tier2", **overrides
    ) as store:
        assert await read_all(store, NAME) == bytes(acknowledged)


async def test_tier2_out_of_space_keeps_the_container_running_and_catches_up(
    small_disk: SmallDisk, tmp_path: Path
) -> None:
    overrides = _fast_healing(
        storage_writer={"flush_interval_ms": 20, "retry_min_ms": 10, "retry_max_ms": 100},
        cache={"max_bytes": 12 << 20},
        durable_log={"throttle_max_delay_ms": 100},
    )
    async with SegmentStore.open(
        tmp_path / "data", containers=1, tier2=f"file://{small_disk.path}/tier2", **overrides
    ) as store:
        container = store.containers[0]
        await store.create_segment(NAME)
        await store.append(NAME, b"a" * 1000)
        await flush(store)
        small_disk.fill()
        acknowledged = bytearray(b"a" * 1000)
        throttled = False
        for i in range(200):  # 25 MiB: more than the cache holds of unflushed bytes
            piece = bytes([i]) * (128 << 10)
            try:
                await store.append(NAME, piece, writer_id="w", writer_seq=i)
            except ThrottledError:
                throttled = True
                break
            acknowledged += piece
        assert throttled, "appends were never pushed back while Tier 2 was full"
        assert container.status is ContainerStatus.RUNNING
        assert container.tier2_error is not None
        assert await read_all(store, NAME) == bytes(acknowledged)

        small_disk.make_room()
        # The error clears when the writer's whole step ends, a moment after the last bytes.
        await _until(lambda: container.tier2_lag_bytes == 0 and container.tier2_error is None, 30)
        await store.append(NAME, b"resumed", writer_id="w", writer_seq=1000)
        acknowledged += b"resumed"
        assert await read_all(store, NAME) == bytes(acknowledged)
        assert container.auto_recoveries == 0
