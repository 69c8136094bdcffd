"""What the JetStream data log adds to the contract: fencing, node failures, its refusals.

The contract itself runs in test_data_log_contract.py; these tests use the same real
three-node cluster, and the kill test a cluster of its own whose nodes it SIGKILLs.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Iterator

import nats
import pytest
from nats.js.api import StorageType, StreamConfig

from segmentstore.harness.jetstream_cluster import JetStreamCluster
from segmentstore.tier1 import DataLogError, DataLogFencedError, LogRecord
from segmentstore.tier1.jetstream import JetStreamDurableDataLog, JetStreamOptions, wire

_PREFIXES = itertools.count()


def options_for(cluster: JetStreamCluster, **overrides: int) -> JetStreamOptions:
    settings: dict[str, int] = {"ack_timeout_ms": 2_000, "write_timeout_ms": 30_000}
    settings.update(overrides)
    return JetStreamOptions(
        servers=tuple(cluster.servers),
        stream_prefix=f"jl{next(_PREFIXES)}",
        **settings,  # type: ignore[arg-type]
    )


async def read_all(log: JetStreamDurableDataLog) -> list[LogRecord]:
    return [record async for record in log.read()]


async def test_a_stale_owner_is_fenced_and_its_late_writes_never_read(
    jetstream_cluster: JetStreamCluster,
) -> None:
    options = options_for(jetstream_cluster)
    old = JetStreamDurableDataLog(options, 0)
    old_epoch = await old.open()
    before = [await old.append([f"old {i}".encode()]) for i in range(20)]

    new = JetStreamDurableDataLog(options, 0)
    assert await new.open() > old_epoch
    # Everything the old owner sends now is refused, however many it pipelines.
    late = [old.append([f"late {i}".encode()]) for i in range(50)]
    results = await asyncio.gather(*late, return_exceptions=True)
    assert all(isinstance(r, DataLogFencedError) for r in results), results
    refused = old.append([b"after the fence"])
    with pytest.raises(DataLogFencedError):
        await refused
    await old.close()

    after = await new.append([b"new 0"])
    records = await read_all(new)
    assert [r.address for r in records] == [*before, after]
    assert [r.data for r in records] == [f"old {i}".encode() for i in range(20)] + [b"new 0"]
    await new.close()


async def test_a_superseded_owner_never_takes_the_stream_back(
    jetstream_cluster: JetStreamCluster,
) -> None:
    options = options_for(jetstream_cluster)
    old, new = JetStreamDurableDataLog(options, 0), JetStreamDurableDataLog(options, 0)
    await old.open()
    await new.open()
    # What the old owner's publisher does when its messages find no stream: it asks.
    with pytest.raises(DataLogFencedError):
        await old._check_ownership()
    client = await nats.connect(jetstream_cluster.servers)
    try:
        info = await client.jetstream().stream_info(options.stream(0))
        assert info.config.subjects == [options.subject(0, new.epoch)]
    finally:
        await client.close()
    assert await new.append([b"still the owner's"]) > 0
    await old.close()
    await new.close()


async def test_a_stream_that_could_lose_data_is_refused(
    jetstream_cluster: JetStreamCluster,
) -> None:
    options = options_for(jetstream_cluster)
    client = await nats.connect(jetstream_cluster.servers)
    try:
        js = client.jetstream()
        await js.add_stream(
            StreamConfig(
                name=options.stream(0),
                subjects=[options.subject(0, 0)],
                storage=StorageType.MEMORY,
                num_replicas=3,
            )
        )
        with pytest.raises(DataLogError, match="file storage"):
            await JetStreamDurableDataLog(options, 0).open()
        await js.delete_stream(options.stream(0))
        await js.add_stream(
            StreamConfig(
                name=options.stream(1),
                subjects=[options.subject(1, 0)],
                storage=StorageType.FILE,
                num_replicas=1,
            )
        )
        with pytest.raises(DataLogError, match="1 replicas, fewer than the 3"):
            await JetStreamDurableDataLog(options, 1).open()
        await js.delete_stream(options.stream(1))
    finally:
        await client.close()


# -- node failures -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def killable_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JetStreamCluster]:
    """A cluster of this module's own: its nodes are killed."""
    with JetStreamCluster.running(tmp_path_factory.mktemp("killable")) as cluster:
        yield cluster


class Load:
    """Writers appending numbered records until stopped; every acknowledgement is kept."""

    def __init__(self, log: JetStreamDurableDataLog, writers: int) -> None:
        self.log = log
        self.acked: dict[int, bytes] = {}
        self.last_ack = time.monotonic()
        self.longest_gap_s = 0.0
        self._stop = asyncio.Event()
        self._tasks = [asyncio.create_task(self._write(w)) for w in range(writers)]

    async def _write(self, writer: int) -> None:
        rng = random.Random(writer)
        for seq in itertools.count():
            if self._stop.is_set():
                return
            payload = f"{writer}:{seq}:".encode() + rng.randbytes(rng.choice([100, 3000, 70_000]))
            address = await self.log.append([payload])
            now = time.monotonic()
            self.longest_gap_s = max(self.longest_gap_s, now - self.last_ack)
            self.last_ack = now
            self.acked[address] = payload

    async def acknowledged_beyond(self, count: int, within_s: float) -> bool:
        """Whether more than ``count`` appends are acknowledged within ``within_s`` (a writer
        that failed fails the test with its error)."""
        deadline = time.monotonic() + within_s
        while len(self.acked) <= count and time.monotonic() < deadline:
            for task in self._tasks:
                if task.done():
                    task.result()
            await asyncio.sleep(0.2)
        return len(self.acked) > count

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)


@pytest.mark.slow
@pytest.mark.integration
async def test_no_acknowledged_record_is_lost_when_a_follower_then_the_leader_dies(
    killable_cluster: JetStreamCluster,
) -> None:
    options = options_for(killable_cluster)
    log = JetStreamDurableDataLog(options, 0)
    await log.open()
    load = Load(log, writers=8)
    stalls = {}
    try:
        for role in ("follower", "leader"):
            await asyncio.sleep(1.5)
            leader = await killable_cluster.stream_leader(options.stream(0))
            victim = (
                leader
                if role == "leader"
                else next(n.name for n in killable_cluster.nodes if n.name != leader)
            )
            acked_before = len(load.acked)
            load.longest_gap_s = 0.0
            killable_cluster.node(victim).sigkill()
            # An election takes 5-10 s on a quiet machine, longer on a loaded one: appends must go
            # on after it, well within the clients' own timeouts.
            resumed = await load.acknowledged_beyond(acked_before, within_s=45)
            assert resumed, f"no append acknowledged within 45 s after the {role} died"
            stalls[role] = load.longest_gap_s
            killable_cluster.node(victim).start()
            await killable_cluster.ready()
        # Enough records to mean something, however slowly a loaded machine gives them.
        assert await load.acknowledged_beyond(1000, within_s=60), len(load.acked)
    finally:
        await load.stop()
        await log.close()
    print(f"longest pause between acknowledgements: {stalls}, {len(load.acked)} records")

    reopened = JetStreamDurableDataLog(options, 0)
    await reopened.open()
    found = {record.address: record.data for record in await read_all(reopened)}
    await reopened.close()
    missing = [address for address in load.acked if found.get(address) != load.acked[address]]
    assert missing == [], f"{len(missing)} acknowledged records lost or changed"


def stored(sequence: int, data: bytes, **headers: str) -> wire.StoredMessage:
    return wire.StoredMessage(sequence, dict(headers), data)


def test_records_are_reassembled_and_a_torn_one_is_dropped() -> None:
    part = {"Segmentstore-Part": ""}
    messages = [
        stored(1, b"whole"),
        stored(2, b"ab", **{**part, "Segmentstore-Part": "1/3"}),
        stored(3, b"cd", **{**part, "Segmentstore-Part": "2/3"}),
        stored(4, b"ef", **{**part, "Segmentstore-Part": "3/3"}),
        # a writer died after two of three parts; the next owner's fence follows
        stored(5, b"gh", **{**part, "Segmentstore-Part": "1/3"}),
        stored(6, b"ij", **{**part, "Segmentstore-Part": "2/3"}),
        stored(7, b"", **{"Segmentstore-Kind": "fence"}),
        stored(8, b"after"),
        # a read that starts inside a record skips to the next one
        stored(9, b"kl", **{**part, "Segmentstore-Part": "2/2"}),
        stored(10, b"next"),
    ]
    assembler = wire.RecordAssembler()
    found = [whole for m in messages if (whole := assembler.feed(m)) is not None]
    assert found == [(1, b"whole"), (2, b"abcdef"), (8, b"after"), (10, b"next")]
