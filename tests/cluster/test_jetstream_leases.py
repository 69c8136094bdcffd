"""Cluster leases in a JetStream key-value bucket: compare-and-set, expiry, taking back,
one consumer per node however often it reads, and entries no member signed ignored.

On the session's real three-node JetStream cluster; each test has a prefix of its own.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import nats
import pytest
from loop_checks import every_exception_retrieved

from segmentstore.cluster.jetstream_leases import JetStreamLeases
from segmentstore.cluster.lease_watch import CONSUMER_IDLE_S, RESYNC_S
from segmentstore.cluster.leases import BackendUsage, ContainerLease, Membership
from segmentstore.harness.jetstream_cluster import JetStreamCluster
from segmentstore.tier1.errors import DataLogWriteError
from segmentstore.tier1.jetstream import JetStreamDurableDataLog, JetStreamOptions
from segmentstore.tier1.signing import Signer

_PREFIXES = itertools.count()
LEASE_MS = 1_000
SECRET = b"the tests' cluster secret"


@pytest.fixture(autouse=True)
async def _every_exception_retrieved() -> AsyncIterator[None]:
    async with every_exception_retrieved():
        yield


@pytest.fixture
def options(jetstream_cluster: JetStreamCluster) -> JetStreamOptions:
    return JetStreamOptions(
        servers=tuple(jetstream_cluster.servers), stream_prefix=f"lease{next(_PREFIXES)}"
    )


@pytest.fixture
async def leases(options: JetStreamOptions) -> AsyncIterator[list[JetStreamLeases]]:
    """Two nodes' lease stores on one bucket (``[a, b]``), closed afterwards."""
    opened = [lease_store(options), lease_store(options)]
    for store in opened:
        await store.open()
    yield opened
    for store in opened:
        await store.close()


def lease_store(
    options: JetStreamOptions, lease_ms: int = LEASE_MS, secret: bytes = SECRET
) -> JetStreamLeases:
    return JetStreamLeases(options, lease_ms, Signer(secret, "lease entries"))


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
    # Waiting for the mark itself: a view that has not seen the acquire yet lacks the lease too.
    view = await read_until(b, lambda view: 1 in view.released)
    assert 1 not in view.leases
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
    later = lease_store(options, 30_000)
    await later.open()
    try:
        assert later.lease_ms == LEASE_MS
    finally:
        await later.close()


async def stream_consumers(options: JetStreamOptions, store: JetStreamLeases) -> int:
    client = await nats.connect(list(options.servers))
    try:
        info = await client.jetstream().stream_info(store.stream_name)
        return int(info.state.consumer_count)
    finally:
        await client.close()


async def test_reads_create_no_consumers_and_a_closed_store_leaves_none(
    options: JetStreamOptions, leases: list[JetStreamLeases]
) -> None:
    """A view is pushed by one watcher per node: reading it a thousand times (four minutes
    of ticks of a 3-node cluster, where a watcher per read hit the stream's cap of 1,000)
    creates no consumer, and a store that closes deletes its own."""
    a, b = leases
    await a.announce("a", "http://127.0.0.1:1")
    for _ in range(1000):
        await a.read()
        await b.read()
    assert await stream_consumers(options, a) == 2
    # a start-up race: 2; and a watcher that heard nothing for half a lease is replaced
    assert a.watch is not None and a.watch.consumers_created <= 2 + a.watch.silent_resyncs
    usage = await a.usage()
    assert (usage.streams, usage.consumers) == (2, 2)  # two buckets; a watcher per store
    await b.close()
    deadline = time.monotonic() + 3
    while await stream_consumers(options, a) != 1:
        assert time.monotonic() < deadline, "the closed store's consumer is still there"
        await asyncio.sleep(0.05)


async def test_a_watcher_whose_consumer_vanished_is_replaced_within_a_lease(
    options: JetStreamOptions, leases: list[JetStreamLeases]
) -> None:
    """JetStream deletes a watcher's consumer once its node was out of reach for a few
    seconds (a partition); the node's subscription then hears nothing, and without a check
    its view stayed stale until the next resync, RESYNC_S later (a returning node did not
    see its containers handed back for 21 s in the soak)."""
    a, b = leases
    client = await nats.connect(list(options.servers))
    try:
        js = client.jetstream()
        for consumer in await js.consumers_info(a.stream_name):
            await js.delete_consumer(a.stream_name, consumer.name)
    finally:
        await client.close()
    started = time.monotonic()
    while "b" not in (await a.read()).nodes:
        assert time.monotonic() - started < 2 * CONSUMER_IDLE_S, "a's view stayed stale"
        await b.announce("b", "http://127.0.0.1:2")  # renewed, as a member does every tick
        await asyncio.sleep(0.2)
    assert a.watch is not None and a.watch.silent_resyncs >= 1
    assert 2 * CONSUMER_IDLE_S < RESYNC_S  # the check is what made it quick


async def rogue_write(
    options: JetStreamOptions, store: JetStreamLeases, key: str, value: bytes
) -> int:
    """A write by a process with access to JetStream but not the cluster's secret."""
    client = await nats.connect(list(options.servers))
    try:
        kv = await client.jetstream().key_value(store.bucket_name)
        return int(await kv.put(key, value))
    finally:
        await client.close()


async def test_entries_no_member_signed_are_ignored_and_written_over(
    options: JetStreamOptions, leases: list[JetStreamLeases]
) -> None:
    a, b = leases
    impostor = lease_store(options, secret=b"another cluster's secret!")
    await impostor.open()
    try:
        # Unsigned, and signed with another secret: neither shows, for nobody.
        await rogue_write(options, a, "node.evil", b'{"url": "http://127.0.0.1:9", "at": 0}')
        await impostor.announce("impostor", "http://127.0.0.1:8")
        evil_lease = await impostor.acquire(4, "impostor")
        assert evil_lease is not None  # it can write: it has access to JetStream
        await a.announce("a", "http://127.0.0.1:1")
        view = await read_until(b, lambda view: "a" in view.nodes)
        assert set(view.nodes) == {"a"}
        assert 4 not in view.leases
        # A member takes the container as if nobody held it.
        taken = await b.acquire(4, "b")
        assert taken is not None and taken.owner == "b"
        await read_until(a, lambda view: 4 in view.leases and view.leases[4].owner == "b")
        # A non-member writing over a member's lease changes nobody's view, and the member's
        # next renewal takes the key back.
        await rogue_write(options, a, "container.4", b'{"owner": "evil", "epoch": 99}')
        await asyncio.sleep(0.2)
        assert (await a.read()).leases[4].owner == "b"
        renewed = await b.renew(taken, 0)
        assert renewed is not None and renewed.owner == "b"
        # Deleting a member's entries changes nothing either.
        client = await nats.connect(list(options.servers))
        try:
            kv = await client.jetstream().key_value(a.bucket_name)
            await kv.delete("node.a")
            await kv.delete("container.4")
        finally:
            await client.close()
        await asyncio.sleep(0.2)
        view = await a.read()
        assert "a" in view.nodes and view.leases[4].owner == "b"
        assert 4 not in view.released
    finally:
        await impostor.close()


async def test_usage_counts_the_replicas_a_dead_server_leaves_out_of_service(
    tmp_path: Path,
) -> None:
    """On a JetStream cluster of its own (a server is killed): the deployment's two R3 buckets
    lose a replica each while the server is down, and have them all back once it returns."""
    with JetStreamCluster.running(tmp_path) as cluster:
        options = JetStreamOptions(servers=tuple(cluster.servers), stream_prefix="replicas")
        store = lease_store(options)
        await store.open()
        try:
            await usage_until(store, lambda u: u.streams == 2 and u.replicas_missing == 0)
            victim = next(node for node in cluster.nodes if node.url != cluster.servers[0])
            victim.sigkill()
            down = await usage_until(store, lambda u: u.replicas_missing >= 2)
            victim.start()
            back = await usage_until(store, lambda u: u.replicas_missing == 0)
            print(
                f"replicas missing with {victim.name} down: {down.replicas_missing}; back: {back}"
            )
            assert down.replicas_missing == 2  # one of three, in each of the two buckets
        finally:
            await store.close()


async def usage_until(
    store: JetStreamLeases, wanted: Callable[[BackendUsage], bool]
) -> BackendUsage:
    """The first count that is ``wanted``; a count JetStream does not answer (its meta
    leader elected again after a server died) is asked again, as a node does."""
    deadline = time.monotonic() + 60
    while True:
        try:
            usage: BackendUsage | DataLogWriteError = await store.usage()
        except DataLogWriteError as error:
            usage = error
        if isinstance(usage, BackendUsage) and wanted(usage):
            return usage
        assert time.monotonic() < deadline, f"never so: {usage}"
        await asyncio.sleep(0.5)
