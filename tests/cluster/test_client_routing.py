"""The Python clients send each request to the node that holds its segment's container, and
learn of a move from the answers."""

from __future__ import annotations

import random
import re
from typing import Any

import httpx
import pytest
from store_cluster import StoreCluster

from segmentstore.client import AsyncSegmentStoreClient, SegmentStoreClient
from segmentstore.client.calls import Call
from segmentstore.client.http1_transport import Http1Transport
from segmentstore.client.owners import OwnerMap
from segmentstore.containers.mapping import container_of

pytestmark = [pytest.mark.cluster, pytest.mark.integration]


def owners_of(cluster: StoreCluster) -> list[str]:
    view = cluster.cluster_map()
    urls = {node["id"]: node["url"] for node in view["nodes"]}
    return [urls[c["owner"]] for c in view["containers"]]


async def test_the_async_client_goes_to_owners(
    shared_store_cluster: StoreCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    owners = owners_of(shared_store_cluster)
    sent: list[tuple[str, str | None]] = []
    original = Http1Transport.send

    async def recording(self: Http1Transport, call: Call[Any], base_url: str | None = None):  # type: ignore[no-untyped-def]
        sent.append((call.path, base_url))
        return await original(self, call, base_url)

    monkeypatch.setattr(Http1Transport, "send", recording)
    names = [f"routed/{i}" for i in range(16)]
    entry = random.choice(shared_store_cluster.urls)
    async with AsyncSegmentStoreClient(entry) as client:
        for name in names:
            await client.create_segment(name)
            result = await client.append(name, name.encode())
            assert result.offset == 0
            assert bytes((await client.read(name, 0)).data) == name.encode()
    assert sent[0] == ("/v1/cluster", None)
    segment_calls = [(path, url) for path, url in sent if path.startswith("/v1/segments/")]
    assert len(segment_calls) == 3 * len(names)
    for path, url in segment_calls:
        name = path[len("/v1/segments/") :].split(":")[0]
        assert url == owners[container_of(name, len(owners))], (path, url)


def test_the_blocking_client_goes_to_owners(shared_store_cluster: StoreCluster) -> None:
    owners = owners_of(shared_store_cluster)
    seen: list[str] = []

    def record(request: httpx.Request) -> None:
        if request.url.path.startswith("/v1/segments/"):
            seen.append(f"{request.url.scheme}://{request.url.host}:{request.url.port}")

    with SegmentStoreClient(shared_store_cluster.urls[0]) as client:
        client._http.event_hooks["request"].append(record)
        for i in range(8):
            name = f"blocking/{i}"
            seen.clear()
            client.create_segment(name)
            assert seen == [owners[container_of(name, len(owners))]], (name, seen)


def test_an_answer_naming_another_owner_updates_the_map() -> None:
    owners = OwnerMap()
    owners.update(
        {
            "nodes": [{"id": "a", "url": "http://a:1/"}, {"id": "b", "url": "http://b:1"}],
            "containers": [{"id": 1, "owner": "b"}, {"id": 0, "owner": "a"}],
        }
    )
    name = next(f"n{i}" for i in range(100) if container_of(f"n{i}", 2) == 1)
    call: Call[None] = Call("GET", "/v1/segments/x", lambda _: None, context={"name": name})
    assert owners.url_for(call) == "http://b:1"
    assert not owners.due()
    owners.observe(call, 200, {"segment-owner": "http://c:1"})
    assert owners.url_for(call) == "http://c:1"
    owners.unreachable("http://c:1")  # until the map is read again: the client's own URL
    assert owners.url_for(call) is None
    nameless: Call[None] = Call("GET", "/v1/containers", lambda _: None)
    assert owners.url_for(nameless) is None


def test_each_node_reports_its_cluster_figures(shared_store_cluster: StoreCluster) -> None:
    held = 0
    for url in shared_store_cluster.urls:
        text = httpx.get(f"{url}/metrics", timeout=10).text
        values = {
            line.split(" ")[0]: float(line.split(" ")[1])
            for line in text.splitlines()
            if line.startswith("segmentstore_cluster_")
        }
        assert values["segmentstore_cluster_nodes"] == 3
        assert values["segmentstore_cluster_containers_unowned"] == 0
        held += int(values["segmentstore_cluster_containers_held"])
        # A node reports the containers it holds, and no others.
        reported = set(re.findall(r'segmentstore_container_epoch\{container="(\d+)"\}', text))
        assert len(reported) == values["segmentstore_cluster_containers_held"]
        assert values['segmentstore_cluster_container_moves_total{kind="taken"}'] >= 1
        assert "segmentstore_cluster_forwarded_requests_total" in values
    assert held == shared_store_cluster.containers
