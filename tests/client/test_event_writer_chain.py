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
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from readiness import wait_ready
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from segmentstore import SegmentStore
from segmentstore.api.errors import error_json
from segmentstore.api.server import serving_app
from segmentstore.client import (
    AsyncSegmentStoreClient,
    EventAck,
    EventReader,
    EventWriter,
    RetryPolicy,
)

from .conftest import LiveServer

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


def _serve(app: ASGIApp) -> tuple[str, uvicorn.Server, threading.Thread]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    config = uvicorn.Config(app, lifespan="on", log_level="warning", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [listener]}, name="uvicorn", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    wait_ready(f"http://127.0.0.1:{port}")
    return f"http://127.0.0.1:{port}", server, thread


@pytest.fixture(params=[False, True], ids=["not-applied", "applied-answer-lost"])
def refusing(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[str, str, OneBatchRefused]]:
    """(server URL, segment prefix, the refusing layer)"""
    store = SegmentStore.open(tmp_path / "data", containers=4, cache={"max_bytes": 64 << 20})
    prefix = f"chain-{uuid.uuid4().hex[:8]}/"
    wrapper = OneBatchRefused(serving_app(store), prefix, victim=3, applied=request.param)
    url, server, thread = _serve(wrapper)
    try:
        yield url, prefix, wrapper
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        assert not thread.is_alive(), "the server did not stop"


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
        written: dict[str, list[bytes]] = {s: [] for s in segments}
        acks: dict[str, list[EventAck]] = {s: [] for s in segments}
        stop = asyncio.Event()
        async with EventWriter(client, linger_ms=1, batch_bytes=2048, max_in_flight=4) as writer:

            async def produce() -> None:
                number = 0
                while not stop.is_set():
                    for segment in segments:
                        record = b"%s-%06d" % (segment.encode(), number)
                        acks[segment].append(await writer.send(segment, record))
                        written[segment].append(record)
                    number += 1
                    if number % 20 == 0:
                        await asyncio.sleep(0.001)

            producer = asyncio.create_task(produce())
            for _ in range(2):
                for container in containers:
                    await asyncio.sleep(0.3)
                    await client.restart_container(container)
            await asyncio.sleep(0.3)
            stop.set()
            await producer
        metrics = await client.metrics()
        for segment in segments:
            offsets = [await ack for ack in acks[segment]]
            stored = [i async for i in EventReader(client, segment, wait_ms=0, follow=False)]
            assert [payload for _, payload in stored] == written[segment]
            assert [offset for offset, _ in stored] == offsets
    assert sum(len(w) for w in written.values()) > 1000
    refused = [
        line
        for line in metrics.splitlines()
        if line.startswith("segmentstore_http_requests_total")
        and ":appendEvents" in line
        and 'status="503"' in line
    ]
    print("appendEvents answered 503 during the restarts:", refused)
    assert refused, "no batch was caught by a restart"
