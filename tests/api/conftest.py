"""A real uvicorn server on a free loopback port, over a store in a temporary directory.

The server runs in a thread with its own event loop; the store is started and closed in the
app's lifespan, exactly as ``segmentstore serve`` does it. Tests talk to it with httpx only.
The same tests run against a cluster of three nodes and against one node of two worker
processes (``segmentstore serve --workers 2``).
Every answer passes :func:`_check_answer`: no 5xx other than the documented 503/507, and
every error in the one JSON shape with no traceback.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from readiness import wait_ready
from store_cluster import StoreCluster

from segmentstore import SegmentStore
from segmentstore.api.server import server_config, serving_app
from segmentstore.harness.served_store import ServedStore

MiB = 1 << 20
# Small enough that a test store is cheap; large enough for one maximal (8 MiB) append.
STORE_OPTIONS: dict[str, Any] = {"cache": {"max_bytes": 64 * MiB}}
TOKENS = {"read-token": "read", "write-token": "write", "admin-token": "admin"}


def _check_answer(response: httpx.Response) -> None:
    status = response.status_code
    assert status < 500 or status in (503, 507), f"{status} for {response.request.url}"
    if status >= 400:
        response.read()
        assert b"Traceback" not in response.content
        error = response.json()["error"]
        assert isinstance(error["code"], str) and isinstance(error["message"], str), error


def checked_client(url: str, token: str | None = None, **options: Any) -> httpx.Client:
    """A client whose every answer passes :func:`_check_answer`."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(
        base_url=url,
        headers=headers,
        timeout=30,
        event_hooks={"response": [_check_answer]},
        **options,
    )


@dataclass
class LiveServer:
    url: str
    server: uvicorn.Server
    thread: threading.Thread
    store: SegmentStore  # for the few tests that must reach behind the API (an offline container)

    def client(self, token: str | None = None, **options: Any) -> httpx.Client:
        return checked_client(self.url, token, **options)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "the server did not stop"


def start_server(data_dir: Path, tokens: Mapping[str, str] | None = None) -> LiveServer:
    store = SegmentStore.open(data_dir, containers=4, **STORE_OPTIONS)
    app = serving_app(store, tokens)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))  # port 0: the kernel picks a free one, no race
    port = listener.getsockname()[1]
    server = uvicorn.Server(server_config(app, log_level="warning", graceful_timeout_s=2))
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [listener]}, name="uvicorn", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive(), "the server failed to start"
        assert time.monotonic() < deadline, "the server did not start in 30 s"
        time.sleep(0.01)
    wait_ready(f"http://127.0.0.1:{port}")  # the port answers before the containers recover
    return LiveServer(f"http://127.0.0.1:{port}", server, thread, store)


class _AnyNode(httpx.HTTPTransport):
    """Sends each request to a node of the cluster picked at random."""

    def __init__(self, urls: list[str]) -> None:
        super().__init__()
        self._nodes = [httpx.URL(url) for url in urls]

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        node = random.choice(self._nodes)
        request.url = request.url.copy_with(host=node.host, port=node.port)
        request.headers["host"] = f"{node.host}:{node.port}"
        return super().handle_request(request)


@dataclass
class LiveCluster:
    """The API of a three-node cluster: each request goes to a node picked at random."""

    urls: list[str]
    store: None = None  # behind the API of three processes: tests that need it say so

    @property
    def url(self) -> str:
        return self.urls[0]

    def client(self, token: str | None = None, **options: Any) -> httpx.Client:
        return checked_client(self.url, token, transport=_AnyNode(self.urls), **options)


@pytest.fixture(scope="session")
def api_cluster(shared_store_cluster: StoreCluster) -> LiveCluster:
    return LiveCluster(shared_store_cluster.urls)


@dataclass
class LiveWorkers(LiveCluster):
    """One node of two worker processes: each request goes to the node's port or to a
    worker's own address, picked at random, so that both the connections handed from worker
    to worker and the requests forwarded between them are used (``urls``: the node's, then
    each worker's own)."""

    node: ServedStore = field(kw_only=True)


def start_workers(data_dir: Path, log: Path) -> LiveWorkers:
    settings = {"SEGMENTSTORE_CACHE__MAX_BYTES": str(64 * MiB)}
    node = ServedStore(data_dir, log, settings, ["--containers", "4"], environ={}, workers=2)
    try:
        node.wait_ready(60)
        workers = httpx.get(f"{node.url}/v1/cluster", timeout=10).json()["nodes"]
    except BaseException:
        node.stop()
        raise
    assert len(workers) == 2, workers
    return LiveWorkers([node.url, *(w["url"] for w in workers)], node=node)


LIVE_KINDS = ("one-node", "cluster", "workers")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The HTTP tests run against one node, a cluster of three and a node of two workers,
    except in modules that say otherwise (``LIVE_KINDS``: the metrics and the fuzzer, which
    read one node's counters and one OpenAPI document, run on a node of one process and on
    one of two workers)."""
    if "live" in metafunc.fixturenames:
        kinds = getattr(metafunc.module, "LIVE_KINDS", LIVE_KINDS)
        metafunc.parametrize("live", kinds, indirect=True, scope="module")


# Module-scoped, not session-scoped: a server left running would hold its store's Tier 1
# threads while other packages' tests count threads.
@pytest.fixture(scope="module")
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer | LiveCluster | LiveWorkers]:
    if request.param == "cluster":
        yield request.getfixturevalue("api_cluster")
        return
    if request.param == "workers":
        root = tmp_path_factory.mktemp("workers")
        workers = start_workers(root / "data", root / "node.log")
        yield workers
        assert workers.node.stop() in (0, -15), workers.node.log()
        return
    server = start_server(tmp_path_factory.mktemp("open") / "data")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A node in this process, for the tests that reach behind its API (whatever ``live``)."""
    server = start_server(tmp_path_factory.mktemp("one-process") / "data")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("secured") / "data", TOKENS)
    yield server
    server.stop()


@pytest.fixture
def http(live: LiveServer) -> Iterator[httpx.Client]:
    with live.client() as client:
        yield client


@pytest.fixture
def name() -> str:
    """A fresh segment name with a "/" in it, unique to the test."""
    return f"scope/{uuid.uuid4().hex[:12]}/0"


def all_names(http: httpx.Client) -> list[str]:
    """Every segment name, page by page."""
    names: list[str] = []
    after: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 1000}
        if after is not None:
            params["after"] = after
        page = http.get("/v1/segments", params=params).json()
        names += page["segments"]
        if page["next"] is None:
            return names
        after = page["next"]


@pytest.fixture
def segment(http: httpx.Client, name: str) -> str:
    """A created, empty segment."""
    assert http.put(f"/v1/segments/{name}").status_code == 201
    return name


Snapshot = tuple[dict[str, Any], list[str]]


@pytest.fixture
def snapshot(http: httpx.Client) -> Callable[[str], Snapshot]:
    """What a request that must change nothing is checked against: a segment's whole info
    (``last_modified_ms`` included) and every segment name in the store."""

    def take(name: str) -> Snapshot:
        return http.get(f"/v1/segments/{name}").json(), all_names(http)

    return take


def frame(*payloads: bytes, kind: int = 0) -> bytes:
    return b"".join(struct.pack(">ii", kind, len(p)) + p for p in payloads)


@pytest.fixture(name="frame")
def frame_fixture() -> Callable[..., bytes]:
    """docs/api.md's event framing: ``type i32be | length i32be | payload`` per event."""
    return frame
