"""A request for a sibling's container, relayed to it over a local connection kept open.

Every worker of a node accepts on the node's port, so a client that does not route (a load
balancer's pooled connections, ``curl``, ``wrk``) sends requests for any worker's containers on
any connection. Moving the connection to the owner (:mod:`.worker_handoff`) is cheapest for a
connection that then stays with that owner; a connection whose requests go to every worker in
turn moved on about every other request, and a move costs both workers more than the request
itself: a socket sent, a transport torn down in one process and built in the other. So a
request whose head and body fit in a few reads is relayed instead: the worker that read it
writes its bytes, unparsed, to a Unix connection it keeps open to the owner, and writes the
owner's answer back to the client as it comes. The owner serves that connection as any other
(its limits, routes and errors), and the answer is the owner's, byte for byte.

What the relay must know of a request is where it ends, so that it never sends the owner part
of the next request: a request line and head whole in the first read, HTTP/1.1, a body framed
by one ``Content-Length`` and nothing else (no ``Transfer-Encoding``, ``Expect`` or upgrade),
and nothing after the body in that read; and not ``HEAD`` (its answer's length is that of a
body it does not carry). Anything else is moved or served here as before. Where
the answer ends it takes from the owner's answer itself, with an HTTP parser.

If the owner dies with the answer unbegun, the client is answered ``503`` with ``Retry-After``
(its request may or may not have been applied: a writer's retry is answered ``duplicate`` if it
was); with the answer begun, the client's connection is closed, as the owner's own would have
been. A client gone mid-request closes the relay connection with it, so the owner sees its
client gone, as it would have.

Only a process of the same user whose parent is this node's supervisor may connect (the address
is abstract, so its peers are checked as the hand-off's are).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from typing import Protocol

import httptools

from segmentstore.api.worker_handoff import accept_sibling
from segmentstore.workers.place import WorkerPlace

log = logging.getLogger(__name__)

# A request larger than this moves with its connection instead: relaying it would copy each
# byte through one more process.
MAX_RELAYED_BYTES = 64 * 1024
_MAX_HEAD = 8 * 1024  # a longer head is moved or served here, never relayed
_RECEIVE_BYTES = 64 * 1024
# A relay connection unused this long is closed by the worker that opened it, before the
# owner's own keep-alive clock (RELAY_KEEP_ALIVE_S) could close it under a request.
IDLE_S = 5.0
RELAY_KEEP_ALIVE_S = 600
_REFUSED = (b"\r\ntransfer-encoding:", b"\r\nexpect:", b"\r\nupgrade:")
_CONTENT_LENGTH = b"\r\ncontent-length:"
_CONNECTION = b"\r\nconnection:"


def request_extent(data: bytes) -> int | None:
    """The bytes of the request that ``data`` begins, if the relay can tell where it ends from
    its head alone (the module's rules); None if it cannot or must not be relayed."""
    end = data.find(b"\r\n\r\n", 0, _MAX_HEAD)
    if end < 0:
        return None
    head = data[:end].lower()
    if head.startswith(b"head "):
        return None  # its answer's Content-Length describes a body that never comes
    line_end = head.find(b"\r\n")
    if not head.endswith(b" http/1.1", 0, line_end if line_end >= 0 else len(head)):
        return None
    if any(name in head for name in _REFUSED):
        return None
    connection = head.find(_CONNECTION)
    if connection >= 0 and _value(head, connection + len(_CONNECTION)) != b"keep-alive":
        return None  # "close" ends the connection with the answer: served where it is
    length = 0
    at = head.find(_CONTENT_LENGTH)
    if at >= 0:
        if head.find(_CONTENT_LENGTH, at + 2) >= 0:
            return None  # two lengths: the owner's parser refuses it where it is read
        value = _value(head, at + len(_CONTENT_LENGTH))
        if not value.isdigit():
            return None
        length = int(value)
    return end + 4 + length


def _value(head: bytes, start: int) -> bytes:
    stop = head.find(b"\r\n", start)
    return head[start : stop if stop >= 0 else len(head)].strip()


class RelayClient(Protocol):
    """The client's side of a relayed request: the connection that read it."""

    transport: asyncio.Transport

    def relay_finished(self, keep_alive: bool) -> bool:
        """The owner's whole answer was written to the client (``keep_alive``: the owner keeps
        the connection open); whether all of the request was sent (else the relay connection
        is closed: the owner would read the rest of its body as a request)."""

    def relay_failed(self, answered: bool) -> None:
        """The relay connection failed; ``answered``: part of the answer reached the client."""


class RequestRelay:
    """One worker's relay: its connections to its siblings, and the connections its siblings
    relay requests to it on."""

    def __init__(self, place: WorkerPlace) -> None:
        self._place = place
        self._idle: dict[int, list[Upstream]] = {}
        self._listener: socket.socket | None = None
        self._serving: set[asyncio.Task[None]] = set()
        # Every answer is read into this one buffer (and copied out at its size): a fresh
        # buffer of this size per read cost more than the read.
        self.buffer = bytearray(_RECEIVE_BYTES)
        self.view = memoryview(self.buffer)
        self.relayed = 0  # requests this worker relayed to a sibling (for /metrics)
        self.failed = 0  # relayed requests whose owner went away before it answered in full
        self.opened = 0  # relay connections this worker opened

    # -- relaying a request -------------------------------------------------------------------

    def relay(self, index: int, data: bytes, client: RelayClient) -> Upstream | None:
        """Send ``data``, the first read of a request, to worker ``index`` and its answer to
        ``client``; the relay connection it is on (more of the request goes there), or None if
        the sibling cannot be reached (the caller serves the request otherwise)."""
        upstream = self._take_idle(index)
        if upstream is None:
            upstream = self._connect(index)
            if upstream is None:
                return None
        upstream.begin(client, data)
        self.relayed += 1
        return upstream

    def _take_idle(self, index: int) -> Upstream | None:
        idle = self._idle.get(index)
        if not idle:
            return None
        now = asyncio.get_running_loop().time()
        while idle and now - idle[0].idle_since > IDLE_S:
            idle.pop(0).close()  # the oldest first: unused for a while
        return idle.pop() if idle else None

    def _connect(self, index: int) -> Upstream | None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(self._place.relay_address(index))
        except OSError:  # a dead or stopping sibling, or one with a full backlog
            sock.close()
            return None
        self.opened += 1
        return Upstream(self, sock, index)

    def give_back(self, upstream: Upstream) -> None:
        if self._listener is None:  # stopping
            upstream.close()
            return
        upstream.idle_since = asyncio.get_running_loop().time()
        self._idle.setdefault(upstream.index, []).append(upstream)

    def forget(self, upstream: Upstream) -> None:
        idle = self._idle.get(upstream.index)
        if idle and upstream in idle:
            idle.remove(upstream)

    # -- serving what siblings relay -----------------------------------------------------------

    def start(self, protocol_factory: Callable[[], asyncio.Protocol]) -> None:
        """Serve the connections siblings relay requests on, each by a protocol of
        ``protocol_factory()`` (the HTTP server's, without the limits on clients: every one
        of them is a sibling's)."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self._place.relay_address(self._place.index))
        listener.listen(1024)
        listener.setblocking(False)
        self._listener = listener
        loop = asyncio.get_running_loop()
        loop.add_reader(listener.fileno(), self._accept, listener, protocol_factory)

    def _accept(
        self, listener: socket.socket, protocol_factory: Callable[[], asyncio.Protocol]
    ) -> None:
        conn = accept_sibling(listener, "relay connection")
        if conn is None:
            return
        task = asyncio.get_running_loop().create_task(self._serve(conn, protocol_factory))
        self._serving.add(task)
        task.add_done_callback(self._serving.discard)

    async def _serve(
        self, conn: socket.socket, protocol_factory: Callable[[], asyncio.Protocol]
    ) -> None:
        try:
            await asyncio.get_running_loop().connect_accepted_socket(protocol_factory, conn)
        except OSError as error:
            log.info("a relay connection was gone before it was served: %s", error)
            conn.close()

    def close(self) -> None:
        """Take no more relay connections and relay nothing more (a stopping worker)."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed already
                asyncio.get_running_loop().remove_reader(listener.fileno())
            listener.close()
        for idle in self._idle.values():
            for upstream in idle:
                upstream.close()
        self._idle.clear()


class Upstream:
    """A relay connection to one sibling: raw non-blocking socket I/O on the event loop (a
    request's bytes are written as they were read; the answer is parsed only to find its end)."""

    def __init__(self, relay: RequestRelay, sock: socket.socket, index: int) -> None:
        self._relay = relay
        self._sock = sock
        self._fd = sock.fileno()
        self._loop = asyncio.get_running_loop()
        self.index = index
        self._parser = httptools.HttpResponseParser(self)
        self._client: RelayClient | None = None
        self._unsent = bytearray()  # request bytes the socket did not take yet
        self._answered = False  # part of the answer was written to the client
        self._complete = False
        self._keep_alive = False
        self._reading = True
        self._closed = False
        self.idle_since = 0.0
        self._loop.add_reader(self._fd, self._readable)

    def begin(self, client: RelayClient, data: bytes) -> None:
        self._client = client
        self._answered = self._complete = False
        self.send(data)

    def send(self, data: bytes) -> None:
        """More of the request (the first read, then the body as it comes)."""
        if self._closed:
            return
        if not self._unsent:
            try:
                sent = self._sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self._fail()
                return
            if sent == len(data):
                return
            data = data[sent:]
            self._loop.add_writer(self._fd, self._writable)
            if self._client is not None:
                self._client.transport.pause_reading()  # the owner is behind: so is the client
        self._unsent += data

    def _writable(self) -> None:
        try:
            sent = self._sock.send(self._unsent)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._fail()
            return
        del self._unsent[:sent]
        if not self._unsent:
            self._loop.remove_writer(self._fd)
            if self._client is not None:
                self._client.transport.resume_reading()

    def _readable(self) -> None:
        try:
            size = self._sock.recv_into(self._relay.buffer)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            size = 0
        data = bytes(self._relay.view[:size])
        client = self._client
        if not data or client is None:  # the owner closed it, or answered what nobody asked
            self._fail()
            return
        client.transport.write(data)
        self._answered = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self._fail()
            return
        if self._complete:
            keep_alive = self._keep_alive and not self._unsent
            self._client = None
            if client.relay_finished(keep_alive) and keep_alive:
                self._relay.give_back(self)
            else:
                self.close()

    def on_message_complete(self) -> None:  # the parser's: the answer is whole
        self._complete = True
        # Asked here: once the parser returns it is ready for the next answer, and says no.
        self._keep_alive = self._parser.should_keep_alive()

    # -- the client's pace ---------------------------------------------------------------------

    def pause(self) -> None:
        """The client does not take the answer as fast as it comes: stop reading it."""
        if self._reading and not self._closed:
            self._reading = False
            self._loop.remove_reader(self._fd)

    def resume(self) -> None:
        if not self._reading and not self._closed:
            self._reading = True
            self._loop.add_reader(self._fd, self._readable)

    # -- ending --------------------------------------------------------------------------------

    def abandon(self) -> None:
        """The client went away mid-request: so does this connection (the owner sees its
        client gone)."""
        self._client = None
        self.close()

    def _fail(self) -> None:
        client, self._client = self._client, None
        self.close()
        if client is not None:
            self._relay.failed += 1
            client.relay_failed(self._answered)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._relay.forget(self)
        with contextlib.suppress(RuntimeError):  # the loop is closed already
            self._loop.remove_reader(self._fd)
            self._loop.remove_writer(self._fd)
        self._sock.close()
