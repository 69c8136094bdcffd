"""The drill's switchboard of proxies, with real sockets: what each link state does to new and
established TCP connections, and how a connection from a node's process is told apart from any
other."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from segmentstore.drill.network import DrillNetwork

pytestmark = pytest.mark.integration


class _Echo:
    """A TCP server on loopback that sends back what it gets, and greets every connection."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.sendall(b"hello\n")
            while data := conn.recv(65536):
                conn.sendall(data)

    def close(self) -> None:
        self._listener.close()


@pytest.fixture(scope="module")
def echo() -> Iterator[_Echo]:
    server = _Echo()
    try:
        yield server
    finally:
        server.close()


def _connect(port: int) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", port), timeout=5)
    conn.settimeout(5)
    return conn


@contextlib.contextmanager
def _greeted(
    switchboard: DrillNetwork, echo: _Echo, name: str
) -> Iterator[tuple[int, socket.socket]]:
    """A proxy on the link ``<name>-a`` ~ ``<name>-b`` to the echo server, and a connection
    through it that got its greeting."""
    port = switchboard.proxy(f"{name}-a", f"{name}-b", echo.port)
    with _connect(port) as conn:
        assert _read(conn, 6) == b"hello\n"
        yield port, conn


def _read(conn: socket.socket, size: int, timeout_s: float = 5) -> bytes:
    conn.settimeout(timeout_s)
    data = b""
    while len(data) < size:
        piece = conn.recv(size - len(data))
        if not piece:
            break
        data += piece
    return data


def _nothing_within(conn: socket.socket, seconds: float) -> bool:
    conn.settimeout(seconds)
    try:
        conn.recv(1)
    except TimeoutError:
        return True
    return False


def test_an_open_link_passes_bytes_both_ways_and_counts_them(
    switchboard: DrillNetwork, echo: _Echo
) -> None:
    with _greeted(switchboard, echo, "open") as (_, conn):
        conn.sendall(b"x" * 100_000)
        assert _read(conn, 100_000) == b"x" * 100_000
    link = switchboard.stats()["links"]["open-a~open-b"]
    assert link["connections"] == 1
    assert link["bytes"]["open-a"] == 100_000 and link["bytes"]["open-b"] >= 100_006


def test_a_refused_link_resets_established_and_new_connections_until_healed(
    switchboard: DrillNetwork, echo: _Echo
) -> None:
    with _greeted(switchboard, echo, "refused") as (port, conn):
        switchboard.set("refused-a", "refused-b", "refused")
        with pytest.raises(ConnectionResetError):
            conn.sendall(b"ping")
            _read(conn, 4)
    with pytest.raises(ConnectionResetError), _connect(port) as conn:  # (even connect may see it)
        _read(conn, 6)
    switchboard.heal()
    with _connect(port) as conn:
        assert _read(conn, 6) == b"hello\n"


def test_a_black_hole_holds_bytes_without_a_word_and_delivers_them_once_healed(
    switchboard: DrillNetwork, echo: _Echo
) -> None:
    with _greeted(switchboard, echo, "hole") as (port, conn):
        switchboard.set("hole-a", "hole-b", "black_hole")
        conn.sendall(b"lost in the hole")
        assert _nothing_within(conn, 0.5)
        with _connect(port) as late:  # accepted, and held as well
            assert _nothing_within(late, 0.3)
            switchboard.heal()
            # Nothing was dropped: TCP would have retransmitted it.
            assert _read(conn, 16) == b"lost in the hole"
            assert _read(late, 6) == b"hello\n"


def test_one_way_holds_one_direction_and_passes_the_other(
    switchboard: DrillNetwork, echo: _Echo
) -> None:
    with _greeted(switchboard, echo, "way") as (_, conn):
        switchboard.set("way-a", "way-b", held_from=["way-b"])  # the server's answers are held
        conn.sendall(b"one")
        assert _nothing_within(conn, 0.5)
        switchboard.set("way-a", "way-b", held_from=["way-a"])  # now the client's requests
        assert _read(conn, 3) == b"one"  # the answer that was held passes
        conn.sendall(b"two")
        assert _nothing_within(conn, 0.5)
        switchboard.heal()
        assert _read(conn, 3) == b"two"
    stats = switchboard.stats()["links"]["way-a~way-b"]
    assert stats["resets"] == 0


def test_a_delay_adds_its_latency_each_way(switchboard: DrillNetwork, echo: _Echo) -> None:
    with _greeted(switchboard, echo, "slow") as (_, conn):
        switchboard.set("slow-a", "slow-b", delay_ms=200)
        started = time.monotonic()
        conn.sendall(b"ping")
        assert _read(conn, 4) == b"ping"
        assert time.monotonic() - started >= 0.4  # 200 ms there, 200 ms back
        switchboard.heal()
        started = time.monotonic()
        conn.sendall(b"pong")
        assert _read(conn, 4) == b"pong"
        assert time.monotonic() - started < 0.4


_NODE = """
import socket, sys, time
conn = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
assert conn.recv(6) == b"hello\\n"
print("connected", flush=True)
try:
    conn.settimeout(30)
    conn.recv(1)
    print("ended", flush=True)
except ConnectionResetError:
    print("reset", flush=True)
"""


def test_a_connection_is_put_on_the_link_of_the_node_process_that_opened_it(
    switchboard: DrillNetwork, echo: _Echo, tmp_path: Path
) -> None:
    """A node's forwarded requests all go to one advertised URL: the switchboard finds the
    calling node by the process that holds the socket (a child of the process that started
    the switchboard, started with the node's ``--data-dir`` and ``--node-id``)."""
    port = switchboard.proxy(None, "peer-b", echo.port)
    nodes_root = Path(switchboard.nodes_root)
    args = ["--data-dir", str(nodes_root / "peer-a"), "--node-id", "peer-a"]
    node = subprocess.Popen(
        [sys.executable, "-c", _NODE, str(port), *args], stdout=subprocess.PIPE, text=True
    )
    try:
        assert node.stdout is not None and node.stdout.readline() == "connected\n"
        assert switchboard.stats()["links"]["peer-a~peer-b"]["open"] == 1
        switchboard.set("peer-a", "peer-b", "refused")
        assert node.stdout.readline() == "reset\n"
    finally:
        node.kill()
        node.wait()
        if node.stdout is not None:
            node.stdout.close()
        switchboard.heal()
    # Anyone else is not taken for a node: the link of its connection is never cut.
    with _connect(port) as conn:
        assert _read(conn, 6) == b"hello\n"
    assert switchboard.stats()["unidentified"] == 1
