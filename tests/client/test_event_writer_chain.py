"""Chained batches (``Writer-Prev-Seq``) under an EventWriter with several batches of a segment
on the wire: a ``503`` for one batch while the next one is already in flight loses, doubles
and reorders nothing, whether the store had applied the refused batch or not; nor do container
restarts in the middle of the writes.

The server is the real one, wrapped in an ASGI layer that picks one chained batch, holds it
until the batch chained on it has arrived (so that one is provably in flight), then answers
it ``503``, after letting the store apply it (the answer is lost) or without.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from recorded_writes import RecordedWrites
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from segmentstore.api.errors import error_json
from segmentstore.client import (
    AsyncSegmentStoreClient,
    EventAck,
    EventReader,
    EventWriter,
    RetryPolicy,
)

from .conftest import LiveServer, start_server

RECORDS = 3000


class OneBatchRefused:
    """Answers the ``victim``-th chained ``:appendEvents`` of segments named ``prefix...``
    with ``503`` once the next batch of its lane has arrived; ``applied``: the store applies
    the victim first."""

    def __init__(self, app: ASGIApp, prefix: str, victim: int, applied: bool) -> None:
        self.app = app
        self.prefix = f"/v1/segments/{prefix}"
        self.victim = victim
        self.applied = applied
        self.chained = 0
        self.victim_seq: bytes | None = None
        self.overlapped = False
        self._next_arrived = asyncio.Event()
        self._answered = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path.startswith(self.prefix):
            headers = dict(scope["headers"])
            prev = headers.get(b"writer-prev-seq")
            if prev is not None and self.victim_seq is None:
                self.chained += 1
                if self.chained == self.victim:
                    self.victim_seq = headers[b"writer-seq"]
                    await self._refuse(scope, receive, send)
                    return
            elif prev is not None and prev == self.victim_seq and not self._answered.is_set():
                self._next_arrived.set()
                await self._answered.wait()  # the victim is answered first
        await self.app(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        await asyncio.wait_for(self._next_arrived.wait(), 30)
        self.overlapped = True
        if self.applied:

            async def lost(message: Message) -> None:
                pass

            await self.app(scope, receive, lost)
        else:
            while (await receive()).get("more_body", False):
                pass
        answer = error_json(503, "container_unavailable", "refused by the test", {})
        await answer(scope, receive, send)
        self._answered.set()


@pytest.fixture(params=[False, True], ids=["not-applied", "applied-answer-lost"])
def refusing(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[str, str, OneBatchRefused]]:
    """(server URL, segment prefix, the refusing layer)"""
    prefix = f"chain-{uuid.uuid4().hex[:8]}/"
    layers: list[OneBatchRefused] = []

    def wrap(app: ASGIApp) -> ASGIApp:
        layers.append(OneBatchRefused(app, prefix, victim=3, applied=request.param))
        return layers[0]

    server = start_server(tmp_path / "data", wrap=wrap)
    try:
        yield server.url, prefix, layers[0]
    finally:
        server.stop()


async def test_a_503_while_the_next_batch_is_in_flight_loses_and_doubles_nothing(
    refusing: tuple[str, str, OneBatchRefused],
) -> None:
    url, prefix, wrapper = refusing
    segment = prefix + "0"
    async with AsyncSegmentStoreClient(url, retry=RetryPolicy.never()) as client:
        await client.create_segment(segment)
        # The writer's own recovery, not the client's retries, handles the 503.
        async with EventWriter(client, linger_ms=1, batch_bytes=4096, max_in_flight=4) as writer:
            acks: list[EventAck] = []
            for number in range(RECORDS):
                acks.append(await writer.send(segment, b"record-%05d" % number))
                if number % 50 == 0:
                    await asyncio.sleep(0.001)  # let batches go out while records still come
            offsets = [await ack for ack in acks]
        stored = [item async for item in EventReader(client, segment, wait_ms=0, follow=False)]
    assert wrapper.overlapped, "the refused batch never had the next one in flight"
    assert [payload for _, payload in stored] == [b"record-%05d" % n for n in range(RECORDS)]
    assert [offset for offset, _ in stored] == offsets


async def test_container_restarts_during_pipelined_writes_lose_and_double_nothing(
    live: LiveServer,
) -> None:
    """Each segment's container is restarted twice while an EventWriter keeps four batches
    of it on the wire: the batches caught by a restart are answered 503 (or lose their
    answer), and the writer sends again from the first unacknowledged one."""
    run = uuid.uuid4().hex[:8]
    segments = [f"chain-restart-{run}/{n}" for n in range(4)]
    async with AsyncSegmentStoreClient(live.url) as client:
        for segment in segments:
            await client.create_segment(segment)
        containers = sorted({(await client.get_info(s)).container for s in segments})
        async with EventWriter(client, linger_ms=1, batch_bytes=2048, max_in_flight=4) as writer:
            records = RecordedWrites(writer, segments, pause_every=20)
            records.start()
            for _ in range(2):
                for container in containers:
                    await asyncio.sleep(0.3)
                    await client.restart_container(container)
            await asyncio.sleep(0.3)
            await records.stop()
        metrics = await client.metrics()
        await records.verify(client)
    assert records.count > 1000
    refused = [
        line
        for line in metrics.splitlines()
        if line.startswith("segmentstore_http_requests_total")
        and ":appendEvents" in line
        and 'status="503"' in line
    ]
    print("appendEvents answered 503 during the restarts:", refused)
    assert refused, "no batch was caught by a restart"
