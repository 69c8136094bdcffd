"""Loopback addresses for the processes the project starts itself (drills, benchmarks)."""

from __future__ import annotations

import random
import socket

# Ports handed out for servers to bind later, drawn below the kernel's ephemeral range
# (net.ipv4.ip_local_port_range, 32768-60999 by default): a port from that range, free a moment
# ago, is soon taken again as the source port of some outgoing connection on a busy machine,
# and the server then fails to bind it. Below it only another explicit bind can take it.
_SERVER_PORTS = range(20_000, 32_768)
_ATTEMPTS = 200


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for a child that must be told its
    port up front, and keep it across restarts)."""
    for _ in range(_ATTEMPTS):
        port = random.choice(_SERVER_PORTS)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as probe:  # that range is full: any port the kernel gives
        probe.bind(("127.0.0.1", 0))
        found: int = probe.getsockname()[1]
        return found
