"""A connection handed to the worker that owns the container of its next request.

Every worker of a node accepts on the node's port. When a request arrives on a connection
between two requests (nothing of an earlier one unread or unanswered) and its request line
names a segment of a container another worker of this node owns, the connection itself moves
there: the socket and the bytes already read travel over a local Unix socket
(``SCM_RIGHTS``), the owner's HTTP server parses the request, once, and answers the client
directly. Nothing of the request is parsed twice and nothing of the answer passes through the
worker that accepted it; the connection stays with its new owner until a request names
another worker's container (docs/architecture.md, A node on every core, measures this
against forwarding).

What cannot move is served where it is, and routing forwards it as a cluster forwards to
another node (:mod:`.cluster_routing`): TLS connections (their state lives in this process),
a request that arrives while another is under way on the same connection (pipelining), a
request line split over reads, or a worker that does not take the connection (stopping, or
dead: the supervisor starts it again, and routing answers ``503`` meanwhile).

Only a process of the same user, whose parent is this node's supervisor, may hand a
connection over: the hand-off address is abstract (no file), so its peers are checked.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import errno
import logging
import os
import socket
import struct
from collections.abc import Callable
from urllib.parse import unquote

from segmentstore.contracts.errors import SegmentStoreError
from segmentstore.workers.place import WorkerPlace

log = logging.getLogger(__name__)

_SEGMENTS = b"/v1/segments/"
_MAX_LINE = 4096  # a request line longer than this is served where it is
# A message carries the bytes read so far with the socket; more stays in the socket for the
# new owner to read. Larger reads than this are served where they are.
MAX_HANDED_BYTES = 128 * 1024
_PEERCRED = struct.Struct("3i")
_FD_SPACE = socket.CMSG_SPACE(array.array("i").itemsize)


# Makes the protocol that serves a connection handed here, given what was read of it already
# (its first read).
AdoptingFactory = Callable[[bytes], asyncio.Protocol]


class ConnectionHandOff:
    def __init__(
        self,
        place: WorkerPlace,
        container_of: Callable[[str], int],
        owner_of: Callable[[int], str | None],
    ) -> None:
        """``owner_of(container)``: the member id that serves ``container`` now (None if
        none does); a sibling's is ``NODE/wJ``."""
        self._place = place
        self._container_of = container_of
        self._owner_of = owner_of
        self._prefix = f"{place.node_id}/w"
        self._peers: dict[int, socket.socket] = {}
        self._listener: socket.socket | None = None
        self._accepted: set[socket.socket] = set()  # siblings' connections to this worker
        self._adopting: set[asyncio.Task[None]] = set()
        self._buffer = bytearray(MAX_HANDED_BYTES)
        self._view = memoryview(self._buffer)
        self.handed = 0  # connections this worker handed on (for /metrics)
        self.adopted = 0  # connections handed to it
        self.not_taken = 0  # hand-offs a sibling did not take (served here instead)

    # -- handing a connection on --------------------------------------------------------------

    def route(self, data: bytes) -> tuple[int, int] | None:
        """The container and the sibling serving it, for a read ``data`` that begins a request
        for a sibling's container; None to serve it here."""
        space = data.find(b" ", 0, 16)
        if space < 0 or not data.startswith(_SEGMENTS, space + 1):
            return None
        start = space + 1 + len(_SEGMENTS)
        end = data.find(b" ", start, start + _MAX_LINE)
        if end < 0:
            return None
        target = data[start:end]
        query = target.find(b"?")
        if query >= 0:
            target = target[:query]
        colon = target.rfind(b":")
        if colon >= 0:
            target = target[:colon]
        try:
            name = target.decode("latin-1")
            if "%" in name:
                name = unquote(name, errors="strict")
            container = self._container_of(name)
            owner = self._owner_of(container)
        except (SegmentStoreError, UnicodeDecodeError):
            return None  # an invalid name: answered here, as the routes answer it
        if owner is None or not owner.startswith(self._prefix):
            return None
        suffix = owner[len(self._prefix) :]
        if not suffix.isdigit():
            return None
        index = int(suffix)
        return None if index == self._place.index else (container, index)

    def hand_on(self, index: int, sock: socket.socket, data: bytes) -> bool:
        """Send the connection on ``sock`` and the bytes read from it so far to worker
        ``index``; whether it took them (the caller then lets go of the connection)."""
        if len(data) > MAX_HANDED_BYTES:
            return False
        for _ in range(2):
            peer = self._peers.get(index)
            try:
                if peer is None:
                    peer = self._connect(index)
                socket.send_fds(peer, [data], [sock.fileno()])
            except BlockingIOError:
                break  # the sibling is behind: served here rather than wait
            except OSError as error:
                self._drop(index)
                if peer is None or error.errno not in _STALE_PEER:
                    break  # a sibling that is dead, or stopping
                continue  # the sibling was started again since: connect to the new one
            self.handed += 1
            return True
        self.not_taken += 1
        return False

    def _connect(self, index: int) -> socket.socket:
        peer = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            peer.connect(self._place.handoff_address(index))
        except OSError:
            peer.close()
            raise
        peer.setblocking(False)
        self._peers[index] = peer
        return peer

    def _drop(self, index: int) -> None:
        peer = self._peers.pop(index, None)
        if peer is not None:
            peer.close()

    # -- taking connections -------------------------------------------------------------------

    def start(self, protocol_factory: AdoptingFactory) -> None:
        """Take the connections the other workers hand over, each served by a protocol of
        ``protocol_factory`` (the HTTP server's, so it counts as one of its connections)
        that reads what was read of it already first."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(self._place.handoff_address(self._place.index))
        listener.listen(64)
        listener.setblocking(False)
        self._listener = listener
        loop = asyncio.get_running_loop()
        loop.add_reader(listener.fileno(), self._accept, listener, protocol_factory)

    def _accept(self, listener: socket.socket, protocol_factory: AdoptingFactory) -> None:
        conn = accept_sibling(listener, "hand-off socket")
        if conn is None:
            return
        conn.setblocking(False)
        self._accepted.add(conn)
        asyncio.get_running_loop().add_reader(conn.fileno(), self._receive, conn, protocol_factory)

    def _receive(self, conn: socket.socket, protocol_factory: AdoptingFactory) -> None:
        try:
            data, fds, flags = self._recv_fds(conn)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            fds, data, flags = [], b"", 0
        if not data and not fds:  # the sibling closed its end (it stopped, or died)
            self._let_go(conn)
            return
        if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC) or len(fds) != 1 or self._closed:
            for fd in fds:
                os.close(fd)  # a connection that cannot be served whole is closed
            return
        sock = socket.socket(fileno=fds[0])
        protocol = protocol_factory(data)
        task = asyncio.get_running_loop().create_task(self._adopt(sock, protocol))
        self._adopting.add(task)
        task.add_done_callback(self._adopting.discard)

    def _recv_fds(self, conn: socket.socket) -> tuple[bytes, list[int], int]:
        """One message: its bytes, the descriptors it carries, its flags. Read into a buffer
        kept for it (a fresh one of this size per message cost a page fault per page)."""
        size, ancillary, flags, _ = conn.recvmsg_into([self._buffer], _FD_SPACE)
        fds = array.array("i")
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        return bytes(self._view[:size]), list(fds), flags

    async def _adopt(self, sock: socket.socket, protocol: asyncio.Protocol) -> None:
        try:
            await asyncio.get_running_loop().connect_accepted_socket(lambda: protocol, sock)
        except OSError as error:
            log.info("a connection handed over was gone before it was served: %s", error)
            sock.close()
            return
        self.adopted += 1

    @property
    def _closed(self) -> bool:
        return self._listener is None

    def _let_go(self, conn: socket.socket) -> None:
        self._accepted.discard(conn)
        with contextlib.suppress(RuntimeError):  # the loop is closed already
            asyncio.get_running_loop().remove_reader(conn.fileno())
        conn.close()

    def close(self) -> None:
        """Take no more connections (a stopping worker: its siblings then serve what they
        would have handed it, which routing answers 503 until it is back), hand none on."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(RuntimeError):
                asyncio.get_running_loop().remove_reader(listener.fileno())
            listener.close()
        for conn in list(self._accepted):
            self._let_go(conn)
        for index in list(self._peers):
            self._drop(index)


_STALE_PEER = {errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN}


def accept_sibling(listener: socket.socket, what: str) -> socket.socket | None:
    """The next connection on ``listener`` (a Unix socket of this worker's) if a sibling made
    it; None if there is none yet, or it came from any other process (refused, and logged)."""
    try:
        conn, _ = listener.accept()
    except (BlockingIOError, InterruptedError):
        return None
    except OSError as error:
        log.warning("accepting a sibling's %s failed: %s", what, error)
        return None
    if not is_sibling(conn):
        log.warning("refused a %s from a process that is not this node's", what)
        conn.close()
        return None
    return conn


def is_sibling(conn: socket.socket) -> bool:
    """Whether the process at the other end of the Unix socket ``conn`` is another worker of
    this node: the same user, and the same parent (the supervisor)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    pid, uid, _ = _PEERCRED.unpack(creds)
    return uid == os.getuid() and _parent_of(pid) == os.getppid()


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
