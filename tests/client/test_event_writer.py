"""EventWriter against a real server: offsets, batching, failures, back-pressure, lost answers;
and EventReader reading back what it wrote."""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest

import segmentstore.contracts.errors as e
from segmentstore.client import (
    AsyncSegmentStoreClient,
    BlockingEventWriter,
    EventAck,
    EventReader,
    EventWriter,
    RetryPolicy,
    SegmentStoreClient,
    UnknownOffsetError,
    WriterClosedError,
)

from .conftest import FlakyProxy, LiveServer


def _segments(count: int) -> list[str]:
    run = uuid.uuid4().hex[:10]
    return [f"writer/{run}/{i}" for i in range(count)]


async def _read_all(client: AsyncSegmentStoreClient, segment: str) -> list[tuple[int, bytes]]:
    return [item async for item in EventReader(client, segment, wait_ms=0, follow=False)]


async def test_every_record_is_found_at_the_offset_it_was_given(live: LiveServer) -> None:
    segments = _segments(4)
    rng = random.Random(7)
    async with AsyncSegmentStoreClient(live.url) as client:
        for segment in segments:
            await client.create_segment(segment)
        written: dict[str, list[tuple[int, bytes]]] = {s: [] for s in segments}
        # Small batches and many producers: many requests, several lanes at once.
        async with EventWriter(client, batch_bytes=4096, linger_ms=1) as writer:

            async def produce(producer: int) -> None:
                for i in range(60):
                    segment = segments[(producer + i) % len(segments)]
                    payload = f"{producer}:{i}:".encode() + bytes(rng.randrange(0, 300))
                    offset = await writer.write(segment, payload)
                    written[segment].append((offset, payload))

            await asyncio.gather(*(produce(p) for p in range(32)))
        for segment in segments:
            read_back = dict(await _read_all(client, segment))
            assert len(read_back) == len(written[segment])
            for offset, payload in written[segment]:
                assert read_back[offset] == payload
            # One producer's records to one segment keep the order of its writes.
            for producer in range(32):
                mine = [o for o, p in written[segment] if p.startswith(f"{producer}:".encode())]
                assert mine == sorted(mine)


async def test_acks_of_full_batches_give_every_record_its_offset(live: LiveServer) -> None:
    # As a throughput producer drives it: send() without waiting, batches of up to 1 MiB
    # (bodies large enough to be written apart from their request's head), acks awaited later.
    segments = _segments(3)
    rng = random.Random(11)
    async with AsyncSegmentStoreClient(live.url) as client:
        for segment in segments:
            await client.create_segment(segment)
        sent: list[tuple[str, bytes, EventAck]] = []
        async with EventWriter(client, batch_bytes=1 << 20, linger_ms=2) as writer:

            async def produce(producer: int) -> None:
                for i in range(1500):
                    segment = segments[(producer + i) % len(segments)]
                    payload = b"%d:%d:" % (producer, i) + rng.randbytes(rng.randrange(0, 2000))
                    sent.append((segment, payload, await writer.send(segment, payload)))

            await asyncio.gather(*(produce(p) for p in range(8)))
        offsets = [await ack for _, _, ack in sent]
        read_back = {segment: dict(await _read_all(client, segment)) for segment in segments}
    assert sum(len(events) for events in read_back.values()) == len(sent) == 12_000
    for (segment, payload, _), offset in zip(sent, offsets, strict=True):
        assert read_back[segment][offset] == payload


async def test_records_are_batched_into_few_requests(live: LiveServer, proxy: FlakyProxy) -> None:
    (segment,) = _segments(1)
    async with AsyncSegmentStoreClient(proxy.url) as client:
        await client.create_segment(segment)
        async with EventWriter(client, batch_bytes=64 << 10, linger_ms=50) as writer:
            offsets = await asyncio.gather(*(writer.write(segment, b"x" * 100) for _ in range(500)))
        assert sorted(offsets) == [i * 108 for i in range(500)]
        assert (await client.get_info(segment)).length == 500 * 108
    sent = [h for h in proxy.requests if ":appendEvents" in h.split("\r\n", 1)[0]]
    # 54 KB in batches of at most 64 KiB, lingering 50 ms: one request, two at most.
    assert 1 <= len(sent) <= 2


async def test_a_refused_batch_fails_exactly_its_records(live: LiveServer) -> None:
    sealed, open_ = _segments(2)
    async with AsyncSegmentStoreClient(live.url) as client:
        await client.create_segment(sealed)
        await client.create_segment(open_)
        await client.seal(sealed)
        async with EventWriter(client, linger_ms=1) as writer:
            outcomes = await asyncio.gather(
                *(writer.write(s, b"r") for s in [sealed, open_] * 5), return_exceptions=True
            )
        assert all(isinstance(o, e.SegmentSealedError) for o in outcomes[0::2])
        assert sorted(outcomes[1::2]) == [i * 9 for i in range(5)]  # type: ignore[type-var]
        assert len(await _read_all(client, open_)) == 5
        with pytest.raises(WriterClosedError):
            await writer.write(open_, b"late")


async def test_memory_is_bounded_by_back_pressure(live: LiveServer) -> None:
    (segment,) = _segments(1)
    bound = 64 << 10
    seen: list[int] = []
    async with AsyncSegmentStoreClient(live.url) as client:
        await client.create_segment(segment)
        async with EventWriter(
            client, batch_bytes=16 << 10, max_buffered_bytes=bound, linger_ms=1
        ) as writer:

            async def produce() -> None:
                for _ in range(50):
                    await writer.write(segment, bytes(1000))
                    seen.append(writer.buffered_bytes)

            await asyncio.gather(*(produce() for _ in range(40)))
        assert max(seen) <= bound
        assert writer.buffered_bytes == 0
        assert (await client.get_info(segment)).length == 2000 * 1008


async def test_a_lost_answer_is_retried_exactly_once_with_the_right_offsets(
    live: LiveServer, proxy: FlakyProxy
) -> None:
    (segment,) = _segments(1)
    fast = RetryPolicy(max_attempts=1)  # the writer's own retries, not the client's
    async with (
        AsyncSegmentStoreClient(live.url) as direct,
        AsyncSegmentStoreClient(proxy.url, retry=fast) as flaky,
    ):
        await direct.create_segment(segment)
        await direct.append_events(segment, [b"before"])
        proxy.drop_response(":appendEvents", times=2)
        async with EventWriter(flaky, linger_ms=1) as writer:
            first = await asyncio.gather(*(writer.write(segment, b"a%d" % i) for i in range(3)))
            second = await writer.write(segment, b"next")
        events = await _read_all(direct, segment)
        assert [p for _, p in events] == [b"before", b"a0", b"a1", b"a2", b"next"]
        assert [o for o, _ in events[1:]] == [*first, second]
        sent = [h for h in proxy.requests if ":appendEvents" in h.split("\r\n", 1)[0]]
        assert len(sent) >= 3  # the dropped ones were sent again with their sequence numbers


async def test_the_reader_follows_the_tail_and_stops_at_the_end_of_a_sealed_segment(
    live: LiveServer,
) -> None:
    (segment,) = _segments(1)
    async with AsyncSegmentStoreClient(live.url) as client:
        await client.create_segment(segment)
        reader = EventReader(client, segment, wait_ms=2000, max_bytes=256)
        seen: list[tuple[int, bytes]] = []

        async def consume() -> None:
            async for item in reader:
                seen.append(item)

        consumer = asyncio.create_task(consume())
        async with EventWriter(client, linger_ms=1) as writer:
            offsets = []
            for i in range(20):
                offsets.append(await writer.write(segment, b"event-%02d" % i * 10))
        await client.seal(segment)
        await asyncio.wait_for(consumer, 30)
        assert seen == [(o, b"event-%02d" % i * 10) for i, o in enumerate(offsets)]
        # Resumable: a new reader from the middle sees the rest.
        resumed = EventReader(client, segment, offset=offsets[15], wait_ms=0)
        assert [o async for o, _ in resumed] == offsets[15:]
        assert reader.offset == (await client.get_info(segment)).length


def test_the_blocking_writer_writes_and_sends_with_correct_offsets(live: LiveServer) -> None:
    segment, sealed = _segments(2)
    with SegmentStoreClient(live.url) as direct:
        direct.create_segment(segment)
        direct.create_segment(sealed)
        direct.seal(sealed)
        with BlockingEventWriter(live.url, linger_ms=1) as writer:
            first = writer.write(segment, b"first")
            pending = [writer.send(segment, b"e%03d" % i) for i in range(200)]
            offsets = [future.result(timeout=30) for future in pending]
            refused = writer.send(sealed, b"no")
            with pytest.raises(e.SegmentSealedError):
                refused.result(timeout=30)
        assert first == 0
        assert offsets == [13 + i * 12 for i in range(200)]
        events = direct.read_events(segment, 0).events()
        assert events == [b"first", *(b"e%03d" % i for i in range(200))]


async def test_a_duplicate_whose_place_cannot_be_known_fails_as_unknown_offset(
    live: LiveServer, proxy: FlakyProxy
) -> None:
    (segment,) = _segments(1)
    with SegmentStoreClient(live.url) as direct:
        direct.create_segment(segment)
        # Another writer's append lands behind the batch before its lost answer is replaced.
        proxy.drop_response(
            ":appendEvents", then=lambda: direct.append_events(segment, [b"someone else"])
        )
        async with (
            AsyncSegmentStoreClient(proxy.url, retry=RetryPolicy.never()) as flaky,
            EventWriter(flaky, linger_ms=1) as writer,
        ):
            outcomes = await asyncio.gather(
                writer.write(segment, b"mine-1"),
                writer.write(segment, b"mine-2"),
                return_exceptions=True,
            )
            assert all(isinstance(o, UnknownOffsetError) for o in outcomes), outcomes
            assert await writer.write(segment, b"after") == 48
        # Applied exactly once all the same.
        assert direct.read_events(segment, 0).events() == [
            b"mine-1",
            b"mine-2",
            b"someone else",
            b"after",
        ]
