"""The supervisor recovers a failed container by itself, with capped backoff, and leaves one
that recovery can never get past (a corrupt record in the middle of Tier 1) offline."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from faults import fail_processing_of

from segmentstore import ContainerUnavailableError, SegmentStore
from segmentstore.containers.status import ContainerStatus

NAME = "scope/stream/0"  # container 3 of 4
FAST = {"store": {"recovery_retry_min_ms": 50, "recovery_retry_max_ms": 400}}


async def test_a_failed_container_recovers_by_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with SegmentStore.open(tmp_path, **FAST) as store:
        container = store.container(3)
        await store.create_segment(NAME)
        await store.append(NAME, b"kept")
        fail_processing_of(monkeypatch, b"boom")
        with pytest.raises(ContainerUnavailableError):
            await store.append(NAME, b"boom")
        assert container.status is ContainerStatus.OFFLINE
        assert container.failure is not None and "injected" in container.failure
        epoch = container.epoch
        deadline = time.monotonic() + 20
        while container.status is not ContainerStatus.RUNNING:
            assert time.monotonic() < deadline, container.failure
            await asyncio.sleep(0.02)
        assert container.auto_recoveries == 1
        assert container.epoch > epoch
        assert bytes(await store.read(NAME, 0)) == b"kept"
        await store.append(NAME, b"!")
        assert bytes(await store.read(NAME, 0)) == b"kept!"


async def test_a_corrupt_log_stays_offline_and_is_not_retried(tmp_path: Path) -> None:
    async with SegmentStore.open(tmp_path) as store:
        await store.create_segment(NAME)
        for i in range(20):
            await store.append(NAME, bytes([i]) * 1000)
    first = sorted((tmp_path / "tier1" / "container-0003").glob("*.log"))[0]
    with open(first, "r+b") as f:
        f.seek(first.stat().st_size // 3)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    async with SegmentStore.open(tmp_path, **FAST) as store:
        container = store.container(3)
        await asyncio.sleep(0.5)  # ten supervisor rounds
        assert container.status is ContainerStatus.OFFLINE
        assert container.failure is not None and "corrupt" in container.failure
        assert container.auto_recoveries == 0


async def test_a_recovery_that_raises_is_tried_again_and_the_supervisor_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug on the recovery path (stopping the failed container raises, once) is one failed
    try: the supervisor logs it and tries again, and keeps watching every container."""
    async with SegmentStore.open(tmp_path, **FAST) as store:
        container = store.container(3)
        await store.create_segment(NAME)
        await store.append(NAME, b"kept")
        stop = type(container).stop
        raised: list[int] = []

        async def stop_raising_once(self: object) -> None:
            if not raised:
                raised.append(1)
                raise RuntimeError("injected into stop")
            await stop(self)  # type: ignore[arg-type]

        monkeypatch.setattr(type(container), "stop", stop_raising_once)
        fail_processing_of(monkeypatch, b"boom")
        with pytest.raises(ContainerUnavailableError):
            await store.append(NAME, b"boom")
        deadline = time.monotonic() + 20
        while container.status is not ContainerStatus.RUNNING:
            assert time.monotonic() < deadline, container.failure
            await asyncio.sleep(0.02)
        assert raised and container.auto_recoveries == 2
        await store.append(NAME, b"!")
        assert bytes(await store.read(NAME, 0)) == b"kept!"
