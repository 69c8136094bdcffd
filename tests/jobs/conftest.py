"""Fixtures of the Spark job tests: one local SparkSession for the whole run, a real HTTP
server over a store whose Storage Writer flushes quickly, and helpers that read the same
events back through the HTTP API and through the data source.

Spark's first data source query in a session costs 12-17 s, so every test shares one session.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from readiness import wait_ready

from segmentstore import SegmentStore
from segmentstore.api.server import server_config, serving_app
from segmentstore.harness.served_store import ServedStore

KiB = 1024
# Small chunks and quick flushes: a few KiB of events already span several chunks.
FAST_WRITER = {
    "flush_threshold_bytes": 4 * KiB,
    "flush_interval_ms": 50,
    "max_chunk_bytes": 16 * KiB,
}
HEADER = struct.Struct(">ii")

Event = tuple[str, int, bytes]  # segment, offset, payload


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    # No PYSPARK_PYTHON: the session's executors run this interpreter by default, the one
    # that has the project installed (what every test here then proves).
    assert "PYSPARK_PYTHON" not in os.environ and "MASTER" not in os.environ
    from segmentstore.jobs.session import start_session

    session = start_session(
        "local[2]",
        "segmentstore-tests",
        {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    yield session
    session.stop()


def frame(payloads: list[bytes]) -> bytes:
    return b"".join(HEADER.pack(0, len(p)) + p for p in payloads)


def unframe(name: str, data: bytes, at_offset: int) -> list[Event]:
    events, position = [], 0
    while position < len(data):
        _, length = HEADER.unpack_from(data, position)
        events.append((name, at_offset + position, data[position + 8 : position + 8 + length]))
        position += 8 + length
    assert position == len(data), "not whole events"
    return events


def scan(spark: Any, **options: str) -> list[tuple[str, int, bytes, str]]:
    """Every row of a ``segmentstore`` scan, sorted by segment and offset."""
    rows = spark.read.format("segmentstore").options(**options).load().collect()
    return sorted((r[0], r[1], bytes(r[2]), r[3]) for r in rows)


def events_of(rows: list[tuple[str, int, bytes, str]]) -> list[Event]:
    return [(segment, offset, payload) for segment, offset, payload, _ in rows]


@dataclass
class LiveServer:
    """``segmentstore serve`` in a thread: uvicorn on a free loopback port over a store."""

    url: str
    tier2_uri: str
    server: uvicorn.Server
    thread: threading.Thread

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "the server did not stop"


@contextmanager
def serve_store(data: Path, **options: Any) -> Iterator[LiveServer]:
    """A store over ``data`` (``SegmentStore.open`` ``options``) served on a free port."""
    store = SegmentStore.open(data, containers=2, storage_writer=FAST_WRITER, **options)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = uvicorn.Server(server_config(serving_app(store), log_level="warning"))
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [listener]}, name="uvicorn", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    wait_ready(f"http://127.0.0.1:{port}")  # the port answers before the containers recover
    running = LiveServer(f"http://127.0.0.1:{port}", store.settings.tier2_uri(), server, thread)
    try:
        yield running
    finally:
        running.stop()
        listener.close()


# The Storage Writer of `served` flushes every 100 ms and rolls chunks at 4 KiB (the smallest
# it takes), so appends are split between flushes and chunks while a stream reads them.
SERVED_SETTINGS = {
    "SEGMENTSTORE_STORAGE_WRITER__FLUSH_INTERVAL_MS": "100",
    "SEGMENTSTORE_STORAGE_WRITER__FLUSH_THRESHOLD_BYTES": str(2 * KiB),
    "SEGMENTSTORE_STORAGE_WRITER__MAX_CHUNK_BYTES": str(4 * KiB),
}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServedStore]:
    """``segmentstore serve`` as a process of its own over ``tmp_path/data``."""
    server = ServedStore(
        tmp_path / "data", tmp_path / "serve.log", SERVED_SETTINGS, environ=os.environ
    )
    try:
        server.wait_ready(120)
        yield server
    finally:
        server.stop()


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveServer]:
    with serve_store(tmp_path / "data") as running:
        yield running


def wait_until(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def http_events(http: httpx.Client, name: str, stop: int) -> list[Event]:
    """The whole events of ``name`` below ``stop``, read with ``:readEvents``."""
    info = http.get(f"/v1/segments/{name}").json()
    offset, events = info["start_offset"], []
    while offset < stop:
        response = http.get(f"/v1/segments/{name}:readEvents", params={"offset": offset})
        assert response.status_code == 200, response.text
        events += unframe(name, response.content, offset)
        offset = int(response.headers["Segment-Next-Offset"])
    return [e for e in events if e[1] + 8 + len(e[2]) <= stop]
