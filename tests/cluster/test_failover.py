"""A cluster of three nodes under concurrent exactly-once writers, while nodes die, pause,
join and leave, and while a JetStream node dies: nothing acknowledged is lost or doubled, a
stale owner never writes again, and the only refusals a client sees are 503s with
``Retry-After``. The tests run in order on one cluster; each leaves three settled nodes."""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections.abc import Callable

import httpx
import pytest
from cluster_load import ClusterWriters, read_whole
from recorded_writes import RecordedWrites
from store_cluster import StoreCluster

from segmentstore.client import AsyncSegmentStoreClient, EventWriter
from segmentstore.contracts.mapping import container_of
from segmentstore.harness.jetstream_cluster import JetStreamCluster

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]


def live_urls(nodes: StoreCluster, excluded: set[str] | None = None) -> list[str]:
    excluded = excluded or set()
    return [
        node.url
        for node_id, node in nodes.nodes.items()
        if node.proc.poll() is None and node_id not in excluded
    ]


def held_by(nodes: StoreCluster, node_id: str) -> list[int]:
    view = nodes.cluster_map()
    return [c["id"] for c in view["containers"] if c["owner"] == node_id]


def name_in(container: int, containers: int, prefix: str) -> str:
    return next(
        name
        for i in range(100_000)
        if container_of(name := f"{prefix}/{i}", containers) == container
    )


async def test_sigkill_of_a_node_under_load(nodes: StoreCluster) -> None:
    writers = ClusterWriters(lambda: live_urls(nodes), "kill")
    await writers.create()
    writers.start()
    await asyncio.sleep(3)
    victim = nodes.nodes["n2"]
    moved = held_by(nodes, "n2")
    assert moved, "n2 held nothing"
    # A burst of appends straight at the owner, killed while it answers them: some are
    # durable without their answer. Retried through the survivors, those answer duplicate.
    burst = Burst(name_in(moved[0], nodes.containers, "burst"), 64)
    await burst.fire(victim.url, nodes)
    killed = time.monotonic()
    victim.sigkill()
    retried = asyncio.create_task(burst.retry(lambda: live_urls(nodes)))
    await asyncio.to_thread(nodes.wait_settled, 60)
    takeover_s = time.monotonic() - killed
    await asyncio.sleep(2)  # more appends on the new owners
    await writers.stop()
    await retried
    print(f"takeover of {len(moved)} containers after SIGKILL: {takeover_s:.2f} s;"
          f" {writers.appended} appends, {writers.duplicates} answered duplicate,"
          f" statuses {dict(writers.statuses)}; burst: {burst.answered_before} answered before"
          f" the kill, {burst.duplicates} of the retried answered duplicate")  # fmt: skip
    writers.verify(live_urls(nodes)[0])
    burst.verify(live_urls(nodes)[0])
    assert takeover_s < 30
    assert set(writers.statuses) <= {200, 201, 503}

    nodes.start_node("n2").wait_listening(30)  # it rejoins and gets its share back
    await asyncio.to_thread(nodes.wait_settled, 60)
    writers.verify(nodes.nodes["n2"].url)


async def test_a_node_restarted_at_once_takes_its_own_containers_back(
    nodes: StoreCluster,
) -> None:
    """As a pod restarts under the same name: its leases have not expired yet, and it takes
    them back itself instead of waiting for them to expire and move."""
    writers = ClusterWriters(lambda: live_urls(nodes), "restart")
    await writers.create()
    writers.start()
    await asyncio.sleep(1)
    before = held_by(nodes, "n3")
    nodes.nodes["n3"].sigkill()
    restarted = time.monotonic()
    nodes.start_node("n3").wait_listening(30)
    await asyncio.to_thread(nodes.wait_settled, 60)
    settled_s = time.monotonic() - restarted
    await asyncio.sleep(1)
    await writers.stop()
    after = held_by(nodes, "n3")
    print(f"n3 restarted at once: settled again in {settled_s:.2f} s, holding {after}"
          f" (before: {before}); statuses {dict(writers.statuses)}")  # fmt: skip
    writers.verify(live_urls(nodes)[0])
    assert set(writers.statuses) <= {200, 201, 503}


async def test_a_paused_owner_is_fenced_when_it_wakes(nodes: StoreCluster) -> None:
    owner = nodes.nodes["n1"]
    container = held_by(nodes, "n1")[0]
    segment = name_in(container, nodes.containers, "pause")
    other = nodes.nodes["n3"].url
    async with httpx.AsyncClient(timeout=60) as http:
        assert (await http.put(f"{owner.url}/v1/segments/{segment}")).status_code == 201
        first = await http.post(f"{owner.url}/v1/segments/{segment}:append", content=b"before|")
        assert first.status_code == 200
        owner.proc.send_signal(signal.SIGSTOP)
        try:
            # Sent to the paused owner itself (as if forwarded): it waits in its socket. On a
            # connection of its own: the owner closes an idle kept-alive one when it wakes.
            fresh = httpx.AsyncClient(timeout=60)
            path = f"/v1/segments/{segment}:append"
            stale = asyncio.create_task(
                fresh.post(
                    f"{owner.url}{path}",
                    content=b"stale|",
                    headers=nodes.as_member("POST", path, body=b"stale|"),
                )
            )
            new_owner = await _wait_owner_other_than(http, other, container, "n1")
            after = await http.post(f"{other}/v1/segments/{segment}:append", content=b"after|")
            assert after.status_code == 200, after.text
            await asyncio.sleep(1.5)  # the new owner flushes to Tier 2 under its epoch
        finally:
            owner.proc.send_signal(signal.SIGCONT)
        refused = await stale
        await fresh.aclose()
        assert refused.status_code == 503, refused.text
        # It gives the container up, and everyone reads only what was acknowledged.
        deadline = time.monotonic() + 20
        while container in held_by_view(await http.get(f"{owner.url}/v1/cluster"), "n1"):
            assert time.monotonic() < deadline, "the stale owner kept the container"
            await asyncio.sleep(0.2)
    for url in live_urls(nodes):
        with httpx.Client(base_url=url, timeout=30) as sync:
            assert read_whole(sync, segment) == b"before|after|"
    log = owner.log_path.read_text()
    gave_up = (f"lost the lease of container {container}", f"lease of container {container} for")
    assert any(words in log for words in gave_up) or "fenced" in log
    said = [line for line in log.splitlines() if "fenced" in line or "lost the lease" in line]
    print(f"container {container} moved to {new_owner}; the stale owner's log says: {said}")
    await asyncio.to_thread(nodes.wait_settled, 60)


class Burst:
    """``count`` appends to one segment at once, each with a writer id of its own."""

    def __init__(self, segment: str, count: int) -> None:
        self.segment = segment
        self.count = count
        self.pending: dict[int, asyncio.Task[httpx.Response]] = {}
        self.answered_before = 0
        self.duplicates = 0
        self._http = httpx.AsyncClient(timeout=60)

    def payload(self, i: int) -> bytes:
        return f"[burst {i:03d}]".encode()

    async def fire(self, url: str, nodes: StoreCluster) -> None:
        assert (await self._http.put(f"{url}/v1/segments/{self.segment}")).status_code == 201
        for i in range(self.count):
            self.pending[i] = asyncio.create_task(self._send(url, i))
        # The kill comes once the owner has answered a quarter: it is in the middle of the rest.
        while sum(task.done() for task in self.pending.values()) < self.count // 4:
            await asyncio.sleep(0.001)

    async def _send(self, url: str, i: int) -> httpx.Response:
        return await self._http.post(
            f"{url}/v1/segments/{self.segment}:append",
            content=self.payload(i),
            headers={"Writer-Id": f"burst-{i}", "Writer-Seq": "0"},
        )

    async def retry(self, urls: Callable[[], list[str]]) -> None:
        for i, task in self.pending.items():
            try:
                answer: httpx.Response | None = await task
            except httpx.TransportError:
                answer = None
            if answer is not None and answer.status_code == 200:
                self.answered_before += 1
                continue
            while True:  # the same writer id and sequence: applied at most once
                try:
                    answer = await self._send(random.choice(urls()), i)
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
                    continue
                if answer.status_code == 200:
                    self.duplicates += bool(answer.json().get("duplicate"))
                    break
                await asyncio.sleep(0.1)
        await self._http.aclose()

    def verify(self, url: str) -> None:
        with httpx.Client(base_url=url, timeout=30) as http:
            data = read_whole(http, self.segment)
        pieces = sorted(data[i : i + 11] for i in range(0, len(data), 11))
        assert pieces == sorted(self.payload(i) for i in range(self.count))


def held_by_view(answer: httpx.Response, node_id: str) -> list[int]:
    return [c["id"] for c in answer.json()["containers"] if c["owner"] == node_id]


async def _wait_owner_other_than(
    http: httpx.AsyncClient, url: str, container: int, old: str
) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        view = (await http.get(f"{url}/v1/cluster")).json()
        owner = view["containers"][container]["owner"]
        if owner not in (None, old):
            containers = (await http.get(f"{url}/v1/containers")).json()["containers"]
            if containers[container]["status"] == "running":
                return str(owner)
        await asyncio.sleep(0.1)
    raise AssertionError(f"container {container} was not taken over from {old}")


async def test_sigkill_of_a_jetstream_node_under_load(
    nodes: StoreCluster, nats: JetStreamCluster
) -> None:
    writers = ClusterWriters(lambda: live_urls(nodes), "jskill")
    await writers.create()
    writers.start()
    await asyncio.sleep(2)
    nats.node("n2").sigkill()
    await asyncio.sleep(8)  # elections of the streams it led, load going on
    nats.node("n2").start()
    await nats.ready()
    await asyncio.to_thread(nodes.wait_settled, 60)
    await asyncio.sleep(2)
    await writers.stop()
    print(f"JetStream node killed: {writers.appended} appends, statuses {dict(writers.statuses)}")
    writers.verify(live_urls(nodes)[0])
    assert set(writers.statuses) <= {200, 201, 503}
    assert writers.transport_errors == 0, writers.lost_connections


async def test_a_joining_and_a_leaving_node_move_containers_with_503s_only(
    nodes: StoreCluster,
) -> None:
    excluded: set[str] = set()
    writers = ClusterWriters(lambda: live_urls(nodes, excluded), "join")
    await writers.create()
    writers.start()
    await asyncio.sleep(2)
    joined = time.monotonic()
    nodes.start_node("n4").wait_listening(30)
    await asyncio.to_thread(nodes.wait_settled, 60)
    join_s = time.monotonic() - joined
    assert len(held_by(nodes, "n4")) == nodes.containers // 4
    await asyncio.sleep(2)

    excluded.add("n4")  # a load balancer stops sending to a node that is stopping
    left = time.monotonic()
    leaving = nodes.nodes["n4"]
    leaving_url = leaving.url
    # In a thread: the writers go on (through the other nodes) while it hands over and stops.
    await asyncio.to_thread(leaving.stop)
    assert leaving.proc.returncode in (0, -signal.SIGTERM)
    leave_s = time.monotonic() - left
    await asyncio.to_thread(nodes.wait_settled, 60)
    await asyncio.sleep(2)
    await writers.stop()
    print(f"join settled in {join_s:.2f} s, SIGTERM handed over and exited in {leave_s:.2f} s;"
          f" statuses {dict(writers.statuses)}, lost {writers.lost_connections}")  # fmt: skip
    writers.verify(live_urls(nodes)[0])
    assert set(writers.statuses) <= {200, 201, 503}
    # A request already on its way to the node that stops may find its connection closed (it
    # is sent again, and the check above finds it exactly once); never one to another node.
    others = [lost for lost in writers.lost_connections if not lost.startswith(leaving_url)]
    assert not others, others
    del nodes.nodes["n4"]


async def test_a_rolling_restart_moves_containers_with_503s_only(nodes: StoreCluster) -> None:
    """As Kubernetes rolls a StatefulSet (an upgrade, a changed setting): one node at a time
    is taken out of the load balancer, stopped with SIGTERM, started again under its id, and
    waited for until ready before the next. Nothing acknowledged is lost or doubled."""
    excluded: set[str] = set()
    writers = ClusterWriters(lambda: live_urls(nodes, excluded), "roll")
    await writers.create()
    writers.start()
    await asyncio.sleep(1)
    took: list[float] = []
    stopped_urls: list[str] = []
    for node_id in sorted(nodes.nodes):
        excluded.add(node_id)
        rolled = time.monotonic()
        stopping = nodes.nodes[node_id]
        stopped_urls.append(stopping.url)
        await asyncio.to_thread(stopping.stop)
        assert stopping.proc.returncode in (0, -signal.SIGTERM)
        restarted = nodes.start_node(node_id)
        await asyncio.to_thread(restarted.wait_listening, 30)
        await asyncio.to_thread(nodes.wait_settled, 60, 3)
        excluded.discard(node_id)
        took.append(time.monotonic() - rolled)
    await asyncio.sleep(1)
    await writers.stop()
    print(f"rolling restart of {len(took)} nodes, each settled again after"
          f" {', '.join(f'{s:.2f}' for s in took)} s; {writers.appended} appends,"
          f" statuses {dict(writers.statuses)}, lost {writers.lost_connections}")  # fmt: skip
    writers.verify(live_urls(nodes)[0])
    assert writers.appended > 0
    assert set(writers.statuses) <= {200, 201, 503}
    # As when a node leaves: only a request already on its way to the node that stops.
    others = [
        lost
        for lost in writers.lost_connections
        if not any(lost.startswith(url) for url in stopped_urls)
    ]
    assert not others, others


async def test_an_event_writer_with_chained_batches_through_a_failover(
    nodes: StoreCluster,
) -> None:
    """An EventWriter with four batches per segment on the wire writes to segments of every
    node while one owner is killed with SIGKILL and its containers move: each segment holds
    every record written, exactly once and in order, at the offsets acknowledged."""
    victim = "n3"
    segments = [name_in(c, nodes.containers, "chained") for c in range(nodes.containers)]
    assert held_by(nodes, victim), f"{victim} held nothing"
    async with AsyncSegmentStoreClient(nodes.nodes["n1"].url) as client:
        for segment in segments:
            await client.create_segment(segment)
        async with EventWriter(
            client, linger_ms=1, batch_bytes=4096, max_in_flight=4, delivery_timeout_s=120
        ) as writer:
            records = RecordedWrites(writer, segments)
            records.start()
            await asyncio.sleep(2)
            nodes.nodes[victim].sigkill()
            await asyncio.to_thread(nodes.wait_settled, 60, 2)
            await asyncio.sleep(2)  # more batches on the new owners
            await records.stop()
        await records.verify(client)
    print(f"chained EventWriter through a failover: {records.count} records")
    nodes.start_node(victim).wait_listening(30)  # it rejoins and gets its share back
    await asyncio.to_thread(nodes.wait_settled, 60)
