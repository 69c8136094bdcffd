"""Cluster leases in a JetStream key-value bucket: compare-and-set, expiry, taking back.

On the session's real three-node JetStream cluster; each test has a prefix of its own.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable

import nats
import pytest

from segmentstore.bench.jetstream_cluster import JetStreamCluster
from segmentstore.tier1.jetstream import JetStreamDurableDataLog, JetStreamOptions
from segmentstore.tier1.jetstream.leases import JetStreamLeases
from segmentstore.tier1.leases import ContainerLease, Membership

_PREFIXES = itertools.count()
LEASE_MS = 1_000


@pytest.fixture
def options(jetstream_cluster: JetStreamCluster) -> JetStreamOptions:
    return JetStreamOptions(
        servers=tuple(jetstream_cluster.servers), stream_prefix=f"lease{next(_PREFIXES)}"
    )


@pytest.fixture
async def leases(options: JetStreamOptions) -> AsyncIterator[list[JetStreamLeases]]:
    """Two nodes' lease stores on one bucket (``[a, b]``), closed afterwards."""
    opened = [JetStreamLeases(options, LEASE_MS), JetStreamLeases(options, LEASE_MS)]
    for store in opened:
        await store.open()
    yield opened
    for store in opened:
        await store.close()


async def leader_holds(options: JetStreamOptions, store: JetStreamLeases) -> int:
    """How many entries the bucket's stream leader holds, asked by a client of its own."""
    client = await nats.connect(list(options.servers))
    try:
        info = await client.jetstream().stream_info(f"KV_{store.bucket_name}")
        return info.state.messages
    finally:
        await client.close()


async def wait_all_expired(options: JetStreamOptions, store: JetStreamLeases) -> float:
    """Seconds until every entry of the bucket expired: at least a lease, until the stream's
    leader (which decides every compare-and-set) holds none, and until a read shows none.
    Each replica expires entries on its own clock and a read may come from any of them."""
    started = time.monotonic()
    await asyncio.sleep(LEASE_MS / 1000 * 1.2)
    while True:
        view = await store.read()
        if not view.leases and not view.nodes and not await leader_holds(options, store):
            return time.monotonic() - started
        assert time.monotonic() - started < 10 * LEASE_MS / 1000, f"never expired: {view}"
        await asyncio.sleep(0.05)


async def read_until(store: JetStreamLeases, settled: Callable[[Membership], bool]) -> Membership:
    """The first read that shows a write just made: a write is acknowledged once two of three
    replicas hold it, and a read may come from the third."""
    deadline = time.monotonic() + 5
    while not settled(view := await store.read()):
        assert time.monotonic() < deadline, f"the write never showed: {view}"
        await asyncio.sleep(0.05)
    return view


async def test_one_holder_at_a_time(leases: list[JetStreamLeases]) -> None:
    a, b = leases
    held = await a.acquire(3, "a")
    assert held is not None and held.owner == "a"
    assert await b.acquire(3, "b") is None
    renewed = await a.renew(held, 7)
    assert renewed is not None and renewed.revision > held.revision and renewed.epoch == 7
    # A renewal naming an old revision is someone else's stale belief: refused.
    forged = ContainerLease(3, "b", 0, held.revision)
    assert await b.renew(forged, 0) is None
    view = await read_until(b, lambda view: 3 in view.leases and view.leases[3].epoch == 7)
    assert view.leases[3].owner == "a"


async def test_a_released_lease_is_marked_and_free(leases: list[JetStreamLeases]) -> None:
    a, b = leases
    held = await a.acquire(1, "a")
    assert held is not None
    await a.release(held)
    view = await read_until(b, lambda view: 1 not in view.leases)
    assert 1 in view.released
    taken = await b.acquire(1, "b")
    assert taken is not None and taken.owner == "b"
    assert await a.renew(held, 0) is None  # the old holder's renewal fails


async def test_nodes_announce_and_withdraw(leases: list[JetStreamLeases]) -> None:
    a, b = leases
    await a.announce("a", "http://127.0.0.1:1")
    await b.announce("b", "http://127.0.0.1:2")
    both = {"a": "http://127.0.0.1:1", "b": "http://127.0.0.1:2"}
    await read_until(a, lambda view: view.nodes == both)
    await b.withdraw("b")
    await read_until(a, lambda view: view.nodes == {"a": "http://127.0.0.1:1"})


async def test_an_unrenewed_lease_expires_and_another_node_takes_it(
    options: JetStreamOptions, leases: list[JetStreamLeases]
) -> None:
    a, b = leases
    await a.announce("a", "http://127.0.0.1:1")
    held = await a.acquire(0, "a")
    assert held is not None
    waited = await wait_all_expired(options, b)  # the node's own entry expires as well
    assert waited >= LEASE_MS / 1000 * 0.5
    taken = await b.acquire(0, "b")
    assert taken is not None and taken.owner == "b"
    assert await a.renew(held, 0) is None


async def test_an_expired_lease_is_taken_back_only_if_nobody_opened_the_container(
    options: JetStreamOptions, leases: list[JetStreamLeases]
) -> None:
    a, _ = leases
    log = JetStreamDurableDataLog(options, 2)
    epoch = await log.open()
    held = await a.acquire(2, "a")
    assert held is not None
    held = await a.renew(held, epoch)
    assert held is not None
    await wait_all_expired(options, a)
    # JetStream was out of reach for longer than a lease, say: nobody took the container.
    back = await a.renew(held, epoch)
    assert back is not None and back.owner == "a"
    await log.close()

    await wait_all_expired(options, a)
    newer = JetStreamDurableDataLog(options, 2)
    assert await newer.open() > epoch  # a new owner opened it meanwhile (and died)
    await newer.close()
    assert await a.renew(back, epoch) is None


async def test_the_bucket_keeps_the_lease_time_it_was_created_with(
    options: JetStreamOptions, leases: list[JetStreamLeases]
) -> None:
    later = JetStreamLeases(options, 30_000)
    await later.open()
    try:
        assert later.lease_ms == LEASE_MS
    finally:
        await later.close()
