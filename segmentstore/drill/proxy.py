"""A switchboard of loopback TCP proxies whose links the drill can cut, black-hole, make one-way
or slow down: in a spawned cluster every link goes through one (see :mod:`.network`).

It runs as a process of its own (``python -m segmentstore.drill.proxy NODES_ROOT``), so that the
bytes of a whole cluster never wait for the drill's event loop, and takes one JSON command per
line on its standard input, answering each with one JSON line on its standard output:

- ``{"op": "proxy", "dialer": "n1", "target": "js1", "port": 4222}`` -> ``{"port": P}``: listen
  on ``127.0.0.1:P`` and pass every connection on to ``127.0.0.1:port``. The connection belongs
  to the link between ``dialer`` and ``target``. A ``dialer`` of null means "whichever node
  opened it": the node's process is found by the socket it holds (nodes forward requests to
  one another's advertised URL, one per node, so the URL alone does not say who is calling).
- ``{"op": "link", "a": "n1", "b": "js1", "mode": "black_hole", "held_from": [], "delay_ms": 0}``
  -> ``{}``: from now on, the link between ``a`` and ``b`` (both directions) is in that state.
- ``{"op": "stats"}`` -> per link, connections and bytes; connections whose node was not found;
  the switchboard's CPU time.

What a link state does to the TCP connections on it, new and established:

- ``open``: bytes pass, ``delay_ms`` later than they arrived (in each direction). When one side
  closes, the connection is closed on both once that close has passed (a half-closed proxy
  would swallow what a dead peer answers with a reset).
- ``refused``: established connections are reset (RST) on both sides, new ones are accepted and
  reset at once, as a peer that is down or a firewall that rejects would.
- ``black_hole``: nothing passes either way and nobody is told. Bytes are held, not dropped:
  TCP retransmits what a network lost, so once the link heals the connections that nobody gave
  up on carry on where they stopped, and what was sent meanwhile arrives then (a FIN included).
  A connection opened meanwhile is accepted (the kernel completes the handshake) and held too.
- ``held_from`` (one-way): the bytes its endpoints send on this link are held as in a black
  hole, the other direction passes. New connections are held until it heals (a handshake needs
  both directions).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODES = ("open", "refused", "black_hole")
UNIDENTIFIED = "unidentified"
_CHUNK = 64 << 10
_QUEUED_CHUNKS = 64  # per direction, before the proxy stops reading (TCP's back-pressure)

Key = tuple[str, str]


def link_key(a: str, b: str) -> Key:
    first, second = sorted((a, b))
    return first, second


@dataclass(frozen=True)
class LinkState:
    mode: str = "open"
    held_from: frozenset[str] = frozenset()
    delay_s: float = 0.0

    def passes(self, sender: str) -> bool:
        return self.mode == "open" and sender not in self.held_from

    @property
    def whole(self) -> bool:
        return self.mode == "open" and not self.held_from


OPEN = LinkState()


@dataclass
class LinkCounters:
    connections: int = 0  # accepted in all
    open: int = 0
    resets: int = 0
    bytes: dict[str, int] = field(default_factory=dict)  # sender -> bytes passed on


class SocketOwners:
    """Which node opened a loopback connection: the drill's child process (a node, started
    with ``--data-dir <nodes_root>/<id>``) that holds the connecting socket."""

    def __init__(self, nodes_root: str, parent: int) -> None:
        self._marker = nodes_root.rstrip("/") + "/"
        self._parent = parent

    def owner(self, client_port: int, server_port: int) -> str | None:
        inode = _socket_inode(client_port, server_port)
        if inode is None:
            return None
        wanted = f"socket:[{inode}]"
        for pid, node in self._nodes():
            with contextlib.suppress(OSError):
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    with contextlib.suppress(OSError):
                        if os.readlink(f"/proc/{pid}/fd/{fd}") == wanted:
                            return node
        return None

    def _nodes(self) -> list[tuple[int, str]]:
        found = []
        for pid in _children(self._parent):
            try:
                args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            words = [a.decode(errors="replace") for a in args]
            if "--data-dir" in words and "--node-id" in words:
                data_dir = words[words.index("--data-dir") + 1]
                if data_dir.startswith(self._marker):
                    found.append((pid, words[words.index("--node-id") + 1]))
        return found


def _children(pid: int) -> list[int]:
    """The children of ``pid``, whichever of its threads started them."""
    children: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                text = Path(f"/proc/{pid}/task/{task}/children").read_text()
                children += [int(word) for word in text.split()]
    return children


def _socket_inode(client_port: int, server_port: int) -> int | None:
    local = f"0100007F:{client_port:04X}"
    remote = f"0100007F:{server_port:04X}"
    with open("/proc/net/tcp") as table:
        for line in table:
            fields = line.split()
            if len(fields) > 9 and fields[1] == local and fields[2] == remote:
                return int(fields[9])
    return None


class Switchboard:
    def __init__(self, owners: SocketOwners) -> None:
        self._owners = owners
        self._links: dict[Key, LinkState] = {}
        self._changed = asyncio.Condition()
        self._open: dict[Key, set[_Connection]] = {}
        self._servers: list[asyncio.Server] = []
        self.counters: dict[Key, LinkCounters] = {}
        self.unidentified = 0

    def state(self, key: Key) -> LinkState:
        return self._links.get(key, OPEN)

    async def set_link(self, a: str, b: str, state: LinkState) -> None:
        key = link_key(a, b)
        self._links[key] = state
        if state.mode == "refused":
            for connection in list(self._open.get(key, ())):
                connection.reset()
        async with self._changed:
            self._changed.notify_all()

    async def wait_until(self, key: Key, ready: Callable[[LinkState], bool]) -> LinkState:
        if ready(state := self.state(key)):
            return state
        async with self._changed:
            await self._changed.wait_for(lambda: ready(self.state(key)))
        return self.state(key)

    async def add_proxy(self, dialer: str | None, target: str, port: int) -> int:
        async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._accepted(reader, writer, dialer, target, port)

        server = await asyncio.start_server(accepted, "127.0.0.1", 0)
        self._servers.append(server)
        listening: int = server.sockets[0].getsockname()[1]
        return listening

    async def _accepted(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        dialer: str | None,
        target: str,
        port: int,
    ) -> None:
        if dialer is None:
            peer, own = writer.get_extra_info("peername"), writer.get_extra_info("sockname")
            dialer = await asyncio.to_thread(self._owners.owner, peer[1], own[1])
            if dialer is None:
                self.unidentified += 1
                dialer = UNIDENTIFIED
        key = link_key(dialer, target)
        counters = self.counters.setdefault(key, LinkCounters())
        counters.connections += 1
        connection = _Connection(self, key, dialer, target, counters)
        self._open.setdefault(key, set()).add(connection)
        counters.open += 1
        try:
            await connection.run(reader, writer, port)
        finally:
            counters.open -= 1
            self._open[key].discard(connection)

    def stats(self) -> dict[str, Any]:
        return {
            "links": {
                "~".join(key): {
                    "connections": c.connections,
                    "open": c.open,
                    "resets": c.resets,
                    "bytes": c.bytes,
                }
                for key, c in sorted(self.counters.items())
            },
            "unidentified": self.unidentified,
            "cpu_s": round(time.process_time(), 2),  # what passing the bytes on has cost
        }

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for connections in self._open.values():
            for connection in list(connections):
                connection.reset()


class _Reset(Exception):
    """The link refuses: the connection is reset on both sides."""


class _Connection:
    def __init__(
        self, board: Switchboard, key: Key, dialer: str, target: str, counters: LinkCounters
    ) -> None:
        self._board = board
        self._key = key
        self._dialer = dialer
        self._target = target
        self._counters = counters
        self._writers: list[asyncio.StreamWriter] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._reset = False

    async def run(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int
    ) -> None:
        self._writers.append(writer)
        try:
            # A handshake needs both directions: a new connection waits while any is held.
            state = await self._board.wait_until(
                self._key, lambda s: s.whole or s.mode == "refused"
            )
            if state.mode == "refused":
                raise _Reset
            if state.delay_s:
                await asyncio.sleep(state.delay_s)
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError as error:
                raise _Reset from error
            self._writers.append(up_writer)
            self._tasks = [
                asyncio.create_task(self._pump(reader, up_writer, self._dialer)),
                asyncio.create_task(self._pump(up_reader, writer, self._target)),
            ]
            # One side closing ends the connection (once its close has passed the link): a
            # peer that closed, or died, would answer anything sent to it later with a reset,
            # which a proxy that only half-closed would never pass back.
            done, _ = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
            if any(task.cancelled() or task.exception() is not None for task in done):
                raise _Reset
            for task in self._tasks:
                task.cancel()
        except (_Reset, asyncio.CancelledError):
            self.reset()
        finally:
            for each in self._writers:
                each.close()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _pump(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, sender: str
    ) -> None:
        queue: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue(_QUEUED_CHUNKS)
        reading = asyncio.create_task(_read_into(source, queue))
        try:
            while True:
                arrived, chunk = await queue.get()
                state = await self._board.wait_until(
                    self._key, lambda s: s.passes(sender) or s.mode == "refused"
                )
                if state.mode == "refused" or chunk is None:
                    raise _Reset
                wait_s = arrived + state.delay_s - time.monotonic()
                if wait_s > 0:
                    await asyncio.sleep(wait_s)
                if not chunk:
                    await sink.drain()
                    return
                sink.write(chunk)
                await sink.drain()
                self._counters.bytes[sender] = self._counters.bytes.get(sender, 0) + len(chunk)
        finally:
            reading.cancel()

    def reset(self) -> None:
        """Both sides see a connection reset, at once."""
        if self._reset:
            return
        self._reset = True
        self._counters.resets += 1
        for task in self._tasks:
            task.cancel()
        for writer in self._writers:
            with contextlib.suppress(OSError, AttributeError):
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()


async def _read_into(
    source: asyncio.StreamReader, queue: asyncio.Queue[tuple[float, bytes | None]]
) -> None:
    """Chunks as they arrive, then ``b""`` at the end of the stream or None if it broke."""
    while True:
        try:
            chunk: bytes | None = await source.read(_CHUNK)
        except OSError:
            chunk = None
        await queue.put((time.monotonic(), chunk))
        if not chunk:
            return


async def _serve(board: Switchboard) -> None:
    loop = asyncio.get_running_loop()
    commands = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
    _answer({"ready": True})
    while line := await commands.readline():
        try:
            _answer(await _command(board, json.loads(line)))
        except (KeyError, ValueError, OSError) as error:
            _answer({"error": repr(error)})
    await board.close()


async def _command(board: Switchboard, command: dict[str, Any]) -> dict[str, Any]:
    op = command["op"]
    if op == "proxy":
        port = await board.add_proxy(command["dialer"], command["target"], int(command["port"]))
        return {"port": port}
    if op == "link":
        if command["mode"] not in MODES:
            raise ValueError(f"mode {command['mode']!r} is not one of {MODES}")
        state = LinkState(
            command["mode"],
            frozenset(command.get("held_from", ())),
            float(command.get("delay_ms", 0)) / 1000,
        )
        await board.set_link(command["a"], command["b"], state)
        return {}
    if op == "stats":
        return board.stats()
    raise ValueError(f"unknown op {op!r}")


def _answer(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document) + "\n")
    sys.stdout.flush()


def main() -> None:
    owners = SocketOwners(sys.argv[1], os.getppid())
    try:
        import uvloop
    except ImportError:
        asyncio.run(_serve(Switchboard(owners)))
    else:
        uvloop.run(_serve(Switchboard(owners)))


if __name__ == "__main__":
    main()
