"""The JetStream data log when the servers' answers are held up on the way back (through a
proxy of the drill's switchboard) for longer than the acknowledgement timeout, then all arrive
at once: late answers are progress, not a failure, and the log goes on appending in order
without losing or repeating a record."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from segmentstore.drill.network import DrillNetwork
from segmentstore.harness.jetstream_cluster import JetStreamCluster
from segmentstore.tier1.jetstream import JetStreamDurableDataLog, JetStreamOptions

pytestmark = pytest.mark.integration

_NAMES = itertools.count()
ACK_TIMEOUT_MS = 1000


async def test_answers_held_past_the_timeout_then_delivered_lose_and_repeat_nothing(
    jetstream_cluster: JetStreamCluster, switchboard: DrillNetwork
) -> None:
    client = f"late-{next(_NAMES)}"
    servers = [f"js{i + 1}" for i in range(len(jetstream_cluster.nodes))]
    urls = tuple(
        f"nats://127.0.0.1:{switchboard.proxy(client, name, node.client_port)}"
        for name, node in zip(servers, jetstream_cluster.nodes, strict=True)
    )
    options = JetStreamOptions(
        servers=urls,
        stream_prefix=f"late{next(_NAMES)}",
        ack_timeout_ms=ACK_TIMEOUT_MS,
        write_timeout_ms=30_000,
    )
    log = JetStreamDurableDataLog(options, 0)
    await log.open()
    appends: list[asyncio.Future[int]] = []

    async def append_for(seconds: float) -> None:
        for _ in range(round(seconds / 0.02)):
            data = f"record {len(appends)}".encode()
            appends.append(asyncio.ensure_future(log.append([data])))
            await asyncio.sleep(0.02)

    try:
        await append_for(0.5)
        # The answers stop coming back: the first unanswered append times out after a second
        # and the log stops sending; the answers are delivered half a second later, before the
        # last append sent has timed out too.
        for server in servers:
            switchboard.set(client, server, held_from=[server])
        await append_for(1.5)
        switchboard.heal()
        await append_for(0.5)
        addresses = await asyncio.wait_for(asyncio.gather(*appends), 60)
        assert addresses == sorted(addresses) and len(set(addresses)) == len(appends)
        records = [record async for record in log.read()]
        assert [r.data for r in records] == [f"record {i}".encode() for i in range(len(appends))]
        assert [r.address for r in records] == addresses
    finally:
        switchboard.heal()
        await log.close()
