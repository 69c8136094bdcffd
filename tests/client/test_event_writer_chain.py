"""Chained batches (``Writer-Prev-Seq``) under an EventWriter with several batches of a segment
on the wire: a ``503`` for one batch while the next one is already in flight loses, doubles
and reorders nothing, whether the store had applied the refused batch or not, nor does a batch
that overtakes its predecessor; nor do container restarts in the middle of the writes.

The server is the real one, wrapped in an ASGI layer that picks one chained batch and holds it
until the batch chained on it has arrived (so that one is provably in flight); then answers it
``503``, after letting the store apply it (the answer is lost) or without, or lets the next
batch reach the store first.
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


HOLD_S = 0.2


class OneBatchRefused:
    """Holds each chained ``:appendEvents`` of segments named ``prefix...`` for up to
    :data:`HOLD_S` until a batch chained on it arrives; the first one that sees its successor
    arrive so (the successor provably in flight) is the victim. Then, by ``mode``:
    ``refused``, the victim is answered ``503`` unapplied; ``lost``, the store applies it and
    the answer is replaced by a ``503``; ``overtaken``, the successor reaches the store first
    (and is refused as out of order), and only then the victim. Either way the successor
    reaches the store after the victim's fate is sealed."""

    def __init__(self, app: ASGIApp, prefix: str, mode: str) -> None:
        self.app = app
        self.prefix = f"/v1/segments/{prefix}"
        self.mode = mode
        self.victim_seq: bytes | None = None
        self._held: dict[bytes, asyncio.Event] = {}
        self._first_done = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(self.prefix):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        seq, prev = headers.get(b"writer-seq"), headers.get(b"writer-prev-seq")
        if prev is not None and self.victim_seq is None and prev in self._held:
            self.victim_seq = prev  # its successor is here while it is still unanswered
            self._held[prev].set()
        if prev is not None and prev == self.victim_seq and not self._first_done.is_set():
            await self._successor(scope, receive, send)
            return
        if seq is not None and prev is not None and self.victim_seq is None:
            arrived = self._held[seq] = asyncio.Event()
            try:
                await asyncio.wait_for(arrived.wait(), HOLD_S)
            except TimeoutError:
                pass
            finally:
                del self._held[seq]
            if self.victim_seq == seq:
                await self._victim(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _successor(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.mode == "overtaken":
            try:
                await self.app(scope, receive, send)
            finally:
                self._first_done.set()
            return
        await self._first_done.wait()
        await self.app(scope, receive, send)

    async def _victim(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.mode == "overtaken":
            await self._first_done.wait()
            await self.app(scope, receive, send)
            return
        if self.mode == "lost":

            async def lost(message: Message) -> None:
                pass

            await self.app(scope, receive, lost)
        else:
            while (await receive()).get("more_body", False):
                pass
        answer = error_json(503, "container_unavailable", "refused by the test", {})
        await answer(scope, receive, send)
        self._first_done.set()


@pytest.fixture(params=["refused", "lost", "overtaken"])
def refusing(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[str, str, OneBatchRefused]]:
    """(server URL, segment prefix, the refusing layer)"""
    prefix = f"chain-{uuid.uuid4().hex[:8]}/"
    layers: list[OneBatchRefused] = []

    def wrap(app: ASGIApp) -> ASGIApp:
        layers.append(OneBatchRefused(app, prefix, mode=request.param))
        return layers[0]

    server = start_server(tmp_path / "data", wrap=wrap)
    try:
        yield server.url, prefix, layers[0]
    finally:
        server.stop()


async def test_a_failure_while_the_next_batch_is_in_flight_loses_and_doubles_nothing(
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
    assert wrapper.victim_seq is not None, "no batch ever had the next one in flight"
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
