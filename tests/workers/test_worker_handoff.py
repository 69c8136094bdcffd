"""A connection handed to the worker that owns its request's container: which requests move,
and a real socket passed from one worker's hand-off to another's with what was read of it."""

from __future__ import annotations

import asyncio
import secrets
import socket
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from segmentstore.api.worker_handoff import MAX_HANDED_BYTES, ConnectionHandOff
from segmentstore.contracts.mapping import container_of
from segmentstore.contracts.names import validate_segment_name
from segmentstore.workers.board import Board
from segmentstore.workers.place import WorkerPlace

CONTAINERS = 4


@pytest.fixture
def places() -> Iterator[list[WorkerPlace]]:
    node = socket.socket()
    own = [socket.socket(), socket.socket()]
    board = Board(2, CONTAINERS)
    run_id, secret = secrets.token_hex(8), b"s" * 32
    urls = ("http://127.0.0.1:1", "http://127.0.0.1:2")
    yield [WorkerPlace(i, 2, "node", node, own[i], urls, run_id, secret, board) for i in (0, 1)]
    for sock in (node, *own):
        sock.close()


def route(name: str) -> int:
    return container_of(validate_segment_name(name), CONTAINERS)


def hand_off(place: WorkerPlace, owners: dict[int, str | None] | None = None) -> ConnectionHandOff:
    """Worker ``place`` of ``node``: container c is served by node/w(c % 2) unless
    ``owners`` says otherwise."""

    def owner_of(container: int) -> str | None:
        if owners is not None and container in owners:
            return owners[container]
        return f"node/w{container % 2}"

    return ConnectionHandOff(place, route, owner_of)


def named(container: int) -> str:
    return next(n for n in (f"s/{i}" for i in range(100)) if route(n) == container)


def test_a_request_for_a_siblings_container_moves_there(places: list[WorkerPlace]) -> None:
    first = hand_off(places[0])
    theirs, mine = named(1), named(2)
    assert first.route(f"POST /v1/segments/{theirs}:append HTTP/1.1\r\n".encode()) == (1, 1)
    assert first.route(f"GET /v1/segments/{theirs}?x=1 HTTP/1.1\r\n".encode()) == (1, 1)
    quoted = theirs.replace("/", "%2F")
    assert first.route(f"PUT /v1/segments/{quoted} HTTP/1.1\r\n".encode()) == (1, 1)
    assert first.route(f"POST /v1/segments/{mine}:append HTTP/1.1\r\n".encode()) is None
    for served_here in (
        b"GET /v1/segments HTTP/1.1\r\n",  # every container's: gathered here
        b"GET /v1/containers HTTP/1.1\r\n",
        b"GET /metrics HTTP/1.1\r\n",
        f"POST /v1/segments/{theirs}".encode(),  # the line is not whole yet
        b"PUT /v1/segments/a%FFb HTTP/1.1\r\n",  # not UTF-8: refused here
        b"PUT /v1/segments/../x HTTP/1.1\r\n",
    ):
        assert first.route(served_here) is None, served_here


def test_a_container_nobody_or_another_node_serves_stays_here(places: list[WorkerPlace]) -> None:
    moving = hand_off(places[0], {1: None, 3: "othernode/w1"})
    assert moving.route(f"GET /v1/segments/{named(1)} HTTP/1.1\r\n".encode()) is None
    assert moving.route(f"GET /v1/segments/{named(3)} HTTP/1.1\r\n".encode()) is None


@given(st.binary(max_size=300))
def test_no_read_makes_it_raise(data: bytes) -> None:
    board = Board(2, CONTAINERS)
    with socket.socket() as node, socket.socket() as own:
        place = WorkerPlace(0, 2, "node", node, own, ("a", "b"), "x", b"s" * 32, board)
        found = hand_off(place).route(b"GET /v1/segments/" + data + b" HTTP/1.1")
        assert found is None or (found[1] == 1 and found[0] % 2 == 1)


class Recording(asyncio.Protocol):
    def __init__(self, initial: bytes) -> None:
        self.received = bytearray(initial)
        self.transport: asyncio.Transport | None = None
        self.more = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.received += data
        if not self.more.done():
            self.more.set_result(None)


async def test_a_socket_and_what_was_read_of_it_reach_the_sibling(
    places: list[WorkerPlace],
) -> None:
    sender, taker = hand_off(places[0]), hand_off(places[1])
    adopted: list[Recording] = []

    def adopt(initial: bytes) -> asyncio.Protocol:
        adopted.append(Recording(initial))
        return adopted[-1]

    taker.start(adopt)
    try:
        with socket.create_server(("127.0.0.1", 0)) as listener:
            client = socket.create_connection(listener.getsockname())
            accepted, _ = listener.accept()
            client.sendall(b"POST /v1/segments/x:append HTTP/1.1\r\n")
            read = accepted.recv(4096)
            assert sender.hand_on(1, accepted, read)
            accepted.close()  # the sender lets go: the connection lives on in the taker
            for _ in range(100):
                if adopted and adopted[0].transport is not None:
                    break
                await asyncio.sleep(0.01)
            client.sendall(b"more")  # read by the taker, after what the sender had read
            await asyncio.wait_for(adopted[0].more, 5)
            assert bytes(adopted[0].received) == read + b"more"
            assert adopted[0].transport is not None
            adopted[0].transport.write(b"answered by the sibling")
            client.settimeout(5)
            assert client.recv(100) == b"answered by the sibling"
            adopted[0].transport.close()
            client.close()
        assert (sender.handed, taker.adopted) == (1, 1)
        with socket.socket() as sock:
            assert not sender.hand_on(1, sock, b"x" * (MAX_HANDED_BYTES + 1))
    finally:
        taker.close()
        sender.close()
    # Closed: it takes no connection any more, and a hand-off to it is not taken.
    with socket.socket() as sock:
        assert not sender.hand_on(1, sock, b"GET / HTTP/1.1\r\n")
    assert sender.not_taken == 1
