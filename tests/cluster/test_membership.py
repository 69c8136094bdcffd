"""Who may be a member, and how containers move: a process with access to JetStream but not
the cluster's secret is ignored, a node with another Tier 2 or another secret is refused at
start, and a node's death or return moves only the containers it must."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import nats
import pytest
from store_cluster import StoreCluster

from segmentstore.contracts.mapping import container_of

pytestmark = [pytest.mark.cluster, pytest.mark.integration]


class Listener:
    """A TCP listener on loopback that counts the connections it gets (a rogue's URL)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


class EpochsShown:
    """Reads a node's own ``/v1/cluster`` every few milliseconds while in use: the epochs it
    shows for the containers it holds (None while it recovers one)."""

    def __init__(self, url: str, node: str) -> None:
        self.url, self.node = url, node
        self.epochs: set[tuple[int, int | None]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)

    def __enter__(self) -> EpochsShown:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _read(self) -> None:
        with httpx.Client(timeout=2) as client:
            while not self._stop.wait(0.02):
                try:
                    view = client.get(f"{self.url}/v1/cluster").json()
                except (httpx.HTTPError, ValueError):
                    continue  # not listening yet
                self.epochs |= {
                    (c["id"], c["epoch"]) for c in view["containers"] if c["owner"] == self.node
                }


@pytest.fixture
def rogue_url() -> Iterator[Listener]:
    listener = Listener()
    yield listener
    listener.close()


def owners(nodes: StoreCluster, url: str | None = None) -> dict[int, str | None]:
    return {c["id"]: c["owner"] for c in nodes.cluster_map(url)["containers"]}


async def play_rogue(nodes: StoreCluster, url: str, seconds: float) -> int:
    """For ``seconds``, write entries into the cluster's lease bucket as a process with
    access to JetStream but without the secret would: itself as a node, every container
    leased to it, the members' entries deleted. The writes it made."""
    client = await nats.connect(nodes.nats.split(","))
    writes = 0
    try:
        kv = await client.jetstream().key_value(f"{nodes.prefix}-cluster")
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await kv.put(
                "node.evil", json.dumps({"url": url, "at": int(time.time() * 1000)}).encode()
            )
            for container in range(nodes.containers):
                lease = {
                    "owner": "evil",
                    "epoch": 0,
                    "at": int(time.time() * 1000),
                    "sig": "0" * 64,
                }
                await kv.put(f"container.{container}", json.dumps(lease).encode())
            for node in nodes.live:
                await kv.delete(f"node.{node}")
            writes += 2 + nodes.containers
            await asyncio.sleep(0.2)
    finally:
        await client.close()
    return writes


def test_a_process_without_the_secret_is_never_a_member(
    nodes: StoreCluster, rogue_url: Listener
) -> None:
    before = owners(nodes)
    names = [
        next(
            f"trust/{c}/{i}"
            for i in range(10_000)
            if container_of(f"trust/{c}/{i}", nodes.containers) == c
        )
        for c in range(nodes.containers)
    ]
    for name in names:
        assert httpx.put(f"{nodes.urls[0]}/v1/segments/{name}", timeout=30).status_code == 201
    rogue = threading.Thread(target=lambda: asyncio.run(play_rogue(nodes, rogue_url.url, 12)))
    rogue.start()
    statuses: list[int] = []
    try:
        while rogue.is_alive():
            for url in nodes.urls:
                for name in names:
                    answer = httpx.post(
                        f"{url}/v1/segments/{name}:append", content=b"x", timeout=30
                    )
                    statuses.append(answer.status_code)
                    listing = httpx.get(f"{url}/v1/segments?prefix=trust/", timeout=30)
                    statuses.append(listing.status_code)
    finally:
        rogue.join()
    assert rogue_url.connections == 0, "a node sent a request to the rogue's URL"
    assert set(statuses) == {200}, {s: statuses.count(s) for s in set(statuses)}
    for url in nodes.urls:
        view = nodes.cluster_map(url)
        assert "evil" not in {node["id"] for node in view["nodes"]}
        assert owners(nodes, url) == before
    for name in names:
        info = httpx.get(f"{nodes.urls[0]}/v1/segments/{name}", timeout=30).json()
        assert info["length"] == statuses.count(200) // (2 * len(names))
    logs = "".join(node.log_path.read_text(errors="replace") for node in nodes.nodes.values())
    assert "ignored the entry node.evil" in logs
    assert "ignored the entry container." in logs


@pytest.mark.parametrize("kind", ["a directory of its own", "another S3 prefix"])
def test_a_node_with_another_tier2_is_refused_naming_both(
    nodes: StoreCluster, tmp_path_factory: pytest.TempPathFactory, kind: str
) -> None:
    settings = dict(nodes.settings)
    if kind == "a directory of its own":
        directory = tmp_path_factory.mktemp("another-tier2")
        elsewhere = directory.as_uri()
        del settings["SEGMENTSTORE_TIER2__OPTIONS"]  # S3's
    else:
        directory = None
        elsewhere = nodes.tier2_uri + "-typo"
    stranger = StoreCluster(
        tmp_path_factory.mktemp("stranger"),
        nodes.nats.split(","),
        elsewhere,
        prefix=nodes.prefix,
        containers=nodes.containers,
        settings=settings,
    )
    stranger.secret = nodes.secret
    node = stranger.start_node("n9")
    try:
        assert node.proc.wait(timeout=90) != 0
    finally:
        node.stop()
    log = node.log_path.read_text()
    assert f"this node's Tier 2 {elsewhere} is not the cluster's Tier 2 {nodes.tier2_uri}" in log
    assert "has no deployment.json" in log
    if directory is not None:
        assert not list(directory.rglob("*")), "the refused node wrote into its Tier 2"
    assert "n9" not in {n["id"] for n in nodes.cluster_map()["nodes"]}


def test_a_node_with_another_secret_is_refused(
    nodes: StoreCluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    stranger = StoreCluster(
        tmp_path_factory.mktemp("wrong-secret"),
        nodes.nats.split(","),
        nodes.tier2_uri,
        prefix=nodes.prefix,
        containers=nodes.containers,
        settings=nodes.settings,
    )
    node = stranger.start_node("n8")  # a secret of its own
    try:
        assert node.proc.wait(timeout=90) != 0
    finally:
        node.stop()
    assert "not signed with this node's cluster secret" in node.log_path.read_text()
    assert "n8" not in {n["id"] for n in nodes.cluster_map()["nodes"]}


def test_a_death_and_a_return_move_only_what_they_must(nodes: StoreCluster) -> None:
    before = owners(nodes)
    victim = "n1"
    nodes.nodes[victim].sigkill()
    nodes.wait_settled(90, nodes=2)
    without = owners(nodes)
    moved = {c for c in before if before[c] != without[c]}
    assert moved == {c for c, owner in before.items() if owner == victim}
    epochs_before = {c["id"]: c["epoch"] for c in nodes.cluster_map()["containers"]}
    returned = nodes.start_node(victim).wait_listening(60)  # before it takes containers
    with EpochsShown(returned, victim) as shown:
        nodes.wait_settled(90, nodes=3)
    back = owners(nodes)
    # While it recovered a container it took back, it showed no epoch, never an old one.
    assert shown.epochs, "the returning node's map was never read"
    old = {(c, e) for c, e in shown.epochs if e is not None and e <= epochs_before[c]}
    assert not old, f"{victim} showed epochs not above the previous owner's: {old}"
    moved_back = {c for c in without if without[c] != back[c]}
    assert {back[c] for c in moved_back} == {victim}
    share = sum(1 for owner in back.values() if owner == victim)
    assert len(moved_back) == share
    assert share in (nodes.containers // 3, nodes.containers // 3 + 1)
    print(f"before {before}; {victim} dead: {without}; back: {back}")
