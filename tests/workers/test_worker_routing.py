"""The Python clients reach the worker that owns each request's container directly: they
read the node's map (``GET /v1/cluster`` lists the workers with their own addresses), so no
connection is handed from worker to worker and no request forwarded."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from segmentstore.client import (
    AsyncSegmentStoreClient,
    EventReader,
    EventWriter,
    SegmentStoreClient,
)
from segmentstore.contracts.mapping import container_of
from segmentstore.harness.served_store import ServedStore

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedStore]:
    root = tmp_path_factory.mktemp("routing")
    served = ServedStore(
        root / "data",
        root / "node.log",
        {"SEGMENTSTORE_CACHE__MAX_BYTES": str(64 << 20)},
        ["--containers", "4"],
        environ={},
        workers=2,
    )
    try:
        served.wait_ready(60)
        yield served
    finally:
        served.stop()


def moved(url: str) -> dict[str, float]:
    """The node's counts of connections handed between workers and requests forwarded."""
    counts: dict[str, float] = {}
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        for figure in ("connections_handed", "forwarded_requests"):
            if line.startswith(f"segmentstore_worker_{figure}_total"):
                counts[figure] = counts.get(figure, 0.0) + float(line.rsplit(" ", 1)[1])
    return counts


def test_the_map_lists_each_worker_at_its_own_address(node: ServedStore) -> None:
    view = httpx.get(f"{node.url}/v1/cluster", timeout=10).json()
    assert [n["id"].rsplit("/", 1)[1] for n in view["nodes"]] == ["w0", "w1"]
    assert [n["containers"] for n in view["nodes"]] == [[0, 2], [1, 3]]
    for worker in view["nodes"]:
        assert worker["url"] != node.url
        own = httpx.get(f"{worker['url']}/v1/cluster", timeout=10).json()
        assert own["node"] == worker["id"]  # the worker at that address answers itself
    assert {c["owner"] for c in view["containers"]} == {n["id"] for n in view["nodes"]}


async def test_clients_and_writers_go_straight_to_the_owning_worker(node: ServedStore) -> None:
    names = [f"routing/{i}" for i in range(16)]
    assert {container_of(n, 4) for n in names} == {0, 1, 2, 3}
    async with AsyncSegmentStoreClient(node.url) as client:
        await client.create_segment(names[0])  # reads the map on its way
        before = moved(node.url)
        for name in names[1:]:
            await client.create_segment(name)
        for name in names:
            assert (await client.append(name, name.encode())).offset == 0
        async with EventWriter(client, writer_id="routing") as writer:
            for name in names:
                await writer.write(name, b"event")
        for name in names:
            async for _, event in EventReader(client, name, offset=len(name), wait_ms=1000):
                assert event == b"event"
                break
    with SegmentStoreClient(node.url) as blocking:
        for name in names:
            assert blocking.read(name, 0).data[: len(name)] == name.encode()
    assert moved(node.url) == before, "a request went through a worker that does not own it"


def test_a_container_restart_answered_is_seen_ready_by_every_worker(node: ServedStore) -> None:
    """``POST /v1/containers/{id}:restart`` answers once the container runs again; from then on
    the whole node is ready, whichever worker is asked (each reads its siblings' readiness on
    the board, which the restarting worker must bring up to date before it answers)."""
    view = httpx.get(f"{node.url}/v1/cluster", timeout=10).json()
    workers = [n["url"] for n in view["nodes"]]
    for round_ in range(40):
        container = 1 + 2 * (round_ % 2)  # worker w1's: 1, 3
        restarted = httpx.post(f"{node.url}/v1/containers/{container}:restart", timeout=60)
        assert restarted.status_code == 200, restarted.text
        for url in [*workers, node.url]:
            ready = httpx.get(f"{url}/readyz", timeout=10)
            assert ready.status_code == 200, (round_, url, ready.text)
