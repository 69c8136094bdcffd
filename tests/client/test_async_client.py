"""The asyncio client: every method against a real server, errors and exactly-once retries."""

from __future__ import annotations

import asyncio

import httpx
import pytest

import segmentstore.contracts.errors as e
from segmentstore.client import AsyncSegmentStoreClient, RetryPolicy, SegmentStoreClient

from .conftest import FlakyProxy, LiveServer


async def test_every_method(live: LiveServer, name: str) -> None:
    async with AsyncSegmentStoreClient(live.url) as client:
        assert await client.healthz() and await client.readyz()
        created = await client.create_segment(name, attributes={"a": 1})
        assert created.attributes == {"a": 1}
        assert (await client.get_info(name)).length == 0
        assert (await client.append(name, b"abc", expected_offset=0)).length == 3
        duplicate = await client.append(name, b"d", writer_id="w", writer_seq=0)
        assert not duplicate.duplicate
        assert (await client.append(name, b"d", writer_id="w", writer_seq=0)).duplicate
        read = await client.read(name, 1, max_length=2)
        assert (read.data, read.length, read.sealed) == (b"bc", 4, False)
        assert (await client.read(name, 4, wait_ms=20)).data == b""
        transaction = await client.begin_transaction(name)
        events = await client.append_events(transaction, [b"x", b"yy"])
        assert events.events == 2
        assert (await client.merge(name, transaction)).offset == 4
        assert (await client.read_events(name, 4)).events() == [b"x", b"yy"]
        updated = await client.update_attributes(name, [{"key": "a", "value": 5}])
        assert updated == {"a": 5} == await client.get_attributes(name)
        assert (await client.truncate(name, 2)).start_offset == 2
        assert (await client.seal(name)).sealed
        assert await client.offset_at(name, 0) == 2  # the start offset: all made after 0
        assert (await client.set_retention(name, {"bytes": 10})).retention == {"bytes": 10}
        prefix = name.rsplit("/", 1)[0]
        assert await client.list_segments(prefix) == [name]
        assert (await client.list_page(prefix, limit=1)).segments == [name]
        before = {c.id: c.epoch for c in await client.containers()}
        assert (await client.restart_container(0)).epoch > before[0]
        assert "segmentstore" in await client.metrics()
        await client.delete_segment(name)
        with pytest.raises(e.SegmentNotFoundError) as missing:
            await client.get_info(name)
        assert missing.value.name == name


async def test_concurrent_appends_share_the_client(live: LiveServer, name: str) -> None:
    async with AsyncSegmentStoreClient(live.url, max_connections=16) as client:
        await client.create_segment(name)
        results = await asyncio.gather(
            *(
                client.append(name, bytes([i]) * 10, writer_id=f"w{i}", writer_seq=0)
                for i in range(32)
            )
        )
        offsets = sorted(r.offset for r in results if r.offset is not None)
        assert offsets == list(range(0, 320, 10))
        data = (await client.read(name, 0)).data
        for result in results:
            assert result.offset is not None
            chunk = data[result.offset : result.offset + 10]
            assert len(set(chunk)) == 1


async def test_lost_answer_is_retried_without_duplicating(
    proxy: FlakyProxy, live: LiveServer, name: str
) -> None:
    with SegmentStoreClient(live.url) as direct:
        direct.create_segment(name)
    policy = RetryPolicy(initial_backoff_s=0.01, max_backoff_s=0.05)
    async with AsyncSegmentStoreClient(proxy.url, retry=policy) as client:
        proxy.drop_response(":append")
        result = await client.append(name, b"once", writer_id="w", writer_seq=0)
        assert result.duplicate
        proxy.drop_response(":append")
        with pytest.raises(httpx.TransportError):
            await client.append(name, b"twice?")  # no writer id: not retried
        assert (await client.read(name, 0)).data == b"oncetwice?"
