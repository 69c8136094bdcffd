"""The cluster heals from the loss of its own lease bucket, under exactly-once load, with no
node restarted: deleted (the nodes make it again), purged, or replaced for a while by a stream
of its name that is not a key-value bucket (nobody can hold a lease until a person removes
it). Appends succeed again on every container within two leases of the bucket being usable,
nothing acknowledged is lost or doubled, no container changes owner (nor epoch, unless its
holder had to stop it, and logged why), a node that holds no lease answers ``/readyz`` 503
meanwhile, and ``/v1/cluster`` names no owner it cannot vouch for."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import nats
import pytest
from cluster_load import ClusterWriters
from nats.js.api import StorageType, StreamConfig
from nats.js.errors import BadRequestError
from store_cluster import StoreCluster

from segmentstore.contracts.mapping import container_of
from segmentstore.harness.jetstream_cluster import JetStreamCluster

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

CONTAINERS = 6
LEASE_S = 5.0


@pytest.fixture(scope="module")
def nodes(
    tmp_path_factory: pytest.TempPathFactory, nats: JetStreamCluster
) -> Iterator[StoreCluster]:
    root = tmp_path_factory.mktemp("bucket-loss")
    cluster = StoreCluster(
        root,
        nats.servers,
        (root / "tier2").as_uri(),
        prefix=f"lost{uuid.uuid4().hex[:8]}",
        containers=CONTAINERS,
        settings={"SEGMENTSTORE_STORAGE_WRITER__FLUSH_INTERVAL_MS": "500"},
        lease_ms=int(LEASE_S * 1000),
    )
    try:
        cluster.start(3)
        yield cluster
    finally:
        cluster.stop()


@dataclass
class Looks:
    """What each node said about itself, every few milliseconds, from a thread: its
    ``/readyz`` status and its ``/v1/cluster``."""

    nodes: StoreCluster
    ready: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    maps: dict[str, list[tuple[float, dict[str, object]]]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> Looks:
        self._thread = threading.Thread(target=self._look, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _look(self) -> None:
        with httpx.Client(timeout=2) as http:
            while not self._stop.wait(0.03):
                for node, url in self.nodes.live.items():
                    try:
                        status = http.get(f"{url}/readyz").status_code
                        view = http.get(f"{url}/v1/cluster").json()
                    except (httpx.HTTPError, ValueError):
                        continue
                    now = time.monotonic()
                    self.ready.setdefault(node, []).append((now, status))
                    self.maps.setdefault(node, []).append((now, view))


async def lose_the_bucket(nodes: StoreCluster, how: str) -> None:
    client = await nats.connect(nodes.nats.split(","))
    try:
        js = client.jetstream()
        stream = f"KV_{nodes.prefix}-cluster"
        if how == "deleted":
            assert await js.delete_stream(stream)
        else:
            assert await js.purge_stream(stream)
    finally:
        await client.close()


async def replace_the_bucket(nodes: StoreCluster) -> None:
    """Delete the bucket's stream and take its name with a stream that is no key-value bucket
    (a node that made the bucket again in between loses it again)."""
    client = await nats.connect(nodes.nats.split(","))
    stream = f"KV_{nodes.prefix}-cluster"
    try:
        js = client.jetstream()
        while True:
            await js.delete_stream(stream)
            try:
                await js.add_stream(
                    StreamConfig(
                        name=stream,
                        subjects=[f"{nodes.prefix}.impostor"],
                        storage=StorageType.MEMORY,
                    )
                )
                return
            except BadRequestError:
                continue  # made again meanwhile
    finally:
        await client.close()


async def remove_the_impostor(nodes: StoreCluster) -> None:
    client = await nats.connect(nodes.nats.split(","))
    try:
        assert await client.jetstream().delete_stream(f"KV_{nodes.prefix}-cluster")
    finally:
        await client.close()


def one_segment_per_container(prefix: str) -> list[str]:
    return [
        next(
            name
            for i in range(10_000)
            if container_of(name := f"{prefix}/c{c}/{i}", CONTAINERS) == c
        )
        for c in range(CONTAINERS)
    ]


class Probes:
    """An append to one segment per container every few tens of milliseconds, each sent to
    a node drawn in turn: when each container last took one, and its longest run without."""

    def __init__(self, nodes: StoreCluster, names: list[str]) -> None:
        self.nodes = nodes
        self.names = names
        self.last_ok: dict[str, float] = {}
        self.oks: list[tuple[float, str]] = []
        self.longest_gap: dict[str, float] = dict.fromkeys(names, 0.0)
        self.statuses: dict[int, int] = {}
        self._stop = asyncio.Event()

    async def run(self) -> None:
        turn = 0
        async with httpx.AsyncClient(timeout=10) as http:
            while not self._stop.is_set():
                for name in self.names:
                    turn += 1
                    urls = self.nodes.urls
                    try:
                        answer = await http.post(
                            f"{urls[turn % len(urls)]}/v1/segments/{name}:append", content=b"p"
                        )
                    except httpx.TransportError:
                        continue
                    status = answer.status_code
                    self.statuses[status] = self.statuses.get(status, 0) + 1
                    assert status in (200, 503), answer.text
                    if status == 200:
                        now = time.monotonic()
                        self.oks.append((now, name))
                        before = self.last_ok.get(name, now)
                        self.longest_gap[name] = max(self.longest_gap[name], now - before)
                        self.last_ok[name] = now
                await asyncio.sleep(0.03)

    def stop(self) -> None:
        self._stop.set()

    def all_appended_after(self, since: float) -> float:
        """Seconds from ``since`` until every segment had taken an append after it."""
        first: dict[str, float] = {}
        for at, name in self.oks:
            if at > since:
                first.setdefault(name, at)
        assert set(first) == set(self.names), (
            f"never appended after: {set(self.names) - set(first)}"
        )
        return max(first.values()) - since


async def under_load(
    nodes: StoreCluster, prefix: str
) -> tuple[list[str], ClusterWriters, Probes, asyncio.Task[None]]:
    """Exactly-once writers under ``prefix`` and a probe of every container, both running:
    (the probe segments, the writers, the probe, its task)."""
    probes = one_segment_per_container(f"{prefix}/probe")
    async with httpx.AsyncClient(timeout=30) as http:
        for name in probes:
            assert (await http.put(f"{nodes.urls[0]}/v1/segments/{name}")).status_code == 201
    writers = ClusterWriters(lambda: nodes.urls, prefix)
    await writers.create()
    writers.start()
    probe = Probes(nodes, probes)
    return probes, writers, probe, asyncio.create_task(probe.run())


@pytest.mark.parametrize("how", ["deleted", "purged"])
async def test_the_cluster_heals_from_the_loss_of_its_lease_bucket(
    nodes: StoreCluster, how: str
) -> None:
    probes, writers, probe, probing = await under_load(nodes, f"{how}-{uuid.uuid4().hex[:6]}")
    await asyncio.sleep(2)
    epochs = {c["id"]: (c["owner"], c["epoch"]) for c in nodes.cluster_map()["containers"]}
    logged_before = {n: node.log_path.stat().st_size for n, node in nodes.nodes.items()}
    with Looks(nodes) as looks:
        await asyncio.sleep(1)
        lost_at = time.monotonic()
        await lose_the_bucket(nodes, how)
        # Long enough for every lease to expire had nobody written the bucket again.
        await asyncio.sleep(3 * LEASE_S)
        await asyncio.to_thread(nodes.wait_settled, 4 * LEASE_S)
        settled_s = time.monotonic() - lost_at
        await asyncio.sleep(1)
    probe.stop()
    await probing
    await writers.stop()
    writers.verify(nodes.urls[0])
    gap_s = max(probe.longest_gap.values())
    print(
        f"bucket {how}: the longest time a container took no append {gap_s:.2f} s, the cluster"
        f" settled {settled_s:.2f} s after the loss; probes {probe.statuses};"
        f" {writers.appended} exactly-once appends, statuses {dict(writers.statuses)},"
        f" {writers.duplicates} duplicates"
    )
    assert gap_s < 2 * LEASE_S
    assert all(probe.last_ok[name] > lost_at + 3 * LEASE_S for name in probes)
    # Each holder wrote its leases again before anyone else could take them: nothing moved.
    after = {c["id"]: (c["owner"], c["epoch"]) for c in nodes.cluster_map()["containers"]}
    assert {c: owner for c, (owner, _) in after.items()} == {
        c: owner for c, (owner, _) in epochs.items()
    }
    # And at the same epoch, unless JetStream took longer than 3/4 of a lease to serve the new
    # bucket: then a holder that could not renew stops its container (before anyone else may
    # take it) and takes it back at a new epoch, and says so in its log.
    for container, (owner, epoch) in after.items():
        if epoch != epochs[container][1]:
            fenced = f"could not renew the lease of container {container} for"
            with nodes.nodes[owner].log_path.open("rb") as log:
                log.seek(logged_before[owner])
                since = log.read().decode(errors="replace")
            assert fenced in since, (
                f"container {container} moved from epoch {epochs[container][1]} to {epoch}"
                f" on {owner} with no self-fence in its log"
            )
    for node, samples in looks.ready.items():
        after = [status for at, status in samples if at > lost_at]
        print(f"{node}: /readyz after the loss {summary(after)}")
        assert after and after[-1] == 200, f"{node} is not ready again"
    for node, samples in looks.maps.items():
        for at, view in samples:
            if at > lost_at and not view["leases_held"]:
                owners = {c["owner"] for c in view["containers"]}  # type: ignore[attr-defined]
                assert owners <= {node, None}, f"{node}'s map while it held no lease: {view}"


async def test_nobody_holds_a_lease_while_the_bucket_is_unusable_and_all_is_taken_back_after(
    nodes: StoreCluster,
) -> None:
    _, writers, probe, probing = await under_load(nodes, f"unusable-{uuid.uuid4().hex[:6]}")
    with Looks(nodes) as looks:
        await asyncio.sleep(1)
        lost_at = time.monotonic()
        await replace_the_bucket(nodes)
        await asyncio.sleep(2 * LEASE_S)
        restored_at = time.monotonic()
        await remove_the_impostor(nodes)
        await asyncio.sleep(2 * LEASE_S)
        await asyncio.to_thread(nodes.wait_settled, 4 * LEASE_S)
    probe.stop()
    await probing
    await writers.stop()
    writers.verify(nodes.urls[0])
    healed_s = probe.all_appended_after(restored_at)
    unowned = [
        at - lost_at
        for at, view in looks.maps["n1"]
        if lost_at < at < restored_at and all(c["owner"] is None for c in view["containers"])
    ]
    print(
        f"bucket unusable for {restored_at - lost_at:.1f} s: every container appended to again"
        f" {healed_s:.2f} s after it was usable; n1 showed no owner from {unowned[0]:.2f} s on;"
        f" probes {probe.statuses}; {writers.appended} exactly-once appends,"
        f" statuses {dict(writers.statuses)}"
    )
    assert healed_s < 2 * LEASE_S
    for node, samples in looks.ready.items():
        # No tick after the loss can write the node's lease: within half a lease (and the
        # tick under way) the node says it holds none.
        held_none = [s for at, s in samples if lost_at + 0.6 * LEASE_S < at < restored_at]
        print(f"{node}: /readyz while the bucket was unusable {summary(held_none)}")
        assert held_none and set(held_none) == {503}, f"{node} said it was ready"
        assert samples[-1][1] == 200, f"{node} is not ready again"
    for node, views in looks.maps.items():
        # Within a lease every node has stopped what it held, and vouches for no one's.
        late = [v for at, v in views if lost_at + LEASE_S < at < restored_at]
        assert late, f"{node}'s map was not read"
        for view in late:
            assert not view["leases_held"]
            assert all(c["owner"] is None for c in view["containers"]), view
            assert [n["id"] for n in view["nodes"]] == [node], view


def summary(statuses: list[int]) -> str:
    """``[200, 200, 503, 200]`` as ``200x2 503x1 200x1``."""
    runs: list[list[int]] = []
    for status in statuses:
        if runs and runs[-1][0] == status:
            runs[-1][1] += 1
        else:
            runs.append([status, 1])
    return " ".join(f"{s}x{n}" for s, n in runs)
