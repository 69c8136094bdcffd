"""Kill -9 of the server under an EventWriter: every acknowledged record is there exactly once.

A ``segmentstore serve`` child process is killed with SIGKILL while producers write through one
EventWriter (with its exactly-once ids) to several segments, then restarted on the same data
directory on a new port; a :class:`FlakyProxy` with no rules keeps one address for the client
across the restart. The writer retries through the outage and finishes. Then: every record
whose ``write`` returned an offset is at that offset, no payload appears twice, and each
producer's records are in the order it wrote them.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from segmentstore.client import AsyncSegmentStoreClient, EventReader, EventWriter, RetryPolicy
from segmentstore.harness.served_store import ServedStore

from .conftest import FlakyProxy

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SEGMENTS = 4
PRODUCERS = 16


async def test_kill_9_under_an_event_writer_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = ServedStore(data_dir, tmp_path / "serve-1.log", environ=os.environ)
    proxy: FlakyProxy | None = None
    try:
        server.wait_ready(60)
        assert server.port is not None
        proxy = FlakyProxy(server.port)
        run = uuid.uuid4().hex[:8]
        segments = [f"kill/{run}/{i}" for i in range(SEGMENTS)]
        acknowledged: dict[str, list[tuple[int, bytes]]] = {s: [] for s in segments}
        failed: list[BaseException] = []
        stop_at = time.monotonic() + 6.0
        # The writer's own delivery retries carry it through the outage, not the client's.
        async with AsyncSegmentStoreClient(
            proxy.url, retry=RetryPolicy(max_attempts=2), timeout_s=10
        ) as client:
            for segment in segments:
                await client.create_segment(segment)
            async with EventWriter(
                client, writer_id=f"killed-{run}", batch_bytes=32 << 10, linger_ms=1
            ) as writer:

                async def produce(producer: int) -> None:
                    segment = segments[producer % SEGMENTS]
                    number = 0
                    while time.monotonic() < stop_at:
                        payload = f"{producer}:{number}:".encode() + bytes(200)
                        number += 1
                        try:
                            offset = await writer.write(segment, payload)
                        except Exception as error:
                            failed.append(error)
                            continue
                        acknowledged[segment].append((offset, payload))

                producers = asyncio.gather(*(produce(p) for p in range(PRODUCERS)))
                await asyncio.sleep(1.5)
                written_before_kill = sum(len(v) for v in acknowledged.values())
                await asyncio.to_thread(server.sigkill)
                await asyncio.sleep(0.5)
                server = ServedStore(data_dir, tmp_path / "serve-2.log", environ=os.environ)
                await asyncio.to_thread(server.wait_ready, 60)
                assert server.port is not None
                proxy.upstream_port = server.port
                await producers
        assert not failed, failed[:3]
        total = sum(len(v) for v in acknowledged.values())
        assert written_before_kill > 0 and total > written_before_kill

        async with AsyncSegmentStoreClient(server.url) as direct:
            for segment in segments:
                stored = [
                    item async for item in EventReader(direct, segment, wait_ms=0, follow=False)
                ]
                payloads = Counter(payload for _, payload in stored)
                assert max(payloads.values()) == 1, "a record was applied twice"
                at = dict(stored)
                for offset, payload in acknowledged[segment]:
                    assert at.get(offset) == payload, f"acknowledged record missing at {offset}"
                order = {payload: index for index, (_, payload) in enumerate(stored)}
                for producer in range(segments.index(segment), PRODUCERS, SEGMENTS):
                    mine = [
                        order[p]
                        for _, p in acknowledged[segment]
                        if p.startswith(f"{producer}:".encode())
                    ]
                    assert mine == sorted(mine), "a producer's records are out of order"
    finally:
        if proxy is not None:
            proxy.close()
        server.stop()
