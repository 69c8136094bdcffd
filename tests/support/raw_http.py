"""Requests written byte by byte on a socket, for tests of what a server does with a request
that is cut off, stalls or is too large, and a process's open sockets, to show none is left."""

from __future__ import annotations

import os
import socket
import time
from urllib.parse import urlsplit


def connect(url: str, timeout_s: float = 30) -> socket.socket:
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout_s)
    return sock


def connect_from(address: str, port: int) -> socket.socket:
    """A connection to 127.0.0.1:``port`` from loopback address ``address`` (a client of its
    own, as a node's caps per address see it)."""
    sock = socket.socket()
    sock.bind((address, 0))
    sock.settimeout(30)
    sock.connect(("127.0.0.1", port))
    return sock


def head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: test", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def answer(sock: socket.socket) -> tuple[int, bytes]:
    """The status and everything the server sent until it closed the connection (or the
    socket's timeout), for an answer on a connection the server closes."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    if not received:
        return 0, b""
    status = int(received.split(b" ", 2)[1])
    return status, received


def open_sockets(pid: int) -> int:
    """How many sockets process ``pid`` holds open."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            continue  # closed meanwhile
    return count


def resident_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def wait_sockets_at_most(pids: list[int], limits: list[int], timeout_s: float) -> list[int]:
    """Until each process holds at most its limit of sockets; the last counts."""
    deadline = time.monotonic() + timeout_s
    while True:
        counts = [open_sockets(pid) for pid in pids]
        if all(c <= limit for c, limit in zip(counts, limits, strict=True)):
            return counts
        if time.monotonic() > deadline:
            return counts
        time.sleep(0.2)
