"""Cluster leases in a JetStream key-value bucket: compare-and-set, expiry, taking back.

On the session's real three-node JetStream cluster; each test has a prefix of its own.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator

import pytest

from segmentstore.bench.jetstream_cluster import JetStreamCluster
from segmentstore.tier1.jetstream import JetStreamDurableDataLog, JetStreamOptions
from segmentstore.tier1.jetstream.leases import JetStreamLeases
from segmentstore.tier1.leases import ContainerLease

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


async def wait_expired(store: JetStreamLeases, container: int) -> float:
    """Seconds until ``container``'s lease is gone from the bucket: at least a lease, and until
    a read no longer shows it (one read alone can miss a key that is still there)."""
    started = time.monotonic()
    await asyncio.sleep(LEASE_MS / 1000 * 1.2)
    while container in (await store.read()).leases:
        assert time.monotonic() - started < 10 * LEASE_MS / 1000, "the lease never expired"
        await asyncio.sleep(0.05)
    return time.monotonic() - started


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
    view = await b.read()
    assert view.leases[3].owner == "a" and view.leases[3].epoch == 7


async def test_a_released_lease_is_marked_and_free(leases: list[JetStreamLeases]) -> None:
    a, b = leases
    held = await a.acquire(1, "a")
    assert held is not None
    await a.release(held)
    view = await b.read()
    assert 1 not in view.leases and 1 in view.released
    taken = await b.acquire(1, "b")
    assert taken is not None and taken.owner == "b"
    assert await a.renew(held, 0) is None  # the old holder's renewal fails


async def test_nodes_announce_and_withdraw(leases: list[JetStreamLeases]) -> None:
    a, b = leases
    await a.announce("a", "http://127.0.0.1:1")
    await b.announce("b", "http://127.0.0.1:2")
    assert (await a.read()).nodes == {"a": "http://127.0.0.1:1", "b": "http://127.0.0.1:2"}
    await b.withdraw("b")
    assert (await a.read()).nodes == {"a": "http://127.0.0.1:1"}


async def test_an_unrenewed_lease_expires_and_another_node_takes_it(
    leases: list[JetStreamLeases],
) -> None:
    a, b = leases
    await a.announce("a", "http://127.0.0.1:1")
    held = await a.acquire(0, "a")
    assert held is not None
    waited = await wait_expired(b, 0)
    assert waited >= LEASE_MS / 1000 * 0.5
    assert "a" not in (await b.read()).nodes  # the node's own entry expired as well
    assert await b.acquire(0, "b") is not None
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
    await wait_expired(a, 2)
    # JetStream was out of reach for longer than a lease, say: nobody took the container.
    back = await a.renew(held, epoch)
    assert back is not None and back.owner == "a"
    await log.close()

    await wait_expired(a, 2)
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
