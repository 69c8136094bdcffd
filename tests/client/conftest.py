"""A real server for the client's tests, and a proxy in front of it that can lose answers.

The server is uvicorn in a thread over a store in a temporary directory, started and closed
in the app's lifespan as ``segmentstore serve`` does. :class:`FlakyProxy` forwards whole HTTP
messages between the client and that server; told to, it lets a request reach the server and
then drops the connection instead of passing the answer on (a response lost after the store
applied the request), or answers a request itself (a ``503`` the server would give while a
container recovers), so retries can be tested deterministically.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import uvicorn
from readiness import wait_ready
from starlette.types import ASGIApp

from segmentstore import SegmentStore
from segmentstore.api.server import server_config, serving_app

TOKENS = {"read-token": "read", "write-token": "write", "admin-token": "admin"}


@dataclass
class LiveServer:
    url: str
    port: int
    server: uvicorn.Server
    thread: threading.Thread
    store: SegmentStore  # to take a container offline behind the API's back

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "the server did not stop"


def start_server(
    data_dir: Path,
    tokens: Mapping[str, str] | None = None,
    wrap: Callable[[ASGIApp], ASGIApp] | None = None,
) -> LiveServer:
    """``wrap``, if given, puts a layer of a test's own around the served app."""
    store = SegmentStore.open(data_dir, containers=4, cache={"max_bytes": 64 << 20})
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    app: ASGIApp = serving_app(store, tokens)
    if wrap is not None:
        app = wrap(app)
    config = server_config(app, log_level="warning", graceful_timeout_s=2)
    server = uvicorn.Server(config)
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
    return LiveServer(f"http://127.0.0.1:{port}", port, server, thread, store)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("client") / "data")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("client-secured") / "data", TOKENS)
    yield server
    server.stop()


@pytest.fixture
def name() -> str:
    """A fresh segment name with a "/" in it, unique to the test."""
    return f"scope/{uuid.uuid4().hex[:12]}/0"


# -- the proxy ----------------------------------------------------------------------------------


class _Closed(Exception):
    """The peer closed the connection between messages."""


def _read_message(sock: socket.socket, buffer: bytearray, request: bool) -> bytes:
    """One whole HTTP/1.1 message (head and ``Content-Length`` body) from ``sock``."""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            raise _Closed
        buffer += chunk
    head_end = buffer.index(b"\r\n\r\n") + 4
    head = bytes(buffer[:head_end]).decode("latin-1").lower()
    length = 0
    for line in head.split("\r\n")[1:]:
        key, _, value = line.partition(":")
        if key == "content-length":
            length = int(value)
        # Neither httpx (with bytes or JSON bodies) nor Starlette's plain responses chunk.
        assert key != "transfer-encoding", "the proxy handles Content-Length messages only"
    if not request and head.split(" ", 2)[1] in ("204", "304"):
        length = 0
    while len(buffer) < head_end + length:
        chunk = sock.recv(max(65536, head_end + length - len(buffer)))
        if not chunk:
            raise _Closed
        buffer += chunk
    message = bytes(buffer[: head_end + length])
    del buffer[: head_end + length]
    return message


@dataclass
class _Rule:
    match: str  # a substring of the request line
    times: int
    response: bytes | None  # None: forward, then drop the connection instead of answering
    then: Callable[[], None] | None = None  # run after the server applied it, before the drop


@dataclass
class FlakyProxy:
    """A loopback proxy to ``upstream_port`` whose rules, applied to the next requests whose
    request line contains ``match``, lose or replace answers. ``requests`` records every
    request head that arrived, in order."""

    upstream_port: int
    listen_port: int = 0  # 0: any free one
    listener: socket.socket = field(init=False)
    requests: list[str] = field(default_factory=list)
    _rules: list[_Rule] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _sockets: list[socket.socket] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)
    _closing: bool = False

    def __post_init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", self.listen_port))
        self._spawn(self._accept)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def drop_response(
        self, match: str, times: int = 1, then: Callable[[], None] | None = None
    ) -> None:
        """The next ``times`` matching requests reach the server; their answers are lost
        (``then`` runs between the server's answer and the drop)."""
        with self._lock:
            self._rules.append(_Rule(match, times, None, then))

    def answer(
        self, match: str, status: int, body: bytes, headers: str = "", times: int = 1
    ) -> None:
        """The next ``times`` matching requests get this answer and never reach the server."""
        reason = {429: "Too Many Requests", 503: "Service Unavailable"}.get(status, "X")
        raw = (
            f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n{headers}"
            f"content-length: {len(body)}\r\n\r\n"
        ).encode() + body
        with self._lock:
            self._rules.append(_Rule(match, times, raw))

    def close(self) -> None:
        self._closing = True
        # close() alone does not wake a thread blocked in accept(); shutdown() does.
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
        for thread in self._threads:
            thread.join(timeout=10)
            assert not thread.is_alive(), "a proxy thread did not stop"

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self._sockets.append(client)
            self._spawn(self._serve, client)

    def _rule_for(self, request: bytes) -> _Rule | None:
        line = request.split(b"\r\n", 1)[0].decode("latin-1")
        with self._lock:
            self.requests.append(request.split(b"\r\n\r\n", 1)[0].decode("latin-1"))
            for rule in self._rules:
                if rule.match in line and rule.times > 0:
                    rule.times -= 1
                    return rule
        return None

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        from_client, from_upstream = bytearray(), bytearray()
        try:
            while True:
                request = _read_message(client, from_client, request=True)
                rule = self._rule_for(request)
                if rule is not None and rule.response is not None:
                    client.sendall(rule.response)
                    continue
                if upstream is None:
                    upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
                    with self._lock:
                        self._sockets.append(upstream)
                upstream.sendall(request)
                response = _read_message(upstream, from_upstream, request=False)
                if rule is not None:
                    if rule.then is not None:
                        rule.then()
                    return  # applied by the server, answer lost on the way back
                client.sendall(response)
        except (_Closed, OSError):
            return
        finally:
            client.close()
            if upstream is not None:
                upstream.close()


@pytest.fixture
def proxy(live: LiveServer) -> Iterator[FlakyProxy]:
    flaky = FlakyProxy(live.port)
    yield flaky
    flaky.close()
